"""The ``ros2`` command lines a user types (docs/ros2-tools.md), against the real bringup.

Each run starts ``ros2 launch agentic_grasp bringup.launch.py`` in its own process group, as a
terminal does, with a busy loop beside it (a loaded machine), then:

- loads a scene with ``ros2 service call /sim/load_scene``;
- sends a goal with ``ros2 action send_goal --feedback`` and checks the streamed feedback and
  the SUCCEEDED result, while ``ros2 topic echo --once /perception/result <type>`` reads perception;
- sets a planner parameter with ``ros2 param set`` and reads it back with ``ros2 param get``;
- cancels the goal of a second ``ros2 action send_goal`` while it runs, with ``ros2 service
  call /grasp_object/_action/cancel_goal``, and checks that send_goal reports CANCELED;
- sends SIGINT to launch's process group, a terminal's Ctrl-C after goals: launch and every
  node get it, then each node launch's own. All seven nodes must finish cleanly (status 0,
  "process has finished cleanly"), with no traceback, and launch must exit 0.

Five runs, each a fresh launch.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

RUNS = 5
NODES = ("sim", "executor", "perception", "retrieval", "scene_graph", "planner", "grasp_front")
EXECUTABLES = ("sim_node", "executor_node", "perception_node", "retrieval_node",
               "scene_graph_node", "planner_node", "front_node")
TASK, SEED, INSTRUCTION, TARGET = "sg_cup", 3, "pick up the ceramic cup", "cup_1"
GOAL = f"{{instruction: '{INSTRUCTION}', seed: {SEED}}}"
ACTION = ("/grasp_object", "agentic_grasp_interfaces/action/GraspObject")
#: Each arm phase takes this long (params file), so a cancel lands while the goal runs.
PHASE_DELAY_S = 4.0
#: Start-up of seven node processes on a loaded 2-core machine: 5-15 s seen.
READY_S = 120.0
CLI_S = 120.0


def _restored_sigint() -> None:
    """In the child, before exec: SIGINT at its default (a shell's background job starts
    with it ignored, and launch would then never see a Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: What the tools say when their own fixed discovery wait ran out (ros2param waits 5 s for a
#: node's parameter services, whatever --timeout says): on a loaded machine a fresh CLI process
#: can take longer to discover the graph. Such a command changed nothing, and a user types it
#: again; so does this test, at most DISCOVERY_RETRIES times, and says so.
DISCOVERY_TIMEOUTS = ("Wait for service timed out", "waiting for service", "Node not found")
DISCOVERY_RETRIES = 3


def ros2(*args: str, timeout_s: float = CLI_S) -> str:
    for attempt in range(1 + DISCOVERY_RETRIES):
        proc = subprocess.run(["ros2", *args], capture_output=True, text=True,
                              timeout=timeout_s, preexec_fn=_restored_sigint)
        out = proc.stdout + proc.stderr
        if proc.returncode == 0 or not any(t in out for t in DISCOVERY_TIMEOUTS):
            break
        print(f"ros2 {' '.join(args)}: discovery timed out ({out.strip()[-120:]}); "
              f"typed again ({attempt + 1})")
    assert proc.returncode == 0, f"ros2 {' '.join(args)}: status {proc.returncode}\n{out}"
    return out


def _wait_for(path: Path, pattern: str, timeout_s: float, proc=None) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace")
        if re.search(pattern, text):
            return text
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.2)
    pytest.fail(f"{pattern!r} not seen in {path.name} within {timeout_s:.0f} s:\n"
                f"{path.read_text(errors='replace')[-4000:]}")


@pytest.fixture(scope="module")
def busy_loop(ros2_tools):
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield proc
    proc.kill()
    proc.wait()


class Bringup:
    """``ros2 launch agentic_grasp bringup.launch.py`` in its own process group."""

    def __init__(self, folder: Path) -> None:
        self.log = folder / "launch.log"
        params = folder / "params.yaml"
        params.write_text(f"sim:\n  ros__parameters:\n    phase_delay_s: {PHASE_DELAY_S}\n")
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                ["ros2", "launch", "agentic_grasp", "bringup.launch.py", "acquired:=none",
                 f"params_file:={params}"], stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_restored_sigint)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_S
        ready = set()
        while time.monotonic() < deadline and ready != set(NODES):
            text = self.log.read_text(errors="replace")
            ready = {n for n in NODES if re.search(rf"\[{n}\]: .*ready", text)}
            assert self.proc.poll() is None, text[-4000:]
            time.sleep(0.3)
        assert ready == set(NODES), f"not ready after {READY_S:.0f} s: {set(NODES) - ready}"

    def ctrl_c(self, timeout_s: float = 60.0) -> str:
        """SIGINT to the whole process group, as a terminal's Ctrl-C."""
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"ros2 launch still running {timeout_s:.0f} s after Ctrl-C")
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


@pytest.mark.parametrize("run", range(1, RUNS + 1))
def test_the_ros2_command_drives_the_graph_and_ctrl_c_stops_it_cleanly(run, tmp_path,
                                                                       busy_loop):
    bringup = Bringup(tmp_path)
    try:
        bringup.wait_ready()

        out = ros2("service", "call", "/sim/load_scene", "agentic_grasp_interfaces/srv/LoadScene",
                   f"{{task: {TASK}, seed: {SEED}}}")
        assert "success=True" in out and f"target_ids=['{TARGET}']" in out, out

        echo_log = tmp_path / "echo.log"
        with open(echo_log, "w") as echo_out:
            # the type named: a fresh CLI may not have discovered the topic yet ("Could not
            # determine the type for the passed topic", seen here once)
            echo = subprocess.Popen(["ros2", "topic", "echo", "--once", "/perception/result",
                                     "agentic_grasp_interfaces/msg/PerceptionResult"],
                                    stdout=echo_out, stderr=subprocess.STDOUT,
                                    preexec_fn=_restored_sigint)
        try:
            out = ros2("action", "send_goal", "--feedback", *ACTION, GOAL)
            assert "Goal finished with status: SUCCEEDED" in out, out
            assert "Feedback:" in out, out
            echo.wait(timeout=CLI_S)
        finally:
            echo.kill()
        assert echo.returncode == 0, echo_log.read_text()
        echo_text = echo_log.read_text()
        assert f"instruction: {INSTRUCTION}" in echo_text and f"target_id: {TARGET}" in echo_text

        out = ros2("param", "set", "/planner", "timeouts.perceive_s", "25.0")
        assert "Set parameter successful" in out, out
        assert "Double value is: 25.0" in ros2("param", "get", "/planner",
                                               "timeouts.perceive_s")

        # a second send_goal's goal, canceled while it runs through the action's cancel
        # service ("{}": every goal). Ctrl-C to jazzy's send_goal does not cancel: its SIGINT
        # shuts its context down before its cancel request goes (docs/ros2-tools.md).
        ros2("service", "call", "/sim/load_scene", "agentic_grasp_interfaces/srv/LoadScene",
             f"{{task: {TASK}, seed: {SEED}}}")
        goal_log = tmp_path / "second_goal.log"
        with open(goal_log, "w") as goal_out:
            sender = subprocess.Popen(["ros2", "action", "send_goal", *ACTION, GOAL],
                                      stdout=goal_out, stderr=subprocess.STDOUT,
                                      preexec_fn=_restored_sigint)
        try:
            # at once: the cancel's own CLI process takes seconds to start on a loaded
            # machine, and the goal's attempt is 3 phases of PHASE_DELAY_S
            _wait_for(goal_log, "Goal accepted", CLI_S, sender)
            out = ros2("service", "call", f"{ACTION[0]}/_action/cancel_goal",
                       "action_msgs/srv/CancelGoal", "{}")
            assert "return_code=0" in out and "goals_canceling=[action_msgs.msg.GoalInfo" \
                in out, out
            sender.wait(timeout=CLI_S)
        finally:
            sender.kill()
        text = goal_log.read_text()
        assert sender.returncode == 0 and "Goal finished with status: CANCELED" in text, text
        _wait_for(bringup.log, r"\[planner\]: ended: canceled", CLI_S)

        log = bringup.ctrl_c()
    finally:
        bringup.kill()
    finished = re.findall(r"\[(\w+)-\d+\]: process has finished cleanly", log)
    assert sorted(finished) == sorted(EXECUTABLES), log[-6000:]
    assert "process has died" not in log, log[-6000:]
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-6000:]
    assert bringup.proc.returncode == 0, log[-6000:]
