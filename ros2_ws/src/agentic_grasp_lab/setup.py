"""ament_python build of agentic_grasp_lab: the evaluation, benchmarks and test servers.

It registers the ``agentic-grasp bench`` and ``eval`` commands in the ``agentic_grasp.commands``
entry-point group, which the runtime's CLI (agentic_grasp/cli.py) reads: without this package
installed those commands are absent.
"""
from setuptools import find_packages, setup

PACKAGE = "agentic_grasp_lab"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="agentic_grasp maintainers",
    maintainer_email="maintainers@agentic-grasp.dev",
    description="The lab of agentic_grasp: evaluation, benchmarks, test servers",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        # subcommand = module:object with add_arguments(parser), run(args) and HELP
        "agentic_grasp.commands": [
            "bench = agentic_grasp_lab.commands.bench",
            "eval = agentic_grasp_lab.commands.evaluate",
        ],
    },
)
