"""GetCorrection / ApplyCorrection (Algorithm 1 lines 14-16): the correction of a failed
attempt at its escalation level, applied to the executed grasp and to its base (the recovery
package's docstring has the levels and the escalation rule)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from agentic_grasp.core.arm.closing_axis import closing_axis
from agentic_grasp.core.grasping.along import on_part
from agentic_grasp.core.grasping.rim import rim_grasp, rim_opening
from agentic_grasp.core.planner.configurations import PlannerConfig
from agentic_grasp.core.planner.recovery.failure import Diagnosis
from agentic_grasp.core.grasping.operations import (CENTRED_M, VERTICAL, clamp_grasp,
                                                        describe_change, extent_across,
                                                        next_grasp_type, same_grasp,
                                                        turned_side, type_template,
                                                        with_approach)
from agentic_grasp.core.planner.recovery.level1 import (CorrectionOps, centre_distance,
                                                        level1_ops, pivot_hold)
from agentic_grasp.core.planner.recovery.measured import palm_raise_ops
from agentic_grasp.core.types import (FailureType, GraspParameters, GraspType, ObjectInstance,
                                      ObjectState, Shape)

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
    #: how far from the perceived centre a body grasp may be for the hand's continuous grip
    #: to hold the moment a pivoting slip measured (m; None: no pivot measured)
    pivot_hold_m: Optional[float] = None

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
    elif "to_centre" in ops:
        # the fraction of the grasp point's distance from the perceived centre it keeps
        centre = np.asarray(target.position[:2], dtype=float)
        pos[:2] = centre + float(ops["to_centre"]) * (pos[:2] - centre)
    elif "shift_closing" in ops:
        pos += float(ops["shift_closing"]) * closing_axis(g.approach, g.wrist_yaw)
    elif "recentre" in ops:
        offset = np.asarray(target.position[:2], dtype=float) - pos[:2]
        dist = float(np.linalg.norm(offset))
        step = float(ops["recentre"])
        if dist < CENTRED_M and "raise_if_centred" in ops:
            pos[2] += float(ops["raise_if_centred"])
        elif dist < CENTRED_M and "shift_if_centred" in ops:
            pos += float(ops["shift_if_centred"]) * closing_axis(g.approach, g.wrist_yaw)
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
    hold = pivot_hold(diagnosis, grasp, ctx.target)
    if hold is not None:
        ctx.pivot_hold_m = hold if ctx.pivot_hold_m is None else min(ctx.pivot_hold_m, hold)
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
    if (correction.level < 2 and _descent_bound(diagnosis, ctx)
            and set(correction.ops) == {"approach_height_delta"}):
        # the hand descends straight along the approach onto the grasp pose: a higher
        # start lengthens the descent above the contact but sweeps the same last stretch,
        # where the hand met the neighbour, so the raise cannot change the outcome
        skipped = correction.rule
        correction = _correction_at(diagnosis, 2, grasp, base, ctx, config)
        correction.rule = (f"{skipped} would sweep the same last stretch of the descent, "
                           f"where the hand met {diagnosis.other_id}: escalated to "
                           f"{correction.rule}")
        correction.text = f"{correction.rule}: {describe_change(grasp, correction.grasp)}"
    return correction


def _descent_bound(diagnosis: Diagnosis, ctx: CorrectionContext) -> bool:
    """A collision with a perceived neighbour during the approach's descent."""
    return (diagnosis.failure_type == FailureType.COLLISION and diagnosis.phase == "approach"
            and bool(diagnosis.other_id) and diagnosis.other_id in ctx.objects
            and diagnosis.other_id != ctx.target.id)


#: Failures of the approach that the next-best clearance candidate addresses.
NEXT_CANDIDATE_FAILURES = (FailureType.COLLISION, FailureType.APPROACH_ANGLE)


#: A sphere's rise smaller than this changes its section by well under the TCP's error.
SPHERE_RISE_MIN_M = 0.002


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
        # fingertips are half a pad below the grasp point. The lowest contact the stroke
        # encloses at all; above it, the one that leaves the TCP's 3-sigma error a side,
        # but no higher than the perceived friction's cone allows (a contact tilted by
        # more than atan(mu) squeezes the ball out of the pads)
        lowest = math.sqrt(max(r * r - half * half, 0.0))
        spare = top / 2.0 - config.corrections.execution_error_m
        clear = math.sqrt(max(r * r - spare * spare, 0.0))
        cone = r * math.sin(math.atan(max(float(target.friction), 0.0)))
        h = max(lowest, min(clear, cone)) + synth.hand.pad_depth_m / 2.0
        rise = float(target.position[2]) + h - float(grasp.position[2])
        if SPHERE_RISE_MIN_M < rise < r:
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


def _part_pivot_ops(diagnosis: Diagnosis, grasp: GraspParameters, config: PlannerConfig,
                    ctx: "CorrectionContext") -> Optional[CorrectionOps]:
    """A grasp on a part beside an open container's body (a handle) that let the body pivot
    out of the pads: the weight's moment about the closing axis was held by the pads'
    torsional friction alone, whose lever is two thirds of a pad's radius. Pinched radially
    at the rim, the wall holds the same moment by the pads' pressure couple, whose lever is
    the pad's depth (about four times longer), so the fingers move to the rim, and the grip
    force rises by the slip rule. None when this does not apply (no pivot, not on a part,
    no opening seen)."""
    if (diagnosis.failure_type != FailureType.SLIP or not diagnosis.torque_bound
            or ctx.rim_z is None or not on_part(grasp, ctx.target)):
        return None
    scale = config.corrections.slip_force_scale
    return CorrectionOps(f"slip: the container pivoted out of the pads on its part (only "
                         f"their torsional friction held its weight's moment); pinched "
                         f"radially at the rim, the pads' pressure couple holds it: rim "
                         f"pinch, f' = {scale:g} f",
                         {"rim_pinch": float(ctx.rim_z), "force_scale": scale})


def _part_collision_ops(diagnosis: Diagnosis, grasp: GraspParameters,
                        ctx: "CorrectionContext") -> Optional[CorrectionOps]:
    """A grasp on a part of an open container (a handle) whose hand met a neighbour: the
    part stands where it stands, so a higher approach start or another grasp of the same
    part brings the wrist down beside that neighbour again. The wall at the rim point
    opposite the neighbour puts the hand on the container's far side. None when this does
    not apply (not a neighbour, not on a part, no opening seen, or a filled container,
    whose liquid an inner finger half a pad below the rim would enter)."""
    if (diagnosis.failure_type != FailureType.COLLISION or ctx.rim_z is None
            or not diagnosis.other_id or not on_part(grasp, ctx.target)
            or ctx.target.state == ObjectState.FILLED):
        return None
    away = ctx.direction_to(diagnosis.other_id)
    if away is None:
        return None
    return CorrectionOps(f"collision with {diagnosis.other_id} on a part of an open "
                         "container: the part cannot move away from it, so the fingers "
                         "take the rim opposite it",
                         {"rim_pinch": float(ctx.rim_z), "rim_away": away})


def _next_candidate(diagnosis: Diagnosis, grasp: GraspParameters,
                    ctx: CorrectionContext) -> Optional[GraspParameters]:
    """Pop the next candidate that differs from the failed grasp (None: none left / N/A)."""
    if diagnosis.failure_type not in NEXT_CANDIDATE_FAILURES:
        return None
    queue = ctx.candidates.grasps
    while queue:
        cand = queue.pop(0)
        if not same_grasp(cand, grasp):
            if (grasp.width > cand.width and on_part(grasp, ctx.target)
                    and on_part(cand, ctx.target)):
                # a part opening that an earlier landing widened: the part is as thick
                # here as where the finger landed, so the narrower opening would land again
                cand = cand.copy(width=float(grasp.width))
            if ctx.pivot_hold_m is not None and not on_part(cand, ctx.target):
                # a pivot was measured: a body candidate farther from the centre than the
                # hand's grip holds it would turn out of the pads again; a nearer one keeps
                # the grip an earlier correction raised (the weight is the same anywhere)
                if centre_distance(cand, ctx.target) > ctx.pivot_hold_m + CENTRED_M:
                    continue
                cand = cand.copy(force=max(float(cand.force), float(grasp.force)))
            return cand
    return None


def _method_switch(grasp: GraspParameters, ctx: CorrectionContext,
                   config: PlannerConfig) -> CorrectionOps:
    """The paper's level-2 method switch to the next grasp type whose template fits the
    hand: a template that closes across a perceived section wider than the hand's stroke
    by more than the perception's width error cannot enclose it, whatever the retry. When
    no type fits (a body wider than the hand, held by its part), the switch goes to the
    next retrieved strategy (another part or approach), or with none left to level 3."""
    order = config.level2.grasp_type_order
    scale = config.level2.force_scale
    synth = config.grasp_synthesis
    beyond = config.limits.max_width_m + synth.hand_limits.width_margin_m
    current = grasp.grasp_type
    skipped = []
    for _ in range(len(list(order))):
        new_type = next_grasp_type(current, order)
        current = new_type
        if new_type == grasp.grasp_type:
            break
        tpl = type_template(new_type, grasp, ctx.target, config.level2, config.limits)
        across = extent_across(ctx.target, closing_axis(tpl.approach, tpl.wrist_yaw))
        if across <= beyond:
            why = (f" ({', '.join(skipped)} would close across more than the hand's stroke)"
                   if skipped else "")
            return CorrectionOps(f"level 2 method switch: {grasp.grasp_type.value} -> "
                                 f"{new_type.value}, f' = {scale:g} f{why}",
                                 {"grasp_type": new_type.value, "force_scale": scale})
        skipped.append(f"{new_type.value} {across * 1e3:.0f} mm")
    why = (f"no grasp type's template fits the hand ({', '.join(skipped)} across, more "
           f"than the {config.limits.max_width_m * 1e3:.0f} mm stroke)")
    if ctx.alternatives:
        return CorrectionOps(f"level 2: {why}: the next retrieved strategy", {"replan": True})
    return _replan_ops(f"level 2: {why} and no strategy left: re-plan from g0", ctx, config)


def _replan_ops(rule: str, ctx: CorrectionContext, config: PlannerConfig) -> CorrectionOps:
    """Level 3's re-plan: back to g0, perturbed by U(-p, p)^3 (``rule`` names who asks)."""
    p = config.level3.perturbation_m
    return CorrectionOps(f"{rule}, perturb by U(-{p:g}, {p:g})^3 m",
                         {"reset": True, "perturbation": ctx.rng.uniform(-p, p, 3)})


def _correction_at(diagnosis: Diagnosis, level: int, grasp: GraspParameters,
                   base: GraspParameters, ctx: CorrectionContext,
                   config: PlannerConfig) -> Correction:
    limits = config.limits
    measured = _measured_width_ops(diagnosis, grasp, config, ctx) if level <= 1 else None
    if measured is None and level <= 1:
        measured = palm_raise_ops(diagnosis, grasp, config, ctx.target)
    # a pivot on a part has one remedy whatever the level: the paper's method switch would
    # turn a handle grasp into a side grasp of a body wider than the hand
    pivot = _part_pivot_ops(diagnosis, grasp, config, ctx) if level <= 2 else None
    part_hit = _part_collision_ops(diagnosis, grasp, ctx) if level <= 2 else None
    if measured is not None:
        adj = measured
    elif pivot is not None:
        adj = pivot
    elif part_hit is not None:
        adj = part_hit
    elif level <= 1:
        adj = level1_ops(diagnosis, grasp, config.corrections,
                         ctx.direction_to(diagnosis.other_id) if diagnosis.other_id else None,
                         ctx.target)
    elif level == 2:
        adj = _method_switch(grasp, ctx, config)
    else:
        adj = _replan_ops("level 3 re-plan: reset to g0", ctx, config)
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
        synth = config.grasp_synthesis
        new_base = rim_grasp(ctx.target, base, float(ops["rim_pinch"]), synth,
                             rim_opening(synth), away_from=ops.get("rim_away"))
        new_grasp = new_base.copy(force=grasp.force * float(ops.get("force_scale", 1.0)))
    elif ops.get("replan"):
        if ctx.alternatives:
            new_base = ctx.alternatives.pop(0)
            name = ctx.alternative_names.pop(0) if ctx.alternative_names else "next strategy"
            rule += f" ({name})"
        else:
            new_base = ctx.b0.copy()
            rule += " (no strategy left: g0)"
        new_grasp = ctx.constrain(new_base)
    elif "side_away" in ops:
        margin = config.level2.opening_margin_m
        others = [o for k, o in ctx.objects.items() if k != ctx.target.id]
        new_base = turned_side(base, ctx.target, others, margin)
        new_grasp = turned_side(grasp, ctx.target, others, margin)
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


__all__ = ["Correction", "CorrectionContext", "NEXT_CANDIDATE_FAILURES", "NextCandidates",
           "correction_level", "get_correction", "retry_level"]
