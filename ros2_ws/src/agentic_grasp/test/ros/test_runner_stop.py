"""A node whose callback is still blocked when it is stopped exits within the launcher's grace.

Python joins every executor worker at exit, and rclpy's MultiThreadedExecutor never stops its
workers, so one callback blocked on an answer that will not come (a peer that stopped with
the graph) kept node processes alive past SIGINT and SIGTERM until the launcher's SIGKILL
(CI: the executor at the teardown of test_vllm_graph). spin_node now lets idle workers end,
waits STOP_GRACE_S for the busy ones and then ends the process without them.
"""
from __future__ import annotations

import select
import signal
import subprocess
import sys
import time

import pytest

from .conftest import STOP_CODES

pytest.importorskip("rclpy")

#: A node with one callback that blocks for a minute once it has run, and one that is idle.
NODE_SCRIPT = """
import sys
import threading
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from agentic_grasp.ros.common.runner import spin_node

BLOCK = {block}

class Blocked(Node):
    def __init__(self):
        super().__init__("runner_stop_probe")
        self.timer = self.create_timer(0.05, self._once, callback_group=ReentrantCallbackGroup())

    def _once(self):
        self.timer.cancel()
        print("callback running", flush=True)
        if BLOCK:
            threading.Event().wait(60.0)

import atexit
atexit.register(lambda: print("exit handler ran", flush=True))
spin_node(Blocked, num_threads=4)
print("spin_node returned", flush=True)
"""
#: The launcher's grace between SIGINT and SIGTERM (ros/graph/launcher.py).
SIGINT_GRACE_S = 5.0


def _first_line(process: subprocess.Popen, timeout_s: float = 60.0) -> str:
    """The process's first line of output, waited for at most ``timeout_s`` (a child stuck
    before it prints is killed and fails the test, rather than hanging the run: a child once
    hung for good creating its node, over a shared-memory port a killed process had left)."""
    if not select.select([process.stdout], [], [], timeout_s)[0]:
        process.kill()
        pytest.fail(f"no output within {timeout_s:.0f} s")
    return process.stdout.readline().strip()


def _stop(block: bool):
    process = subprocess.Popen([sys.executable, "-c", NODE_SCRIPT.format(block=block)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert _first_line(process) == "callback running", process.stderr.read()
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    try:
        out, err = process.communicate(timeout=30.0)
    finally:
        process.kill()
    return process.returncode, time.monotonic() - started, out, err


def test_a_node_with_a_blocked_callback_ends_within_the_sigint_grace():
    code, took, out, err = _stop(block=True)
    assert code == 0, err
    assert took < SIGINT_GRACE_S, f"exited {took:.1f} s after SIGINT"
    assert "still blocked" in err and "ending the process without them" in err


def test_a_node_with_no_blocked_callback_ends_at_once_and_in_order():
    code, took, out, err = _stop(block=False)
    assert code == 0, err
    assert took < 2.0, f"exited {took:.1f} s after SIGINT"
    # the normal way out (exit handlers run), not the blocked callbacks' os._exit; and not
    # the interpreter's finalization either (test_a_stopped_node_ends_without_...)
    assert "exit handler ran" in out and "spin_node returned" not in out
    assert "still blocked" not in err


#: A node still being built when SIGINT arrives: rclpy's handler shuts the context down, and
#: creating the node then raises RCLError ("the given context is not valid").
SLOW_START_SCRIPT = """
import time
import rclpy
from rclpy.node import Node
from agentic_grasp.ros.common.runner import spin_node

class SlowStart(Node):
    def __init__(self):
        # busy in code that no KeyboardInterrupt reaches (C, a library's own handler) until
        # the signal has shut the context down. Everything from the announcement to the
        # context's end is inside the try: Python raises the KeyboardInterrupt at its next
        # check, which may fall on the loop's condition (rclpy.ok() is Python) rather than in
        # the sleep (CI once saw it escape there: exit 0 through spin_node's
        # KeyboardInterrupt, not the RCLError path this test is about)
        deadline = None
        while True:
            try:
                if deadline is None:
                    deadline = time.monotonic() + 20.0
                    print("constructing", flush=True)
                while rclpy.ok() and time.monotonic() < deadline:
                    time.sleep(0.01)
                break
            except KeyboardInterrupt:
                pass
        super().__init__("runner_slow_start_probe")

spin_node(SlowStart, end_process=False)
print("spin_node returned", flush=True)
"""


def test_a_node_stopped_while_it_is_still_being_built_exits_cleanly():
    """The launcher may stop a graph before a slow node is up (CI: the front node at a
    fixture's teardown, exit 1 with a traceback): that is an orderly stop, status 0."""
    process = subprocess.Popen([sys.executable, "-c", SLOW_START_SCRIPT],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _first_line(process) == "constructing", process.stderr.read()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30.0)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "Traceback" not in err and "stopped while starting" in err, err
    assert "spin_node returned" in out


def test_the_executors_sigint_guard_outlives_its_shutdown():
    """rclpy's signal thread may still be walking the SIGINT guard conditions when the woken
    executor shuts down; spin_node keeps the executor's guard condition registered and alive
    instead of letting Executor.shutdown destroy it (ros/common/runner.py)."""
    from rclpy.executors import MultiThreadedExecutor

    from agentic_grasp.ros.common import runner

    executor = MultiThreadedExecutor(num_threads=2)
    guard = executor._sigint_gc
    assert guard is not None                       # rclpy still keeps it there
    runner._keep_sigint_guard(executor)
    assert executor.shutdown(timeout_sec=1.0)
    assert executor._sigint_gc is None and guard in runner._SIGINT_GUARDS
    with guard.handle:                             # not destroyed: InvalidHandle otherwise
        guard.trigger()


#: One callback blocked for a minute, another that raises: the exception comes out of
#: executor.spin(), and the blocked one makes spin_node end the process with os._exit.
RAISING_SCRIPT = """
import threading
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from agentic_grasp.ros.common.runner import spin_node

class Raising(Node):
    def __init__(self):
        super().__init__("runner_raising_probe")
        group = ReentrantCallbackGroup()
        self.blocker = self.create_timer(0.05, self._block, callback_group=group)
        self.raiser = self.create_timer(0.5, self._raise, callback_group=group)

    def _block(self):
        self.blocker.cancel()
        threading.Event().wait(60.0)

    def _raise(self):
        self.raiser.cancel()
        raise RuntimeError("boom from a callback")

spin_node(Raising, num_threads=4)
"""


def test_a_callbacks_exception_is_said_and_ends_the_node_as_a_crash():
    proc = subprocess.run([sys.executable, "-c", RAISING_SCRIPT], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "stopped by an exception" in proc.stderr, proc.stderr
    assert "RuntimeError: boom from a callback" in proc.stderr, proc.stderr


#: A node whose stop takes a while (one callback blocked: the stop path waits STOP_GRACE_S for
#: it), so a second signal lands in the stop path, as launch's own SIGINT does after a
#: terminal's Ctrl-C, or launch's SIGTERM after its grace.
@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
@pytest.mark.parametrize("block", [True, False], ids=["blocked", "idle"])
def test_a_second_signal_during_the_stop_ends_the_node_quietly(second, block):
    """Ctrl-C to launch's process group: each node gets the terminal's SIGINT, then launch's
    (and SIGTERM after launch's grace). The one that lands while the node stops must neither
    raise a KeyboardInterrupt out of the stop path (a traceback, status -2) nor kill it."""
    process = subprocess.Popen([sys.executable, "-c", NODE_SCRIPT.format(block=block)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _first_line(process) == "callback running", process.stderr.read()
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        # inside the stop: the blocked case waits 2 s for its callback; the idle one is in
        # its teardown within milliseconds, so the second signal comes at once, twice
        time.sleep(0.5 if block else 0.0)
        for _ in range(1 if block else 3):
            if process.poll() is None:
                process.send_signal(second)
            time.sleep(0.005)
        out, err = process.communicate(timeout=30.0)
    finally:
        process.kill()
    assert process.returncode == 0, (process.returncode, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


#: A node with an action server and an action client (as the planner, the front and the
#: executor have), whose interpreter exit is slow; it prints when spin_node has returned.
ACTION_NODE_SCRIPT = """
import sys, time
from rclpy.action import ActionClient, ActionServer
from rclpy.node import Node
from agentic_grasp.ros.common.runner import spin_node
from agentic_grasp_interfaces.action import GraspObject

class WithActions(Node):
    def __init__(self):
        super().__init__(sys.argv[1])
        self.server = ActionServer(self, GraspObject, sys.argv[1] + "_action", lambda h: None)
        self.client = ActionClient(self, GraspObject, sys.argv[1] + "_action")
        print("up", flush=True)

spin_node(WithActions, end_process=False)
import signal
signal.setitimer(signal.ITIMER_REAL, 0)     # the teardown watchdog: this exit is the test's
print("spin_node returned", flush=True)
time.sleep(1.5)             # the interpreter's exit, slowed: the node must be gone already
"""


def test_a_nodes_actions_and_participant_are_torn_down_before_the_interpreter_exits(
        ros_domain):
    # rclpy's destroy_node leaves action servers and clients, which hold the node: it used
    # to leave the graph only in the garbage collection of Python's exit (runner.py).
    import os

    import rclpy

    name = f"runner_actions_probe_{os.getpid()}"
    watcher = rclpy.create_node(f"runner_actions_watcher_{os.getpid()}")
    process = subprocess.Popen([sys.executable, "-c", ACTION_NODE_SCRIPT, name],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _first_line(process) == "up", process.stderr.read()
        deadline = time.monotonic() + 30.0
        while name not in watcher.get_node_names() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert name in watcher.get_node_names()
        process.send_signal(signal.SIGINT)
        assert _first_line(process, 30.0) == "spin_node returned"
        returned = time.monotonic()
        while name in watcher.get_node_names() and time.monotonic() - returned < 1.0:
            time.sleep(0.05)
        assert process.poll() is None                   # still in its slow exit
        assert name not in watcher.get_node_names(), \
            "the node was still in the graph after spin_node returned"
        process.wait(timeout=30.0)
        # 0, or its teardown watchdog's status where the machine is loaded enough for the
        # slowed exit and the interpreter's finalization to outlast it: not this test's subject
        assert process.returncode in STOP_CODES, process.stderr.read()
    finally:
        watcher.destroy_node()
        process.kill()


#: A node stopped by SIGINT with spin_node's defaults: an exit handler must run, the
#: interpreter's finalization (an object's __del__ at exit) must not.
END_PROCESS_SCRIPT = """
import atexit
import rclpy
from rclpy.node import Node
from agentic_grasp.ros.common.runner import spin_node

class AtFinalization:
    def __del__(self):
        print("finalized", flush=True)

KEPT = AtFinalization()
atexit.register(lambda: print("exit handler ran", flush=True))

class Idle(Node):
    def __init__(self):
        super().__init__("runner_end_process_probe")
        print("up", flush=True)

spin_node(Idle)
print("spin_node returned", flush=True)
"""


def test_a_stopped_node_ends_without_the_interpreters_finalization():
    # The final garbage collection, module teardown and native static destructors of a
    # node's interpreter took 1.6-3.4 s of a 2.5 s teardown watchdog at load 27 (runner.py).
    process = subprocess.Popen([sys.executable, "-c", END_PROCESS_SCRIPT],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _first_line(process) == "up", process.stderr.read()
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30.0)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "exit handler ran" in out
    assert "spin_node returned" not in out and "finalized" not in out, out
