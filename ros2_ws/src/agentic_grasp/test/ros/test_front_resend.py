"""The front forwards a goal once, even when a restarted planner drops its goal response.

A planner that came back moments ago can take a goal and lose its answer: its response writer
is not matched to the front's reader yet, and rmw_fastrtps drops the response ("failed to send
response (timeout)"). CI saw the front then wait its whole ``planner_wait_s`` while the planner
ran the goal to success. The front resends the goal under the same goal id; rclpy's server
refuses an id it holds, so the planner runs it once, and the front follows that goal's result.

Here the planner is a stand-in in this process (an action server on ``planner/grasp_object``
that announces itself like a node) whose first goal response is dropped on purpose, after a
first instance left the graph (so the front's watch knows the planner as restarting).
"""
from __future__ import annotations

import threading
import time

import pytest

rclpy = pytest.importorskip("rclpy")

from agentic_grasp_interfaces.action import GraspObject  # noqa: E402

WAIT_S = 30.0


class DroppingHandle:
    """The C action server handle with its first ``drop`` goal responses dropped."""

    def __init__(self, handle, drop: int) -> None:
        self._handle = handle
        self.drop = drop
        self.dropped = 0

    def send_goal_response(self, header, response) -> None:
        if self.dropped < self.drop:
            self.dropped += 1
            return
        self._handle.send_goal_response(header, response)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self._handle.__enter__()

    def __exit__(self, *exc):
        return self._handle.__exit__(*exc)


class StandIn:
    """A node named ``planner`` serving ``planner/grasp_object`` (each goal succeeds), in a
    context (a DDS participant) of its own, as a planner process has: liveliness events do
    not come between nodes of one participant."""

    def __init__(self, drop: int = 0) -> None:
        from rclpy.action import ActionServer
        from rclpy.callback_groups import ReentrantCallbackGroup
        from rclpy.executors import MultiThreadedExecutor

        from agentic_grasp.ros.common.liveness import announce

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("planner", context=self.context)
        self.alive = announce(self.node)
        self.executed = []
        self.server = ActionServer(self.node, GraspObject, "planner/grasp_object",
                                   execute_callback=self._execute,
                                   callback_group=ReentrantCallbackGroup())
        self.handle = DroppingHandle(self.server._handle, drop)
        self.server._handle = self.handle
        self.executor = MultiThreadedExecutor(num_threads=2, context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self.context.try_shutdown()

    def _execute(self, goal_handle):
        self.executed.append(bytes(goal_handle.goal_id.uuid))
        goal_handle.succeed()
        return GraspObject.Result(success=True, message="done by the stand-in")


def _wait(predicate, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_goal_whose_response_a_restarted_planner_dropped_runs_once_and_ends():
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from rclpy.executors import MultiThreadedExecutor

    from agentic_grasp.ros.front.node import FrontNode

    executor = MultiThreadedExecutor(num_threads=6)
    front = FrontNode()
    client_node = rclpy.create_node("front_resend_client")
    client = ActionClient(client_node, GraspObject, "grasp_object")
    first = StandIn()
    for node in (front, client_node):
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    second = None
    try:
        _wait(lambda: front.liveness.alive("planner"), "the front never saw the planner")
        first.close()                           # leaves the graph: dead at once
        _wait(lambda: front.liveness.lost("planner"), "the front never saw the planner go")
        second = StandIn(drop=1)
        _wait(lambda: not front.liveness.lost("planner"), "the front never saw it back")
        assert client.wait_for_server(timeout_sec=WAIT_S)

        sent = client.send_goal_async(GraspObject.Goal(instruction="pick up the cube"))
        _wait(sent.done, "the front did not answer the goal")
        assert sent.result().accepted
        started = time.monotonic()
        result = sent.result().get_result_async()
        _wait(result.done, "the plain client got no result")
        took = time.monotonic() - started

        assert second.handle.dropped == 1, "the stand-in did not drop the response"
        assert result.result().status == GoalStatus.STATUS_SUCCEEDED, \
            result.result().result.message
        assert result.result().result.message == "done by the stand-in"
        # once, under the client's own goal id
        assert second.executed == [bytes(sent.result().goal_id.uuid)]
        assert took < front.planner_wait_s / 2, f"ended {took:.1f} s after acceptance"
    finally:
        executor.shutdown(timeout_sec=2.0)
        client.destroy()
        for node in (front, client_node):
            node.destroy_node()
        for stand_in in (first, second):
            if stand_in is not None and stand_in.context.ok():
                stand_in.close()


class _Answer:
    def __init__(self, accepted: bool) -> None:
        self.accepted = accepted
        self.canceled = 0

    def cancel_goal_async(self) -> None:
        self.canceled += 1


class _Client:
    """An OrderedActionClient's part GoalCopies uses; no server holds an earlier copy."""

    def __init__(self) -> None:
        self.sent = []

    def send_goal_async(self, goal, feedback_callback=None, goal_uuid=None):
        from rclpy.task import Future

        self.sent.append(bytes(goal_uuid.uuid))
        return Future()

    def accepted_copy(self, goal_id, futures):
        return None


def test_copies_share_one_goal_id_and_a_late_taken_copy_nobody_follows_is_canceled():
    from agentic_grasp.ros.common.dependencies import GoalCopies

    client = _Client()
    copies = GoalCopies(client, goal=object())
    first, second = copies.send(), copies.send()
    assert len(set(client.sent)) == 1                     # one goal id for every copy
    copies.abandon(first)                                 # left unanswered by PeerCall
    refused = _Answer(False)
    second.set_result(refused)
    assert copies.handle(refused) is refused              # no earlier copy was taken
    late = _Answer(True)
    first.set_result(late)                                # ... until now: nobody follows it
    assert late.canceled == 1


def test_a_late_answer_to_a_copy_of_the_followed_goal_is_left_alone():
    from agentic_grasp.ros.common.dependencies import GoalCopies

    copies = GoalCopies(_Client(), goal=object())
    first, second = copies.send(), copies.send()
    copies.abandon(first)
    taken = _Answer(True)
    second.set_result(taken)
    assert copies.handle(taken) is taken
    late = _Answer(True)
    first.set_result(late)
    assert late.canceled == 0
