"""Grasp operations the correction levels, the candidate search and the heuristic share: the
grasp inside the planner's limits, a new approach that keeps the finger line, a grasp carried
along to a moved object, the perceived object's extents, the level-2 grasp-type templates
(the recovery package's docstring), the grasp-type rotation, the side turned away from
neighbours, and how two grasps differ. Geometry of grasps only: nothing here imports the
planner, which builds on it."""
from __future__ import annotations

import math
from typing import List

import numpy as np

from agentic_grasp.core.arm.closing_axis import closing_axis, wrist_yaw_for_closing_axis
from agentic_grasp.core.geometry import grasp_to_object_frame, grasp_to_world, wrap_angle
from agentic_grasp.core.numeric import allclose_finite, clip_float
from agentic_grasp.core.grasping.config import Level2Config, Limits
from agentic_grasp.core.types import GraspParameters, GraspType, ObjectInstance, Shape

VERTICAL = np.array([0.0, 0.0, -1.0])
#: A grasp point closer than this to the perceived centre (horizontally) counts as centred.
CENTRED_M = 0.001
#: An approach whose downward component is below this (tilted more than 60 deg from
#: vertical) is a side approach: its palm stands beside the object, not above it.
SIDE_APPROACH_Z = 0.5
#: The Franka Hand's palm seen from above in a side grasp (config/sim.yaml hand geometry):
#: its centre 75 mm behind the TCP (finger length 55 mm less half the 20 mm pad, plus half
#: the 60 mm palm thickness), 200 mm long across the approach.
PALM_BEHIND_M = 0.075
PALM_HALF_LENGTH_M = 0.1


def clamp_grasp(grasp: GraspParameters, limits: Limits) -> GraspParameters:
    """The grasp with force, width, stand-off, speed and height inside the limits."""
    pos = grasp.position.copy()
    pos[2] = max(pos[2], limits.min_grasp_z_m)
    return grasp.copy(
        position=pos,
        force=clip_float(grasp.force, limits.min_force_n, limits.max_force_n),
        width=clip_float(grasp.width, 0.0, limits.max_width_m),
        approach_height=clip_float(grasp.approach_height, limits.min_approach_height_m,
                                   limits.max_approach_height_m),
        speed=clip_float(grasp.speed, limits.min_speed_mps, limits.max_speed_mps),
        wrist_yaw=wrap_angle(grasp.wrist_yaw))


def with_approach(grasp: GraspParameters, approach: np.ndarray) -> GraspParameters:
    """The grasp with a new approach direction and the *same finger line*.

    wrist_yaw is measured from a default closing axis that depends on the approach
    (kinematics.default_closing_axis switches convention 10 deg away from vertical), so
    changing the approach alone can turn the fingers by 90 deg. The closing axis is kept
    (projected normal to the new approach) unless it would be parallel to it.
    """
    new = np.asarray(approach, dtype=float)
    new = new / max(float(np.linalg.norm(new)), 1e-12)
    axis = closing_axis(grasp.approach, grasp.wrist_yaw)
    if abs(float(axis @ new)) > 0.95:
        return grasp.copy(approach=new)
    return grasp.copy(approach=new, wrist_yaw=wrist_yaw_for_closing_axis(new, axis))


def rebase_grasp(grasp: GraspParameters, old: ObjectInstance,
                 new: ObjectInstance) -> GraspParameters:
    """Carry a world grasp on ``old`` along to the object's new pose ``new``."""
    return grasp_to_world(grasp_to_object_frame(grasp, old), new)


# ------------------------------------------------------------------ object geometry
def extent_across(obj: ObjectInstance, axis: np.ndarray) -> float:
    """Width of the perceived object along a horizontal axis (its support width).

    A box's footprint is its rotated rectangle; a cylinder's or sphere's is the ellipse with
    the box's semi-axes.
    """
    c, s = math.cos(obj.yaw), math.sin(obj.yaw)
    ax = axis[0] * c + axis[1] * s             # axis in the object frame
    ay = -axis[0] * s + axis[1] * c
    sx, sy = float(obj.size[0]), float(obj.size[1])
    if obj.shape in (Shape.CYLINDER, Shape.SPHERE):
        return float(math.hypot(sx * ax, sy * ay))
    return float(sx * abs(ax) + sy * abs(ay))


def narrow_side(obj: ObjectInstance) -> tuple:
    """(extent, wrist_yaw) of a top-down grasp closing across the narrower horizontal side.

    Convention of kinematics.closing_axis: closing along the object's y axis takes
    wrist_yaw = yaw, along its x axis yaw - pi / 2.
    """
    sx, sy = float(obj.size[0]), float(obj.size[1])
    if sx <= sy:
        return sx, wrap_angle(obj.yaw - math.pi / 2.0)
    return sy, wrap_angle(obj.yaw)


def type_template(grasp_type: GraspType, current: GraspParameters, obj: ObjectInstance,
                  cfg: Level2Config, limits: Limits) -> GraspParameters:
    """The canonical geometry of a grasp type on the perceived box (level 2, the
    recovery package's docstring)."""
    centre = np.asarray(obj.position, dtype=float)
    top = float(centre[2] + obj.size[2] / 2.0)
    bottom = float(centre[2] - obj.size[2] / 2.0)
    if grasp_type == GraspType.POWER:
        extent, wrist = narrow_side(obj)
        z = max(float(centre[2]), top - cfg.power_depth_m)
        return current.copy(position=np.array([centre[0], centre[1], z]),
                            approach=VERTICAL.copy(), grasp_type=GraspType.POWER,
                            width=min(limits.max_width_m, extent + cfg.opening_margin_m),
                            wrist_yaw=wrist)
    if grasp_type == GraspType.PINCH:
        z = max(limits.min_grasp_z_m, top - cfg.pinch_depth_m)
        wrist = current.wrist_yaw
        if not float(current.approach[2]) <= -0.99:      # from a side grasp: narrow side
            wrist = narrow_side(obj)[1]
        # the fingertips must pass the perceived section at the pinch height: the opening
        # spans it plus the margin when it is wider than the template's pinch opening
        across = extent_across(obj, closing_axis(VERTICAL, wrist))
        width = max(cfg.pinch_width_m, across + cfg.opening_margin_m)
        return current.copy(position=np.array([current.position[0], current.position[1], z]),
                            approach=VERTICAL.copy(), grasp_type=GraspType.PINCH,
                            width=min(limits.max_width_m, width), wrist_yaw=wrist)
    horizontal = np.array([centre[0], centre[1], 0.0])
    norm = float(np.linalg.norm(horizontal))
    approach = horizontal / norm if norm > 1e-6 else np.array([1.0, 0.0, 0.0])
    axis = np.array([-approach[1], approach[0], 0.0])
    z = max(bottom + cfg.side_height_fraction * float(obj.size[2]), cfg.side_min_height_m)
    return current.copy(position=np.array([centre[0], centre[1], z]), approach=approach,
                        grasp_type=GraspType.SIDE,
                        width=min(limits.max_width_m,
                                  extent_across(obj, axis) + cfg.opening_margin_m),
                        wrist_yaw=wrist_yaw_for_closing_axis(approach, axis))


def narrows_upward(obj: ObjectInstance) -> bool:
    """The perceived body's horizontal section narrows above its middle: a sphere, a lying
    cylinder. A raised grasp point then passes a narrower section."""
    return obj.shape == Shape.SPHERE or (obj.shape == Shape.CYLINDER and not obj.upright)


def turned_side(grasp: GraspParameters, obj: ObjectInstance,
                neighbours: List[ObjectInstance], margin: float) -> GraspParameters:
    """A side grasp turned 90 deg about the vertical, to the side whose palm stands farther
    from the perceived neighbours. The palm is a segment across the approach, PALM_BEHIND_M
    behind the grasp point and PALM_HALF_LENGTH_M to either side; each side is scored by
    its gap to the nearest neighbour's footprint circle. The fingers close horizontally
    across the object there, opened to its perceived extent plus ``margin``."""
    a = np.asarray(grasp.approach, dtype=float)
    point = np.asarray(grasp.position[:2], dtype=float)

    def gap(h: np.ndarray) -> float:
        mid = point - h * PALM_BEHIND_M
        along = np.array([-h[1], h[0]])
        best = math.inf
        for n in neighbours:
            rel = np.asarray(n.position[:2], dtype=float) - mid
            t = float(np.clip(rel @ along, -PALM_HALF_LENGTH_M, PALM_HALF_LENGTH_M))
            dist = float(np.linalg.norm(rel - t * along))
            best = min(best, dist - float(max(n.size[0], n.size[1])) / 2.0)
        return best

    turns = [np.array([-a[1], a[0]]), np.array([a[1], -a[0]])]
    turns = [t / max(float(np.linalg.norm(t)), 1e-12) for t in turns]
    h = max(turns, key=gap)
    new = np.array([h[0], h[1], a[2]])
    new = new / max(float(np.linalg.norm(new)), 1e-12)
    axis = np.array([-new[1], new[0], 0.0])
    axis = axis / max(float(np.linalg.norm(axis)), 1e-12)
    return grasp.copy(approach=new, wrist_yaw=wrist_yaw_for_closing_axis(new, axis),
                      width=max(float(grasp.width), extent_across(obj, axis) + margin))


def next_grasp_type(current: GraspType, order) -> GraspType:
    """power -> pinch -> side -> power (a type outside the order starts it)."""
    names = list(order)
    if current.value not in names:
        return GraspType(names[0])
    return GraspType(names[(names.index(current.value) + 1) % len(names)])



def describe_change(old: GraspParameters, new: GraspParameters) -> str:
    """'force 20.0 -> 24.0 N; width 40 -> 50 mm' for the fields that changed."""
    parts = []
    if new.grasp_type != old.grasp_type:
        parts.append(f"type {old.grasp_type.value} -> {new.grasp_type.value}")
    if abs(new.force - old.force) > 1e-6:
        parts.append(f"force {old.force:.1f} -> {new.force:.1f} N")
    if abs(new.width - old.width) > 1e-6:
        parts.append(f"width {old.width * 1e3:.0f} -> {new.width * 1e3:.0f} mm")
    if abs(new.approach_height - old.approach_height) > 1e-6:
        parts.append(f"approach height {old.approach_height * 1e3:.0f} -> "
                     f"{new.approach_height * 1e3:.0f} mm")
    delta = new.position - old.position
    if float(np.linalg.norm(delta)) > 1e-6:
        parts.append("grasp point moved (" + ", ".join(f"{d * 1e3:+.1f}" for d in delta)
                     + ") mm")
    if float(np.linalg.norm(new.approach - old.approach)) > 1e-6:
        parts.append("approach (" + ", ".join(f"{v:.2f}" for v in old.approach) + ") -> ("
                     + ", ".join(f"{v:.2f}" for v in new.approach) + ")")
    if abs(wrap_angle(new.wrist_yaw - old.wrist_yaw)) > 1e-6:
        parts.append(f"wrist {math.degrees(old.wrist_yaw):.0f} -> "
                     f"{math.degrees(new.wrist_yaw):.0f} deg")
    if abs(new.speed - old.speed) > 1e-6:
        parts.append(f"speed {old.speed:.3f} -> {new.speed:.3f} m/s")
    return "; ".join(parts) if parts else "no parameter changed (at a limit)"


def same_grasp(a: GraspParameters, b: GraspParameters) -> bool:
    """Whether two grasps command the same motion (every parameter within 1e-9)."""
    return (a.grasp_type == b.grasp_type
            and allclose_finite(a.position.tolist(), b.position.tolist(), atol=1e-9)
            and allclose_finite(a.approach.tolist(), b.approach.tolist(), atol=1e-9)
            and all(abs(getattr(a, f) - getattr(b, f)) <= 1e-9
                    for f in ("width", "force", "approach_height", "speed", "wrist_yaw")))


__all__ = ["CENTRED_M", "PALM_BEHIND_M", "PALM_HALF_LENGTH_M", "SIDE_APPROACH_Z", "VERTICAL",
           "clamp_grasp", "describe_change", "extent_across", "narrow_side", "narrows_upward",
           "next_grasp_type", "rebase_grasp", "same_grasp", "turned_side", "type_template",
           "with_approach"]
