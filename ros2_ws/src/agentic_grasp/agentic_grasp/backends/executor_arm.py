"""The planner's arm: one attempt = one ExecuteGrasp goal on the executor node.

Feedback (approach, close, lift) is forwarded to the planner's phase callback as it arrives;
a cancel of the planner's goal cancels the ExecuteGrasp goal too (the executor stops the arm
before its next phase and the simulator opens the gripper), and the attempt ends CANCELED.
"""
from __future__ import annotations

import time
from typing import Any, Optional

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from agentic_grasp.backends.dependencies import (DependencyTimeout, GoalSignal,
                                                 OrderedActionClient, wait_for_peer)
from agentic_grasp.conversions import grasp_to_msg, outcome_from_msg
from agentic_grasp.backends.executor_view import ExecutorView
from agentic_grasp.core.arm import (ArmBackend, ArmError, ArmResult, CancelCheck,
                                    PhaseCallback, ViewResult, WristCameraInfo)
from agentic_grasp.core.types import GraspParameters, Phase
from agentic_grasp_interfaces.action import ExecuteGrasp

PEER = "executor"

#: How long a canceled ExecuteGrasp goal may take to report that it stopped (s): the
#: executor checks between phases, so this is one phase at most.
CANCEL_GRACE_S = 5.0


class ExecutorArmBackend(ArmBackend):
    """ArmBackend over the ``execute_grasp`` action (see the module docstring).

    ``timeout_s`` bounds the whole attempt: the server appearing, the goal being accepted
    and the result arriving. Past it, the ExecuteGrasp goal is canceled and
    DependencyTimeout("executor") is raised. An executor that answers BACKEND_UNAVAILABLE
    (its arm, e.g. the simulator, did not answer) also raises DependencyTimeout: no grasp
    correction can fix a missing arm, so the planner should not spend its retries on it.
    Every other answer, rejections included, is an ArmResult the planner diagnoses.

    The last GraspOutcome message is kept in ``last_outcome_msg`` so the planner node can
    publish it unchanged (its events and measurements) in the attempt record.
    """

    name = "executor"

    def __init__(self, node: Node, timeout_s: float, callback_group: CallbackGroup,
                 action: str = "execute_grasp") -> None:
        if not timeout_s > 0.0:
            raise ValueError(f"execute timeout must be > 0 s, got {timeout_s}")
        self._client = OrderedActionClient(node, ExecuteGrasp, action,
                                           callback_group=callback_group)
        self.view = ExecutorView(node, timeout_s, callback_group)   # the wrist camera
        self._action = action
        self._context = node.context
        self.timeout_s = float(timeout_s)
        self.last_outcome_msg: Optional[Any] = None

    def execute(self, target_id: str, grasp: GraspParameters, on_phase: PhaseCallback,
                is_cancelled: CancelCheck, signal: Optional[GoalSignal] = None) -> ArmResult:
        signal = signal if signal is not None else GoalSignal()
        self.last_outcome_msg = None
        deadline = time.monotonic() + self.timeout_s
        if is_cancelled():
            return ArmResult(ArmError.CANCELED, "canceled before the attempt started")
        signal.raise_if_lost()
        found = wait_for_peer(self._client.server_is_ready, signal, self.timeout_s)
        if found == "lost":
            signal.raise_if_lost()
        if found == "canceled":
            return ArmResult(ArmError.CANCELED, "canceled before the attempt started")
        if found == "timeout":
            raise DependencyTimeout(PEER, f"action {self._action} did not appear within "
                                          f"{self.timeout_s:.1f} s (is the executor node "
                                          "running?)")

        def feedback(message: Any) -> None:
            fb = message.feedback
            try:
                phase = Phase(fb.phase)
            except ValueError:
                return
            on_phase(phase, int(fb.phase_index), int(fb.phase_count))

        goal = ExecuteGrasp.Goal(target_id=target_id, grasp=grasp_to_msg(grasp))
        send = self._client.send_goal_async(goal, feedback_callback=feedback)
        state = signal.wait_future(send, deadline - time.monotonic())
        if state == "lost":
            send.add_done_callback(lambda f: f.result().accepted
                                   and f.result().cancel_goal_async())
            signal.raise_if_lost()
        if state == "canceled":
            # The goal may still be accepted: cancel it as soon as its handle exists.
            send.add_done_callback(lambda f: f.result().accepted
                                   and f.result().cancel_goal_async())
            return ArmResult(ArmError.CANCELED, "canceled before the executor accepted")
        if state == "timeout":
            send.add_done_callback(lambda f: f.result().accepted
                                   and f.result().cancel_goal_async())
            raise DependencyTimeout(PEER, f"{self._action} goal not answered within "
                                          f"{self.timeout_s:.1f} s")
        handle = send.result()
        if not handle.accepted:
            return ArmResult(ArmError.BUSY, "the executor rejected the goal (busy with "
                                            "another grasp)")
        result_future = handle.get_result_async()
        state = signal.wait_future(result_future, deadline - time.monotonic())
        if state != "done":
            handle.cancel_goal_async()
            if state == "lost":
                # A peer died: the arm is told to stop (if the executor still lives), and the
                # goal ends now rather than after the executor confirms.
                signal.raise_if_lost()
            if state == "timeout":
                raise DependencyTimeout(PEER, f"{self._action} result not received within "
                                              f"{self.timeout_s:.1f} s (goal canceled)")
            # Canceled: wait (briefly) for the executor to confirm the arm stopped, so the
            # next goal does not find it busy, and keep the partial outcome. Not when the
            # node is shutting down: nothing would deliver the confirmation any more.
            if not self._context.ok():
                return ArmResult(ArmError.CANCELED, "canceled: the planner is shutting down")
            if GoalSignal().wait_future(result_future, CANCEL_GRACE_S) != "done":
                return ArmResult(ArmError.CANCELED, "canceled; the executor did not confirm "
                                                    f"within {CANCEL_GRACE_S:.0f} s")
        return self._to_arm_result(result_future.result().result)

    def _to_arm_result(self, result: Any) -> ArmResult:
        try:
            error = ArmError(int(result.error_code))
        except ValueError:
            error = ArmError.BACKEND_FAILURE
        has_outcome = len(result.outcome.phi) > 0
        if has_outcome:
            self.last_outcome_msg = result.outcome
        if error == ArmError.BACKEND_UNAVAILABLE:
            raise DependencyTimeout(PEER, f"the executor's arm did not answer: "
                                          f"{result.message}")
        outcome = outcome_from_msg(result.outcome) if has_outcome else None
        return ArmResult(error, result.message, outcome)

    def wrist_camera(self, signal: Optional[GoalSignal] = None) -> Optional[WristCameraInfo]:
        return self.view.wrist_camera(signal)

    def move_camera_to(self, T_world_cam: Any, is_cancelled: CancelCheck,
                       signal: Optional[GoalSignal] = None) -> ViewResult:
        return self.view.move_camera_to(T_world_cam, is_cancelled, signal)

    def close(self) -> None:
        self._client.destroy()
        self.view.close()


__all__ = ["CANCEL_GRACE_S", "ExecutorArmBackend"]
