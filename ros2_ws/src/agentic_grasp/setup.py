"""ament_python build of agentic_grasp.

The top-level launch/, config/ and kb_data/ folders of the repository are installed into
share/agentic_grasp so that FindPackageShare('agentic_grasp') finds them on a ROS 2 install.
"""
import os

from setuptools import find_packages, setup

PACKAGE = "agentic_grasp"
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def tree(top: str):
    """data_files entries for every file under REPO/top, keeping the folder structure."""
    entries = []
    base = os.path.join(REPO, top)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d not in ("cache", "__pycache__")]
        files = [os.path.relpath(os.path.join(dirpath, f)) for f in filenames]
        if files:
            rel = os.path.relpath(dirpath, REPO)
            entries.append((os.path.join("share", PACKAGE, rel), files))
    return entries


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
    ] + tree("launch") + tree("config") + tree("kb_data"),
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="agentic_grasp maintainers",
    maintainer_email="maintainers@agentic-grasp.dev",
    description="Agentic RAG-VLM grasping for the Franka Panda",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "agentic-grasp = agentic_grasp.cli:main",
            "sim_node = agentic_grasp.ros.sim.node:main",
            "executor_node = agentic_grasp.ros.executor.node:main",
            "scene_graph_node = agentic_grasp.ros.scene_graph.node:main",
            "perception_node = agentic_grasp.ros.perception.node:main",
            "retrieval_node = agentic_grasp.ros.retrieval.node:main",
            "planner_node = agentic_grasp.ros.planner.node:main",
            "front_node = agentic_grasp.ros.front.node:main",
        ],
    },
)
