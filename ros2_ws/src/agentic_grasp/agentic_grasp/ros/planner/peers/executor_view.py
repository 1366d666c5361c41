"""The planner's wrist camera: the executor's ``wrist_camera`` service (its model) and
``move_camera`` action (one view motion per goal), for core/planner/instruction/uncover.py.

The camera model is asked once and kept (it is the hardware's); an executor that answers
"no wrist camera" is asked again at the next call, since another arm backend may come up.
Both go through the executor arm's one PeerCall (ros/common/peer_call.py), as a grasp does:
a restarting executor is waited for within the goal's budget, a view goal the executor died
before answering is sent to its restart, a motion under way is never resent. A view's goal
is canceled when the planner's goal is (the executor checks before moving); an executor that
does not answer within ``timeout_s`` raises DependencyTimeout, and a rejected goal (the arm
busy) is an ERROR_BUSY answer the uncover search reports.
"""
from __future__ import annotations

from typing import Any, Optional

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from agentic_grasp.ros.common.dependencies import (DependencyTimeout, GoalCanceled, GoalSignal,
                                                   OrderedActionClient)
from agentic_grasp.ros.common.peer_call import PeerCall, goal_call, service_call
from agentic_grasp.ros.conversions.wrist_view import (pose_to_msg, view_result_from_msg,
                                                      wrist_camera_from_response)
from agentic_grasp.core.arm.backend import ArmError, CancelCheck, ViewResult, WristCameraInfo
from agentic_grasp_interfaces.action import MoveCamera
from agentic_grasp_interfaces.srv import WristCamera

PEER = "executor"


class ExecutorView:
    """``wrist_camera()`` and ``move_camera_to()`` over the executor (module docstring)."""

    def __init__(self, node: Node, timeout_s: float, callback_group: CallbackGroup,
                 caller: PeerCall, action: str = "move_camera",
                 service: str = "wrist_camera") -> None:
        self._client = OrderedActionClient(node, MoveCamera, action,
                                           callback_group=callback_group)
        self._describe = node.create_client(WristCamera, service,
                                            callback_group=callback_group)
        self.caller = caller                 # the executor arm's (its watch set by the planner)
        self._action = action
        self.timeout_s = float(timeout_s)
        self._camera: Optional[WristCameraInfo] = None
        self.last_message = ""

    def wrist_camera(self, signal: Optional[GoalSignal] = None) -> Optional[WristCameraInfo]:
        if self._camera is None:
            response = service_call(self.caller, self._describe, WristCamera.Request(),
                                    signal)
            self.last_message = response.message
            self._camera = wrist_camera_from_response(response)
        return self._camera

    def move_camera_to(self, T_world_cam: Any, is_canceled: CancelCheck,
                       signal: Optional[GoalSignal] = None) -> ViewResult:
        signal = signal if signal is not None else GoalSignal()
        if is_canceled():
            return ViewResult(ArmError.CANCELED, "canceled before the view motion")
        goal = MoveCamera.Goal(camera_pose=pose_to_msg(T_world_cam))
        try:
            handle = goal_call(self.caller, self._client, goal, f"action {self._action}",
                               signal)
        except GoalCanceled:
            return ViewResult(ArmError.CANCELED, "canceled before the executor accepted")
        if not handle.accepted:
            return ViewResult(ArmError.BUSY, "the executor rejected the view (the arm is busy)")
        since = self.caller.losses()
        result = handle.get_result_async()
        try:
            wrapped = self.caller.follow(signal, result, f"{self._action} result",
                                         lambda _f: handle.cancel_goal_async(), since)
        except GoalCanceled:
            return ViewResult(ArmError.CANCELED, "canceled during the view motion")
        msg = wrapped.result
        if int(msg.error_code) == int(ArmError.BACKEND_UNAVAILABLE):
            raise DependencyTimeout(PEER, f"the executor's arm did not answer: {msg.message}")
        return view_result_from_msg(msg, self.wrist_camera(signal))

    def close(self) -> None:
        self._client.destroy()



__all__ = ["ExecutorView"]
