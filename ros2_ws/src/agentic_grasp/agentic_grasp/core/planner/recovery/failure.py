"""ClassifyFailure: the failure taxonomy of one attempt (paper Sec. IV-B, Algorithm 1 line 13).

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
   phi2  width_compatibility 0.4       WIDTH_MISMATCH (paper Eq. 2 example,
                                       docs/paper_facts.md)
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

The corrections (level 1 included) and the escalation rule are in the other modules of the
recovery package (:mod:`.level1`, :mod:`.correction`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np

from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.planner.sections import ClassificationConfig
from agentic_grasp.core.types import QUALITY_FACTOR_NAMES, AttemptOutcome, FailureGroup, FailureType

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
    #: WIDTH_MISMATCH: the material between the fingers, measured (opening - 2 x the
    #: per-side margin the gripper reported); NaN when not measured
    material_width_m: float = math.nan
    #: POSITION_ERROR where a finger landed: the centre of the material under the fingers
    #: along the closing axis, from the TCP (m; the contact the landing finger's force/torque
    #: reading locates); NaN when not measured
    closing_offset_m: float = math.nan
    #: ... and that offset puts the material under a finger (beyond the opening's margin)
    offset_explains: bool = False
    #: FORCE_DAMAGE / DEFORMATION: the grip force at which the material gave way (the
    #: fingers' position jumps when a wall buckles or a skin bruises); NaN when not measured
    yield_force_n: float = math.nan
    #: SLIP / DROP: the grasp's torque capacity, not its friction, bounded the load (the
    #: object turned out of the pads: the wrist's force/torque reading shows the moment)
    torque_bound: bool = False
    #: ... and the weight's moment over the pads' torsional capacity at the applied force
    #: (the wrist's moment reading against the grip); NaN when not measured
    torque_ratio: float = math.nan

    @property
    def group(self) -> FailureGroup:
        return self.failure_type.group

    def to_dict(self) -> Dict[str, Any]:
        return {"failure_type": self.failure_type.value, "group": self.group.value,
                "evidence": self.evidence, "source": self.source,
                "width_direction": self.width_direction, "phase": self.phase,
                "other_id": self.other_id}


def _material_width(outcome: Optional[AttemptOutcome]) -> float:
    """The material the fingers met (m): opening - 2 x per-side margin; NaN when unknown."""
    if outcome is None:
        return math.nan
    opening = float(outcome.measurements.get("opening_m", math.nan))
    margin = float(outcome.measurements.get("opening_margin_m", math.nan))
    width = opening - 2.0 * margin
    return width if math.isfinite(width) and width > 0.0 else math.nan


def _landing_offset(outcome: AttemptOutcome) -> Tuple[float, bool]:
    """The measured material centre along the closing axis (NaN: not measured) and whether
    it explains the landing: an offset beyond the per-side opening margin puts the material
    under a finger. Within the margin the material would have fitted where it was
    measured, so the landing came from the hand's own execution error."""
    offset = float(outcome.measurements.get("closing_offset_m", math.nan))
    margin = float(outcome.measurements.get("opening_margin_m", math.nan))
    explains = math.isfinite(offset) and not (math.isfinite(margin)
                                              and abs(offset) <= max(margin, 0.0))
    return offset, explains


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
            diag.material_width_m = _material_width(outcome)
        return diag
    return None


def classify_arm_error(arm_error: ArmError, arm_message: str = "",
                       elapsed_s: Optional[float] = None,
                       config: Optional[ClassificationConfig] = None) -> Diagnosis:
    """The failure of an attempt the arm did not run (or did not report): its error code,
    a timeout, or no observation at all."""
    cfg = config or ClassificationConfig()
    if arm_error not in (ArmError.NONE, ArmError.CANCELED):
        kind = _ARM_ERROR_TYPES.get(ArmError(arm_error), FailureType.UNKNOWN)
        return Diagnosis(kind, f"arm error {ArmError(arm_error).name}: {arm_message}",
                         "arm_error")
    if elapsed_s is not None and elapsed_s > cfg.attempt_timeout_s:
        return Diagnosis(FailureType.TIMEOUT, f"attempt took {elapsed_s:.1f} s > "
                         f"{cfg.attempt_timeout_s:.1f} s", "timeout")
    return Diagnosis(FailureType.UNKNOWN, "no observation reported", "default")


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
                diag.material_width_m = _material_width(outcome)
            elif kind == FailureType.POSITION_ERROR:
                diag.closing_offset_m, diag.offset_explains = _landing_offset(outcome)
                diag.material_width_m = _material_width(outcome)
            elif kind in (FailureType.FORCE_DAMAGE, FailureType.DEFORMATION):
                diag.yield_force_n = float(outcome.measurements.get("damage_limit_n",
                                                                    math.nan))
            elif kind in (FailureType.SLIP, FailureType.DROP):
                m = outcome.measurements
                torque = float(m.get("torque_limit_n", math.nan))
                friction = float(m.get("friction_capacity_n", math.nan))
                diag.torque_bound = bool(math.isfinite(torque) and math.isfinite(friction)
                                         and torque < friction)
                load = float(m.get("torque_load_nm", math.nan))
                capacity = float(m.get("torque_capacity_nm", math.nan))
                if math.isfinite(load) and math.isfinite(capacity) and capacity > 0.0:
                    diag.torque_ratio = load / capacity
            return diag
    diag = _phi_fallback(outcome, cfg)
    if diag is not None:
        return diag
    return Diagnosis(FailureType.UNKNOWN, "no failure event and every phi above its "
                     "threshold", "default")


__all__ = ["Diagnosis", "PHI_ORDER", "classify_arm_error", "classify_failure"]
