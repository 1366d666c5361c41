"""Grasp rules without retrieval: the two heuristic baselines and the demo's grasp.

``heuristic`` (Table II "Heuristic baseline"): the full system with retrieval and
the VLM's semantics removed, nothing else. It sees what depth geometry gives (the perceived
box, shape, yaw, the handle side, an open container's rim), never the VLM's category,
affordance, material or fragility (:func:`strip_semantics`). Its grasps come from the rules
of :func:`geometric_grasps` and then go through the same fitting limits, clearance search,
scene graph (on the stripped objects: relations and support, no fragility) and recovery as
the full system's. Memory is off (its keys are the VLM's semantics). The rules:

1. **body**: top-down, closing across the narrower horizontal side, the pads
   ``finger_depth_m`` below the top (the centre for an object shorter than that), opening =
   perceived extent across the fingers + ``grasp_synthesis.opening_margin_m``, when the
   extent leaves the fingers their clearance in the 80 mm hand;
2. **other side**: the same across the longer horizontal side, when it fits too and differs
   from rule 1 by more than the opening margin;
3. **side**: horizontal, at mid-height (level-2 side template), across the body, for an
   object taller than it is wide;
4. **rim**: an open container seen from above (perceived rim) too wide for rules 1-3: the
   fingers straddle the wall at the rim nearest the robot, opening
   ``grasp_synthesis.min_part_opening_m``;
5. **handle**: a perceived handle side: the fingers close on the handle, ``handle_reach_m``
   outside the perceived body, opening ``min_part_opening_m``;
6. nothing fits: rule 1 at the hand's full opening (recovery goes on from there).

Force: no material or fragility is known, so the rule holds the weight estimated from the
perceived volume at ``assumed_density_kg_m3`` with ``safety_factor`` against
``assumed_friction``, clipped to [min_force_n, max_force_n]: the least force that holds,
which is also the least that can crush. Speed: ``speed_mps``.

``heuristic_box`` (today's box rule, a second named row): :func:`heuristic_grasp`, a top-down
grasp across the narrower side from the perceived box, the force from the default mass and the
VLM's fragility; no fitting, no scene graph, with recovery.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import List, Optional, Tuple

import numpy as np

from agentic_grasp.core.arm.closing_axis import wrist_yaw_for_closing_axis
from agentic_grasp.core.geometry import wrap_angle
from agentic_grasp.core.grasping.config import HeuristicConfig
from agentic_grasp.core.grasping.fit import extent_at, footprint_extent
from agentic_grasp.core.grasping.operations import VERTICAL, narrow_side, type_template
from agentic_grasp.core.grasping.rim import rim_grasp
from agentic_grasp.core.types import (
    GRIPPER_MAX_WIDTH_M, GraspParameters, GraspType, ObjectInstance, Shape)

G = 9.81


def heuristic_grasp(obj: ObjectInstance, config: HeuristicConfig | None = None) -> GraspParameters:
    """A top-down grasp of ``obj`` from its box, mass estimate and fragility (heuristic_box)."""
    cfg = config or HeuristicConfig()
    sx, sy, sz = (float(v) for v in obj.size)
    # Close across the narrower horizontal side: along the object's x if sx <= sy.
    if sx <= sy:
        extent, closing_yaw = sx, obj.yaw
    else:
        extent, closing_yaw = sy, obj.yaw + math.pi / 2.0
    # wrist_yaw = 0 closes along world y, so rotate by -90 deg to close along the object x axis.
    wrist_yaw = math.atan2(math.sin(closing_yaw - math.pi / 2.0),
                           math.cos(closing_yaw - math.pi / 2.0))
    width = min(GRIPPER_MAX_WIDTH_M, extent + cfg.opening_margin_m)
    grasp_z = max(obj.position[2], obj.top_z - cfg.finger_depth_m)
    hold = obj.mass * G * cfg.safety_factor / (2.0 * cfg.assumed_friction)
    force = float(np.clip(hold, cfg.min_force_n, cfg.max_force_n))
    force *= 1.0 - (1.0 - cfg.fragile_force_scale) * obj.fragility
    grasp_type = GraspType.POWER if extent >= 0.03 else GraspType.PINCH
    speed = cfg.fragile_speed_mps if obj.fragility >= 0.5 else cfg.speed_mps
    return GraspParameters(position=np.array([obj.position[0], obj.position[1], grasp_z]),
                           approach=np.array([0.0, 0.0, -1.0]), width=width, force=force,
                           grasp_type=grasp_type, approach_height=cfg.approach_height_m,
                           speed=speed, wrist_yaw=wrist_yaw)


# ------------------------------------------------------------------ the honest heuristic
#: Category every object carries once its semantics are stripped.
UNKNOWN_CATEGORY = "object"


def strip_semantics(obj: ObjectInstance) -> ObjectInstance:
    """``obj`` as depth geometry alone knows it: no category, affordance, material or
    fragility (the VLM's semantics); shape, box, yaw and state are kept."""
    return replace(obj, category=UNKNOWN_CATEGORY, affordance=None, material="unknown",
                   fragility=0.0, position=obj.position.copy(), size=obj.size.copy())


def estimated_mass(obj: ObjectInstance, cfg: HeuristicConfig) -> float:
    """Weight of the perceived volume at the assumed density (kg)."""
    sx, sy, sz = (float(v) for v in obj.size)
    factor = {Shape.BOX: 1.0, Shape.CYLINDER: math.pi / 4.0,
              Shape.SPHERE: math.pi / 6.0}.get(obj.shape, 1.0)
    return factor * sx * sy * sz * cfg.assumed_density_kg_m3


def holding_force(obj: ObjectInstance, cfg: HeuristicConfig) -> float:
    """The force that holds the estimated weight with the safety factor (N)."""
    hold = estimated_mass(obj, cfg) * G * cfg.safety_factor / (2.0 * cfg.assumed_friction)
    return float(np.clip(hold, cfg.min_force_n, cfg.max_force_n))


def geometric_grasps(obj: ObjectInstance, synth, level2, limits,
                     cfg: Optional[HeuristicConfig] = None,
                     handle_yaw: Optional[float] = None,
                     rim_z: Optional[float] = None) -> List[Tuple[GraspParameters, str]]:
    """The heuristic's grasps of the perceived ``obj``, best rule first (module docstring);
    ``synth``: GraspSynthesisConfig, ``level2``: the level-2 templates' constants,
    ``limits``: the planner's grasp limits."""
    cfg = cfg or HeuristicConfig()
    max_w = synth.hand.max_opening_m
    fits = max_w - 2.0 * synth.finger_clearance_m
    force = holding_force(obj, cfg)
    centre = np.asarray(obj.position, dtype=float)
    z_top = max(float(centre[2]), obj.top_z - cfg.finger_depth_m)
    base = GraspParameters(position=np.array([centre[0], centre[1], z_top]),
                           approach=VERTICAL.copy(), width=max_w, force=force,
                           grasp_type=GraspType.POWER, approach_height=cfg.approach_height_m,
                           speed=cfg.speed_mps, wrist_yaw=0.0)
    out: List[Tuple[GraspParameters, str]] = []

    def across(wrist: float) -> Tuple[GraspParameters, float]:
        g = base.copy(wrist_yaw=wrap_angle(wrist))
        extent = extent_at(obj, g, synth.hand.pad_depth_m)
        return g.copy(width=min(max_w, extent + synth.opening_margin_m)), extent

    _, wrist = narrow_side(obj)
    first, e1 = across(wrist)
    if e1 <= fits:
        out.append((first, f"heuristic rule 1 (body, across the narrower side: "
                           f"{e1 * 1e3:.0f} mm)"))
    second, e2 = across(wrist + math.pi / 2.0)
    if e2 <= fits and abs(e2 - e1) > synth.opening_margin_m:
        out.append((second, f"heuristic rule 2 (body, across the longer side: "
                            f"{e2 * 1e3:.0f} mm)"))
    if float(obj.size[2]) > min(float(obj.size[0]), float(obj.size[1])):
        side = type_template(GraspType.SIDE, base, obj, level2, limits)
        extent = extent_at(obj, side, synth.hand.pad_depth_m)
        if extent <= fits:
            out.append((side.copy(force=force, width=min(max_w, extent
                                                          + synth.opening_margin_m)),
                        f"heuristic rule 3 (side, at mid-height: {extent * 1e3:.0f} mm)"))
    if rim_z is not None and not out:
        out.append((rim_grasp(obj, base, float(rim_z), synth),
                    "heuristic rule 4 (rim pinch of the open container's wall)"))
    if handle_yaw is not None:
        out.append((_handle_grasp(obj, base, float(handle_yaw), synth, cfg),
                    "heuristic rule 5 (pinch on the perceived handle)"))
    if not out:
        out.append((first.copy(width=max_w),
                    f"heuristic rule 6 (nothing fits the hand: {e1 * 1e3:.0f} mm body at the "
                    "full opening)"))
    return out


def _handle_grasp(obj: ObjectInstance, base: GraspParameters, handle_yaw: float, synth,
                  cfg: HeuristicConfig) -> GraspParameters:
    """Fingers on the handle: ``handle_reach_m`` outside the body on the perceived side,
    closing across the handle (tangentially), at mid-height."""

    out_dir = np.array([math.cos(handle_yaw), math.sin(handle_yaw), 0.0])
    radius = footprint_extent(obj.shape, obj.size, out_dir, float(obj.yaw)) / 2.0
    centre = np.asarray(obj.position, dtype=float)
    point = centre + out_dir * (radius + cfg.handle_reach_m / 2.0)
    point[2] = float(centre[2])
    axis = np.array([-out_dir[1], out_dir[0], 0.0])
    return base.copy(position=point, approach=VERTICAL.copy(), width=synth.min_part_opening_m,
                     grasp_type=GraspType.PINCH,
                     wrist_yaw=wrist_yaw_for_closing_axis(VERTICAL, axis))


__all__ = ["UNKNOWN_CATEGORY", "estimated_mass", "geometric_grasps",
           "heuristic_grasp", "holding_force", "strip_semantics"]
