"""A wrist camera on the Franka Hand and the arm motion that points it.

Most Franka set-ups carry an RGB-D camera on the hand (a RealSense D435 on a bracket beside
the fingers). The planner asks for a *camera* pose (where the optical frame should be); the
simulator turns it into the TCP pose through the fixed mount (:class:`WristCameraMount`),
solves the arm's inverse kinematics (core/arm/kinematics.py), checks the hand at that pose
against the table and every object, and reports the camera that the joint solution really
gives (forward kinematics of the solved joints times the mount). Nothing in the scene moves:
a view is contact-free, so the physics of the grasp is untouched; a view pose whose hand
would touch something is refused before the motion, as a motion planner refuses a colliding
goal.

The render of that camera is :func:`agentic_grasp.core.render.views.render_view` with the returned
:class:`~agentic_grasp.core.camera.Camera`, exactly as for the fixed camera.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.sim.physics.approach import gripper_boxes
from agentic_grasp.core.sim.physics.bodies import Body
from agentic_grasp.core.sim.collision import separation
from agentic_grasp.core.sim.params import PhysicsParams, WristCameraMount
from agentic_grasp.core.types import GRIPPER_MAX_WIDTH_M


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


__all__ = ["ViewMotion", "plan_view"]
