"""One GraspObject goal on the ROS side: the planner's typed events -> feedback messages,
AttemptRecord messages and grasp markers (core/planner/events.py -> agentic_grasp_interfaces).

Nothing is decided here: the attempt's content is the core AttemptRecord the events carry.
The session only adds what ROS sees and the core does not: the sub-goal index and count
(the count grows when a support dependency inserts a prerequisite), the GraspOutcome message
exactly as the executor returned it, and the attempt's time as the node saw it (Thought to
Observation).
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

from std_msgs.msg import Header

from agentic_grasp.ros.common.dependencies import (DependencyError, DependencyTimeout, GoalCanceled,
                                                   GoalSignal, PeerLost)
from agentic_grasp.ros.conversions.records import (VIEW_LABEL, attempt_record_to_msg,
                                                   recorded_grasp)
from agentic_grasp.ros.conversions.grasp import outcome_to_msg
from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.planner import (STATUS_BLOCKED, STATUS_CANCELED, STATUS_NOT_PERCEIVED,
                                        TaskOutcome)
from agentic_grasp.core.planner.events import (ObservationEvent, PhaseEvent, PlanEvent,
                                               PlannerEvent, ReflectionEvent, ResultEvent,
                                               TaskPlanEvent, TaskResultEvent, ThoughtEvent,
                                               UncoverEvent)
from agentic_grasp.core.planner.outcomes import AttemptRecord
from agentic_grasp.core.grasping.limits import STATUS_BEYOND_HAND
from agentic_grasp_interfaces.action import GraspObject
from agentic_grasp_interfaces.msg import AttemptRecord as AttemptRecordMsg, GraspOutcome

Result = GraspObject.Result
STAGES = ("perceive", "uncover", "retrieve", "reason", "plan", "execute", "reflect", "done")


@dataclass
class _Pending:
    """An attempt between its Thought and its reflection."""

    subgoal_index: int
    thought: ThoughtEvent
    started: float
    observation: Optional[AttemptRecord] = None    # set by its Observation
    record: Optional[AttemptRecord] = None    # the planner's, once it is done with it
    outcome: Any = None                       # the executor's GraspOutcome message
    duration_s: float = 0.0


def _value(x: Any) -> str:
    return getattr(x, "value", str(x))


class GoalSession:
    """Turns the planner's events of one goal into feedback, AttemptRecords and markers.

    Called from the goal's thread and, for motion phases, from the thread that delivers the
    executor's feedback; a lock keeps the two in order.
    """

    def __init__(self, goal_id: str, feedback: Callable[[GraspObject.Feedback], None],
                 publish_attempt: Callable[[AttemptRecordMsg], None],
                 publish_grasp: Callable[..., None],
                 header: Callable[[], Header]) -> None:
        self.goal_id = goal_id
        self._feedback = feedback
        self._publish_attempt = publish_attempt
        self._publish_grasp = publish_grasp
        self._header = header
        self._lock = threading.RLock()
        self.records: List[AttemptRecordMsg] = []
        self.grasped: List[str] = []
        self.subgoal_index = -1
        self.subgoal_count = 0
        self._target = ""
        self._between = True               # no sub-goal running (start, or after a result)
        self._pending: Optional[_Pending] = None
        self._attempt = 0
        self._level = 0

    # ---- feedback ---------------------------------------------------------------------------
    def stage(self, stage: str, thought: str = "", target_id: Optional[str] = None,
              failure_type: str = "", correction: str = "",
              retry_level: Optional[int] = None, upcoming: bool = False) -> None:
        """Publish one feedback message (``stage`` one of STAGES); ``upcoming``: about the
        sub-goal that has not started yet (the perception before it)."""
        with self._lock:
            ahead = upcoming and self._between
            index = max(0, self.subgoal_index + 1 if ahead else self.subgoal_index)
            if target_id is None:
                target_id = "" if ahead else self._target
            self._feedback(GraspObject.Feedback(
                stage=stage, subgoal_index=index,
                subgoal_count=max(self.subgoal_count, index + 1),
                target_id=target_id, attempt=0 if ahead else self._attempt,
                retry_level=(int(retry_level) if retry_level is not None
                             else 0 if ahead else self._level),
                failure_type=failure_type, correction=correction, thought=thought))

    def enter(self, target_id: str) -> None:
        """The sub-goal on ``target_id`` has started (its first event or constraint call)."""
        with self._lock:
            self._enter(target_id)

    def _enter(self, target_id: str) -> None:
        if self._between or target_id != self._target:
            self.subgoal_index += 1
            self.subgoal_count = max(self.subgoal_count, self.subgoal_index + 1)
            self._target, self._between = target_id, False
            self._attempt, self._level = 0, 0

    # ---- planner events ---------------------------------------------------------------------
    def on_event(self, event: PlannerEvent) -> None:
        with self._lock:
            if isinstance(event, TaskPlanEvent):
                self.subgoal_count = len(event.plan.subgoals)
                order = ", ".join(s.target_id for s in event.plan.subgoals)
                self.stage("plan", f"task plan ({event.plan.kind}): {order or 'nothing'}",
                           target_id="")
            elif isinstance(event, TaskResultEvent):
                self._flush()
                self._between = True
            elif isinstance(event, PhaseEvent):
                self.stage("execute", f"{event.phase} ({event.index}/{event.count})")
            elif isinstance(event, UncoverEvent):
                self._uncover(event)
            else:
                self._enter(event.target_id)
                self._on_subgoal_event(event)

    def _on_subgoal_event(self, event: PlannerEvent) -> None:
        if isinstance(event, PlanEvent):
            self.stage("plan", f"initial grasp from {event.initial_source}: {event.detail}")
        elif isinstance(event, ThoughtEvent):
            self._flush()
            self._attempt, self._level = event.attempt, event.retry_level
            self._pending = _Pending(self.subgoal_index, event, time.perf_counter())
            self._publish_grasp(recorded_grasp(event.grasp),
                                f"{event.target_id} #{event.attempt + 1}: ", event.candidate)
            self.stage("plan", event.text)
        elif isinstance(event, ObservationEvent):
            self._observe(event)
        elif isinstance(event, ReflectionEvent):
            if self._pending is not None:
                self._pending.record = event.record
            self._flush()
            self.stage("reflect", event.diagnosis.evidence,
                       failure_type=event.diagnosis.failure_type.value,
                       correction=event.correction.text, retry_level=event.correction.level)
        elif isinstance(event, ResultEvent):
            self._flush()
            if event.success:
                self.grasped.append(event.target_id)
            if event.status == STATUS_BLOCKED:
                self.subgoal_count += len(event.prerequisites) + 1
            self._between = True

    def _uncover(self, event: UncoverEvent) -> None:
        """A wrist-camera view (before the sub-goal it uncovers): its thought, then its record
        as an AttemptRecord and a marker, like a grasp attempt's."""
        view = event.record
        if not event.done:
            self.stage("uncover", view.thought, target_id="", upcoming=True)
            return
        record = _view_attempt(view)
        self._publish_grasp(recorded_grasp(record.grasp), f"uncover #{view.index + 1}: ",
                            record.candidate)
        # outcome.success = the target was seen (nothing is grasped), its motion time
        seen = GraspOutcome(success=bool(view.target_seen), duration_s=float(view.duration_s))
        msg = attempt_record_to_msg(record, self.goal_id, max(0, self.subgoal_index + 1), "",
                                    seen, view.duration_s, self._header())
        self.records.append(msg)
        self._publish_attempt(msg)
        self.stage("uncover", view.summary(), target_id="", upcoming=True)

    def _observe(self, event: ObservationEvent) -> None:
        pending = self._pending
        if pending is None:
            return
        seen = event.observation
        # the planner's reading of the arm's observation (the observation itself goes into
        # the record too: attempt_record_to_msg)
        pending.outcome = outcome_to_msg(seen.outcome) if seen.outcome is not None else None
        pending.duration_s = time.perf_counter() - pending.started
        pending.observation = seen
        pending.record = event.record           # None: a reflection follows
        n, outcome = seen.index + 1, seen.outcome
        if seen.success:
            # the quality as the attempt records store it (4 decimals), then shown with 2
            quality = round(float(outcome.quality), 4)
            self.stage("execute", f"attempt {n} succeeded (Q {quality:.2f})")
            self._flush()
        elif seen.arm_error != ArmError.NONE:
            self.stage("execute", f"attempt {n} not run: {seen.arm_error.name}")
        else:
            events = ", ".join(f"{e.kind}:{_value(e.phase)}"
                               for e in (outcome.events if outcome else []))
            reached = _value(outcome.phase_reached) if outcome else "?"
            self.stage("execute", f"attempt {n} failed at {reached}"
                                  + (f" ({events})" if events else ""))

    def _flush(self) -> None:
        """Publish the pending attempt: the planner's AttemptRecord once it has built it;
        an attempt it never finished (interrupted in reflecting on it: observed only; the arm
        never reported back: cancel, lost peer, timeout) is sent without a reflection."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        record = pending.record
        if record is None and pending.observation is not None:
            record = pending.observation
        elif record is None:
            pending.duration_s = time.perf_counter() - pending.started
            t = pending.thought
            record = AttemptRecord(t.attempt, t.retry_level, t.text, t.grasp, False, None,
                                   candidate=t.candidate)
        msg = attempt_record_to_msg(record, self.goal_id, pending.subgoal_index,
                                    pending.thought.target_id, pending.outcome,
                                    pending.duration_s, self._header())
        self.records.append(msg)
        self._publish_attempt(msg)

    def close(self) -> None:
        with self._lock:
            self._flush()

    # ---- the goal's end ---------------------------------------------------------------------
    def result(self, task: Optional[TaskOutcome], code: int, message: str, signal: GoalSignal,
               canceled_by_client: Callable[[], bool], started: float) -> GraspObject.Result:
        """The goal's Result once the planner returned ``task`` (None: it raised) with
        (``code``, ``message``): a lost peer, then a client's cancel, override the error the
        planner ended with. Publishes the pending attempt and the ``done`` feedback."""
        self.close()
        if code != Result.ERROR_NONE and signal.lost is not None:
            code = Result.ERROR_PEER_LOST
            message = f"peer lost: {signal.lost.detail}; goal aborted"
        success = code == Result.ERROR_NONE
        if not success and code != Result.ERROR_PEER_LOST and canceled_by_client():
            code = Result.ERROR_CANCELED
        self.stage("done", message, target_id="")
        return Result(success=success, error_code=code, message=message,
                      grasped_ids=list(task.grasped if task is not None else self.grasped),
                      attempts=self.records, total_time_s=time.perf_counter() - started)


def _view_attempt(view: Any) -> AttemptRecord:
    """An uncover.ViewRecord as the planner's AttemptRecord (what is published for every
    motion): success = the target was seen; the candidate names it an uncover view."""
    clear = view.clearance_m if math.isfinite(view.clearance_m) else None
    return AttemptRecord(view.index, 0, view.thought, view.pose, view.target_seen, None,
                         ArmError(view.error), view.message, duration_s=view.duration_s,
                         candidate={"label": f"{VIEW_LABEL}{view.occluder_id}'s {view.side}",
                                    "clearance_m": clear, "nearest": view.message,
                                    "collision_free": view.reached})


def task_error(task: TaskOutcome) -> Tuple[int, str]:
    """(error_code, message) of a finished task (ERROR_NONE on success)."""
    if task.success:
        return Result.ERROR_NONE, task.message
    if task.status == STATUS_CANCELED:
        return Result.ERROR_CANCELED, task.message
    if task.plan is None:
        return Result.ERROR_PERCEPTION_FAILED, task.message
    if not task.plan.subgoals:
        return Result.ERROR_TARGET_NOT_FOUND, task.message
    last = task.goals[-1] if task.goals else None
    if last is not None and last.status == STATUS_BEYOND_HAND:
        return Result.ERROR_BEYOND_HAND_LIMITS, f"{task.message}; {last.message}"
    if last is not None and last.status == STATUS_NOT_PERCEIVED:
        code = (Result.ERROR_PERCEPTION_FAILED if last.message.startswith("perception failed")
                else Result.ERROR_TARGET_NOT_FOUND)
        return code, f"{task.message}; {last.target_id}: {last.message}"
    detail = f"; {last.target_id}: {last.message}" if last is not None else ""
    if last is not None and last.failure_types:
        detail += f" (failures: {', '.join(last.failure_types)})"
    return Result.ERROR_GRASP_FAILED, task.message + detail


def guarded(publish: Callable[..., None], context_ok: Callable[[], bool],
            debug: Callable[[str], None]) -> Callable[..., None]:
    """``publish``, silent once the node shuts down under a running goal (``context_ok``
    false: the publisher may already be destroyed)."""
    def call(*args: Any) -> None:
        if context_ok():
            try:
                publish(*args)
            except Exception as exc:  # noqa: BLE001 - destroyed while shutting down
                if context_ok():
                    raise
                debug(f"not published during shutdown: {exc!r}")
    return call


def end_goal(goal_handle: Any, result: GraspObject.Result, log: Any) -> None:
    """End the goal in exactly one of succeed / canceled / abort, and log how."""
    line = (f"{'succeeded' if result.success else 'ended'}: {result.message} "
            f"({len(result.attempts)} attempts, {result.total_time_s:.2f} s)")
    if result.success:
        goal_handle.succeed()
        log.info(line)
    elif result.error_code == Result.ERROR_CANCELED and _cancel_state(goal_handle):
        goal_handle.canceled()
        log.info(line)
    else:
        goal_handle.abort()
        log.warning(line)


def _cancel_state(goal_handle: Any, timeout_s: float = 1.0) -> bool:
    """True once rclpy has moved the goal to CANCELING (it does so right after the cancel
    callback returns, possibly after this thread already finished the goal)."""
    deadline = time.monotonic() + timeout_s
    wait = threading.Event()
    while not goal_handle.is_cancel_requested:
        if time.monotonic() > deadline:
            return False
        wait.wait(0.01)
    return True


def exception_error(exc: Exception) -> Optional[Tuple[int, str]]:
    """(error_code, message) of a goal the planner left with ``exc``: a peer that is lost,
    did not answer or answered an error, or a cancel; None for anything else (a bug)."""
    if isinstance(exc, PeerLost):
        return Result.ERROR_PEER_LOST, ""
    if isinstance(exc, DependencyTimeout):
        return (Result.ERROR_DEPENDENCY_TIMEOUT,
                f"dependency timeout: the {exc.peer} node did not answer ({exc.detail})")
    if isinstance(exc, DependencyError):
        return (Result.ERROR_INTERNAL,
                f"dependency error: the {exc.peer} node answered an error ({exc.detail})")
    if isinstance(exc, GoalCanceled):
        return Result.ERROR_CANCELED, f"canceled ({exc})"
    return None


__all__ = ["GoalSession", "STAGES", "end_goal", "exception_error", "guarded", "task_error"]
