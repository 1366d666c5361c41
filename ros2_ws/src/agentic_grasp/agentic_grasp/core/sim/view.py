"""A wrist camera on the Franka Hand and the arm motion that points it (issue 23, item 3).

Most Franka set-ups carry an RGB-D camera on the hand (a RealSense D435 on a bracket beside
the fingers). The planner asks for a *camera* pose (where the optical frame should be); the
simulator turns it into the TCP pose through the fixed mount (:class:`WristCameraMount`),
solves the arm's inverse kinematics (core/kinematics.py), checks the hand at that pose
against the table and every object, and reports the camera that the joint solution really
gives (forward kinematics of the solved joints times the mount). Nothing in the scene moves:
a view is contact-free, so the physics of the grasp is untouched; a view pose whose hand
would touch something is refused before the motion, as a motion planner refuses a colliding
goal.

The render of that camera is :func:`agentic_grasp.core.render.render_view` with the returned
:class:`~agentic_grasp.core.camera.Camera`, exactly as for the fixed camera.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.sim.approach import gripper_boxes
from agentic_grasp.core.sim.bodies import Body
from agentic_grasp.core.sim.collision import separation
from agentic_grasp.core.sim.params import PhysicsParams
from agentic_grasp.core.types import GRIPPER_MAX_WIDTH_M


def _d(text: str) -> dict:
    return {"description": text}


@dataclass
class WristCameraMount:
    """Where the wrist camera sits on the hand and what it sees (config/sim.yaml
    ``wrist_camera``; the comments there say where each value comes from)."""

    offset_m: Tuple[float, float, float] = field(default=(0.06, 0.0, -0.085), metadata=_d(
        "Wrist camera optical centre in the TCP frame (m; axes as the TCP's, z = approach)"))
    width: int = field(default=640, metadata=_d("Wrist camera image width (px)"))
    height: int = field(default=480, metadata=_d("Wrist camera image height (px)"))
    fx: float = field(default=554.26, metadata=_d("Wrist camera focal length x (px)"))
    fy: float = field(default=554.26, metadata=_d("Wrist camera focal length y (px)"))
    min_range_m: float = field(default=0.18, metadata=_d(
        "Wrist camera nearest valid depth (m); views are never closer"))

    def __post_init__(self) -> None:
        off = tuple(float(v) for v in self.offset_m)
        if len(off) != 3 or not all(math.isfinite(v) for v in off):
            raise ConfigError("wrist_camera.offset_m must be 3 finite numbers")
        self.offset_m = off
        self.width, self.height = int(self.width), int(self.height)
        if self.width < 8 or self.height < 8:
            raise ConfigError("wrist_camera: width and height must be >= 8 px")
        for name in ("fx", "fy", "min_range_m"):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value <= 0.0:
                raise ConfigError(f"wrist_camera.{name} must be > 0")
            setattr(self, name, value)

    @classmethod
    def from_mapping(cls, data: Optional[Mapping[str, Any]],
                     source: str = "sim.yaml") -> "WristCameraMount":
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown wrist_camera parameter(s) {unknown}")
        return cls(**data)

    @property
    def T_tcp_cam(self) -> np.ndarray:
        """Optical frame in the TCP frame: same axes (z = approach), shifted by the mount."""
        pose = np.eye(4)
        pose[:3, 3] = self.offset_m
        return pose

    def camera(self, T_world_cam: np.ndarray) -> Camera:
        """The wrist camera at an optical-frame pose (principal point at the image centre)."""
        return Camera(width=self.width, height=self.height, fx=self.fx, fy=self.fy,
                      cx=(self.width - 1) / 2.0, cy=(self.height - 1) / 2.0,
                      T_world_cam=np.asarray(T_world_cam, dtype=float).copy(),
                      frame_id="wrist_camera_color_optical_frame")

    def intrinsics(self) -> Camera:
        """The camera model at the identity pose (camera_info without extrinsics)."""
        return self.camera(np.eye(4))


@dataclass
class ViewMotion:
    """The answer to one view request: reached or why not, and the camera it gives."""

    ok: bool
    message: str
    camera: Optional[Camera] = None
    q: Optional[np.ndarray] = None
    tcp_pose: Optional[np.ndarray] = None
    clearance_m: float = float("nan")
    nearest: str = ""
    duration_s: float = 0.0
    events: List[str] = field(default_factory=list)


def plan_view(T_world_cam: np.ndarray, mount: WristCameraMount, kinematics: Any,
              bodies: Sequence[Body], prm: PhysicsParams) -> ViewMotion:
    """Reach the camera pose ``T_world_cam`` (4x4) with the arm, or say why not.

    The hand (palm, wrist and both fingers, fully open as they travel) at the solved pose
    must clear the table and every object's box; the motion takes one free-space transit
    (``transit_time_s``, as the move to any pre-grasp pose).
    """
    T = np.asarray(T_world_cam, dtype=float)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise ValidationError("view pose must be a finite 4x4 matrix")
    tcp = T @ np.linalg.inv(mount.T_tcp_cam)
    q = kinematics.ik(tcp)
    if q is None:
        return ViewMotion(False, "view pose out of the arm's reach (no IK solution for the "
                          f"hand at {np.round(tcp[:3, 3], 3).tolist()})", tcp_pose=tcp)
    reached = kinematics.fk(q)
    R, p = reached[:3, :3], reached[:3, 3]
    boxes = gripper_boxes(R, p, GRIPPER_MAX_WIDTH_M, prm)
    lowest = min(float(b.corners()[:, 2].min()) for b in boxes)
    clearance, nearest = lowest, "hand vs table"
    for body in bodies:
        for box in boxes:
            gap = separation(box, body.obb)
            if gap < clearance:
                clearance, nearest = gap, f"{box.name} vs {body.instance.id}"
    if clearance <= 0.0:
        return ViewMotion(False, f"view pose refused: the hand would touch ({nearest})",
                          q=q, tcp_pose=reached, clearance_m=clearance, nearest=nearest)
    camera = mount.camera(reached @ mount.T_tcp_cam)
    return ViewMotion(True, "view pose reached", camera=camera, q=q, tcp_pose=reached,
                      clearance_m=clearance, nearest=nearest, duration_s=prm.transit_time_s)


__all__ = ["ViewMotion", "WristCameraMount", "plan_view"]
