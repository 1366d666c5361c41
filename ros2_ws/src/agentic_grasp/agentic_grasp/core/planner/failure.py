"""ClassifyFailure and the level-1 correction rules (paper Sec. IV-B, Algorithm 1 line 13-14).

Classification turns one failed attempt into one of the 14 taxonomy types
(:class:`~agentic_grasp.core.types.FailureType`, four groups). Precedence, first that
applies wins (thresholds in config/planner.yaml ``classification``):

1. **arm error** (the arm ran nothing): OUT_OF_WORKSPACE -> UNREACHABLE_POSE,
   UNKNOWN_TARGET -> WRONG_OBJECT, BACKEND_UNAVAILABLE / BUSY -> TIMEOUT, any other code ->
   UNKNOWN. The planner clips its grasps into the executor's limits, so FORCE_LIMIT and
   WIDTH_LIMIT should not occur; if they do they are UNKNOWN with the message as evidence.
2. **timeout**: the attempt's wall time exceeded ``attempt_timeout_s`` -> TIMEOUT.
3. **events**: the first event (in phase order) whose kind is a taxonomy name. Events are
   what the simulator or the robot's sensors observed, so they beat any inference from phi.
4. **phi fallback** (no failure event, e.g. a real robot reporting only Q and phi), in causal
   order pre-contact -> contact -> post-grasp, so the earliest broken stage is blamed:

   ====  ============================  =======================================================
   phi   below threshold               failure type
   ====  ============================  =======================================================
   phi1  position_accuracy 0.3         POSITION_ERROR
   phi2  width_compatibility 0.4       WIDTH_MISMATCH (facts.md)
   phi5  approach_clearance 0.2        COLLISION
   phi4  grasp_type_matching 0.2       ORIENTATION (the hand's orientation does not fit the
                                       part: the grasp type meets the wrong geometry)
   phi3  force_appropriateness 0.2     FORCE_DAMAGE if applied force > damage limit (from the
                                       measurements), else SLIP
   phi7  grip_security 0.3             DROP if the static load was held (static_margin >= 1),
                                       else SLIP
   ====  ============================  =======================================================

5. otherwise UNKNOWN.

Width direction (for WIDTH_MISMATCH): the measured per-side opening margin
(``opening_margin_m`` = (opening - material) / 2) < 0 means the opening was too narrow
(w + 10 mm); a margin above ``too_wide_margin_m`` means too wide (w - 10 mm); without a
measurement the paper's rule w' = w + 0.01 m applies.

Level-1 corrections (targeted parameter tuning; constants in ``corrections``):

======================  ===========================================================  ========
failure type            rule                                                         source
======================  ===========================================================  ========
SLIP                    f' = 1.2 f                                                   facts.md
DROP                    f' = 1.3 f                                                   facts.md
FORCE_DAMAGE            f' = 0.7 f                                                   facts.md
DEFORMATION             f' = 0.8 f                                                   project
WIDTH_MISMATCH          w' = w + 10 mm (too narrow) or w - 10 mm (too wide)          facts.md
COLLISION               approach height + 30 mm                                      facts.md
                        and, when the closing axis (the palm's 200 mm long side)     project
                        points within 45 deg of the object hit, wrist + 90 deg
                        (with the table, other_id "table": a tilted approach         project
                        becomes vertical, a vertical one raises the grasp point
                        10 mm: the fingertips were below the table top)
POSITION_ERROR          re-perceive; grasp point moved 10 mm (or the whole offset    project
                        when shorter) towards the perceived centre, horizontally; a
                        finger that landed on an already centred grasp means too
                        much material under the fingertips: grasp point + 10 mm
UNREACHABLE_POSE        tilted approach -> vertical; vertical -> wrist + 90 deg;     project
                        pre-grasp unreachable -> approach height - 30 mm too
APPROACH_ANGLE          tilted approach -> vertical; vertical -> grasp point + 10 mm project
ORIENTATION             wrist + 90 deg                                               project
CONSTRAINT_VIOLATION    speed x 0.5 and vertical approach                            project
WRONG_OBJECT, TIMEOUT,  replan: the next retrieved strategy (e2, e3), else g0        project
UNKNOWN
======================  ===========================================================  ========

An adjustment is a small dict of operations (``ops``) that :mod:`recovery` applies to a
grasp; keeping it declarative lets the planner apply the same correction to the grasp it
executes and to the scene-independent grasp it may store in episodic memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from agentic_grasp.core.arm import ArmError
from agentic_grasp.core.kinematics import closing_axis
from agentic_grasp.core.planner.configurations import ClassificationConfig, CorrectionConfig
from agentic_grasp.core.types import (QUALITY_FACTOR_NAMES, AttemptOutcome, FailureGroup,
                                      FailureType, GraspParameters)

_FAILURE_NAMES = {f.value for f in FailureType}

#: phi fallback order: (factor name, failure type or a resolver tag).
PHI_ORDER = (
    ("position_accuracy", FailureType.POSITION_ERROR),
    ("width_compatibility", FailureType.WIDTH_MISMATCH),
    ("approach_clearance", FailureType.COLLISION),
    ("grasp_type_matching", FailureType.ORIENTATION),
    ("force_appropriateness", "force"),
    ("grip_security", "hold"),
)

_ARM_ERROR_TYPES = {
    ArmError.OUT_OF_WORKSPACE: FailureType.UNREACHABLE_POSE,
    ArmError.UNKNOWN_TARGET: FailureType.WRONG_OBJECT,
    ArmError.BACKEND_UNAVAILABLE: FailureType.TIMEOUT,
    ArmError.BUSY: FailureType.TIMEOUT,
}

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
class Diagnosis:
    """F_r: the failure type of one attempt and the evidence it was read from."""

    failure_type: FailureType
    evidence: str
    source: str                    # "arm_error" | "timeout" | "event" | "phi" | "default"
    width_direction: int = 0       # +1 opening too narrow, -1 too wide, 0 unknown
    phase: str = ""
    other_id: str = ""
    detail: str = ""               # the event's detail text, when from an event

    @property
    def group(self) -> FailureGroup:
        return self.failure_type.group

    def to_dict(self) -> Dict[str, Any]:
        return {"failure_type": self.failure_type.value, "group": self.group.value,
                "evidence": self.evidence, "source": self.source,
                "width_direction": self.width_direction, "phase": self.phase,
                "other_id": self.other_id}


def _width_direction(outcome: Optional[AttemptOutcome], cfg: ClassificationConfig) -> int:
    margin = math.nan if outcome is None else float(
        outcome.measurements.get("opening_margin_m", math.nan))
    if math.isnan(margin):
        return 0
    if margin < 0.0:
        return 1
    if margin > cfg.too_wide_margin_m:
        return -1
    return 1   # a width failure with a tight but non-negative margin: open a little more


def _phi_fallback(outcome: AttemptOutcome, cfg: ClassificationConfig) -> Optional[Diagnosis]:
    phi = np.asarray(outcome.phi, dtype=float).reshape(-1)
    if phi.shape != (len(QUALITY_FACTOR_NAMES),):
        return None
    index = {name: k for k, name in enumerate(QUALITY_FACTOR_NAMES)}
    m = outcome.measurements
    for name, kind in PHI_ORDER:
        threshold = cfg.phi_thresholds.get(name)
        if threshold is None:
            continue
        value = float(phi[index[name]])
        if not value < threshold:
            continue
        k = index[name] + 1
        evidence = f"phi{k} ({name}) = {value:.2f} < {threshold:.2f}"
        if kind == "force":
            applied = float(m.get("applied_force_n", math.nan))
            limit = float(m.get("damage_limit_n", math.inf))
            if math.isfinite(applied) and applied > limit:
                kind = FailureType.FORCE_DAMAGE
                evidence += f"; applied {applied:.1f} N > damage limit {limit:.1f} N"
            else:
                kind = FailureType.SLIP
                evidence += "; force below what the load needs"
        elif kind == "hold":
            static = float(m.get("static_margin", math.nan))
            if math.isfinite(static) and static >= 1.0:
                kind = FailureType.DROP
                evidence += f"; static load held (margin {static:.2f}), lost under lift"
            else:
                kind = FailureType.SLIP
                evidence += "; static load not held"
        diag = Diagnosis(kind, evidence, "phi")
        if kind == FailureType.WIDTH_MISMATCH:
            diag.width_direction = _width_direction(outcome, cfg)
        return diag
    return None


def classify_failure(outcome: Optional[AttemptOutcome], arm_error: ArmError = ArmError.NONE,
                     arm_message: str = "", elapsed_s: Optional[float] = None,
                     config: Optional[ClassificationConfig] = None) -> Diagnosis:
    """F_r = ClassifyFailure(phi_r, events_r) with the documented precedence."""
    cfg = config or ClassificationConfig()
    if arm_error not in (ArmError.NONE, ArmError.CANCELED):
        kind = _ARM_ERROR_TYPES.get(ArmError(arm_error), FailureType.UNKNOWN)
        return Diagnosis(kind, f"arm error {ArmError(arm_error).name}: {arm_message}",
                         "arm_error")
    if elapsed_s is not None and elapsed_s > cfg.attempt_timeout_s:
        return Diagnosis(FailureType.TIMEOUT, f"attempt took {elapsed_s:.1f} s > "
                         f"{cfg.attempt_timeout_s:.1f} s", "timeout")
    if outcome is None:
        return Diagnosis(FailureType.UNKNOWN, "no outcome reported", "default")
    for event in outcome.events:
        if event.kind in _FAILURE_NAMES:
            kind = FailureType(event.kind)
            phase = getattr(event.phase, "value", str(event.phase))
            diag = Diagnosis(kind, f"event {kind.value} in {phase}: {event.detail}", "event",
                             phase=phase, other_id=event.other_id, detail=event.detail)
            if kind == FailureType.WIDTH_MISMATCH:
                diag.width_direction = _width_direction(outcome, cfg)
            return diag
    diag = _phi_fallback(outcome, cfg)
    if diag is not None:
        return diag
    return Diagnosis(FailureType.UNKNOWN, "no failure event and every phi above its "
                     "threshold", "default")


@dataclass
class Adjustment:
    """Delta g of one correction: declarative operations plus the rule they implement.

    ops keys (applied in this order by recovery.apply_ops): ``reset`` (restart from g0),
    ``replan`` (next strategy), ``grasp_type`` (level-2 template of that type),
    ``force_scale``, ``width_delta`` (m), ``approach_height_delta`` (m), ``grasp_z_delta``
    (m), ``recentre`` (step towards the perceived centre, m), ``vertical`` (True),
    ``wrist_delta`` (rad), ``speed_scale``, ``perturbation`` (3-vector, m).
    """

    rule: str
    ops: Dict[str, Any] = field(default_factory=dict)


def _is_vertical(grasp: GraspParameters, tol: float = 1e-3) -> bool:
    return float(grasp.approach[2]) <= -1.0 + tol


def level1_adjustment(diagnosis: Diagnosis, grasp: GraspParameters,
                      config: Optional[CorrectionConfig] = None,
                      obstacle_direction: Optional[np.ndarray] = None) -> Adjustment:
    """The targeted parameter tuning for one failure type (module docstring table).

    ``obstacle_direction``: horizontal unit vector from the target to the object the hand
    collided with (from perception), when known.
    """
    cfg = config or CorrectionConfig()
    kind = diagnosis.failure_type
    if kind == FailureType.SLIP:
        return Adjustment(f"slip: f' = {cfg.slip_force_scale:g} f",
                          {"force_scale": cfg.slip_force_scale})
    if kind == FailureType.DROP:
        return Adjustment(f"drop: f' = {cfg.drop_force_scale:g} f",
                          {"force_scale": cfg.drop_force_scale})
    if kind == FailureType.FORCE_DAMAGE:
        return Adjustment(f"force damage: f' = {cfg.force_damage_scale:g} f",
                          {"force_scale": cfg.force_damage_scale})
    if kind == FailureType.DEFORMATION:
        return Adjustment(f"deformation: f' = {cfg.deformation_force_scale:g} f",
                          {"force_scale": cfg.deformation_force_scale})
    if kind == FailureType.WIDTH_MISMATCH:
        sign = -1 if diagnosis.width_direction < 0 else 1
        why = "opening too wide" if sign < 0 else "opening too narrow"
        return Adjustment(f"width mismatch ({why}): w' = w {'-' if sign < 0 else '+'} "
                          f"{cfg.width_step_m * 1e3:.0f} mm",
                          {"width_delta": sign * cfg.width_step_m})
    if kind == FailureType.COLLISION:
        if diagnosis.other_id == "table":
            if not _is_vertical(grasp):
                return Adjustment("collision with the table: vertical approach (a tilted "
                                  "hand's lower fingertip is below the grasp point)",
                                  {"vertical": True})
            return Adjustment(f"collision with the table: grasp point + "
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
        return Adjustment(rule, ops)
    if kind == FailureType.POSITION_ERROR:
        ops = {"recentre": cfg.recentre_step_m}
        rule = (f"position error: re-centre {cfg.recentre_step_m * 1e3:.0f} mm towards the "
                "perceived centre")
        if diagnosis.phase == "approach":
            ops["raise_if_centred"] = cfg.landing_raise_m
            rule += (f" (a finger landed: + {cfg.landing_raise_m * 1e3:.0f} mm instead when "
                     "already centred)")
        return Adjustment(rule, ops)
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
        return Adjustment(rule, ops)
    if kind == FailureType.APPROACH_ANGLE:
        if _is_vertical(grasp):
            return Adjustment(f"approach angle: grasp point + "
                              f"{cfg.approach_angle_raise_m * 1e3:.0f} mm",
                              {"grasp_z_delta": cfg.approach_angle_raise_m})
        return Adjustment("approach angle: vertical approach", {"vertical": True})
    if kind == FailureType.ORIENTATION:
        return Adjustment(f"orientation: wrist + {math.degrees(cfg.orientation_wrist_rad):.0f}"
                          " deg", {"wrist_delta": cfg.orientation_wrist_rad})
    if kind == FailureType.CONSTRAINT_VIOLATION:
        return Adjustment(f"constraint violation: speed x {cfg.constraint_speed_scale:g}, "
                          "vertical approach",
                          {"speed_scale": cfg.constraint_speed_scale, "vertical": True})
    return Adjustment(f"{kind.value}: replan from the next retrieved strategy",
                      {"replan": True})


def failure_types_covered() -> List[FailureType]:
    """Every taxonomy type has a rule (a test checks the table is complete)."""
    return [k for k in FailureType if k in CORRECTION_RULES]


__all__ = ["Adjustment", "CORRECTION_RULES", "Diagnosis", "PHI_ORDER", "classify_failure",
           "failure_types_covered", "level1_adjustment"]
