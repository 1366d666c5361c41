"""Level 1 of the recovery: targeted parameter tuning per failure type (paper Sec. IV-B).

Level-1 corrections (targeted parameter tuning; constants in ``corrections``; source
"paper": docs/paper_facts.md, Sec. IV-B; "project": this project's choice):

======================  ===========================================================  ========
failure type            rule                                                         source
======================  ===========================================================  ========
SLIP                    f' = 1.2 f                                                   paper
                        where the object pivoted out of the pads (torque-bound) with   project
                        the grasp point 9 mm or more off the perceived centre: the
                        grasp point moves over the centre instead
DROP                    f' = 1.3 f                                                   paper
FORCE_DAMAGE            f' = 0.7 f                                                   paper
                        (of the force at which the material gave way, when the      project
                        fingers measured it below the applied one; also DEFORMATION)
DEFORMATION             f' = 0.8 f                                                   project
WIDTH_MISMATCH          w' = w + 10 mm (too narrow) or w - 10 mm (too wide)          paper
COLLISION               approach height + 30 mm                                      paper
                        and, when the closing axis (the palm's 200 mm long side)     project
                        points within 45 deg of the object hit, wrist + 90 deg
                        (with the table, other_id "table": a tilted approach         project
                        becomes vertical, a vertical one raises the grasp point
                        10 mm: the fingertips were below the table top)
POSITION_ERROR          re-perceive; grasp point moved 10 mm (or the whole offset    project
                        when shorter) towards the perceived centre, horizontally; a
                        finger that landed on an already centred grasp means too
                        much material under the fingertips: grasp point + 10 mm;
                        on a part outside the body (a handle): opening + 2 x 10 mm
                        instead (towards the centre is onto the body); where the
                        landing finger's contact puts the material's centre 9 mm or
                        more off the TCP along the closing axis: the grasp point
                        moves there at once; where the measured clearance a side
                        was below the TCP's 9 mm error: opening = material + 2 x
                        9 mm (up to the stroke), the grasp point stays
UNREACHABLE_POSE        tilted approach -> vertical; vertical -> wrist + 90 deg;     project
                        pre-grasp unreachable -> approach height - 30 mm too
APPROACH_ANGLE          tilted approach -> vertical; vertical -> grasp point + 10 mm project
                        (or as far as the hand model needs for the palm to clear
                        the perceived body, pads below its top: correction.py)
ORIENTATION             wrist + 90 deg                                               project
CONSTRAINT_VIOLATION    speed x 0.5 and vertical approach                            project
WRONG_OBJECT, TIMEOUT,  replan: the next retrieved strategy (e2, e3), else g0        project
UNKNOWN
======================  ===========================================================  ========

A correction's operations are a small dict (``ops``, :class:`CorrectionOps`) that
:func:`get_correction` applies to a grasp; keeping it declarative lets the planner apply the
same correction to the grasp it executes and to the scene-independent grasp it may store in
episodic memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from agentic_grasp.core.arm.closing_axis import closing_axis
from agentic_grasp.core.grasping.along import CONTENT_SAFETY, HAND_CONTINUOUS_FORCE_N, on_part
from agentic_grasp.core.grasping.fit import footprint_extent
from agentic_grasp.core.planner.recovery.failure import Diagnosis
from agentic_grasp.core.grasping.operations import SIDE_APPROACH_Z, narrows_upward
from agentic_grasp.core.planner.sections import CorrectionConfig
from agentic_grasp.core.types import (GRIPPER_MAX_WIDTH_M, FailureType, GraspParameters,
                                      ObjectInstance, Shape)

# ------------------------------------------------------------------ level 1
#: One-line statement of each level-1 rule (for thoughts, logs and the README).
CORRECTION_RULES: Dict[FailureType, str] = {
    FailureType.SLIP: "increase grip force f' = 1.2 f",
    FailureType.DROP: "increase grip force f' = 1.3 f",
    FailureType.FORCE_DAMAGE: "reduce grip force f' = 0.7 f",
    FailureType.DEFORMATION: "soften the squeeze f' = 0.8 f",
    FailureType.WIDTH_MISMATCH: "adjust the opening w' = w +- 10 mm (sign from the evidence)",
    FailureType.COLLISION: "raise the approach height by 30 mm",
    FailureType.POSITION_ERROR: "re-perceive and re-centre the grasp point on the object",
    FailureType.UNREACHABLE_POSE: "verticalise the approach or turn the wrist 90 deg",
    FailureType.APPROACH_ANGLE: "verticalise the approach (or raise the grasp point)",
    FailureType.ORIENTATION: "rotate the wrist by 90 deg",
    FailureType.CONSTRAINT_VIOLATION: "slow down (x0.5) and approach vertically",
    FailureType.WRONG_OBJECT: "replan from the next retrieved strategy",
    FailureType.TIMEOUT: "replan from the next retrieved strategy",
    FailureType.UNKNOWN: "replan from the next retrieved strategy",
}


#: A landing's widening smaller than this (the opening already near the stroke) is not
#: worth an attempt: 1 mm a side is a third of the TCP's 3 mm lateral sigma.
WIDEN_MIN_M = 0.002


@dataclass
class CorrectionOps:
    """Delta g_r of one correction (Algorithm 1 line 14): declarative operations plus the
    rule they implement. Named apart from the scene graph's constraint adjustment Delta g
    (Sec. III-B, :attr:`agentic_grasp.core.constraints.ConstraintSet.adjustment`).

    ops keys (applied in this order by :func:`get_correction`): ``reset`` (restart from g0),
    ``replan`` (next strategy), ``grasp_type`` (level-2 template of that type),
    ``force_scale``, ``width_delta`` (m), ``approach_height_delta`` (m), ``grasp_z_delta``
    (m), ``recentre`` (step towards the perceived centre, m), ``vertical`` (True),
    ``wrist_delta`` (rad), ``speed_scale``, ``perturbation`` (3-vector, m).
    """

    rule: str
    ops: Dict[str, Any] = field(default_factory=dict)


def is_vertical(grasp: GraspParameters, tol: float = 1e-3) -> bool:
    return float(grasp.approach[2]) <= -1.0 + tol


def centre_distance(grasp: GraspParameters, target: ObjectInstance) -> float:
    """Horizontal distance of the grasp point from the perceived centre (m)."""
    return float(np.linalg.norm(np.asarray(grasp.position[:2], dtype=float)
                                - np.asarray(target.position[:2], dtype=float)))


def pivot_hold(diagnosis: Diagnosis, grasp: GraspParameters, target: ObjectInstance
               ) -> Optional[float]:
    """A body grasp the object turned out of (its weight's moment beat the pads' torsional
    hold, measured as a ratio at this grip): the moment grows with the grasp's distance from
    the centre and the hold with the grip, so the hand's continuous grip holds it up to
    distance x 70 N / (grip x ratio x safety) from the perceived centre: that distance
    (m), None when the failure is no measured pivot of a body grasp."""
    ratio = float(diagnosis.torque_ratio)
    if (diagnosis.failure_type not in (FailureType.SLIP, FailureType.DROP)
            or not diagnosis.torque_bound or not math.isfinite(ratio) or ratio <= 0.0
            or on_part(grasp, target) or grasp.force <= 0.0):
        return None
    return (centre_distance(grasp, target) * HAND_CONTINUOUS_FORCE_N
            / (float(grasp.force) * ratio * CONTENT_SAFETY))


#: Level-1 corrections that only scale the grip force: the rule's name and the
#: CorrectionConfig field of the factor.
_FORCE_SCALES = {
    FailureType.SLIP: ("slip", "slip_force_scale"),
    FailureType.DROP: ("drop", "drop_force_scale"),
    FailureType.FORCE_DAMAGE: ("force damage", "force_damage_scale"),
    FailureType.DEFORMATION: ("deformation", "deformation_force_scale"),
}


def _turned_extent(grasp: GraspParameters, target: Optional[ObjectInstance],
                   turn: float = math.pi / 2.0) -> float:
    """The perceived target's extent across the closing axis turned by ``turn`` about the
    approach (0 when unknown, or round about the vertical: nothing speaks against the
    turn)."""
    if target is None or target.shape == Shape.SPHERE or (target.shape == Shape.CYLINDER
                                                          and target.upright):
        return 0.0
    axis = closing_axis(grasp.approach, float(grasp.wrist_yaw) + turn)
    return footprint_extent(target.shape, target.size, axis, float(target.yaw))


def level1_ops(diagnosis: Diagnosis, grasp: GraspParameters,
               config: Optional[CorrectionConfig] = None,
               obstacle_direction: Optional[np.ndarray] = None,
               target: Optional[ObjectInstance] = None) -> CorrectionOps:
    """The targeted parameter tuning for one failure type (level-1 table, module docstring).

    ``obstacle_direction``: horizontal unit vector from the target to the object the hand
    collided with (from perception), when known; ``target``: the perceived target, when
    known (a slip whose object pivoted moves the grasp point over its centre).
    """
    cfg = config or CorrectionConfig()
    kind = diagnosis.failure_type
    if kind in (FailureType.SLIP, FailureType.DROP) and diagnosis.torque_bound \
            and target is not None and not on_part(grasp, target):
        # the pads' torsional capacity grows with the grip: where the grip that holds the
        # measured moment (with the lift's jerk and the hand's force error,
        # along.CONTENT_SAFETY) is within the hand's continuous force, the grasp stays where
        # the candidate ranking put it (clear of the neighbours) and the grip rises to it
        ratio = float(diagnosis.torque_ratio)
        need = grasp.force * ratio * CONTENT_SAFETY if math.isfinite(ratio) else math.inf
        if need <= HAND_CONTINUOUS_FORCE_N:
            return CorrectionOps(f"{kind.value}: the object turned out of the pads with a "
                                 f"moment {ratio:.2f} x their torsional hold at "
                                 f"{grasp.force:.1f} N: the grip rises to {need:.1f} N, "
                                 f"which holds it with a {CONTENT_SAFETY:g} margin",
                                 {"force_scale": need / float(grasp.force)})
        dist = centre_distance(grasp, target)
        if dist >= cfg.execution_error_m:
            # the weight's moment about the pads grows with the grasp point's distance from
            # the centre of mass: at the hand's continuous grip it is held up to the
            # distance where it has shrunk by that grip over the one it needs here, so the
            # grasp moves only that far towards the centre (and stays as clear of the
            # neighbours as it can); with no moment measured, over the centre
            hold = pivot_hold(diagnosis, grasp, target) or 0.0
            keep = hold / dist
            if hold < cfg.execution_error_m:
                return CorrectionOps(f"{kind.value}: the object pivoted out of the pads (its "
                                     f"weight's moment beat their torsional friction) with "
                                     f"the grasp point {dist * 1e3:.0f} mm from the "
                                     "perceived centre: it moves over the centre, not to a "
                                     "higher force", {"to_centre": 0.0})
            return CorrectionOps(f"{kind.value}: the object turned out of the pads with a "
                                 f"moment {ratio:.2f} x their torsional hold at "
                                 f"{grasp.force:.1f} N, {dist * 1e3:.0f} mm from the perceived "
                                 f"centre; the hand's {HAND_CONTINUOUS_FORCE_N:.0f} N holds it "
                                 f"{hold * 1e3:.0f} mm from the centre: the grasp "
                                 "moves there and the grip rises to it",
                                 {"to_centre": keep,
                                  "force_scale": HAND_CONTINUOUS_FORCE_N / float(grasp.force)})
    if kind in _FORCE_SCALES:
        name, attr = _FORCE_SCALES[kind]
        scale = getattr(cfg, attr)
        yielded = float(diagnosis.yield_force_n)
        if (kind in (FailureType.FORCE_DAMAGE, FailureType.DEFORMATION)
                and math.isfinite(yielded) and 0.0 < yielded < grasp.force):
            # the material gave way at a force below the one applied: the paper's factor is
            # applied to that force, not to the applied one (which would need several
            # attempts to come down below it)
            return CorrectionOps(f"{name}: the material gave way at {yielded:.1f} N: f' = "
                                 f"{scale:g} x {yielded:.1f} N",
                                 {"force_scale": scale * yielded / float(grasp.force)})
        return CorrectionOps(f"{name}: f' = {scale:g} f", {"force_scale": scale})
    if kind == FailureType.WIDTH_MISMATCH:
        sign = -1 if diagnosis.width_direction < 0 else 1
        why = "opening too wide" if sign < 0 else "opening too narrow"
        return CorrectionOps(f"width mismatch ({why}): w' = w {'-' if sign < 0 else '+'} "
                             f"{cfg.width_step_m * 1e3:.0f} mm",
                             {"width_delta": sign * cfg.width_step_m})
    if kind == FailureType.COLLISION:
        if diagnosis.other_id == "table":
            if not is_vertical(grasp):
                return CorrectionOps("collision with the table: vertical approach (a tilted "
                                     "hand's lower fingertip is below the grasp point)",
                                     {"vertical": True})
            return CorrectionOps(f"collision with the table: grasp point + "
                                 f"{cfg.table_collision_raise_m * 1e3:.0f} mm",
                                 {"grasp_z_delta": cfg.table_collision_raise_m})
        if obstacle_direction is not None and float(grasp.approach[2]) > -SIDE_APPROACH_Z:
            # a side approach: the palm sits beside the object at the grasp itself, so a
            # longer stand-off does not move it off the neighbour; another side does
            return CorrectionOps("collision with a neighbour on a side approach: the palm "
                                 "sits beside the object at the grasp, which a longer "
                                 "stand-off does not move; the approach turns 90 deg to the "
                                 "side whose palm stands farther from the neighbours",
                                 {"side_away": True})
        ops = {"approach_height_delta": cfg.collision_height_m}
        rule = f"collision: approach height + {cfg.collision_height_m * 1e3:.0f} mm"
        if obstacle_direction is not None:
            axis = closing_axis(grasp.approach, grasp.wrist_yaw)
            along = abs(float(axis[:2] @ np.asarray(obstacle_direction, dtype=float)[:2]))
            turned = _turned_extent(grasp, target)
            passes = max(float(grasp.width), _turned_extent(grasp, target, 0.0))
            if along > math.cos(cfg.palm_alignment_rad) and turned <= passes:
                ops["wrist_delta"] = math.pi / 2.0
                rule += (f", wrist + 90 deg (the palm's long side pointed "
                         f"{math.degrees(math.acos(min(along, 1.0))):.0f} deg off the obstacle)")
            elif along > math.cos(cfg.palm_alignment_rad):
                # turned, the fingers would close along a section the opening does not pass
                # (a long object's length): that turn cannot succeed and is not tried
                rule += (f" (the wrist stays: turned 90 deg, the fingers would meet "
                         f"{turned * 1e3:.0f} mm of the object, more than the "
                         f"{passes * 1e3:.0f} mm they pass now)")
        return CorrectionOps(rule, ops)
    if kind == FailureType.POSITION_ERROR:
        ops = {"recentre": cfg.recentre_step_m}
        offset = float(diagnosis.landing_offset_m)
        landed = diagnosis.phase == "approach"
        if (landed and diagnosis.offset_explains and math.isfinite(offset)
                and abs(offset) >= cfg.execution_error_m):
            # A finger landed on the material: its contact locates the material's centre
            # along the closing axis, so the grasp goes there at once (a step towards the
            # perceived centre repeats the perception's error; a raise does not move sideways).
            ops["shift_closing"] = offset
            return CorrectionOps(f"position error: a finger landed on the material, whose "
                                 f"centre lies {offset * 1e3:+.0f} mm along the closing axis: "
                                 "grasp point moved there", ops)
        material = float(diagnosis.material_width_m)
        if landed and math.isfinite(material) and not (target is not None
                                                       and on_part(grasp, target)):
            # the fingers' per-side clearance beside the material they met was below the
            # TCP's 3-sigma lateral error, so a finger lands wherever the grasp point is
            # put; an opening with that error a side removes the cause (up to the stroke)
            margin = (float(grasp.width) - material) / 2.0
            need = min(material + 2.0 * cfg.execution_error_m, GRIPPER_MAX_WIDTH_M)
            if margin < cfg.execution_error_m and need - float(grasp.width) >= WIDEN_MIN_M:
                return CorrectionOps(
                    f"position error: a finger landed on {material * 1e3:.0f} mm of "
                    f"material with {max(margin, 0.0) * 1e3:.1f} mm a side, within the TCP's "
                    f"{cfg.execution_error_m * 1e3:.0f} mm error: the opening widens to "
                    f"{need * 1e3:.0f} mm, the grasp point stays",
                    {"width_delta": need - float(grasp.width)})
        rule = (f"position error: re-centre {cfg.recentre_step_m * 1e3:.0f} mm towards the "
                "perceived centre")
        if landed and (target is None or narrows_upward(target)):
            ops["raise_if_centred"] = cfg.landing_raise_m
            rule += (f" (a finger landed: + {cfg.landing_raise_m * 1e3:.0f} mm instead when "
                     "already centred, where the section narrows)")
        elif landed and math.isfinite(offset):
            # a section that does not narrow upward gains nothing from a raise but loses grip
            # depth (a flat phone: the fingers close above it); the grasp follows the
            # measured centre instead and the hand's execution error is drawn anew
            ops["shift_if_centred"] = offset
            rule += (f" (a finger landed: when already centred, to the measured material "
                     f"centre, {offset * 1e3:+.0f} mm along the closing axis, instead)")
        return CorrectionOps(rule, ops)
    if kind == FailureType.UNREACHABLE_POSE:
        ops: Dict[str, Any] = {}
        if is_vertical(grasp):
            ops["wrist_delta"] = cfg.unreachable_wrist_rad
            rule = f"unreachable: wrist + {math.degrees(cfg.unreachable_wrist_rad):.0f} deg"
        else:
            ops["vertical"] = True
            rule = "unreachable: vertical approach"
        if "pre-grasp" in diagnosis.detail:
            ops["approach_height_delta"] = -cfg.unreachable_height_m
            rule += f", pre-grasp stand-off - {cfg.unreachable_height_m * 1e3:.0f} mm"
        return CorrectionOps(rule, ops)
    if kind == FailureType.APPROACH_ANGLE:
        if is_vertical(grasp):
            return CorrectionOps(f"approach angle: grasp point + "
                                 f"{cfg.approach_angle_raise_m * 1e3:.0f} mm",
                                 {"grasp_z_delta": cfg.approach_angle_raise_m})
        return CorrectionOps("approach angle: vertical approach", {"vertical": True})
    if kind == FailureType.ORIENTATION:
        return CorrectionOps(f"orientation: wrist + {math.degrees(cfg.orientation_wrist_rad):.0f}"
                             " deg", {"wrist_delta": cfg.orientation_wrist_rad})
    if kind == FailureType.CONSTRAINT_VIOLATION:
        return CorrectionOps(f"constraint violation: speed x {cfg.constraint_speed_scale:g}, "
                             "vertical approach",
                             {"speed_scale": cfg.constraint_speed_scale, "vertical": True})
    return CorrectionOps(f"{kind.value}: replan from the next retrieved strategy",
                         {"replan": True})


def failure_types_covered() -> List[FailureType]:
    """Every taxonomy type has a rule (a test checks the table is complete)."""
    return [k for k in FailureType if k in CORRECTION_RULES]


#: Older name of :class:`CorrectionOps` (kept for existing imports).
#: Older name of :func:`level1_ops`.
level1_adjustment = level1_ops


__all__ = ["CORRECTION_RULES", "CorrectionOps", "failure_types_covered", "level1_adjustment",
           "level1_ops"]
