"""The ROS 2 tools tier: the upstream ``ros2`` command, ``ros2 launch`` and ``launch_test``
driving the real graph, as a user types them (docs/ros2-tools.md).

These tools are not on PyPI. They are there on a ROS 2 Jazzy install, or here after
``scripts/setup.sh --ros2-tools DIR`` (their jazzy sources, installed beside the venv). Where
they are missing, every test of this folder is reported as NOT RUN (a skip with that word,
and a banner at the end of the run), never as passed. ``scripts/test.sh`` sets
``AGENTIC_GRASP_REQUIRE_ROS2_TOOLS=1`` when it found them (or was given ``--ros2-tools``):
missing tools then fail these tests instead.
"""
from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

REQUIRE_ENV = "AGENTIC_GRASP_REQUIRE_ROS2_TOOLS"
NOT_RUN = "ROS 2 TOOLS TEST NOT RUN (not a pass)"
_MODULES = ("ros2cli", "ros2launch", "ros2action", "ros2param", "launch", "launch_ros",
            "launch_testing", "composition_interfaces")
_SKIPPED = []


def tools_problem() -> str:
    """Why the tools cannot run here ("" when they can)."""
    missing = [cmd for cmd in ("ros2", "launch_test") if shutil.which(cmd) is None]
    missing += [name for name in _MODULES if importlib.util.find_spec(name) is None]
    if missing:
        return (f"the upstream ROS 2 tools are not installed ({', '.join(missing)} missing): "
                "scripts/setup.sh --ros2-tools DIR, or a ROS 2 Jazzy install")
    return ""


@pytest.fixture(scope="module")
def ros2_tools(request):
    """The tools are here, or this test is NOT RUN (failed under REQUIRE_ENV); module-scoped
    so it comes before the module's other fixtures (the busy loop)."""
    problem = tools_problem()
    if not problem:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"the ROS 2 tools are required here ({REQUIRE_ENV}=1) but {problem}")
    _SKIPPED.append(problem)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and len(_SKIPPED) == 1:
        reporter.write_line(f"\n*** ROS 2 TOOLS TESTS NOT RUN: {problem} ***", red=True,
                            bold=True)
    pytest.skip(f"{NOT_RUN}: {problem}")


@pytest.fixture(autouse=True)
def _ros2_tools_here(ros2_tools):
    return ros2_tools


def pytest_terminal_summary(terminalreporter):
    if _SKIPPED:
        skipped = [r for r in terminalreporter.stats.get("skipped", [])
                   if NOT_RUN in str(getattr(r, "longrepr", ""))]
        terminalreporter.write_sep("!", "ROS 2 TOOLS TESTS NOT RUN - NOT A PASS", red=True,
                                   bold=True)
        terminalreporter.write_line(f"{len(skipped)} test(s) of test/ros2_tools did not run: "
                                    f"{_SKIPPED[0]}", red=True, bold=True)
