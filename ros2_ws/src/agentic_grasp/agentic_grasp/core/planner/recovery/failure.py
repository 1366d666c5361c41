"""ClassifyFailure: the failure taxonomy of one attempt (paper Sec. IV-B, Algorithm 1 line 13).

:class:`Diagnosis` is F_r: one of the 14 taxonomy types
(:class:`~agentic_grasp.core.types.FailureType`, four groups) and the evidence it was read
from. An attempt the arm ran is diagnosed from what the arm's sensors reported, by the one
diagnosis both arms share (:func:`agentic_grasp.core.planner.recovery.diagnosis.assess`).
An attempt it did not run is classified here (:func:`classify_arm_error`), first that
applies wins:

1. **arm error**: OUT_OF_WORKSPACE -> UNREACHABLE_POSE, UNKNOWN_TARGET -> WRONG_OBJECT,
   BACKEND_UNAVAILABLE / BUSY -> TIMEOUT, any other code -> UNKNOWN. The planner clips its
   grasps into the executor's limits, so FORCE_LIMIT and WIDTH_LIMIT should not occur; if
   they do they are UNKNOWN with the message as evidence.
2. **timeout**: the attempt's wall time exceeded ``attempt_timeout_s`` -> TIMEOUT.
3. otherwise UNKNOWN (no observation reported).

The corrections (level 1 included) and the escalation rule are in the other modules of the
recovery package (:mod:`.level1`, :mod:`.correction`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional

from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.planner.sections import ClassificationConfig
from agentic_grasp.core.types import FailureGroup, FailureType

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
    #: along the closing axis, from the TCP (m; from which finger the contact's torque puts
    #: the push under, and the perceived width); NaN when not read
    landing_offset_m: float = math.nan
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


__all__ = ["Diagnosis", "classify_arm_error"]
