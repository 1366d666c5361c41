"""GetCorrection / ApplyCorrection with three escalation levels (paper Sec. IV-B, Fig. 4).

- Level 1 (parameter tuning): the failure type's rule (:func:`level1_ops`, table below).
- Level 2 (method switch): the grasp type rotates power -> pinch -> side -> power and the
  force drops 10 %. In the analytical simulator the type label alone changes nothing
  physical, so a new type brings its geometry, built from the perceived box (constants in
  config/planner.yaml ``level2``):
  power = top-down at the centre closing across the narrower horizontal side, fingers
  ``power_depth_m`` below the top; pinch = top-down at the same point and wrist, fingertips
  ``pinch_depth_m`` below the top, opening ``pinch_width_m``; side = horizontal approach
  pointing away from the robot base, at ``side_height_fraction`` of the height (at least
  ``side_min_height_m`` so the wrist clears the table), closing horizontally across the
  object.
- Level 3 (re-plan): reset to g0 and perturb the grasp point by eps ~ U(-0.01, 0.01)^3 m
  drawn from the planner's seeded generator.

Two grasps are corrected in step: the executed grasp g_r (with the scene-graph adjustment
Delta g of Sec. III-B) and its *base* b_r (the same grasp without Delta g). Parameter
operations apply to both; operations that rebuild the grasp (level-2 template, level-3
reset, replan) rebuild the base and apply the constraints again, so collision avoidance
survives every level. Episodic memory stores the base, so a grasp proven next to a fragile
vase is not reduced a second time when the next scene applies its own constraints.

Escalation (:func:`correction_level`): the correction computed after failed attempt r has
level(r) = 1 for r <= ``level1_max_index``, 2 for r == ``level2_index``, else 3; with
``level_by = "failed_attempt"`` (the paper's indexing, default) r is the failed attempt's
index, with ``"next_attempt"`` it is r + 1. With ``escalate_unchanged`` a correction that
changes nothing is replaced by the next level's (:func:`get_correction`).

Level-1 corrections (targeted parameter tuning; constants in ``corrections``; source
"paper": docs/paper_facts.md, Sec. IV-B; "project": this project's choice):

======================  ===========================================================  ========
failure type            rule                                                         source
======================  ===========================================================  ========
SLIP                    f' = 1.2 f                                                   paper
DROP                    f' = 1.3 f                                                   paper
FORCE_DAMAGE            f' = 0.7 f                                                   paper
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
                        instead (towards the centre is onto the body)
UNREACHABLE_POSE        tilted approach -> vertical; vertical -> wrist + 90 deg;     project
                        pre-grasp unreachable -> approach height - 30 mm too
APPROACH_ANGLE          tilted approach -> vertical; vertical -> grasp point + 10 mm project
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
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

import numpy as np

from agentic_grasp.core.geometry import grasp_to_object_frame, grasp_to_world, wrap_angle
from agentic_grasp.core.grasping.along import on_part
from agentic_grasp.core.grasping.rim import rim_grasp
from agentic_grasp.core.closing_axis import closing_axis, wrist_yaw_for_closing_axis
from agentic_grasp.core.numeric import allclose_finite, clip_float
from agentic_grasp.core.planner.configurations import (CorrectionConfig, Level2Config, Limits,
                                                       PlannerConfig)
from agentic_grasp.core.types import FailureType, GraspParameters, GraspType, ObjectInstance, Shape

if TYPE_CHECKING:   # annotations only
    from agentic_grasp.core.planner.failure import Diagnosis

VERTICAL = np.array([0.0, 0.0, -1.0])
#: A grasp point closer than this to the perceived centre (horizontally) counts as centred.
CENTRED_M = 0.001


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
    """The canonical geometry of a grasp type on the perceived box (module docstring)."""
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
        return current.copy(position=np.array([current.position[0], current.position[1], z]),
                            approach=VERTICAL.copy(), grasp_type=GraspType.PINCH,
                            width=min(limits.max_width_m, cfg.pinch_width_m), wrist_yaw=wrist)
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


def next_grasp_type(current: GraspType, order) -> GraspType:
    """power -> pinch -> side -> power (a type outside the order starts it)."""
    names = list(order)
    if current.value not in names:
        return GraspType(names[0])
    return GraspType(names[(names.index(current.value) + 1) % len(names)])


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


def _is_vertical(grasp: GraspParameters, tol: float = 1e-3) -> bool:
    return float(grasp.approach[2]) <= -1.0 + tol


#: Level-1 corrections that only scale the grip force: the rule's name and the
#: CorrectionConfig field of the factor.
_FORCE_SCALES = {
    FailureType.SLIP: ("slip", "slip_force_scale"),
    FailureType.DROP: ("drop", "drop_force_scale"),
    FailureType.FORCE_DAMAGE: ("force damage", "force_damage_scale"),
    FailureType.DEFORMATION: ("deformation", "deformation_force_scale"),
}


def level1_ops(diagnosis: Diagnosis, grasp: GraspParameters,
               config: Optional[CorrectionConfig] = None,
               obstacle_direction: Optional[np.ndarray] = None) -> CorrectionOps:
    """The targeted parameter tuning for one failure type (level-1 table, module docstring).

    ``obstacle_direction``: horizontal unit vector from the target to the object the hand
    collided with (from perception), when known.
    """
    cfg = config or CorrectionConfig()
    kind = diagnosis.failure_type
    if kind in _FORCE_SCALES:
        name, attr = _FORCE_SCALES[kind]
        scale = getattr(cfg, attr)
        return CorrectionOps(f"{name}: f' = {scale:g} f", {"force_scale": scale})
    if kind == FailureType.WIDTH_MISMATCH:
        sign = -1 if diagnosis.width_direction < 0 else 1
        why = "opening too wide" if sign < 0 else "opening too narrow"
        return CorrectionOps(f"width mismatch ({why}): w' = w {'-' if sign < 0 else '+'} "
                             f"{cfg.width_step_m * 1e3:.0f} mm",
                             {"width_delta": sign * cfg.width_step_m})
    if kind == FailureType.COLLISION:
        if diagnosis.other_id == "table":
            if not _is_vertical(grasp):
                return CorrectionOps("collision with the table: vertical approach (a tilted "
                                     "hand's lower fingertip is below the grasp point)",
                                     {"vertical": True})
            return CorrectionOps(f"collision with the table: grasp point + "
                                 f"{cfg.table_collision_raise_m * 1e3:.0f} mm",
                                 {"grasp_z_delta": cfg.table_collision_raise_m})
        ops = {"approach_height_delta": cfg.collision_height_m}
        rule = f"collision: approach height + {cfg.collision_height_m * 1e3:.0f} mm"
        if obstacle_direction is not None:
            axis = closing_axis(grasp.approach, grasp.wrist_yaw)
            along = abs(float(axis[:2] @ np.asarray(obstacle_direction, dtype=float)[:2]))
            if along > math.cos(cfg.palm_alignment_rad):
                ops["wrist_delta"] = math.pi / 2.0
                rule += (f", wrist + 90 deg (the palm's long side pointed "
                         f"{math.degrees(math.acos(min(along, 1.0))):.0f} deg off the obstacle)")
        return CorrectionOps(rule, ops)
    if kind == FailureType.POSITION_ERROR:
        ops = {"recentre": cfg.recentre_step_m}
        rule = (f"position error: re-centre {cfg.recentre_step_m * 1e3:.0f} mm towards the "
                "perceived centre")
        if diagnosis.phase == "approach":
            ops["raise_if_centred"] = cfg.landing_raise_m
            rule += (f" (a finger landed: + {cfg.landing_raise_m * 1e3:.0f} mm instead when "
                     "already centred)")
        return CorrectionOps(rule, ops)
    if kind == FailureType.UNREACHABLE_POSE:
        ops: Dict[str, Any] = {}
        if _is_vertical(grasp):
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
        if _is_vertical(grasp):
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


# ------------------------------------------------------------------ corrections
@dataclass
class NextCandidates:
    """constraint_mode clearance: the next-best candidates of the last constrained grasp,
    best first; a correction pops them (the next-best clearance candidate), the planner's
    constrain() replaces them each time it ranks a grasp's candidates."""

    grasps: List[GraspParameters] = field(default_factory=list)


@dataclass
class CorrectionContext:
    """What a correction may use besides the grasp: the scene and the plan's alternatives.

    ``constrain`` applies the scene-graph adjustment to a base grasp (identity without a
    scene graph); ``alternatives`` are base grasps of the lower-ranked strategies, consumed
    by replanning; ``rng`` draws the level-3 perturbation.
    """

    target: ObjectInstance
    g0: GraspParameters
    b0: GraspParameters
    constrain: Callable[[GraspParameters], GraspParameters]
    rng: np.random.Generator
    alternatives: List[GraspParameters] = field(default_factory=list)
    alternative_names: List[str] = field(default_factory=list)
    objects: Dict[str, ObjectInstance] = field(default_factory=dict)
    # constraint_mode clearance: the next-best candidates of the last constrained grasp, best
    # first (the planner's constrain() refills the holder)
    candidates: NextCandidates = field(default_factory=NextCandidates)
    #: the perceived rim height of an open container (None: no opening seen)
    rim_z: Optional[float] = None

    def direction_to(self, object_id: str) -> Optional[np.ndarray]:
        """Horizontal unit vector from the target to a perceived object (None if unknown)."""
        other = self.objects.get(object_id)
        if other is None or object_id == self.target.id:
            return None
        delta = np.asarray(other.position[:2], dtype=float) - self.target.position[:2]
        norm = float(np.linalg.norm(delta))
        return None if norm < 1e-6 else delta / norm


@dataclass
class Correction:
    """Delta g_r and its result: the level, the rule, the grasps and a text with numbers."""

    level: int
    rule: str
    text: str
    grasp: GraspParameters
    base: GraspParameters
    ops: Dict[str, Any]

    def to_dict(self) -> Dict[str, Any]:
        ops = {k: (np.round(np.asarray(v, dtype=float), 6).tolist()
                   if isinstance(v, np.ndarray) else v) for k, v in self.ops.items()}
        return {"level": self.level, "rule": self.rule, "text": self.text,
                "grasp": self.grasp.to_dict(), "ops": ops}


def _param_ops(g: GraspParameters, ops: Dict[str, Any], target: ObjectInstance
               ) -> GraspParameters:
    """Apply the parameter operations (everything but reset / replan / grasp_type)."""
    changes: Dict[str, Any] = {}
    pos = g.position.copy()
    if "force_scale" in ops:
        changes["force"] = g.force * float(ops["force_scale"])
    if "width_delta" in ops:
        changes["width"] = g.width + float(ops["width_delta"])
    if "approach_height_delta" in ops:
        changes["approach_height"] = g.approach_height + float(ops["approach_height_delta"])
    if "grasp_z_delta" in ops:
        pos[2] += float(ops["grasp_z_delta"])
    if "recentre" in ops and on_part(g, target):
        # a grasp on a part outside the body (a handle): towards the body's centre the
        # fingers would land on the body. The finger landed because the TCP's lateral error
        # exceeded the clearance beside the part, so the clearance grows by the step a side.
        changes["width"] = changes.get("width", g.width) + 2.0 * float(ops["recentre"])
    elif "recentre" in ops:
        offset = np.asarray(target.position[:2], dtype=float) - pos[:2]
        dist = float(np.linalg.norm(offset))
        step = float(ops["recentre"])
        if dist < CENTRED_M and "raise_if_centred" in ops:
            pos[2] += float(ops["raise_if_centred"])
        else:
            pos[:2] += offset if dist <= step else offset * (step / dist)
    if "perturbation" in ops:
        pos += np.asarray(ops["perturbation"], dtype=float)
    wrist = g.wrist_yaw
    if "vertical" in ops:
        turned = with_approach(g, VERTICAL)
        changes["approach"], wrist = turned.approach, turned.wrist_yaw
    if "wrist_delta" in ops:
        wrist += float(ops["wrist_delta"])
    changes["wrist_yaw"] = wrist
    if "speed_scale" in ops:
        changes["speed"] = g.speed * float(ops["speed_scale"])
    changes["position"] = pos
    return g.copy(**changes)


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


# ------------------------------------------------------------------ escalation
def retry_level(index: int, config: PlannerConfig) -> int:
    """The retry level (1, 2 or 3; paper Sec. IV-B) for attempt index ``index``."""
    if index <= config.level1_max_index:
        return 1
    if index == config.level2_index:
        return 2
    return 3


def correction_level(failed_index: int, config: PlannerConfig) -> int:
    """Level of the correction computed after failed attempt ``failed_index`` (``level_by``:
    the paper's indexing takes the failed attempt's index, ``next_attempt`` the next one)."""
    if config.level_by == "failed_attempt":
        return retry_level(failed_index, config)
    return retry_level(failed_index + 1, config)


def get_correction(diagnosis: Diagnosis, level: int, grasp: GraspParameters,
                   base: GraspParameters, ctx: CorrectionContext,
                   config: PlannerConfig) -> Correction:
    """Delta g_r = GetCorrection(F_r, r) applied: g_{r+1} and its base b_{r+1}.

    With ``escalate_unchanged`` a correction that changes nothing (its parameter is at a
    limit, e.g. w + 10 mm at the 80 mm aperture) is replaced by the next level's, so the
    planner never repeats a grasp that just failed; the returned level says which ran.
    """
    nxt = _next_candidate(diagnosis, grasp, ctx)
    if nxt is not None:
        return Correction(level=level, rule=f"{diagnosis.failure_type.value}: next-best "
                          "clearance candidate",
                          text=f"{diagnosis.failure_type.value}: next-best clearance "
                          f"candidate: {describe_change(grasp, nxt)}", grasp=nxt,
                          base=base.copy(), ops={"next_candidate": True})
    correction = _correction_at(diagnosis, level, grasp, base, ctx, config)
    while (config.escalate_unchanged and correction.level < 3
           and same_grasp(correction.grasp, grasp)):
        skipped = correction.rule
        correction = _correction_at(diagnosis, correction.level + 1, grasp, base, ctx, config)
        correction.rule = f"{skipped} changes nothing (at a limit), escalated to {correction.rule}"
        correction.text = f"{correction.rule}: {describe_change(grasp, correction.grasp)}"
    return correction


#: Failures of the approach that the next-best clearance candidate addresses.
NEXT_CANDIDATE_FAILURES = (FailureType.COLLISION, FailureType.APPROACH_ANGLE)


def _measured_width_ops(diagnosis: Diagnosis, grasp: GraspParameters,
                        config: PlannerConfig, ctx: "CorrectionContext"
                        ) -> Optional[CorrectionOps]:
    """A too-narrow opening whose material the gripper measured.

    - The material fits the stroke (with the fingers' clearance on both sides): open to what
      was measured plus the fit margin (capped at the stroke) at once, where the paper's
      +10 mm step would take several attempts to get there.
    - It does not, and the target is round (a sphere): no opening spans its equator, but
      above it the section narrows; the grasp point goes up until the fingertips, half a pad
      below the grasp point, pass a section the stroke encloses.
    - It does not, otherwise: no opening encloses this body, so another part or approach
      (the next retrieved strategy) rather than another grasp of it; with no strategy left,
      the fingers close across the other horizontal side (wrist + 90 deg).

    None when this does not apply (the paper's step covers it, or nothing was measured).
    """
    if diagnosis.failure_type != FailureType.WIDTH_MISMATCH or diagnosis.width_direction <= 0:
        return None
    material = float(diagnosis.material_width_m)
    if not math.isfinite(material):
        return None
    synth = config.grasp_synthesis
    top = float(config.limits.max_width_m)
    # at the full stroke already, a finger still landed: the body is wider than the stroke
    # somewhere along the fingers (the gripper measures the material at the pads only)
    at_stroke = grasp.width >= top - 1e-6
    if material + 2.0 * synth.finger_clearance_m <= top and not at_stroke:
        need = min(material + float(synth.opening_margin_m), top)
        if need <= grasp.width + config.corrections.width_step_m:
            return None                 # the paper's +10 mm step already covers it
        return CorrectionOps(
            f"width mismatch: {material * 1e3:.0f} mm of material measured between the "
            f"fingers: w' = {need * 1e3:.0f} mm (the measured width plus the "
            f"{synth.opening_margin_m * 1e3:.0f} mm fit margin, within the stroke)",
            {"width_delta": need - grasp.width})
    head = (f"width mismatch: {material * 1e3:.0f} mm of material measured, as wide as the "
            f"hand's {top * 1e3:.0f} mm stroke or wider: no opening encloses it there")
    target = ctx.target
    if target.shape == Shape.SPHERE:
        r = float(target.size[0]) / 2.0
        half = top / 2.0 - synth.finger_clearance_m
        # the section at height h above the centre is 2 sqrt(r^2 - h^2) wide; the
        # fingertips are half a pad below the grasp point
        h = math.sqrt(max(r * r - half * half, 0.0)) + synth.hand.pad_depth_m / 2.0
        rise = float(target.position[2]) + h - float(grasp.position[2])
        if 0.0 < rise < r:
            return CorrectionOps(
                head + f"; a sphere narrows above its equator: grasp point + "
                f"{rise * 1e3:.0f} mm, where the fingertips pass a section the stroke "
                "encloses", {"grasp_z_delta": rise, "width_delta": top - grasp.width})
    if ctx.rim_z is not None:
        return CorrectionOps(head + "; the container is open, so the fingers pinch its wall "
                             "at the rim (closing radially), with the same grip force",
                             {"rim_pinch": float(ctx.rim_z)})
    if ctx.alternatives:
        return CorrectionOps(head + ", so another part or approach (the next retrieved "
                             "strategy), not another grasp of this body", {"replan": True})
    return CorrectionOps(head + "; no other strategy is left, so the fingers close across "
                         "the other horizontal side (wrist + 90 deg) at the widest opening",
                         {"wrist_delta": math.pi / 2.0, "width_delta": top - grasp.width})


def _next_candidate(diagnosis: Diagnosis, grasp: GraspParameters,
                    ctx: CorrectionContext) -> Optional[GraspParameters]:
    """Pop the next candidate that differs from the failed grasp (None: none left / N/A)."""
    if diagnosis.failure_type not in NEXT_CANDIDATE_FAILURES:
        return None
    queue = ctx.candidates.grasps
    while queue:
        cand = queue.pop(0)
        if not same_grasp(cand, grasp):
            return cand
    return None


def same_grasp(a: GraspParameters, b: GraspParameters) -> bool:
    """Whether two grasps command the same motion (every parameter within 1e-9)."""
    return (a.grasp_type == b.grasp_type
            and allclose_finite(a.position.tolist(), b.position.tolist(), atol=1e-9)
            and allclose_finite(a.approach.tolist(), b.approach.tolist(), atol=1e-9)
            and all(abs(getattr(a, f) - getattr(b, f)) <= 1e-9
                    for f in ("width", "force", "approach_height", "speed", "wrist_yaw")))


def _correction_at(diagnosis: Diagnosis, level: int, grasp: GraspParameters,
                   base: GraspParameters, ctx: CorrectionContext,
                   config: PlannerConfig) -> Correction:
    limits = config.limits
    measured = _measured_width_ops(diagnosis, grasp, config, ctx) if level <= 1 else None
    if measured is not None:
        adj = measured
    elif level <= 1:
        adj = level1_ops(diagnosis, grasp, config.corrections,
                                ctx.direction_to(diagnosis.other_id)
                                if diagnosis.other_id else None)
    elif level == 2:
        new_type = next_grasp_type(grasp.grasp_type, config.level2.grasp_type_order)
        adj = CorrectionOps(f"level 2 method switch: {grasp.grasp_type.value} -> "
                            f"{new_type.value}, f' = {config.level2.force_scale:g} f",
                            {"grasp_type": new_type.value,
                             "force_scale": config.level2.force_scale})
    else:
        eps = ctx.rng.uniform(-config.level3.perturbation_m, config.level3.perturbation_m, 3)
        adj = CorrectionOps(f"level 3 re-plan: reset to g0, perturb by U(-"
                            f"{config.level3.perturbation_m:g}, "
                            f"{config.level3.perturbation_m:g})^3 m",
                            {"reset": True, "perturbation": eps})
    ops = dict(adj.ops)
    rule = adj.rule
    if "recentre" in ops and on_part(grasp, ctx.target):
        rule = (f"position error on a part beside the body: opening + "
                f"{2.0 * float(ops['recentre']) * 1e3:.0f} mm (re-centred towards the body, "
                "a finger would land on it)")
    if ops.get("reset"):
        new_base = _param_ops(ctx.b0, {k: v for k, v in ops.items() if k != "reset"},
                              ctx.target)
        new_grasp = _param_ops(ctx.g0, {k: v for k, v in ops.items() if k != "reset"},
                               ctx.target)
    elif "rim_pinch" in ops:
        # the grip force stays the one planned for this object: the pivot rule's bound
        # (a volume of water) would crush a thin wall, and a slip raises it by the
        # paper's rule on the next attempt
        # the part opening plus the perceived width's error bound on either side, so the
        # wall, at a perceived radius that may be off by that much, falls between the pads
        synth = config.grasp_synthesis
        new_base = rim_grasp(ctx.target, base, float(ops["rim_pinch"]), synth,
                             synth.min_part_opening_m + 2.0 * synth.hand_limits.width_margin_m)
        new_grasp = new_base.copy(force=grasp.force)
    elif ops.get("replan"):
        if ctx.alternatives:
            new_base = ctx.alternatives.pop(0)
            name = ctx.alternative_names.pop(0) if ctx.alternative_names else "next strategy"
            rule += f" ({name})"
        else:
            new_base = ctx.b0.copy()
            rule += " (no strategy left: g0)"
        new_grasp = ctx.constrain(new_base)
    elif "grasp_type" in ops:
        gtype = GraspType(ops["grasp_type"])
        new_base = type_template(gtype, base, ctx.target, config.level2, limits)
        new_base = new_base.copy(force=base.force * float(ops["force_scale"]))
        new_grasp = ctx.constrain(new_base).copy(force=grasp.force * float(ops["force_scale"]))
    else:
        new_base = _param_ops(base, ops, ctx.target)
        new_grasp = _param_ops(grasp, ops, ctx.target)
    new_base = clamp_grasp(new_base, limits)
    new_grasp = clamp_grasp(new_grasp, limits)
    return Correction(level=level, rule=rule, text=f"{rule}: {describe_change(grasp, new_grasp)}",
                      grasp=new_grasp, base=new_base, ops=ops)


__all__ = ["CORRECTION_RULES", "Correction", "CorrectionContext", "CorrectionOps", "NextCandidates",
           "clamp_grasp", "correction_level", "describe_change", "extent_across",
           "failure_types_covered", "get_correction", "level1_adjustment", "level1_ops",
           "narrow_side", "next_grasp_type", "rebase_grasp", "retry_level", "same_grasp",
           "type_template", "with_approach", "wrap_angle"]
