"""PlannerClient.send (OrderedActionClient.send_goal_resending) when DDS loses the first goal
request or its answer.

A client that already sees the planner's action can send before the planner has matched it;
the planner's volatile reader then skips the request for good. Here an in-process GraspObject
server stands in for the planner, and the client's first copy is made to vanish: either it is
never sent (the request lost), or it is sent and its answer thrown away (the answer lost, the
goal accepted). Either way ``send`` must come back with the one goal, accepted, and its result,
and the goal must run once.
"""
from __future__ import annotations

import threading
import time

import pytest

from agentic_grasp.ros.common import dependencies

ACTION = "test_planner_client_grasp"


class Graph:
    """What PlannerClient needs of a GraphClient: a spinning node and a future wait."""

    def __init__(self, node) -> None:
        self.node = node

    @staticmethod
    def wait_future(future, timeout_s: float) -> None:
        from agentic_grasp.ros.common.futures import wait_done

        wait_done(future, timeout_s)


@pytest.fixture
def server_and_client(ros_domain):
    import rclpy
    from rclpy.action import ActionServer, GoalResponse
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import MultiThreadedExecutor

    from agentic_grasp.ros.client.planner import PlannerClient
    from agentic_grasp_interfaces.action import GraspObject

    context = rclpy.Context()
    rclpy.init(context=context)
    server_node = rclpy.create_node("test_pc_server", context=context)
    client_node = rclpy.create_node("test_pc_client", context=context)
    runs = []

    def execute(goal_handle):
        runs.append(bytes(goal_handle.goal_id.uuid))
        time.sleep(0.2)
        goal_handle.succeed()
        return GraspObject.Result(success=True, message=goal_handle.request.instruction)

    server = ActionServer(server_node, GraspObject, ACTION, execute_callback=execute,
                          goal_callback=lambda _g: GoalResponse.ACCEPT,
                          callback_group=ReentrantCallbackGroup())
    executor = MultiThreadedExecutor(context=context)
    executor.add_node(server_node)
    executor.add_node(client_node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    client = PlannerClient(Graph(client_node), action=ACTION, planner_node="test_pc_server")
    assert client.wait_for_server(30.0)
    try:
        yield client, runs
    finally:
        client.close()
        server.destroy()
        executor.shutdown()
        server_node.destroy_node()
        client_node.destroy_node()
        context.try_shutdown()
        thread.join(5.0)


def _first_copy(client, how: str):
    """Make the first send_goal_async copy vanish (``how``: "request" or "answer")."""
    from rclpy.task import Future

    real = client._action.send_goal_async
    calls = []

    def send(*args, **kwargs):
        calls.append(kwargs.get("goal_uuid"))
        if len(calls) > 1:
            return real(*args, **kwargs)
        if how == "answer":
            real(*args, **kwargs)           # the planner gets it; its answer goes nowhere
        return Future()                     # never done
    client._action.send_goal_async = send
    return calls


@pytest.mark.parametrize("how", ["request", "answer"])
def test_a_lost_first_copy_costs_a_resend_not_the_goal(server_and_client, how, monkeypatch):
    client, runs = server_and_client
    monkeypatch.setattr(dependencies, "GOAL_RESEND_S", 0.5)
    calls = _first_copy(client, how)
    started = time.monotonic()
    handle = client.send("pick up the banana", timeout_s=20.0)
    assert handle.accepted, how
    assert len(calls) >= 2 and all(c is calls[0] for c in calls), "copies keep the goal id"
    status, result = client.wait(handle, 20.0)
    assert result.success and result.message == "pick up the banana"
    assert runs == [bytes(calls[0].uuid)], "the goal ran exactly once"
    assert time.monotonic() - started < 10.0


def test_an_answered_goal_is_sent_once(server_and_client):
    client, runs = server_and_client
    real = client._action.send_goal_async
    calls = []
    client._action.send_goal_async = lambda *a, **k: calls.append(1) or real(*a, **k)
    handle = client.send("pick up the cube", timeout_s=20.0)
    assert handle.accepted and calls == [1]
    assert client.wait(handle, 20.0)[1].success and len(runs) == 1


def test_a_service_request_left_unanswered_is_sent_again(ros_domain, monkeypatch):
    """GraphClient._call: the first LoadScene request is never answered in time (the server
    sits on it, as a lost request would leave the client); the copy is answered."""
    import rclpy
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import MultiThreadedExecutor

    from agentic_grasp.ros.client.graph_client import GraphClient
    from agentic_grasp_interfaces.srv import LoadScene

    monkeypatch.setattr(dependencies, "GOAL_RESEND_S", 0.5)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("test_pc_service", context=context)
    calls = []
    release = threading.Event()
    answered = []

    def on_load(request, response):
        calls.append(request.task)
        if len(calls) == 1:
            release.wait(10.0)
        answered.append(request.task)
        response.success = True
        response.message = f"call {len(calls)}"
        return response

    node.create_service(LoadScene, "test_pc_load", on_load,
                        callback_group=ReentrantCallbackGroup())
    client = node.create_client(LoadScene, "test_pc_load")
    executor = MultiThreadedExecutor(context=context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        assert client.wait_for_service(timeout_sec=30.0)
        started = time.monotonic()
        response = GraphClient._call(Graph(node), client, LoadScene.Request(task="sg_cup"),
                                     10.0, "test_pc_load")
        assert response.success and response.message == "call 2"
        assert calls == ["sg_cup", "sg_cup"] and time.monotonic() - started < 5.0
    finally:
        release.set()
        # The held first call answers now; let it be sent before the node goes.
        deadline = time.monotonic() + 5.0
        while len(answered) < len(calls) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
        thread.join(5.0)
