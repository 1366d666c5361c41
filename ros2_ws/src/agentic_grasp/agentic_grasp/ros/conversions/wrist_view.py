"""Messages of the wrist-camera view (in the node graph): poses, the camera
model and a view motion's answer, between the core types and MoveCamera / WristCamera /
SimMoveCamera.

A view pose is the optical frame's 4x4 pose in world; on the wire a geometry_msgs/Pose. A
pose that is not finite or whose quaternion is far from unit length is refused
(ValidationError) rather than normalised: a client that sends garbage is told so.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, Quaternion

from agentic_grasp.ros.conversions.images import camera_from_info, camera_info_to_msg
from agentic_grasp.core.arm.backend import ArmError, ViewResult, WristCameraInfo
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.geometry import matrix_to_quaternion, quaternion_to_matrix

#: How far from 1 a pose's quaternion norm may be (float32 round trips stay far below).
QUATERNION_TOLERANCE = 1e-3


def pose_to_msg(T: Any) -> Pose:
    """geometry_msgs/Pose of a 4x4 pose."""
    T = np.asarray(T, dtype=float)
    x, y, z, w = (float(v) for v in matrix_to_quaternion(T[:3, :3]))
    return Pose(position=Point(x=float(T[0, 3]), y=float(T[1, 3]), z=float(T[2, 3])),
                orientation=Quaternion(x=x, y=y, z=z, w=w))


def pose_from_msg(msg: Pose, what: str = "camera_pose") -> np.ndarray:
    """The 4x4 pose of a geometry_msgs/Pose; ValidationError for one that is not a pose."""
    p, q = msg.position, msg.orientation
    values = [p.x, p.y, p.z, q.x, q.y, q.z, q.w]
    if not all(math.isfinite(float(v)) for v in values):
        raise ValidationError(f"{what} is not finite: {values}")
    norm = math.sqrt(sum(float(v) ** 2 for v in values[3:]))
    if abs(norm - 1.0) > QUATERNION_TOLERANCE:
        raise ValidationError(f"{what} orientation is not a unit quaternion (norm {norm:.4f})")
    T = np.eye(4)
    T[:3, :3] = quaternion_to_matrix(values[3:])
    T[:3, 3] = [float(p.x), float(p.y), float(p.z)]
    return T


def ns_of(stamp: Time) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def time_of(ns: int) -> Time:
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def fill_wrist_camera(response: Any, info: Optional[WristCameraInfo], why: str = "") -> Any:
    """A WristCamera response for the camera model ``info`` (None: no wrist camera)."""
    if info is None:
        response.available, response.message = False, why or "this arm has no wrist camera"
        return response
    response.available, response.message = True, "wrist camera"
    response.camera_info = camera_info_to_msg(info.camera)
    response.camera_info.header.frame_id = info.camera.frame_id
    response.min_range_m = float(info.min_range_m)
    response.mount = pose_to_msg(info.T_tcp_cam if info.T_tcp_cam is not None else np.eye(4))
    return response


def wrist_camera_from_response(response: Any) -> Optional[WristCameraInfo]:
    """The camera model of a WristCamera response (None when the arm has none)."""
    if not response.available:
        return None
    camera = camera_from_info(response.camera_info, np.eye(4))
    return WristCameraInfo(camera, float(response.min_range_m),
                           pose_from_msg(response.mount, "mount"))


def fill_view_result(msg: Any, result: ViewResult) -> Any:
    """A MoveCamera result (or SimMoveCamera response) from a ViewResult."""
    msg.error_code, msg.message = int(result.error), result.message
    if result.camera is not None:
        msg.camera_pose = pose_to_msg(result.camera.T_world_cam)
    msg.reached_stamp = time_of(result.reached_ns)
    msg.duration_s = float(result.duration_s)
    msg.clearance_m = float(result.clearance_m)
    msg.nearest = result.nearest
    return msg


def view_result_from_msg(msg: Any, info: Optional[WristCameraInfo]) -> ViewResult:
    """A ViewResult of a MoveCamera result; the camera is ``info``'s intrinsics at the pose
    reached (None when not reached or when the model is unknown)."""
    try:
        error = ArmError(int(msg.error_code))
    except ValueError:
        error = ArmError.BACKEND_FAILURE
    camera = None
    if error == ArmError.NONE and info is not None:
        try:
            T = pose_from_msg(msg.camera_pose)
        except ValidationError as exc:
            return ViewResult(ArmError.BACKEND_FAILURE, f"the arm reported a bad pose: {exc}")
        intr = info.camera
        camera = Camera(width=intr.width, height=intr.height, fx=intr.fx, fy=intr.fy,
                        cx=intr.cx, cy=intr.cy, T_world_cam=T, frame_id=intr.frame_id)
    elif error == ArmError.NONE:
        error, msg.message = ArmError.BACKEND_FAILURE, "no wrist camera model to view with"
    return ViewResult(error, msg.message, camera, float(msg.duration_s),
                      float(msg.clearance_m), msg.nearest, ns_of(msg.reached_stamp))


__all__ = ["QUATERNION_TOLERANCE", "fill_view_result", "fill_wrist_camera", "ns_of",
           "pose_from_msg", "pose_to_msg", "time_of", "view_result_from_msg",
           "wrist_camera_from_response"]
