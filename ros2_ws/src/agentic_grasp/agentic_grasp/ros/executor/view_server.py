"""The executor's wrist-camera views: the ``move_camera`` action (MoveCamera) and the
``wrist_camera`` service (WristCamera), served from the executor's arm backend.

Why an action of its own rather than a phase of ExecuteGrasp: a view has no target and no
gripper command, so none of ExecuteGrasp's checks (grip force, width, the grasp point in the
workspace) applies to it, and its refusals are about the camera pose (out of reach, the hand
would touch something there). It is still a motion of the same arm: it takes the executor's
one-motion-at-a-time lock (a view while a grasp runs is rejected, as a second grasp is), can be
canceled, and stops for a vanished client like a grasp.
"""
from __future__ import annotations

import threading
from typing import Callable

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from agentic_grasp.ros.conversions.wrist_view import (fill_view_result, fill_wrist_camera,
                                                      pose_from_msg)
from agentic_grasp.core.arm.backend import ArmBackend, ArmError, ViewResult
from agentic_grasp.core.errors import ValidationError
from agentic_grasp_interfaces.action import MoveCamera
from agentic_grasp_interfaces.srv import WristCamera


def accept_when_free(busy: threading.Lock, logger, rejection: str) -> GoalResponse:
    """An executor goal callback: take the arm's motion lock at acceptance (released when the
    goal's execution ends), else reject with ``rejection`` logged. Taking it here, not in
    the execute callback, leaves no window in which a second motion goal is accepted."""
    if not busy.acquire(blocking=False):
        logger.warning(rejection)
        return GoalResponse.REJECT
    return GoalResponse.ACCEPT


class ViewServer:
    """``move_camera`` and ``wrist_camera`` on ``node`` for ``backend`` (module docstring).

    ``busy`` is the executor's motion lock; ``client_lost()`` returns a counter that changes
    when the commanding node vanishes (the executor's PeerMonitor), like a cancel.
    """

    def __init__(self, node: Node, backend: ArmBackend, busy: threading.Lock,
                 client_lost: Callable[[], int], result_timeout_s: int = 30) -> None:
        self._node, self._backend, self._busy = node, backend, busy
        self._client_lost = client_lost
        group = ReentrantCallbackGroup()
        self._server = ActionServer(
            node, MoveCamera, "move_camera", execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=lambda _: CancelResponse.ACCEPT,
            callback_group=group, result_timeout=int(result_timeout_s))
        node.create_service(WristCamera, "wrist_camera", self._on_describe,
                            callback_group=group)

    def _on_describe(self, _request, response):
        try:
            info = self._backend.wrist_camera()
        except Exception as exc:  # noqa: BLE001 - the node keeps serving
            return fill_wrist_camera(response, None, f"the arm backend failed: {exc!r}")
        return fill_wrist_camera(response, info,
                                 f"the {self._backend.name} arm has no wrist camera")

    def _on_goal(self, _goal) -> GoalResponse:
        return accept_when_free(self._busy, self._node.get_logger(),
                                "rejecting MoveCamera goal: the arm is busy")

    def _execute(self, goal_handle):
        try:
            result = self._run(goal_handle)
        finally:
            self._busy.release()
        msg = fill_view_result(MoveCamera.Result(), result)
        if result.error == ArmError.CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif result.error == ArmError.NONE:
            goal_handle.succeed()
        else:
            self._node.get_logger().warning(f"MoveCamera not reached: {result.message}")
            goal_handle.abort()
        return msg

    def _run(self, goal_handle) -> ViewResult:
        try:
            T = pose_from_msg(goal_handle.request.camera_pose)
        except ValidationError as exc:
            return ViewResult(ArmError.INVALID_PARAMETERS, str(exc))
        losses = self._client_lost()

        def canceled() -> bool:
            return goal_handle.is_cancel_requested or self._client_lost() != losses

        goal_handle.publish_feedback(MoveCamera.Feedback(stage="moving"))
        try:
            return self._backend.move_camera_to(T, canceled)
        except Exception as exc:  # noqa: BLE001 - a backend bug must not kill the node
            self._node.get_logger().error(f"arm backend raised on a view: {exc!r}")
            return ViewResult(ArmError.BACKEND_FAILURE, f"{type(exc).__name__}: {exc}")


__all__ = ["ViewServer", "accept_when_free"]
