"""The wrist camera on a real Franka through MoveIt: a pose goal for the camera frame.

A view request names where the camera's optical frame should be. The camera is fixed on the
hand (the mount: the optical frame in the TCP frame), so the goal for MoveIt's planning link
is T_link = T_world_cam inv(T_tcp_cam) inv(T_link_tcp) (:func:`view_link_pose`), planned with
the ``transit`` request (OMPL, collision-checked against the table and every perceived
object, none excluded: a view touches nothing) and executed like any transit. The camera
actually reached is the planning link's pose after the motion (forward kinematics of the
measured joints) times the same chain, so perception places the wrist image where the arm
really is, not where it was asked to be.

The camera model is the executor's ``wrist_camera.*`` parameters (config/executor.yaml):
off (``enabled: false``) unless the set-up carries one, so a Franka without a wrist camera
never claims a view. Planning errors map as a grasp's do: no IK solution or an unreachable
goal -> ERROR_OUT_OF_WORKSPACE, a goal in collision -> ERROR_INVALID_PARAMETERS (the hand
would touch something there), set-up errors -> ERROR_BACKEND_FAILURE.

The translation (:func:`view_link_pose`, :func:`view_error`, :func:`reached_camera`) needs no
MoveIt and is unit-tested; :class:`MoveItViewMixin` is the part of MoveItArmBackend that
talks to MoveIt (its ``_plan_to``, ``_execute``, ``_update_scene``, ``_psm``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

import numpy as np

from agentic_grasp.ros.executor.moveit.outcome import (MOVEIT_ERROR_CODES, is_system_error,
                                                       moveit_error_name)
from agentic_grasp.ros.executor.moveit.config import MoveItBackendConfig
from agentic_grasp.ros.executor.moveit.translation import Pose, tcp_to_link_pose
from agentic_grasp.core.arm.backend import ArmError, ViewResult, WristCameraInfo
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.sim.params import WristCameraMount

_OUT_OF_REACH = {MOVEIT_ERROR_CODES[n] for n in (
    "NO_IK_SOLUTION", "PLANNING_FAILED", "INVALID_MOTION_PLAN", "TIMED_OUT",
    "GOAL_CONSTRAINTS_VIOLATED", "GOAL_STATE_INVALID", "INVALID_GOAL_CONSTRAINTS",
    "GOAL_VIOLATES_PATH_CONSTRAINTS", "FAILURE")}


def _d(text: str) -> dict:
    return {"description": text}


@dataclass
class MoveItWristCamera:
    """``wrist_camera.*`` of the executor with arm_backend moveit: the camera on the hand."""

    enabled: bool = field(default=False, metadata=_d(
        "Whether the hand carries a wrist camera (views behind occluders need one)"))
    offset_m: Tuple[float, float, float] = field(default=(0.06, 0.0, -0.085), metadata=_d(
        "Optical centre in the TCP frame (m; axes as the TCP's, z = approach); "
        "config/sim.yaml wrist_camera says where the default comes from"))
    width: int = field(default=640, metadata=_d("Colour image width (px)"))
    height: int = field(default=480, metadata=_d("Colour image height (px)"))
    fx: float = field(default=554.26, metadata=_d("Focal length x (px)"))
    fy: float = field(default=554.26, metadata=_d("Focal length y (px)"))
    min_range_m: float = field(default=0.18, metadata=_d("Nearest valid depth (m)"))

    def mount(self) -> Optional[WristCameraMount]:
        """The mount (validated), None when there is no camera."""
        if not self.enabled:
            return None
        return WristCameraMount(offset_m=tuple(self.offset_m), width=self.width,
                                height=self.height, fx=self.fx, fy=self.fy,
                                min_range_m=self.min_range_m)


def view_link_pose(T_world_cam: np.ndarray, mount: WristCameraMount,
                   cfg: MoveItBackendConfig) -> Pose:
    """The planning link's pose that puts the optical frame at ``T_world_cam``."""
    T_tcp = np.asarray(T_world_cam, dtype=float) @ np.linalg.inv(mount.T_tcp_cam)
    return tcp_to_link_pose(T_tcp, cfg)


def reached_camera(T_link: np.ndarray, mount: WristCameraMount,
                   cfg: MoveItBackendConfig) -> Camera:
    """The wrist camera at the pose a planning-link pose gives."""
    return mount.camera(np.asarray(T_link, dtype=float) @ cfg.link_to_tcp() @ mount.T_tcp_cam)


def view_error(code: int) -> Tuple[ArmError, str]:
    """(executor error, reason) for a view MoveIt could not plan."""
    name = moveit_error_name(code)
    if is_system_error(code):
        return ArmError.BACKEND_FAILURE, f"MoveIt cannot plan the view motion: {name}"
    if int(code) == MOVEIT_ERROR_CODES["GOAL_IN_COLLISION"]:
        return ArmError.INVALID_PARAMETERS, f"view pose refused: the hand would touch ({name})"
    if int(code) in _OUT_OF_REACH:
        return ArmError.OUT_OF_WORKSPACE, f"view pose out of the arm's reach ({name})"
    return ArmError.INVALID_PARAMETERS, f"view motion not planned ({name})"


class MoveItViewMixin:
    """``wrist_camera()`` and ``move_camera_to()`` of MoveItArmBackend (module docstring).

    Needs ``self.cfg`` (MoveItBackendConfig), ``self.wrist_mount`` (None: no camera),
    ``self._node``, ``self._plan_to``, ``self._execute``, ``self._update_scene`` and
    ``self._psm`` of the backend.
    """

    wrist_mount: Optional[WristCameraMount] = None

    def wrist_camera(self) -> Optional[WristCameraInfo]:
        mount = self.wrist_mount
        if mount is None:
            return None
        return WristCameraInfo(mount.intrinsics(), mount.min_range_m, mount.T_tcp_cam)

    def _link_pose_now(self) -> np.ndarray:
        """The planning link's pose in the planning frame, from the measured joints."""
        with self._psm.read_only() as scene:
            pose = scene.current_state.get_pose(self.cfg.ik_link)
        p, q = pose.position, pose.orientation
        return Pose((p.x, p.y, p.z), (q.x, q.y, q.z, q.w)).matrix()

    def move_camera_to(self, T_world_cam: Any, is_canceled) -> ViewResult:
        mount = self.wrist_mount
        if mount is None:
            return ViewResult(ArmError.BACKEND_UNAVAILABLE, "the moveit arm has no wrist "
                              "camera (executor parameter wrist_camera.enabled is false)")
        if is_canceled():
            return ViewResult(ArmError.CANCELED, "canceled before the view motion")
        start = time.monotonic()
        try:
            self._update_scene("", is_canceled)        # every perceived object an obstacle
            trajectory, code = self._plan_to(view_link_pose(T_world_cam, mount, self.cfg),
                                             self.cfg.transit_request, None)
            if trajectory is None:
                error, message = view_error(code)
                return ViewResult(error, message)
            failure = self._execute(trajectory, is_canceled)
        except Exception as exc:  # noqa: BLE001 - _Canceled included: mapped below
            if is_canceled():
                return ViewResult(ArmError.CANCELED, "canceled during the view motion; "
                                  "motion stopped")
            return ViewResult(ArmError.BACKEND_FAILURE, f"{type(exc).__name__}: {exc}")
        if failure:
            return ViewResult(ArmError.BACKEND_FAILURE, f"view motion failed: {failure}")
        camera = reached_camera(self._link_pose_now(), mount, self.cfg)
        return ViewResult(ArmError.NONE, "view pose reached", camera,
                          time.monotonic() - start, math.nan, "",
                          int(self._node.get_clock().now().nanoseconds))


__all__ = ["MoveItViewMixin", "MoveItWristCamera", "reached_camera", "view_error",
           "view_link_pose"]
