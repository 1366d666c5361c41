"""What happened in one MoveIt attempt, as an AttemptOutcome in the
paper's failure taxonomy (Sec. III-C): MoveIt error codes by name and the observation ->
event mapping (the table in :mod:`agentic_grasp.ros.executor.moveit.translation`).

Observed quality: a real robot has no Eq. 2 model, so phi is the observation itself, one
factor per stage (1 where the stage went right, 0 where it failed, 1 where it cannot be
observed) and Q = sum w_k phi_k with the configured Eq. 2 weights (the caller passes them;
the paper's by default); the events carry the diagnosis. No ROS or MoveIt import.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from agentic_grasp.core.sim.params import QualityParams
from agentic_grasp.core.sim.quality import quality_score
from agentic_grasp.core.types import (QUALITY_FACTOR_NAMES, AttemptOutcome, FailureType, Phase,
                                      PhysicalEvent)
from agentic_grasp.ros.executor.moveit.config import MoveItBackendConfig
from agentic_grasp.ros.executor.moveit.translation import GripperGraspGoal


#: moveit_msgs/msg/MoveItErrorCodes values (moveit_msgs 2.x, msg/MoveItErrorCodes.msg).
MOVEIT_ERROR_CODES: Dict[str, int] = {
    "SUCCESS": 1, "FAILURE": 99999, "PLANNING_FAILED": -1, "INVALID_MOTION_PLAN": -2,
    "MOTION_PLAN_INVALIDATED_BY_ENVIRONMENT_CHANGE": -3, "CONTROL_FAILED": -4,
    "UNABLE_TO_AQUIRE_SENSOR_DATA": -5, "TIMED_OUT": -6, "PREEMPTED": -7,
    "START_STATE_IN_COLLISION": -10, "START_STATE_VIOLATES_PATH_CONSTRAINTS": -11,
    "START_STATE_INVALID": -26, "GOAL_IN_COLLISION": -12, "GOAL_VIOLATES_PATH_CONSTRAINTS": -13,
    "GOAL_CONSTRAINTS_VIOLATED": -14, "GOAL_STATE_INVALID": -27, "UNRECOGNIZED_GOAL_TYPE": -28,
    "INVALID_GROUP_NAME": -15, "INVALID_GOAL_CONSTRAINTS": -16, "INVALID_ROBOT_STATE": -17,
    "INVALID_LINK_NAME": -18, "INVALID_OBJECT_NAME": -19, "FRAME_TRANSFORM_FAILURE": -21,
    "COLLISION_CHECKING_UNAVAILABLE": -22, "ROBOT_STATE_STALE": -23, "SENSOR_INFO_STALE": -24,
    "COMMUNICATION_FAILURE": -25, "CRASH": -29, "ABORT": -30, "NO_IK_SOLUTION": -31,
}
_CODE_NAMES = {v: k for k, v in MOVEIT_ERROR_CODES.items()}

#: Planning errors that say the goal cannot be reached (-> UNREACHABLE_POSE).
_UNREACHABLE_CODES = {MOVEIT_ERROR_CODES[n] for n in (
    "PLANNING_FAILED", "INVALID_MOTION_PLAN", "TIMED_OUT", "GOAL_VIOLATES_PATH_CONSTRAINTS",
    "GOAL_CONSTRAINTS_VIOLATED", "GOAL_STATE_INVALID", "INVALID_GOAL_CONSTRAINTS",
    "NO_IK_SOLUTION", "FAILURE")}
#: Planning errors that say the goal pose collides with the scene (-> COLLISION).
_COLLISION_CODES = {MOVEIT_ERROR_CODES["GOAL_IN_COLLISION"]}
#: Errors of the set-up rather than of the grasp (-> the backend failed, no outcome).
SYSTEM_ERROR_CODES = {MOVEIT_ERROR_CODES[n] for n in (
    "START_STATE_IN_COLLISION", "START_STATE_VIOLATES_PATH_CONSTRAINTS", "START_STATE_INVALID",
    "UNRECOGNIZED_GOAL_TYPE", "INVALID_GROUP_NAME", "INVALID_ROBOT_STATE", "INVALID_LINK_NAME",
    "INVALID_OBJECT_NAME", "FRAME_TRANSFORM_FAILURE", "COLLISION_CHECKING_UNAVAILABLE",
    "ROBOT_STATE_STALE", "SENSOR_INFO_STALE", "COMMUNICATION_FAILURE", "CRASH")}


def moveit_error_name(code: int) -> str:
    """Readable name of a MoveItErrorCodes value (for messages and events)."""
    return _CODE_NAMES.get(int(code), f"error {int(code)}")


# ---------------------------------------------------------------------------- outcome
@dataclass
class MoveItObservation:
    """What the robot did and measured in one attempt; filled step by step by the backend."""

    phase_reached: Phase = Phase.APPROACH
    planning_error: Optional[int] = None        # MoveItErrorCodes of a failed plan
    planning_stage: str = ""                    # "pre-grasp", "descent", "lift-off", "lift"
    cartesian_fraction: float = math.nan        # of the failed straight segment
    execution_failure: str = ""                 # ExecutionStatus text of an aborted motion
    execution_stage: str = ""
    grasp_goal: Optional[GripperGraspGoal] = None
    grasp_action_ok: Optional[bool] = None
    width_after_close_m: float = math.nan
    width_after_liftoff_m: float = math.nan
    width_after_lift_m: float = math.nan
    opening_m: float = math.nan
    duration_s: float = 0.0


def _lost(width_before: float, width_now: float, cfg: MoveItBackendConfig) -> bool:
    if math.isnan(width_now) or math.isnan(width_before):
        return False
    return (width_now < cfg.min_object_width_m
            or width_now < width_before - cfg.lost_width_tolerance_m)


def _stage_phase(stage: str) -> Phase:
    return Phase.LIFT if stage in ("lift-off", "lift") else Phase.APPROACH


def outcome_from_observation(obs: MoveItObservation, cfg: MoveItBackendConfig,
                             target_id: str = "",
                             weights: Optional[Sequence[float]] = None) -> AttemptOutcome:
    """The attempt as an :class:`AttemptOutcome`: events in the failure taxonomy, observed phi.

    Events come first in ClassifyFailure, so the mapping in the module docstring decides
    the failure type; phi mirrors it (see the module docstring), Q uses the Eq. 2
    ``weights``: the configured ones (``QualityParams.weights``, config/sim.yaml
    ``quality.weights``); None means the defaults (the paper's, docs/paper_facts.md).
    """
    events: List[PhysicalEvent] = []
    phi = dict.fromkeys(QUALITY_FACTOR_NAMES, 1.0)
    m: Dict[str, float] = {"opening_m": obs.opening_m, "reachable": 1.0,
                           "width_after_close_m": obs.width_after_close_m,
                           "width_after_liftoff_m": obs.width_after_liftoff_m,
                           "width_after_lift_m": obs.width_after_lift_m,
                           "cartesian_fraction": obs.cartesian_fraction}
    success = False
    if obs.planning_error is not None:
        name = moveit_error_name(obs.planning_error)
        phase = _stage_phase(obs.planning_stage)
        if obs.planning_error in _COLLISION_CODES:
            events.append(PhysicalEvent(FailureType.COLLISION.value, phase,
                                        f"{obs.planning_stage} pose in collision ({name})"))
            phi["approach_clearance"] = 0.0
        elif phase == Phase.LIFT:
            events.append(PhysicalEvent(FailureType.COLLISION.value, phase,
                                        f"no straight {obs.planning_stage} path ({name}, "
                                        f"fraction {obs.cartesian_fraction:.2f})"))
            phi["approach_clearance"] = 0.0
        else:
            events.append(PhysicalEvent(FailureType.UNREACHABLE_POSE.value, phase,
                                        f"no plan to the {obs.planning_stage} pose ({name})"))
            phi["position_accuracy"] = 0.0
            m["reachable"] = 0.0
    elif obs.execution_failure:
        phase = _stage_phase(obs.execution_stage)
        events.append(PhysicalEvent(FailureType.COLLISION.value, phase,
                                    f"{obs.execution_stage} motion stopped: "
                                    f"{obs.execution_failure}"))
        phi["approach_clearance"] = 0.0
    elif obs.grasp_action_ok is not None:
        d = obs.width_after_close_m
        if not math.isnan(obs.opening_m) and not math.isnan(d):
            m["object_extent_m"] = d
            m["opening_margin_m"] = (obs.opening_m - d) / 2.0
        goal = obs.grasp_goal
        in_window = goal is not None and not math.isnan(d) and goal.window[0] < d < goal.window[1]
        if not obs.grasp_action_ok and not in_window:
            if math.isnan(d) or d < cfg.min_object_width_m:
                events.append(PhysicalEvent(FailureType.POSITION_ERROR.value, Phase.CLOSE,
                                            "fingers closed on nothing", target_id))
                phi["position_accuracy"] = 0.0
            else:
                lo, hi = goal.window if goal is not None else (math.nan, math.nan)
                events.append(PhysicalEvent(FailureType.WIDTH_MISMATCH.value, Phase.CLOSE,
                                            f"fingers stopped at {d * 1000:.1f} mm, expected "
                                            f"{lo * 1000:.1f} to {hi * 1000:.1f} mm", target_id))
                phi["width_compatibility"] = 0.0
        elif obs.phase_reached == Phase.LIFT:
            if _lost(d, obs.width_after_liftoff_m, cfg):
                events.append(PhysicalEvent(FailureType.SLIP.value, Phase.LIFT,
                                            "object lost at lift-off: static load not held",
                                            target_id))
                phi["force_appropriateness"] = 0.0
                phi["grip_security"] = 0.0
                m["static_margin"] = 0.0
            elif _lost(d, obs.width_after_lift_m, cfg):
                events.append(PhysicalEvent(FailureType.DROP.value, Phase.LIFT,
                                            "object lost during the lift after lift-off",
                                            target_id))
                phi["grip_security"] = 0.0
                m["static_margin"] = 1.0
            elif not math.isnan(obs.width_after_lift_m):
                success = True
                m["static_margin"] = 1.0
    values = np.array([phi[n] for n in QUALITY_FACTOR_NAMES])
    quality = quality_score(values, QualityParams().weights if weights is None else weights)
    return AttemptOutcome(success=success, quality=float(quality), phi=values, events=events,
                          phase_reached=obs.phase_reached, measurements=m,
                          duration_s=obs.duration_s)


def is_system_error(code: int) -> bool:
    """A planning error caused by the set-up (state, frames, names), not by the grasp."""
    return int(code) in SYSTEM_ERROR_CODES


__all__ = [
    "MoveItObservation", "is_system_error", "MOVEIT_ERROR_CODES", "moveit_error_name",
    "outcome_from_observation",
]
