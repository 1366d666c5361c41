"""The AttemptRecord message of one attempt (Thought -> Action -> Observation
and its reflection) and its FailureDiagnosis (paper Sec. III-C).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional

from std_msgs.msg import Header

from agentic_grasp.core.types import GraspParameters
from agentic_grasp_interfaces.msg import (AttemptRecord as AttemptRecordMsg, FailureDiagnosis,
                                          GraspOutcome as GraspOutcomeMsg)
from agentic_grasp.ros.conversions.grasp import grasp_to_msg, observation_to_msg

if TYPE_CHECKING:  # scene_graph pulls in networkx (~0.3 s): imported where it is used
    from agentic_grasp.core.planner.recovery.failure import Diagnosis
    from agentic_grasp.core.planner.outcomes import AttemptRecord as CoreAttemptRecord
    from agentic_grasp.core.planner.recovery import Correction


#: How an AttemptRecord of a wrist-camera view begins its ``candidate`` (a motion, recorded
#: like an attempt, that grasps nothing: counted apart from the grasp attempts).
VIEW_LABEL = "uncover view: "


def is_view_record(msg: Any) -> bool:
    """Whether an AttemptRecord message records a wrist-camera view, not a grasp attempt."""
    return str(getattr(msg, "candidate", "")).startswith(VIEW_LABEL)


def failure_diagnosis_to_msg(diagnosis: Optional["Diagnosis"],
                             correction: Optional["Correction"] = None) -> Any:
    """FailureDiagnosis of the planner's diagnosis F_r and the correction computed from it.

    None (a successful attempt, or one not reflected on) is failure_type "none"; retry_level
    is the level of the correction computed from this failure (0 when there is none).
    """
    if diagnosis is None:
        return FailureDiagnosis(failure_type=FailureDiagnosis.NONE)
    return FailureDiagnosis(failure_type=diagnosis.failure_type.value,
                            group=diagnosis.group.value,
                            retry_level=int(correction.level) if correction else 0,
                            evidence=str(diagnosis.evidence),
                            correction=str(correction.text) if correction else "")


def recorded_grasp(grasp: GraspParameters) -> GraspParameters:
    """``grasp`` as the attempt records store it (``to_dict``: position and approach to 6
    decimals), so an AttemptRecord message, its marker and its JSON record agree."""
    return GraspParameters.from_dict(grasp.to_dict())


def attempt_record_to_msg(record: "CoreAttemptRecord", goal_id: str, subgoal_index: int,
                          target_id: str, outcome: Optional[GraspOutcomeMsg],
                          duration_s: float, header: Optional[Header] = None) -> Any:
    """The AttemptRecord message of the planner's core record of one attempt (Thought ->
    Action -> Observation, and the reflection on it when ``record`` has one).

    ``outcome`` is the planner's reading of the arm's observation (success, Q, phi, the
    diagnosed event); an attempt the arm never ran has an empty one, and an empty
    observation. ``duration_s`` is the
    attempt's time as the node saw it (Thought to Observation). ``record.candidate`` is the
    planner's clearance report of the executed grasp (None: no clearance reasoning ran).
    """
    msg = AttemptRecordMsg(header=header if header is not None else Header(),
                           goal_id=goal_id, subgoal_index=int(subgoal_index),
                           target_id=target_id, attempt=int(record.index),
                           retry_level=int(record.retry_level), thought=record.thought,
                           diagnosis=failure_diagnosis_to_msg(record.diagnosis,
                                                              record.correction),
                           duration_s=float(duration_s))
    if record.grasp is not None:
        msg.grasp = grasp_to_msg(recorded_grasp(record.grasp))
    if outcome is not None:
        msg.outcome = outcome
    msg.observation = observation_to_msg(getattr(record, "observation", None))
    msg.clearance_m = math.nan
    candidate = record.candidate
    if candidate:
        clear = candidate.get("clearance_m")
        msg.candidate = str(candidate.get("label", ""))
        msg.clearance_m = math.inf if clear is None else float(clear)
        msg.clearance_nearest = str(candidate.get("nearest", ""))
        msg.collision_free = bool(candidate.get("collision_free", False))
    msg.memory_transfer = str(getattr(record, "memory", "") or "")
    return msg
