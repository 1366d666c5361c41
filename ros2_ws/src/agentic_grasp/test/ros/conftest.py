"""Whole-graph fixtures: real node processes over Fast DDS in this run's ROS_DOMAIN_ID."""
from __future__ import annotations

import os
import signal

import pytest

from agentic_grasp.core.supervision import TEARDOWN_SIGNAL



def _rclpy():
    """rclpy, or a skip of every test here where it does not import; under CI (CI=true) a
    failure instead: CI that skipped the graph tests would pass without running them."""
    try:
        import rclpy
    except ImportError as exc:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI=true and rclpy does not import ({exc}): the graph tests of "
                        "test/ros cannot run; set up ROS 2 with scripts/setup.sh",
                        pytrace=False)
        pytest.skip(f"ROS 2 (rclpy) does not import ({exc}): scripts/setup.sh sets it up",
                    allow_module_level=True)
    return rclpy


rclpy = _rclpy()


@pytest.fixture(scope="session", autouse=True)
def acquired_dir(tmp_path_factory):
    # bringup acquires experiences into the per-user data folder by default: tests use a
    # temporary one (the node processes inherit the environment).
    os.environ["AGENTIC_GRASP_DATA_HOME"] = str(tmp_path_factory.mktemp("acquired"))
    yield os.environ["AGENTIC_GRASP_DATA_HOME"]


@pytest.fixture(scope="session", autouse=True)
def ros_domain():
    # scripts/test.sh picks a random domain; keep discovery on this host either way.
    os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 90 + 5))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    _remove_stale_shm("before the session")
    rclpy.init()
    yield os.environ["ROS_DOMAIN_ID"]
    rclpy.try_shutdown()


def _remove_stale_shm(when: str) -> None:
    """Remove the Fast DDS shared-memory files no process holds (ros/common/fastdds_shm.py): a
    process a test killed while it built its participant leaves a port that hangs the next
    participant taking it, for good (CI stopped at its time limit on such a hang)."""
    import sys

    from agentic_grasp.ros.common.fastdds_shm import remove_stale, summary

    removed = remove_stale()
    if removed:
        print(f"[fastdds_shm] {when}: {summary(removed)}", file=sys.stderr)


@pytest.fixture(autouse=True)
def stale_shm_removed(request):
    """After every test: its killed processes' shared-memory files do not outlive it."""
    yield
    _remove_stale_shm(f"after {request.node.name}")


#: A node's exit statuses after the launcher's SIGINT: 0, or the SIGINT codes, or its teardown
#: watchdog's (ros/common/runner.py: Fast DDS 2.14 can deadlock in a stopped node's teardown).
#: A SIGKILL (-9) means the node did not end on its own within 7 s.
STOP_CODES = (0, -int(signal.SIGINT), 128 + int(signal.SIGINT), -int(TEARDOWN_SIGNAL))


def assert_stopped(codes) -> None:
    """Every node of a graph ended on its own after SIGINT (``codes``: Launcher.stop's)."""
    assert all(code in STOP_CODES for code in codes.values()), codes


class Graph:
    """A launcher of node processes plus a client; restartable node by node."""

    def __init__(self, args, overrides=None):
        from agentic_grasp.ros.client.graph_client import GraphClient
        from agentic_grasp.ros.graph.launcher import Launcher

        # acquisition off unless a test asks for it: tests must not learn from each other
        self.launcher = Launcher({"acquired": "none", **args}, extra_params=overrides or {})
        self.launcher.start()
        self.client = GraphClient("test_client")

    def close(self):
        self.client.close()
        codes = self.launcher.stop()
        return codes


@pytest.fixture(scope="module")
def sim_graph():
    """sim + executor nodes as separate processes (a phase takes 0.15 s so cancel can land),
    the executor calling the sim once per phase (``sim.whole_attempt`` false: the per-phase
    path the default no longer takes)."""
    graph = Graph({"arm": "sim"}, overrides={"sim": {"phase_delay_s": 0.15},
                                             "executor": {"sim.whole_attempt": False}})
    graph.client.load_scene("sg_banana", 0, timeout_s=30.0)
    yield graph
    assert_stopped(graph.close())


@pytest.fixture(scope="module")
def whole_attempt_graph():
    """As sim_graph, with the executor's ``sim.whole_attempt`` (the default): one ATTEMPT
    call per grasp."""
    graph = Graph({"arm": "sim"}, overrides={"sim": {"phase_delay_s": 0.15},
                                             "executor": {"sim.whole_attempt": True}})
    graph.client.load_scene("sg_banana", 0, timeout_s=30.0)
    yield graph
    assert_stopped(graph.close())
