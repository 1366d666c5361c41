"""A correction read with the hand model: how far a grasp point must rise for the palm to
clear the body it met (correction.py)."""
from __future__ import annotations

from typing import Optional

from agentic_grasp.core.grasping.hand import HandModel, object_box
from agentic_grasp.core.planner.configurations import PlannerConfig
from agentic_grasp.core.planner.recovery.failure import Diagnosis
from agentic_grasp.core.planner.recovery.level1 import CorrectionOps, is_vertical
from agentic_grasp.core.types import FailureType, GraspParameters, ObjectInstance


#: The palm's clearance over the perceived body after a raise: 3 sigma of the TCP's vertical
#: error (config/sim.yaml tcp_sigma_z_m, 2 mm).
PALM_RAISE_CLEARANCE_M = 0.006
#: Steps of the search for the raise (m).
PALM_RAISE_STEP_M = 0.005


def palm_raise_ops(diagnosis: Diagnosis, grasp: GraspParameters, config: PlannerConfig,
                   target: ObjectInstance) -> Optional[CorrectionOps]:
    """A vertical approach whose hand body met the target before the fingers reached the
    grasp point: the hand model says how far the grasp point must rise for the palm and
    wrist to clear the perceived body (with the TCP's vertical error), while the pads stay
    below its top. None when the paper's 10 mm step does as much, or no raise clears it."""
    if (diagnosis.failure_type != FailureType.APPROACH_ANGLE
            or not is_vertical(grasp)
            or (diagnosis.other_id and diagnosis.other_id != target.id)):
        return None
    synth = config.grasp_synthesis
    hand = HandModel(synth.hand)
    body = [object_box(target)]
    top = target.top_z
    step = config.corrections.approach_angle_raise_m
    dz = PALM_RAISE_STEP_M
    while float(grasp.position[2]) + dz - synth.hand.pad_depth_m / 2.0 <= top:
        pos = grasp.position.copy()
        pos[2] += dz
        gap = hand.clearance(grasp.copy(position=pos), body, parts=("palm", "wrist"))[0]
        if gap >= PALM_RAISE_CLEARANCE_M:
            if dz <= step:
                return None
            return CorrectionOps(f"approach angle: the palm met {target.id}'s top; the "
                                 f"hand model clears it {gap * 1e3:.0f} mm with the grasp "
                                 f"point + {dz * 1e3:.0f} mm, the pads still below its top",
                                 {"grasp_z_delta": dz})
        dz += PALM_RAISE_STEP_M
    return None


__all__ = ["PALM_RAISE_CLEARANCE_M", "PALM_RAISE_STEP_M", "palm_raise_ops"]
