"""The gripper's closing axis for a grasp: the world direction in
which the Franka Hand's fingers close, from the approach direction and the wrist yaw, and the
wrist yaw that gives a wanted closing axis (shared by the planner, the simulator's hand model,
the MoveIt translation and the pictures of a recording).
"""
from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import numpy as np

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.numeric import cross_list


#: Approaches within this angle of straight down use the top-down closing-axis reference.
VERTICAL_APPROACH_TOL_RAD = math.radians(10.0)


def _default_closing_axis(a: Sequence[float]) -> Tuple[float, float, float]:
    """See :func:`default_closing_axis`; ``a`` is a unit vector, floats in and out."""
    ax, ay, az = a
    horizontal = math.hypot(ax, ay)
    if az < 0.0 and math.atan2(horizontal, -az) <= VERTICAL_APPROACH_TOL_RAD:
        cx, cy, cz = -ay * ax, 1.0 - ay * ay, -ay * az   # world y projected off the approach
    elif horizontal > 1e-9:
        cx, cy, cz = -ay, ax, 0.0                        # world z x approach
    else:
        cx, cy, cz = 0.0, 1.0, 0.0
    n = math.sqrt(cx * cx + cy * cy + cz * cz)
    return cx / n, cy / n, cz / n


def _grasp_frame(p: Sequence[float], a: Sequence[float], wrist_yaw: float) -> List[float]:
    """TCP frame of a grasp as 12 floats (x, y, z axes, origin); ``a`` must be unit length."""
    ax, ay, az = a
    c0x, c0y, c0z = _default_closing_axis(a)
    c, s = math.cos(wrist_yaw), math.sin(wrist_yaw)
    # y = c0 turned by wrist_yaw about -a: cos c0 + sin (c0 x a) (c0 is normal to a).
    yx = c * c0x + s * (c0y * az - c0z * ay)
    yy = c * c0y + s * (c0z * ax - c0x * az)
    yz = c * c0z + s * (c0x * ay - c0y * ax)
    return [yy * az - yz * ay, yz * ax - yx * az, yx * ay - yy * ax,
            yx, yy, yz, ax, ay, az, float(p[0]), float(p[1]), float(p[2])]


def _unit(v: Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(v, dtype=float).reshape(-1)
    # = float(np.linalg.norm(arr)) bit for bit (for a 1-D float array it is sqrt(x.dot(x))),
    # without its dispatch: the candidate search asks for ~100 closing axes per call
    n = math.sqrt(float(arr.dot(arr))) if arr.shape == (3,) else 0.0
    if not math.isfinite(n) or n < 1e-9:
        raise ValidationError(f"{name} must be a finite non-zero 3-vector, got {v!r}")
    return arr / n


def default_closing_axis(approach: Sequence[float]) -> np.ndarray:
    """Finger closing axis at ``wrist_yaw = 0`` for an approach direction (unit 3-vector).

    Convention: for approaches within ``VERTICAL_APPROACH_TOL_RAD`` of straight down it is
    world y projected onto the plane normal to the approach (exactly world y for a top-down
    grasp); otherwise it is the horizontal direction ``world_z x approach`` (fingers close
    horizontally, e.g. world y for an approach along +x). The two rules agree for approaches
    tilted in the world x-z plane; a 90 deg switch happens at the 10 deg boundary for tilts
    towards +-y, which no continuous rule can avoid (hairy-ball theorem). Straight up falls
    back to world y.
    """
    return np.array(_default_closing_axis(_unit(approach, "approach").tolist()))


def closing_axis(approach: Sequence[float], wrist_yaw: float) -> np.ndarray:
    """Finger closing axis: the default axis turned by ``wrist_yaw`` about ``-approach``.

    Positive yaw is counter-clockwise as seen looking along the approach (from behind the
    hand), so for a top-down grasp it is the familiar counter-clockwise yaw about world +z:
    the axis is ``(-sin(wrist_yaw), cos(wrist_yaw), 0)``. Closing along the y axis of an
    object with yaw psi therefore takes ``wrist_yaw = psi``, along its x axis
    ``psi - pi / 2``.
    """
    frame = _grasp_frame((0.0, 0.0, 0.0), _unit(approach, "approach").tolist(),
                         float(wrist_yaw))
    return np.array(frame[3:6])


def wrist_yaw_for_closing_axis(approach: Sequence[float], axis: Sequence[float]) -> float:
    """The wrist_yaw whose closing axis is ``axis`` projected normal to ``approach``.

    Use this rather than re-deriving the sign convention. ``axis`` and ``-axis`` describe
    the same finger line; the gripper is symmetric, so :meth:`PandaKinematics.solve_grasp`
    accepts either (the two answers differ by pi).
    """
    a = _unit(approach, "approach")
    v = _unit(axis, "axis")
    c0l = _default_closing_axis(a.tolist())
    c0 = np.array(c0l)
    # np.cross(c0, a) bit for bit without its set-up: the candidate search calls this per
    # tilted grasp
    cross = np.array(cross_list(c0l, a.tolist()))
    return math.atan2(float(np.dot(cross, v)), float(np.dot(c0, v)))
