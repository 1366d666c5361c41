"""Front node: the public ``grasp_object`` action, which outlives the planner.

Other robot stacks send GraspObject goals with a plain rclpy ``ActionClient``. When the process
that runs a goal dies, that client waits forever: its get-result request went to a server
that is gone, rclpy does not notice a vanished server, and DDS keeps listing it for its 20 s
participant lease. A goal journal the respawned planner answers from cannot help such a
client either: it never asks the new server, whose get-result service it was not talking to.
So the public action is served here, by a thin process that only forwards:

- a goal is forwarded, under the *same goal id* (so the planner's GoalLog and AttemptRecords
  name the id the client holds), to the planner's internal ``planner/grasp_object`` action,
  its feedback relayed as it comes, its result and end state (succeeded, canceled, aborted)
  returned unchanged;
- a cancel is forwarded; the planner's answer (with the attempts made) ends the goal;
- one goal at a time, as the planner: a goal arriving while one runs is rejected here;
- the planner's death (agentic_grasp.ros.common.liveness: about 1.2 s after a SIGKILL) ends the
  forwarded goal at once: ABORTED with ERROR_PEER_LOST and a message naming the planner,
  the attempts made so far being lost with it;
- a goal sent while the planner is restarting (dead and not back, not discovered yet, or
  dead before it answered the forwarded goal) waits for it, ``planner_wait_s`` in all
  (common.peer_call.PeerCall, the planner's own peer call), then is forwarded; a planner
  that never appears ends it with ERROR_DEPENDENCY_TIMEOUT;
- a goal that names its sender's liveliness (GraspObject ``sender_liveliness_topic``, opt-in)
  holds a lease on motion (common.sender_lease): the goal is forwarded once the sender is
  seen alive (its end is then seen too); when the sender dies (about 1.2 s after a SIGKILL)
  its goal is canceled as a client's cancel is (the planner
  cancels the executor's goal, the arm stops) and ends ABORTED with ERROR_SENDER_LOST, the
  attempts made kept; nobody would read the result, and nobody should own a moving arm;
- a planner that came back moments ago may take the goal and drop its answer (its response
  writer not matched yet): the goal is sent again under the same id, which rclpy's server
  refuses while it holds the goal, so the goal runs once and its result is asked for by id.

The front holds no state a goal needs beyond the forwarded handle, so its own restart costs
only the goal in flight (the launcher restarts it like any node; a client that must survive
that too watches ``alive/grasp_front`` as PlannerClient does).

The goal's wait blocks its executor thread on an event, as the planner's peer calls do,
rather than awaiting in a coroutine: rclpy Jazzy's executor yields every pending task again
on each pass of its wait loop (rclpy/executors.py, _wait_for_ready_callbacks), so a
coroutine parked on a future is resumed over and over while it waits.
"""
from __future__ import annotations

import threading
from typing import Any, Optional

from action_msgs.msg import GoalStatus
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from agentic_grasp.ros.common.dependencies import (DependencyTimeout, GoalCanceled, GoalSignal,
                                                   OrderedActionClient, PeerLost)
from agentic_grasp.ros.common.peer_call import PeerCall, goal_call
from agentic_grasp.ros.common.liveness import PeerMonitor
from agentic_grasp.ros.common.runner import spin_node
from agentic_grasp.ros.common.sender_lease import SEEN_S, SenderLeases, check_topic
from agentic_grasp.ros.common.params import declare
from agentic_grasp_interfaces.action import GraspObject

NODE_NAME = "grasp_front"
#: The public action (GraspObject.action: "other robot stacks send this goal").
ACTION = "grasp_object"
#: The planner's own action, which only this node calls.
PLANNER_ACTION = "planner/grasp_object"
PLANNER = "planner"
#: Threads: the goal's, the planner's answers and feedback, a second client's goal and cancel.
EXECUTOR_THREADS = 4
#: How long a forwarded goal may run at most (s): a safety net far above any goal (the
#: planner bounds every peer call itself), not a limit a goal should reach.
RESULT_WAIT_S = 3600.0
#: How long the end of a goal waits for the planner's "done" feedback to be relayed (s).
DONE_GRACE_S = 1.0

Result = GraspObject.Result


class FrontNode(Node):
    """Serves ``grasp_object`` by forwarding to the planner (module docstring)."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        self.planner_wait_s = float(declare(
            self, "planner_wait_s", 20.0,
            "How long a goal waits for a planner that is restarting or not up yet (s): "
            "respawn delay 0.5-8 s (core/supervision.py) plus a planner start of 2-4 s",
            (0.1, 3600.0)))
        self.result_timeout_s = int(declare(
            self, "result_timeout_s", 30, "How long a finished goal's result is kept for "
                                          "late clients (s), as the planner's", (1, 3600)))
        self.sender_seen_s = float(declare(
            self, "sender_seen_s", SEEN_S,
            "How long a goal that names its sender waits to see it alive before the goal "
            "is forwarded; not seen by then: ERROR_SENDER_LOST, nothing moved (s; "
            "common.sender_lease)", (0.5, 60.0)))
        self._planner = OrderedActionClient(self, GraspObject, PLANNER_ACTION,
                                            callback_group=ReentrantCallbackGroup())
        # Feedback is relayed from the planner's feedback topic, one message at a time (in
        # the planner's order), not through the client's feedback callback: rclpy drops
        # that callback when the result arrives, and the planner's last ("done") feedback
        # may be taken after its result.
        self._relay_to: Optional[Any] = None        # (goal id bytes, our goal handle)
        self._relayed_done = threading.Event()
        self.create_subscription(GraspObject.Impl.FeedbackMessage,
                                 PLANNER_ACTION + "/_action/feedback", self._relay,
                                 QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE),
                                 callback_group=MutuallyExclusiveCallbackGroup())
        self._lock = threading.Lock()
        self._signal: Optional[GoalSignal] = None
        self._forwarded: Optional[Any] = None      # the planner's ClientGoalHandle
        #: the wait for the forwarded goal's result: woken by a planner death, never by a
        #: cancel (that is forwarded, and the planner's answer ends the goal)
        self._waiting: Optional[GoalSignal] = None
        #: why the running goal's sender was lost ("" while it lives or names none)
        self._sender_lost = ""
        self._lease_topic = ""                  # the running goal's sender ("" for none)
        self._leases = SenderLeases(self, self._on_sender_lost, self.sender_seen_s)
        self.liveness = PeerMonitor(self, [PLANNER], on_lost=self._on_planner_lost)
        self._call = PeerCall(PLANNER, self.planner_wait_s, watch=self.liveness)
        self._server = ActionServer(
            self, GraspObject, ACTION, execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
            callback_group=ReentrantCallbackGroup(), result_timeout=self.result_timeout_s)
        self.get_logger().info(f"front ready: {ACTION} -> {PLANNER_ACTION}; a planner death "
                               f"ends the goal; waits up to {self.planner_wait_s:g} s for it")

    # ---- action callbacks -------------------------------------------------------------------
    def _on_goal(self, goal: GraspObject.Goal) -> GoalResponse:
        with self._lock:
            if self._signal is not None:
                self.get_logger().warning(
                    f"rejecting GraspObject goal {goal.instruction[:80]!r}: another goal is "
                    "running (one goal at a time)")
                return GoalResponse.REJECT
            self._signal = GoalSignal(self.planner_wait_s)
            self._forwarded = None
        return GoalResponse.ACCEPT

    def _on_cancel(self, _goal_handle: Any) -> CancelResponse:
        self._cancel_running()
        return CancelResponse.ACCEPT

    def _cancel_running(self) -> None:
        with self._lock:                        # ordered against _forward's hand-over
            forwarded = self._forwarded
            if forwarded is None and self._signal is not None:
                self._signal.cancel()           # not forwarded yet: ends here, or is
        if forwarded is not None:               # forwarded with its cancel (_forward)
            forwarded.cancel_goal_async()       # the planner's answer ends the goal

    def _on_sender_lost(self, topic: str, why: str) -> None:
        with self._lock:
            if topic != self._lease_topic:      # a sender with no goal running: no motion
                return
            self._sender_lost = why
        self.get_logger().error(f"{why}; canceling its goal (lease on motion)")
        self._cancel_running()

    def _relay(self, msg: Any) -> None:
        with self._lock:
            relay = self._relay_to
        if relay is not None and bytes(msg.goal_id.uuid) == relay[0]:
            relay[1].publish_feedback(msg.feedback)
            if msg.feedback.stage == "done":
                self._relayed_done.set()

    def _on_planner_lost(self, _peer: str) -> None:
        with self._lock:
            signals = [s for s in (self._signal, self._waiting) if s is not None]
        self.get_logger().error(self.liveness.describe_loss(PLANNER)
                                + ("; ending the forwarded goal" if signals else ""))
        for signal in signals:
            signal.poke()

    # ---- one goal ---------------------------------------------------------------------------
    def _execute(self, goal_handle: Any) -> GraspObject.Result:
        with self._lock:
            signal = self._signal or GoalSignal(self.planner_wait_s)
            self._sender_lost = ""
        try:
            topic = goal_handle.request.sender_liveliness_topic
            if topic:
                reason = check_topic(topic)
                if reason:
                    return self._end(goal_handle, False, Result(
                        error_code=Result.ERROR_INVALID_GOAL, message=reason))
                lease = self._leases.lease(topic)
                with self._lock:
                    self._lease_topic = topic   # a loss from now on cancels this goal
                unseen = lease.why if lease.lost() else lease.wait_seen(lambda: signal.canceled)
                if not unseen and lease.seen_after_s > 0.5:
                    self.get_logger().warning(f"{topic} seen alive after "
                                              f"{lease.seen_after_s:.2f} s (goal held till then)")
                if unseen:                      # before anything moves: no lease, no goal
                    with self._lock:
                        self._sender_lost = unseen
                    self.get_logger().error(unseen)
                    return self._end(goal_handle, False, self._sender_result(Result()))
            return self._forward(goal_handle, signal)
        finally:
            with self._lock:
                self._signal = self._forwarded = self._waiting = self._relay_to = None
                self._lease_topic = ""

    def _forward(self, goal_handle: Any, signal: GoalSignal) -> GraspObject.Result:
        goal_id = bytes(goal_handle.goal_id.uuid).hex()[:8]
        try:
            with self._lock:
                self._relay_to = (bytes(goal_handle.goal_id.uuid), goal_handle)
                self._relayed_done.clear()
            # a planner that came back moments ago may take the goal and drop its answer:
            # the goal is sent again under the client's own goal id (goal_call), so the
            # planner's GoalLog and AttemptRecords name the id the client holds
            handle = goal_call(self._call, self._planner, goal_handle.request,
                               f"action {PLANNER_ACTION}", signal, goal_id=goal_handle.goal_id)
            if not handle.accepted:
                return self._end(goal_handle, False, Result(
                    error_code=Result.ERROR_INTERNAL,
                    message="the planner rejected the goal (busy with a goal not sent "
                            "through grasp_object)"))
            waiting = GoalSignal()
            with self._lock:
                self._forwarded, self._waiting = handle, waiting
                canceled = signal.canceled
            if canceled:                    # a cancel that came while the goal was sent
                handle.cancel_goal_async()
            since = self._call.losses()
            response = self._call.follow(waiting, handle.get_result_async(),
                                         f"{PLANNER_ACTION} result", lambda _f: None, since,
                                         timeout_s=RESULT_WAIT_S)
        except GoalCanceled:
            if self._sender_lost:
                return self._end(goal_handle, False, self._sender_result(Result(
                    message="canceled before the planner took the goal")))
            return self._end(goal_handle, True, Result(
                error_code=Result.ERROR_CANCELED,
                message="canceled before the planner took the goal"))
        except PeerLost as exc:
            self.get_logger().error(f"goal {goal_id}: {exc.detail}")
            return self._end(goal_handle, False, Result(
                error_code=Result.ERROR_PEER_LOST,
                message=f"peer lost: {exc.detail}; the goal's attempts are lost with it "
                        "(bringup restarts the planner: send the goal again)"))
        except DependencyTimeout as exc:
            return self._end(goal_handle, False, Result(
                error_code=Result.ERROR_DEPENDENCY_TIMEOUT,
                message=f"dependency timeout: the planner node did not answer ({exc.detail})"))
        return self._mirror(goal_handle, response)

    def _mirror(self, goal_handle: Any, response: Any) -> GraspObject.Result:
        """End the goal as the planner ended it, with its result unchanged."""
        result = response.result
        # the planner published "done" before it ended the goal: relay it first
        self._relayed_done.wait(DONE_GRACE_S)
        if self._sender_lost and int(response.status) != GoalStatus.STATUS_SUCCEEDED:
            goal_handle.abort()                 # canceled for its sender, who is gone
            return self._sender_result(result)
        if int(response.status) == GoalStatus.STATUS_SUCCEEDED:
            goal_handle.succeed()
        elif int(response.status) == GoalStatus.STATUS_CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return result

    def _sender_result(self, result: GraspObject.Result) -> GraspObject.Result:
        """The result of a goal canceled for its lost sender: ERROR_SENDER_LOST, the
        planner's message and attempts kept."""
        result.success = False
        result.error_code = Result.ERROR_SENDER_LOST
        result.message = f"sender lost: {self._sender_lost}; the goal was canceled" + \
            (f" ({result.message})" if result.message else "")
        return result

    def _end(self, goal_handle: Any, canceled: bool, result: GraspObject.Result
             ) -> GraspObject.Result:
        """End a goal the planner did not answer: canceled (when asked) or aborted."""
        if not self.context.ok():
            return result
        if canceled and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        self.get_logger().warning(f"goal ended here: {result.message}")
        return result

    def destroy_node(self) -> None:
        with self._lock:
            signals = [s for s in (self._signal, self._waiting) if s is not None]
        for signal in signals:
            signal.cancel()
        super().destroy_node()


def main(args=None) -> None:
    spin_node(FrontNode, num_threads=EXECUTOR_THREADS, args=args)


if __name__ == "__main__":
    main()
