"""What an agent needs to stop the arm and to know the graph's state, from any client.

:class:`GraphWatch` follows, on a GraphClient's node, what every client of the graph can see:

- the public action's goals (``grasp_object/_action/status``, ``.../feedback``) whoever sent
  them, with the last stage of the running one, and the executor's arm goals
  (``execute_grasp/_action/status``): the arm moves while one of those runs;
- the last goal's result (``planner/goal_log``, latched with a history);
- each node of the graph (ros/graph/description.NODES) by its liveliness (``alive/<node>``,
  common.liveness): alive now, and how often it died and came back since this watch began
  (the launcher restarts a dead node; its own count is not published).

:meth:`GraphWatch.stop` cancels every goal of ``grasp_object`` (the action's cancel-all
request: a zero goal id and stamp), whoever sent it, and returns once no grasp goal and no arm
goal runs: the planner cancels the executor's goal, the executor aborts the arm between
phases. A front that does not answer the cancel has the planner's own action canceled the
same way, and an arm goal still running after the planner had its chance is canceled at the
executor.
"""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

from action_msgs.msg import GoalStatus, GoalStatusArray
from action_msgs.srv import CancelGoal
from rclpy.qos import qos_profile_action_status_default

from agentic_grasp.ros.common.liveness import PeerMonitor
from agentic_grasp.ros.graph.description import NODES
from agentic_grasp.ros.planner import goal_log
from agentic_grasp_interfaces.action import GraspObject
from agentic_grasp_interfaces.msg import GoalLog

#: Goal states in which a goal still runs (its arm may move).
RUNNING = (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING, GoalStatus.STATUS_CANCELING)
STATUS_NAMES = {GoalStatus.STATUS_UNKNOWN: "unknown", GoalStatus.STATUS_ACCEPTED: "accepted",
                GoalStatus.STATUS_EXECUTING: "executing",
                GoalStatus.STATUS_CANCELING: "canceling",
                GoalStatus.STATUS_SUCCEEDED: "succeeded", GoalStatus.STATUS_CANCELED: "canceled",
                GoalStatus.STATUS_ABORTED: "aborted"}
#: The actions whose goals move the arm, outermost first.
GRASP_ACTION = "grasp_object"
PLANNER_ACTION = "planner/grasp_object"
ARM_ACTION = "execute_grasp"
#: How long a stop waits for the front to answer its cancel before it cancels the planner's
#: own action (s): an answer is a local service round trip (milliseconds), but a new client's
#: first request (or its answer) can be lost to DDS matching, so the request is sent again
#: every CANCEL_RESEND_S (a cancel-all is idempotent). Measured without resending: 2 of 3
#: stops from a server started seconds before lost their first cancel.
CANCEL_ANSWER_S = 0.6
CANCEL_RESEND_S = 0.15
#: How long after the grasp goals are canceled an arm goal may still run before it is
#: canceled at the executor itself (s): the planner's cancel reaches the executor within
#: one peer-call wake (tens of ms), so this only acts on a planner that is stuck or gone.
ARM_GRACE_S = 0.5


def _codes() -> Dict[int, str]:
    return {v: k for k, v in vars(GraspObject.Result).items()
            if k.startswith("ERROR_") and isinstance(v, int)}


class GraphWatch:
    """Goals, arm goals, the last result and node health, as seen from ``node``."""

    def __init__(self, node: Any, nodes: Optional[List[str]] = None) -> None:
        self.node = node
        self._cond = threading.Condition()
        self.statuses: Dict[str, Dict[str, int]] = {GRASP_ACTION: {}, PLANNER_ACTION: {},
                                                    ARM_ACTION: {}}
        self._feedback: Dict[str, Dict[str, Any]] = {}
        self._last_log: Optional[Any] = None
        for action in self.statuses:
            node.create_subscription(GoalStatusArray, f"{action}/_action/status",
                                     self._status_keeper(action),
                                     qos_profile_action_status_default)
        node.create_subscription(GraspObject.Impl.FeedbackMessage,
                                 f"{GRASP_ACTION}/_action/feedback", self._on_feedback, 10)
        node.create_subscription(GoalLog, goal_log.TOPIC, self._on_log, goal_log.QOS)
        self._cancel = {action: node.create_client(CancelGoal, f"{action}/_action/cancel_goal")
                        for action in self.statuses}
        for client in self._cancel.values():
            # Match the request and answer paths now, with a cancel of a goal id no server
            # holds (answered ERROR_UNKNOWN_GOAL_ID; nothing is canceled), so that a stop's
            # first request is not the one DDS matching loses.
            probe = CancelGoal.Request()
            probe.goal_info.goal_id.uuid = list(uuid.uuid4().bytes)
            client.call_async(probe)
        self.nodes = list(nodes) if nodes is not None else [spec.name for spec in NODES]
        self._restarts: Dict[str, int] = {n: 0 for n in self.nodes}
        self.health = PeerMonitor(node, self.nodes, on_back=self._on_back)
        self.since = time.time()

    # ---- what comes in ------------------------------------------------------------------------
    def _status_keeper(self, action: str):
        def keep(msg: Any) -> None:
            with self._cond:
                self.statuses[action] = {bytes(s.goal_info.goal_id.uuid).hex(): int(s.status)
                                         for s in msg.status_list}
                self._cond.notify_all()
        return keep

    def _on_feedback(self, msg: Any) -> None:
        fb = msg.feedback
        with self._cond:
            self._feedback[bytes(msg.goal_id.uuid).hex()] = {
                "stage": fb.stage, "subgoal_index": int(fb.subgoal_index),
                "subgoal_count": int(fb.subgoal_count), "target_id": fb.target_id,
                "attempt": int(fb.attempt), "retry_level": int(fb.retry_level),
                "failure_type": fb.failure_type, "thought": fb.thought}
            if len(self._feedback) > 64:                 # old goals' last stages
                self._feedback.pop(next(iter(self._feedback)))

    def _on_log(self, msg: Any) -> None:
        with self._cond:
            if self._last_log is None or (msg.end_stamp.sec, msg.end_stamp.nanosec) >= (
                    self._last_log.end_stamp.sec, self._last_log.end_stamp.nanosec):
                self._last_log = msg

    def _on_back(self, peer: str) -> None:
        with self._cond:
            self._restarts[peer] = self._restarts.get(peer, 0) + 1

    # ---- reading ------------------------------------------------------------------------------
    def running(self, action: str = GRASP_ACTION) -> List[str]:
        """Goal ids of ``action`` that still run (by its last status message)."""
        with self._cond:
            return [g for g, s in self.statuses[action].items() if s in RUNNING]

    def moving(self) -> bool:
        """Whether any grasp or arm goal runs."""
        with self._cond:
            return any(s in RUNNING for table in self.statuses.values() for s in table.values())

    def status(self) -> Dict[str, Any]:
        """The graph's health, the running goal with its stage, and the last result."""
        with self._cond:
            running = [{"goal_id": g, "status": STATUS_NAMES.get(s, str(s)),
                        **({"feedback": dict(self._feedback[g])} if g in self._feedback
                           else {})}
                       for g, s in self.statuses[GRASP_ACTION].items() if s in RUNNING]
            arm = [g for g, s in self.statuses[ARM_ACTION].items() if s in RUNNING]
            log = self._last_log
            restarts = dict(self._restarts)
        nodes = [{"name": n, "alive": self.health.alive(n), "deaths": self.health.losses(n),
                  "restarts": restarts.get(n, 0)} for n in self.nodes]
        last = None
        if log is not None:
            last = {"goal_id": log.goal_id, "instruction": log.instruction,
                    "success": bool(log.success),
                    "error_code": _codes().get(int(log.error_code), str(log.error_code)),
                    "message": log.message}
        return {"healthy": all(n["alive"] for n in nodes), "nodes": nodes,
                "running_goals": running, "arm_moving": bool(arm), "last_result": last,
                "watching_since_unix_s": round(self.since, 3)}

    # ---- stopping -----------------------------------------------------------------------------
    def _cancel_all(self, action: str, answer_s: float) -> Optional[List[str]]:
        """Send ``action``'s cancel-all request (again every CANCEL_RESEND_S until one is
        answered); the ids of the goals it cancels (None: no answer within ``answer_s``)."""
        client = self._cancel[action]
        deadline = time.monotonic() + answer_s
        if not client.wait_for_service(timeout_sec=answer_s):
            return None
        done = threading.Event()
        futures = []
        while time.monotonic() < deadline and not done.is_set():
            future = client.call_async(CancelGoal.Request())    # zero id and stamp: all
            future.add_done_callback(lambda _f: done.set())
            futures.append(future)
            done.wait(min(CANCEL_RESEND_S, max(0.0, deadline - time.monotonic())))
        answers = [f.result() for f in futures if f.done() and f.exception() is None]
        if not answers:
            return None
        return sorted({bytes(g.goal_id.uuid).hex() for a in answers for g in a.goals_canceling})

    def _wait_still(self, timeout_s: float, actions=(GRASP_ACTION, PLANNER_ACTION,
                                                       ARM_ACTION),
                    canceled: Tuple[str, ...] = ()) -> bool:
        """Whether, within ``timeout_s``, no goal of ``actions`` runs and each goal of
        ``canceled`` has a status here that says it ended (a goal this watch has not heard of
        yet, e.g. in a server started moments ago, is waited for, not taken as ended)."""
        deadline = time.monotonic() + timeout_s

        def ended(goal: str) -> bool:
            return any(self.statuses[a].get(goal) not in (None,) + RUNNING
                       for a in (GRASP_ACTION, PLANNER_ACTION))

        with self._cond:
            while any(s in RUNNING for a in actions for s in self.statuses[a].values()) \
                    or not all(ended(g) for g in canceled):
                left = deadline - time.monotonic()
                if left <= 0.0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def stop(self, timeout_s: float = 10.0) -> Dict[str, Any]:
        """Cancel every grasp goal, whoever sent it, and wait until the arm is still
        (module docstring). ``stopped`` False when a goal still runs after ``timeout_s``."""
        started = time.monotonic()
        running_before = self.running(GRASP_ACTION)
        arm_before = self.running(ARM_ACTION)
        canceled = self._cancel_all(GRASP_ACTION, CANCEL_ANSWER_S)
        notes: List[str] = []
        if canceled is None:
            notes.append("grasp_object did not answer the cancel: the planner's action was "
                         "canceled directly")
            canceled = self._cancel_all(PLANNER_ACTION, CANCEL_ANSWER_S) or []
        elif self.running(PLANNER_ACTION) and not running_before:
            canceled += self._cancel_all(PLANNER_ACTION, CANCEL_ANSWER_S) or []
        if not self._wait_still(ARM_GRACE_S, (ARM_ACTION,)):
            notes.append("the arm goal still ran after the planner's cancel: canceled at "
                         "the executor")
            self._cancel_all(ARM_ACTION, CANCEL_ANSWER_S)
        stopped = self._wait_still(max(0.0, timeout_s - (time.monotonic() - started)),
                                   canceled=tuple(canceled))
        return {"stopped": stopped, "goals_canceled": len(set(canceled)),
                "goals_running_before": sorted(set(running_before) | set(canceled)),
                "arm_was_moving": bool(arm_before),
                "stop_s": round(time.monotonic() - started, 3), "notes": notes}


__all__ = ["GraphWatch", "RUNNING"]
