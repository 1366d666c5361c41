"""A goal sent while a node restarts waits for it; a plain client learns of a planner death.

The whole graph of graph.py runs under the launcher's supervisor (as ``agentic-grasp
bringup``):

- **Restart wait**: a node is SIGKILLed and a goal is sent at once, while the
  supervisor respawns it. Every planner call goes through common/peer_call.PeerCall: the
  goal waits for the restarting peer (out of its restart budget, ``timeouts.restart_wait_s``)
  and succeeds once the node is back, instead of ending with "peer lost". The sim restarts
  into the same scene (its ``task``/``seed`` parameters), so its victim case needs no reload.
- **Plain client**: a plain rclpy ActionClient, as another robot stack would use,
  sends a goal to ``grasp_object`` (the front node), and the planner is SIGKILLed while the
  arm moves. The client's result must come within 3 s: ABORTED, ERROR_PEER_LOST, naming the
  planner. Once the planner is back, the next plain goal succeeds.
"""
from __future__ import annotations

import threading
import time

import pytest

from agentic_grasp_interfaces.action import GraspObject

Result = GraspObject.Result
TASK, SEED, INSTRUCTION, CONFIGURATION = "sg_cube", 0, "pick up the wood cube", \
    "no_episodic_memory"
PHASE_DELAY_S = 0.6
#: The goal's restart budget; a respawn is 0.5 s delay plus a 1.5-5 s process start here.
RESTART_WAIT_S = 30.0
TIMEOUTS = {"timeouts.perceive_s": 5.0, "timeouts.retrieve_s": 5.0,
            "timeouts.constraints_s": 5.0, "timeouts.execute_s": 15.0,
            "timeouts.restart_wait_s": RESTART_WAIT_S}
#: A plain client's goal must end this soon after the planner's SIGKILL.
PLAIN_END_S = 3.0


class Graph:
    def __init__(self) -> None:
        from agentic_grasp.ros.client.graph_client import GraphClient
        from agentic_grasp.commands.grasp import PlannerClient
        from agentic_grasp.ros.graph.launcher import Launcher
        from agentic_grasp.ros.common.liveness import PeerMonitor
        from agentic_grasp_interfaces.srv import Perceive

        self.launcher = Launcher(
            {"acquired": "none", "perception": "oracle"},
            extra_params={"sim": {"phase_delay_s": PHASE_DELAY_S, "task": TASK, "seed": SEED},
                          "planner": TIMEOUTS})
        self.launcher.start()
        self.launcher.supervise()
        try:
            self.client = GraphClient("test_restart_wait_client")
            self.planner = PlannerClient(self.client)
            self.perceive = self.client.node.create_client(Perceive, "perceive")
            self.liveness = PeerMonitor(self.client.node, ["perception", "retrieval",
                                                           "scene_graph", "executor", "sim",
                                                           "planner"])
            assert self.planner.wait_for_server(60.0), "grasp_object did not come up"
            deadline = time.monotonic() + 90.0
            while not self.ready():
                assert time.monotonic() < deadline, "graph not ready"
        except Exception:
            self.launcher.stop()
            raise

    def ready(self) -> bool:
        from agentic_grasp.ros.client.graph_client import GraphError

        try:
            self.load()
            return bool(self.planner.grasp(INSTRUCTION, CONFIGURATION, timeout_s=20.0).success)
        except GraphError:
            return False

    def load(self) -> None:
        from agentic_grasp.commands import grasp as grasp_cli

        loaded = grasp_cli.load_scene(self.client, TASK, SEED, timeout_s=10.0)
        grasp_cli.wait_until_perceived(self.client, self.perceive, loaded.object_ids, 10.0)

    def close(self):
        self.planner.close()
        self.client.close()
        return self.launcher.stop()


@pytest.fixture(scope="module")
def graph():
    g = Graph()
    yield g
    g.close()


@pytest.mark.parametrize("victim", ["perception", "retrieval", "scene_graph", "executor",
                                    "sim"])
def test_a_goal_sent_while_a_node_restarts_waits_for_it(graph, victim):
    graph.load()
    restarts = graph.launcher.restarts().get(victim, 0)
    losses = graph.liveness.losses(victim)
    graph.launcher.kill_node(victim)
    killed = time.monotonic()
    status, result = graph.planner.wait(graph.planner.send(INSTRUCTION, CONFIGURATION),
                                        timeout_s=RESTART_WAIT_S + 30.0)
    took = time.monotonic() - killed
    print(f"{victim}: goal sent at the kill ended after {took:.2f} s: {result.message}")
    assert result.error_code != Result.ERROR_PEER_LOST, result.message
    assert result.success, result.message
    assert graph.launcher.restarts()[victim] == restarts + 1
    assert graph.liveness.losses(victim) == losses + 1     # it did die, and came back
    assert took < RESTART_WAIT_S + 20.0


def test_a_plain_client_gets_a_result_when_the_planner_dies(graph):
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient

    client = ActionClient(graph.client.node, GraspObject, "grasp_object")
    try:
        assert client.wait_for_server(timeout_sec=10.0)
        graph.load()
        executing = threading.Event()

        def feedback(msg):
            if msg.feedback.stage == "execute":
                executing.set()

        sent = client.send_goal_async(GraspObject.Goal(instruction=INSTRUCTION,
                                                       configuration=CONFIGURATION),
                                      feedback_callback=feedback)
        graph.client.wait_future(sent, 10.0)
        assert sent.done() and sent.result().accepted
        assert executing.wait(20.0), "the goal never reached the arm"
        result_future = sent.result().get_result_async()
        graph.launcher.kill_node("planner")
        killed = time.monotonic()
        graph.client.wait_future(result_future, 10.0)
        ended = time.monotonic() - killed
        assert result_future.done(), "the plain client got no result"
        response = result_future.result()
        print(f"plain client: result {ended:.2f} s after the planner's SIGKILL: "
              f"{response.result.message}")
        assert response.status == GoalStatus.STATUS_ABORTED
        assert response.result.error_code == Result.ERROR_PEER_LOST
        assert "the planner node died" in response.result.message
        assert ended <= PLAIN_END_S, f"result {ended:.2f} s after the kill"

        # A plain goal sent while the planner restarts waits for it (the front's PeerCall).
        graph.load()
        sent = client.send_goal_async(GraspObject.Goal(instruction=INSTRUCTION,
                                                       configuration=CONFIGURATION))
        graph.client.wait_future(sent, 10.0)
        assert sent.done() and sent.result().accepted
        result_future = sent.result().get_result_async()
        graph.client.wait_future(result_future, 60.0)
        assert result_future.done()
        assert result_future.result().status == GoalStatus.STATUS_SUCCEEDED, \
            result_future.result().result.message
    finally:
        client.destroy()
