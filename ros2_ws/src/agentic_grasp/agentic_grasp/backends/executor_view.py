"""The planner's wrist camera: the executor's ``wrist_camera`` service (its model) and
``move_camera`` action (one view motion per goal), for core/planner/uncover.py.

The camera model is asked once and kept (it is the hardware's); an executor that answers
"no wrist camera" is asked again at the next call, since another arm backend may come up.
A view's goal is canceled when the planner's goal is (the executor checks before moving);
an executor that does not answer within ``timeout_s`` raises DependencyTimeout, as a grasp
does, and a rejected goal (the arm busy) is an ERROR_BUSY answer the uncover search reports.
"""
from __future__ import annotations

import time
from typing import Any, Optional

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from agentic_grasp.backends.dependencies import (DependencyTimeout, GoalSignal,
                                                 OrderedActionClient, ServiceCaller,
                                                 wait_for_peer)
from agentic_grasp.backends.wrist_view import (pose_to_msg, view_result_from_msg,
                                               wrist_camera_from_response)
from agentic_grasp.core.arm import ArmError, CancelCheck, ViewResult, WristCameraInfo
from agentic_grasp_interfaces.action import MoveCamera
from agentic_grasp_interfaces.srv import WristCamera

PEER = "executor"


class ExecutorView:
    """``wrist_camera()`` and ``move_camera_to()`` over the executor (module docstring)."""

    def __init__(self, node: Node, timeout_s: float, callback_group: CallbackGroup,
                 action: str = "move_camera", service: str = "wrist_camera") -> None:
        self._client = OrderedActionClient(node, MoveCamera, action,
                                           callback_group=callback_group)
        self._describe = ServiceCaller(node.create_client(WristCamera, service,
                                                          callback_group=callback_group),
                                       PEER, timeout_s)
        self._action = action
        self.timeout_s = float(timeout_s)
        self._camera: Optional[WristCameraInfo] = None
        self.last_message = ""

    def wrist_camera(self, signal: Optional[GoalSignal] = None) -> Optional[WristCameraInfo]:
        if self._camera is None:
            response = self._describe.call(WristCamera.Request(), signal)
            self.last_message = response.message
            self._camera = wrist_camera_from_response(response)
        return self._camera

    def move_camera_to(self, T_world_cam: Any, is_cancelled: CancelCheck,
                       signal: Optional[GoalSignal] = None) -> ViewResult:
        signal = signal if signal is not None else GoalSignal()
        deadline = time.monotonic() + self.timeout_s
        if is_cancelled():
            return ViewResult(ArmError.CANCELED, "canceled before the view motion")
        found = wait_for_peer(self._client.server_is_ready, signal, self.timeout_s)
        if found == "lost":
            signal.raise_if_lost()
        if found == "canceled":
            return ViewResult(ArmError.CANCELED, "canceled before the view motion")
        if found == "timeout":
            raise DependencyTimeout(PEER, f"action {self._action} did not appear within "
                                          f"{self.timeout_s:.1f} s (is the executor node "
                                          "running?)")
        send = self._client.send_goal_async(MoveCamera.Goal(camera_pose=pose_to_msg(T_world_cam)))
        state = signal.wait_future(send, deadline - time.monotonic())
        if state != "done":
            send.add_done_callback(lambda f: f.result().accepted
                                   and f.result().cancel_goal_async())
            signal.raise_if_lost()
            if state == "canceled":
                return ViewResult(ArmError.CANCELED, "canceled before the executor accepted")
            raise DependencyTimeout(PEER, f"{self._action} goal not answered within "
                                          f"{self.timeout_s:.1f} s")
        handle = send.result()
        if not handle.accepted:
            return ViewResult(ArmError.BUSY, "the executor rejected the view (the arm is busy)")
        result = handle.get_result_async()
        state = signal.wait_future(result, deadline - time.monotonic())
        if state != "done":
            handle.cancel_goal_async()
            signal.raise_if_lost()
            if state == "timeout":
                raise DependencyTimeout(PEER, f"{self._action} result not received within "
                                              f"{self.timeout_s:.1f} s (goal canceled)")
            return ViewResult(ArmError.CANCELED, "canceled during the view motion")
        msg = result.result().result
        if int(msg.error_code) == int(ArmError.BACKEND_UNAVAILABLE):
            raise DependencyTimeout(PEER, f"the executor's arm did not answer: {msg.message}")
        return view_result_from_msg(msg, self.wrist_camera(signal))

    def close(self) -> None:
        self._client.destroy()


__all__ = ["ExecutorView"]
