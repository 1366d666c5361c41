"""The planner's arm: one attempt = one ExecuteGrasp goal on the executor node.

Feedback (approach, close, lift) is forwarded to the planner's phase callback as it arrives,
each phase once and in order; the phases the result says ran (its outcome's phase_reached)
whose feedback has not arrived by then are reported when the result arrives. The executor
publishes a phase's feedback before its result, but they travel apart (a topic and a
service reply), and rclpy drops feedback taken after the result: with one sim/arm call per
attempt (the default) CLOSE and LIFT are published just before the result and often lost so.
A cancel of the planner's goal cancels the ExecuteGrasp goal too (the executor stops the arm
before its next phase and the simulator opens the gripper), and the attempt ends CANCELED.
"""
from __future__ import annotations

import threading
from typing import Any, Optional

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from agentic_grasp.ros.common.dependencies import (DependencyTimeout, GoalCanceled, GoalSignal,
                                                   OrderedActionClient)
from agentic_grasp.ros.common.peer_call import PeerCall, goal_call
from agentic_grasp.ros.conversions.grasp import grasp_to_msg, observation_from_msg
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.ros.planner.peers.executor_view import ExecutorView
from agentic_grasp.core.arm.backend import (PHASES, ArmBackend, ArmError, ArmResult, CancelCheck,
                                            PhaseCallback, ViewResult, WristCameraInfo)
from agentic_grasp.core.types import GraspParameters, Phase
from agentic_grasp.ros.common.liveness import CONFIRM_S, LEASE_S
from agentic_grasp_interfaces.action import ExecuteGrasp

PEER = "executor"
#: The nodes an attempt cannot go on without: the executor and its simulated arm (never seen
#: alive with arm:=moveit, so never lost there).
DEPENDS = ("executor", "sim")

#: How long a canceled ExecuteGrasp goal may take to report that it stopped (s): the
#: executor checks between phases, so this is one phase at most.
CANCEL_GRACE_S = 5.0
#: How long an answer "the arm did not answer" waits for our own watch to report a lost sim
#: (s): a death is known LEASE_S + CONFIRM_S (1.2 s) after it, by the executor as by us.
LOSS_CONFIRM_S = LEASE_S + CONFIRM_S + 0.3


class ExecutorArmBackend(ArmBackend):
    """ArmBackend over the ``execute_grasp`` action (see the module docstring).

    Both calls go through one PeerCall (ros/common/peer_call.py): an executor (or sim) that is
    restarting when the attempt starts is waited for, out of the goal's restart budget, and
    a goal it died before answering is sent again to its restart; one that dies while the
    attempt runs raises PeerLost (a motion is never resent: its fate is unknown).
    ``timeout_s`` bounds the server appearing with the goal being accepted, and the result
    arriving; past it, the ExecuteGrasp goal is canceled and
    DependencyTimeout("executor") is raised. An executor that answers BACKEND_UNAVAILABLE
    (its arm, e.g. the simulator, did not answer) also raises DependencyTimeout: no grasp
    correction can fix a missing arm, so the planner should not spend its retries on it.
    Every other answer, rejections included, is an ArmResult the planner diagnoses.
    """

    name = "executor"

    def __init__(self, node: Node, timeout_s: float, callback_group: CallbackGroup,
                 action: str = "execute_grasp") -> None:
        if not timeout_s > 0.0:
            raise ValueError(f"execute timeout must be > 0 s, got {timeout_s}")
        self._client = OrderedActionClient(node, ExecuteGrasp, action,
                                           callback_group=callback_group)
        self._action = action
        self._context = node.context
        self.timeout_s = float(timeout_s)
        #: the one peer call; its liveness watch is set by the planner node
        self.caller = PeerCall(PEER, timeout_s, depends=DEPENDS)
        self.view = ExecutorView(node, timeout_s, callback_group, self.caller)  # wrist camera

    def execute(self, target_id: str, grasp: GraspParameters, on_phase: PhaseCallback,
                is_canceled: CancelCheck, signal: Optional[GoalSignal] = None) -> ArmResult:
        signal = signal if signal is not None else GoalSignal()
        if is_canceled():
            return ArmResult(ArmError.CANCELED, "canceled before the attempt started")

        phases = _PhaseRelay(on_phase)

        def feedback(message: Any) -> None:
            fb = message.feedback
            try:
                phase = Phase(fb.phase)
            except ValueError:
                return
            phases.report(phase, int(fb.phase_index), int(fb.phase_count))

        goal = ExecuteGrasp.Goal(target_id=target_id, grasp=grasp_to_msg(grasp))
        try:
            # waits for a restarting executor (or sim) first; a goal the executor died
            # before answering is sent to its restart; a motion under way is never resent
            handle = goal_call(self.caller, self._client, goal, f"action {self._action}",
                               signal, feedback)
        except GoalCanceled:
            return ArmResult(ArmError.CANCELED, "canceled before the executor accepted")
        if not handle.accepted:
            return ArmResult(ArmError.BUSY, "the executor rejected the goal (busy with "
                                            "another grasp)")
        since = self.caller.losses()
        result_future = handle.get_result_async()
        try:
            wrapped = self.caller.follow(
                signal, result_future, f"{self._action} result",
                lambda _f: handle.cancel_goal_async(), since)
        except GoalCanceled:
            # Canceled (the goal's cancel was sent): wait (briefly) for the executor to
            # confirm the arm stopped, so the next goal does not find it busy, and keep the
            # partial outcome. Not when the node is shutting down: nothing would deliver the
            # confirmation any more.
            if not self._context.ok():
                return ArmResult(ArmError.CANCELED, "canceled: the planner is shutting down")
            if GoalSignal().wait_future(result_future, CANCEL_GRACE_S) != "done":
                return ArmResult(ArmError.CANCELED, "canceled; the executor did not confirm "
                                                    f"within {CANCEL_GRACE_S:.0f} s")
            wrapped = result_future.result()
        phases.catch_up(wrapped.result.observation.phase_reached)
        return self._to_arm_result(wrapped.result, signal, since)

    def _to_arm_result(self, result: Any, signal: GoalSignal, since: tuple) -> ArmResult:
        try:
            error = ArmError(int(result.error_code))
        except ValueError:
            error = ArmError.BACKEND_FAILURE
        if error == ArmError.BACKEND_UNAVAILABLE:
            # the executor may notice its sim's death before our watch does: a peer lost
            lost = self.caller.lost_within(signal, since, LOSS_CONFIRM_S)
            if lost is not None:
                raise lost
            raise DependencyTimeout(PEER, f"the executor's arm did not answer: "
                                          f"{result.message}")
        try:
            observation = observation_from_msg(result.observation)
        except ValidationError as exc:
            return ArmResult(ArmError.BACKEND_FAILURE, f"the executor's observation does not "
                             f"read: {exc}")
        return ArmResult(error, result.message, observation)

    def wrist_camera(self, signal: Optional[GoalSignal] = None) -> Optional[WristCameraInfo]:
        return self.view.wrist_camera(signal)

    def move_camera_to(self, T_world_cam: Any, is_canceled: CancelCheck,
                       signal: Optional[GoalSignal] = None) -> ViewResult:
        return self.view.move_camera_to(T_world_cam, is_canceled, signal)

    def close(self) -> None:
        self._client.destroy()
        self.view.close()



class _PhaseRelay:
    """The phase callback of one attempt: each phase once, in order (module docstring)."""

    def __init__(self, on_phase: PhaseCallback) -> None:
        self._on_phase = on_phase
        self._lock = threading.Lock()       # held while reporting: phases stay in order
        self._last = 0                      # index of the last phase reported (1-based)

    def report(self, phase: Phase, index: int, count: int) -> None:
        with self._lock:
            if index <= self._last:         # reported already (from the result)
                return
            self._last = index
            self._on_phase(phase, index, count)

    def catch_up(self, phase_reached: str) -> None:
        """Report the phases up to ``phase_reached`` (the result's) not reported yet."""
        try:
            reached = PHASES.index(Phase(phase_reached)) + 1
        except ValueError:                  # no outcome, or not a phase: nothing ran
            return
        for index in range(1, reached + 1):
            self.report(PHASES[index - 1], index, len(PHASES))


__all__ = ["CANCEL_GRACE_S", "DEPENDS", "ExecutorArmBackend"]
