"""The launcher names a node that does not stop after SIGINT and has it write its stacks
before it escalates (CI once saw a node SIGKILLed at a test's teardown with nothing to say
why; ros/graph/launcher.py, ros/common/runner.py)."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

#: A node stand-in that ignores SIGINT and SIGTERM, as a node stuck in native code does, and
#: has the node processes' stack dumps on.
STUBBORN = """
import signal, sys, time
from agentic_grasp.core.supervision import enable_stack_dumps

enable_stack_dumps()
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)

def stuck_in_shutdown():
    print("up", flush=True)
    while True:
        time.sleep(0.05)

stuck_in_shutdown()
"""


def test_a_node_that_will_not_stop_is_named_with_its_stacks_then_killed(capsys):
    from agentic_grasp.ros.graph.launcher import Launcher

    launcher = Launcher({})
    proc = subprocess.Popen([sys.executable, "-u", "-c", STUBBORN], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    launcher.procs["stubborn"] = proc
    assert proc.stdout.readline().strip() == "up"
    pump = threading.Thread(target=launcher._pump, args=("stubborn", proc), daemon=True)
    pump.start()
    started = time.monotonic()
    codes = launcher.stop(timeout_s=0.5)
    pump.join(5.0)
    err = capsys.readouterr().err
    assert codes == {"stubborn": -9}
    assert re.search(r"\[bringup\] stubborn still running \d+\.\d s after SIGINT", err), err
    # faulthandler's dump, relayed line by line with the node's prefix
    assert "[stubborn] Current thread" in err or "[stubborn] Thread" in err, err
    assert "in stuck_in_shutdown" in err, err
    assert time.monotonic() - started < 10.0


#: A stopped node whose teardown hangs holding the GIL, as a Fast DDS deadlock in a writer's
#: destruction does (libc's sleep through ctypes.PyDLL keeps the GIL).
HUNG_TEARDOWN = """
import ctypes, sys
from agentic_grasp.core.supervision import arm_teardown_watchdog, enable_stack_dumps

enable_stack_dumps()

def destroy_node_hangs():
    ctypes.PyDLL(None).sleep(30)

arm_teardown_watchdog(0.5)
destroy_node_hangs()
print("not reached", flush=True)
"""


def test_a_hung_teardown_is_ended_by_its_watchdog_with_its_stacks():
    from agentic_grasp.core.supervision import CLEAN_EXITS, TEARDOWN_SIGNAL

    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", HUNG_TEARDOWN], capture_output=True,
                          text=True, timeout=20)
    took = time.monotonic() - started
    assert proc.returncode == -TEARDOWN_SIGNAL, (proc.returncode, proc.stderr)
    assert proc.returncode in CLEAN_EXITS        # a supervisor does not restart it
    assert "in destroy_node_hangs" in proc.stderr, proc.stderr
    assert "not reached" not in proc.stdout
    assert took < 10.0
