"""The planner's perceive callback over the perception node's Perceive service."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from agentic_grasp.ros.common.dependencies import GoalSignal
from agentic_grasp.ros.common.peer_call import PeerCall, service_call
from agentic_grasp.ros.conversions.wrist_view import pose_to_msg
from agentic_grasp.ros.conversions.perception import perception_result_from_msg
from agentic_grasp.ros.conversions.images import rgb_from_msg
from agentic_grasp.ros.recording.inputs import tapped
from agentic_grasp.core.perception import PerceptionResult
from agentic_grasp_interfaces.srv import Perceive

PEER = "perception"
#: The nodes a perceive call needs: perception, and the simulator whose camera it perceives
#: (a perception answer while the sim restarts is "no capture in time"). With arm:=moveit
#: there is no sim node: never seen alive, it is never lost.
DEPENDS = ("perception", "sim")


class PerceptionAnswer(NamedTuple):
    """One Perceive answer: the result, the target crop cut from the same capture (None
    without one), and the capture it came from (stamp in ns, world version; 0 = unknown)."""

    result: PerceptionResult
    crop: Optional[np.ndarray]
    capture_ns: int
    world_version: int


class PerceptionService:
    """``perceive(instruction, ...)`` -> PerceptionAnswer, for ReflectivePlanner.run_task.

    A perception *error* (no capture in time, target not found, VLM unreachable) is an
    answer: it comes back in ``PerceptionResult.error`` and the planner reports it. Only a
    node that does not answer within ``timeout_s`` raises DependencyTimeout. With the VLM
    backend one call can take ``capture_wait_s`` + ``max_attempts * timeout_s`` plus backoff
    (perception node docstring): set the timeout above that.
    """

    def __init__(self, node: Node, timeout_s: float, callback_group: CallbackGroup,
                 service: str = "perceive") -> None:
        client = node.create_client(Perceive, service, callback_group=callback_group)
        self._client = client
        self.caller = PeerCall(PEER, timeout_s, depends=DEPENDS)  # watch: set by the planner
        #: Records each exchange (recording/inputs.DecisionTap; None: not recorded).
        self.tap: Any = None

    def perceive(self, instruction: str, signal: Optional[GoalSignal] = None,
                 not_before: Any = None, goal_id: str = "",
                 camera: Any = None) -> PerceptionAnswer:
        """``not_before`` (builtin_interfaces/Time): the capture must be taken at or after it
        (None: when the request arrives). ``camera``: None for the fixed camera, else the
        wrist camera (core Camera) where the arm's last view put it (its pose is sent)."""
        request = Perceive.Request(instruction=instruction, goal_id=goal_id,
                                   camera=Perceive.Request.CAMERA_FIXED)
        if camera is not None:
            request.camera = Perceive.Request.CAMERA_WRIST
            request.camera_pose = pose_to_msg(camera.T_world_cam)
        if not_before is not None:
            request.not_before = not_before
        response = tapped(self.tap, "perceive", request, lambda: service_call(
            self.caller, self._client, request, signal))
        return perception_answer(response)


def perception_answer(response: Any) -> PerceptionAnswer:
    """The PerceptionAnswer of a Perceive response (replay converts recorded ones here)."""
    msg = response.result
    crop = None
    if response.target_crop.height > 0 and response.target_crop.header.frame_id \
            == msg.target_id:
        try:
            crop = rgb_from_msg(response.target_crop)
        except Exception:  # noqa: BLE001 - a bad crop only costs the visual query
            crop = None
    stamp = msg.capture_stamp
    return PerceptionAnswer(perception_result_from_msg(msg), crop,
                            int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec),
                            int(msg.world_version))
