"""A start that is really ready (ros/common/readiness.py, ros/graph/launcher.py).

- a node says READY_MARK only once every service and action it calls is discovered, and a
  node that calls nobody says it at once;
- bringup says "ready" only once every node has said it, and not for an earlier instance of
  a node that was restarted since.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import rclpy
from rclpy.action import ActionClient, ActionServer
from rclpy.executors import MultiThreadedExecutor
from agentic_grasp_interfaces.srv import WristCamera

from agentic_grasp.ros.common.readiness import READY_MARK, ClientReadiness, client_checks
from agentic_grasp_interfaces.action import GraspObject


def _spin(*nodes):
    executor = MultiThreadedExecutor(num_threads=2)
    for node in nodes:
        executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    return executor, thread


def test_a_node_is_ready_only_once_its_callees_are_discovered(ros_domain):
    suffix = os.getpid()
    caller = rclpy.create_node(f"readiness_caller_{suffix}")
    server = None
    caller.create_client(WristCamera, f"readiness_probe_{suffix}")
    ActionClient(caller, GraspObject, f"readiness_action_{suffix}")
    assert set(client_checks(caller)) == {f"service readiness_probe_{suffix}",
                                          f"action readiness_action_{suffix}"}
    readiness = ClientReadiness(caller, poll_s=0.05)
    executor, thread = _spin(caller)
    try:
        time.sleep(1.0)                      # nothing serves them yet
        assert not readiness.ready.is_set()
        assert len(readiness.missing()) == 2
        server = rclpy.create_node(f"readiness_server_{suffix}")
        server.create_service(WristCamera, f"readiness_probe_{suffix}", lambda _rq, rs: rs)
        executor.add_node(server)
        time.sleep(1.0)                      # the service alone is not enough
        assert not readiness.ready.is_set()
        ActionServer(server, GraspObject, f"readiness_action_{suffix}", lambda h: None)
        assert readiness.ready.wait(20.0), readiness.missing()
        assert readiness.missing() == []
    finally:
        executor.shutdown()
        caller.destroy_node()
        if server is not None:
            server.destroy_node()


def test_a_node_that_calls_nobody_is_ready_at_once(ros_domain):
    node = rclpy.create_node(f"readiness_alone_{os.getpid()}")
    try:
        assert ClientReadiness(node).ready.is_set()
    finally:
        node.destroy_node()


#: A node stand-in that says READY_MARK after a delay, as a node does once its callees are
#: discovered.
SAYS_READY = """
import sys, time
time.sleep(float(sys.argv[1]))
print("[INFO] [planner]: {mark}: service /perceive", flush=True)
time.sleep(float(sys.argv[2]))
""".format(mark=READY_MARK)


def _fake(launcher, name, delay_s, then_s=30.0):
    from agentic_grasp.ros.graph.description import NodeSpec

    proc = subprocess.Popen([sys.executable, "-u", "-c", SAYS_READY, str(delay_s), str(then_s)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    with launcher._procs_lock:
        launcher.procs[name] = proc
        launcher._specs[name] = NodeSpec(name, name, name, "none.yaml")
        launcher._ready_nodes.discard(name)
    thread = threading.Thread(target=launcher._pump, args=(name, proc), daemon=True)
    thread.start()
    launcher._threads.append(thread)
    return proc


def test_bringup_is_ready_only_once_every_node_said_so(capsys):
    from agentic_grasp.ros.graph.launcher import Launcher

    launcher = Launcher({})
    try:
        _fake(launcher, "quick", 0.0)
        _fake(launcher, "slow", 2.0)
        launcher._all_started = True
        launcher._node_ready("", None)
        time.sleep(1.0)
        assert not launcher.ready.is_set()          # "quick" alone said it
        assert launcher.wait_ready(20.0)
        assert "[bringup] ready: every node's services and actions are discovered" \
            in capsys.readouterr().err
    finally:
        launcher.stop(timeout_s=1.0)


def test_a_restarted_nodes_earlier_instance_does_not_count(capsys):
    from agentic_grasp.ros.graph.launcher import Launcher

    launcher = Launcher({})
    try:
        old = subprocess.Popen([sys.executable, "-u", "-c", SAYS_READY, "0", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        _fake(launcher, "planner", 30.0)              # restarted before the old one said it
        launcher._all_started = True
        launcher._pump("planner", old)               # the old instance's last words
        old.wait(5.0)
        assert READY_MARK in capsys.readouterr().err
        assert not launcher.ready.is_set()
    finally:
        launcher.stop(timeout_s=1.0)
