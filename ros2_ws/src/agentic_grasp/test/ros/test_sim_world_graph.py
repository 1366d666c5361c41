"""A SIGKILLed sim comes back in the world it had, and the next goal on that world succeeds.

The whole graph of graph.py runs under the launcher's supervisor (as ``agentic-grasp
bringup``), which gives the run its own folder; the sim keeps its world there on every change
(core/sim/world_state.py). The test loads a scene other than the sim's ``task`` parameter, has
the planner put one object in the bin, SIGKILLs the sim, and checks that the respawned sim
shows the same objects at the same poses (and not its default scene, nor the object in the
bin), and that a goal for another object of that scene then succeeds without a reload. Before
the world was kept, the respawn showed ``sg_cube`` and the goal failed ("not in view").
"""
from __future__ import annotations

import time

import numpy as np
import pytest

#: The sim's own scene (its parameter) and the scene the test loads instead.
DEFAULT_TASK, TASK, SEED = "sg_cube", "lh_clear_table", 2
FIRST, NEXT = ("pick up the ceramic cup", "cup_1"), ("pick up the apple", "apple_1")
CONFIGURATION = "no_episodic_memory"
#: A respawn is 0.5 s of delay and a 1.5-5 s process start here; the rest is load.
BACK_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def graph():
    from agentic_grasp.commands.grasp import PlannerClient
    from agentic_grasp.ros.client.graph_client import GraphClient
    from agentic_grasp.ros.graph.launcher import Launcher
    from agentic_grasp_interfaces.srv import Perceive

    launcher = Launcher({"acquired": "none", "perception": "oracle"},
                        extra_params={"sim": {"task": DEFAULT_TASK, "seed": 0},
                                      "planner": {"timeouts.restart_wait_s": 30.0}})
    launcher.start()
    launcher.supervise()
    client = planner = None
    try:
        client = GraphClient("test_sim_world_client")
        planner = PlannerClient(client)
        perceive = client.node.create_client(Perceive, "perceive")
        assert planner.wait_for_server(60.0), "grasp_object did not come up"
        yield launcher, client, planner, perceive
    finally:
        if planner is not None:
            planner.close()
        if client is not None:
            client.close()
        launcher.stop()


def _truth(client, after_ns: int = 0, timeout_s: float = BACK_WITHIN_S):
    """The sim's ground truth, from a capture stamped after ``after_ns`` (wall clock, ns)."""
    from agentic_grasp.ros.client.graph_client import GraphError
    from agentic_grasp.ros.conversions.perception import objects_from_msgs

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            client.ground_truth(timeout_s=1.0)           # subscribes; waits for a message
        except GraphError:
            continue
        msg = client._truth
        stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        if stamp > after_ns:
            return {o.id: o for o in objects_from_msgs(msg.objects)}
        client._truth_event.clear()                      # this one is older: the next
        client._truth_event.wait(0.5)
    pytest.fail(f"no ground truth stamped after the kill within {timeout_s:.0f} s")


def _grasp(graph, instruction: str):
    from agentic_grasp.ros.client.graph_client import GraphError

    _, client, planner, _ = graph
    deadline = time.monotonic() + 90.0
    while True:                      # the first goal of a fresh graph may find a peer not up
        try:
            return planner.grasp(instruction, CONFIGURATION, timeout_s=60.0)
        except GraphError:
            assert time.monotonic() < deadline, "the graph did not answer goals"


def test_a_killed_sim_comes_back_in_its_world_and_the_next_goal_succeeds(graph):
    from agentic_grasp.commands import grasp as grasp_cli

    launcher, client, planner, perceive = graph
    loaded = grasp_cli.load_scene(client, TASK, SEED, timeout_s=30.0)
    grasp_cli.wait_until_perceived(client, perceive, loaded.object_ids, 30.0)
    result = _grasp(graph, FIRST[0])
    assert result.success, result.message
    before = _truth(client, after_ns=time.time_ns())   # captured once the arm is quiet
    assert FIRST[1] not in before and NEXT[1] in before, sorted(before)   # in the bin

    killed_ns = time.time_ns()
    launcher.kill_node("sim")
    killed = time.monotonic()
    after = _truth(client, after_ns=killed_ns)
    print(f"sim back with its world {time.monotonic() - killed:.2f} s after SIGKILL")
    assert launcher.restarts()["sim"] == 1
    assert sorted(after) == sorted(before), "the respawned sim shows another world"
    for object_id, obj in before.items():
        assert np.allclose(after[object_id].position, obj.position, atol=1e-9), object_id
        assert after[object_id].yaw == pytest.approx(obj.yaw, abs=1e-9)
        assert after[object_id].upright == obj.upright

    # the next goal on that world, with no reload: it sees what was there
    grasp_cli.wait_until_perceived(client, perceive, sorted(before), 30.0)
    result = _grasp(graph, NEXT[0])
    assert result.success, result.message
    assert NEXT[1] not in _truth(client, after_ns=time.time_ns())
