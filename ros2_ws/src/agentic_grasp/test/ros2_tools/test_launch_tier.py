"""test/launch/ through ``launch_test``, as on a ROS 2 install (``launch_test FILE``).

Each launch test file is run by the real launch_testing in its own process: its launch
description starts the bringup, its tests talk to the graph, and its post-shutdown test checks
the nodes' exit codes. A file that needs what cannot be installed here (MoveIt 2 and its mock
Panda for test_bringup_moveit_mock_launch.py) is reported as not run, with the reason.
"""
from __future__ import annotations

import importlib.util
import pathlib
import subprocess

import pytest

LAUNCH_DIR = pathlib.Path(__file__).resolve().parent.parent / "launch"
#: What each launch test file needs beyond the tools (module names), and why.
NEEDS = {"test_bringup_moveit_mock_launch.py": (
    ("moveit_configs_utils", "moveit_py"),
    "MoveIt 2, ros2_control and moveit_resources_panda_moveit_config (a ROS 2 Jazzy install)")}
TIMEOUT_S = 600.0


@pytest.mark.parametrize("path", sorted(LAUNCH_DIR.glob("test_*.py")), ids=lambda p: p.name)
def test_launch_test_passes(path):
    modules, what = NEEDS.get(path.name, ((), ""))
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"NOT RUN (not a pass): {path.name} needs {what}; "
                    f"missing {', '.join(missing)}")
    proc = subprocess.run(["launch_test", str(path)], capture_output=True, text=True,
                          timeout=TIMEOUT_S, cwd=LAUNCH_DIR)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "Traceback" not in out, out[-6000:]
    # every test ran: launch_testing says OK after the tests and after the shutdown test
    assert out.count("\nOK") >= 2, out[-6000:]
