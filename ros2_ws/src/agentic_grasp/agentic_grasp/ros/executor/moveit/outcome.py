"""What the MoveIt backend measured in one attempt (:class:`MoveItObservation`), MoveIt
error codes by name, and that record as the arm's observation both arms report
(:func:`arm_observation`): the planner diagnoses it with the one diagnosis it uses for the
simulator too (core/planner/recovery/diagnosis.py). No ROS or MoveIt import.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional


from agentic_grasp.core.arm.observation import ArmObservation
from agentic_grasp.core.types import Phase
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


def arm_observation(obs: MoveItObservation, grasp: Optional[Any] = None) -> ArmObservation:
    """What the MoveIt backend measured, as the one observation type both arms report
    (core/arm/observation.py); the planner diagnoses it as it diagnoses the simulator's.

    Planning errors carry their MoveItErrorCodes name and stage; an aborted motion its
    ExecutionStatus text; the finger widths come from franka_gripper/joint_states after
    closing, at lift-off and after the lift. Not wired yet: the external wrench
    (franka_robot_state_broadcaster's FrankaRobotState.o_f_ext_hat_k), reflexes with their
    pose (franka_msgs/Errors) and the closing trace, so those fields stay unknown (NaN) and
    the diagnosis falls back to the widths: no spill from the load, no turn out of the pads.
    """
    out = ArmObservation(commanded_width_m=obs.opening_m,
                         phase_reached=obs.phase_reached, duration_s=float(obs.duration_s))
    if grasp is not None:
        out.commanded_width_m = float(grasp.width)
        out.commanded_speed_mps = float(grasp.speed)
        out.commanded_force_n = float(grasp.force)
    if obs.planning_error is not None:
        out.planning_error = (f"{moveit_error_name(obs.planning_error)} at the "
                              f"{obs.planning_stage} pose")
        return out
    if obs.execution_failure:
        out.execution_error = f"{obs.execution_stage} motion stopped: {obs.execution_failure}"
        return out
    if obs.grasp_action_ok is not None:
        out.is_grasped = bool(obs.grasp_action_ok)
        out.width_at_contact_m = obs.width_after_close_m
        out.width_after_close_m = obs.width_after_close_m
        out.width_at_liftoff_m = obs.width_after_liftoff_m
        out.width_after_lift_m = obs.width_after_lift_m
    return out


def is_system_error(code: int) -> bool:
    """A planning error caused by the set-up (state, frames, names), not by the grasp."""
    return int(code) in SYSTEM_ERROR_CODES


__all__ = ["MOVEIT_ERROR_CODES", "MoveItObservation", "arm_observation", "is_system_error",
           "moveit_error_name"]
