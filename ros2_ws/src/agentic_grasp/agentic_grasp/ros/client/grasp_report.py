"""A GraspObject result as the command line shows it: JSON-ready dicts and an exit status.

``agentic-grasp grasp`` prints these; they read the action's messages (their constants name
the grasp types and error codes), so they live on the ROS side and the command imports them.

The exit status follows the README: 0 the goal succeeded, 1 the goal ran and failed (the
grasp failed, the target was not found, or it is beyond the hand), 2 a usage or system error
(the goal refused as invalid, perception or a peer failed, a timeout, a cancel).
"""
from __future__ import annotations

from typing import Any, Dict

from agentic_grasp.ros.conversions.records import VIEW_LABEL, is_view_record
from agentic_grasp_interfaces.action import GraspObject
from agentic_grasp_interfaces.msg import GraspParameters as GraspMsg

GRASP_FAILED_EXIT = 1
ERROR_EXIT = 2

#: The error codes of a goal that ran and failed: what the robot tried or found did not
#: get the object (exit 1, "FAILED"). Every other code but ERROR_NONE is an error (exit 2).
GOAL_FAILED_CODES = frozenset({GraspObject.Result.ERROR_GRASP_FAILED,
                               GraspObject.Result.ERROR_TARGET_NOT_FOUND,
                               GraspObject.Result.ERROR_BEYOND_HAND_LIMITS})


def view_summary(record: Any) -> Dict[str, Any]:
    """An AttemptRecord of a wrist-camera view (it grasps nothing: no grasp type, force or
    width), JSON-ready: which occluder it looked behind, from where, and whether the target
    was seen."""
    occluder, _, side = record.candidate[len(VIEW_LABEL):].partition("'s ")
    return {"kind": "view", "subgoal": int(record.subgoal_index), "view": int(record.attempt),
            "occluder": occluder, "side": side, "reached": bool(record.collision_free),
            "target_seen": bool(record.outcome.success), "note": record.clearance_nearest,
            "duration_s": round(float(record.duration_s), 3)}


def attempt_summary(record: Any) -> Dict[str, Any]:
    """The essentials of one AttemptRecord, JSON-ready (a view: :func:`view_summary`)."""
    if is_view_record(record):
        return view_summary(record)
    g = record.grasp
    types = {GraspMsg.GRASP_POWER: "power", GraspMsg.GRASP_PINCH: "pinch",
             GraspMsg.GRASP_SIDE: "side"}
    d = record.diagnosis
    return {"kind": "grasp", "subgoal": int(record.subgoal_index),
            "target": record.target_id,
            "attempt": int(record.attempt), "retry_level": int(record.retry_level),
            "grasp": {"type": types.get(g.grasp_type, str(g.grasp_type)),
                      "force_n": round(float(g.grip_force), 2),
                      "width_mm": round(float(g.gripper_width) * 1e3, 1),
                      "position": [round(v, 4) for v in (g.position.x, g.position.y,
                                                         g.position.z)]},
            "success": bool(record.outcome.success),
            "quality": round(float(record.outcome.quality), 3),
            "events": list(record.outcome.events), "failure_type": d.failure_type,
            "correction": d.correction, "duration_s": round(float(record.duration_s), 3)}


def outcome_word(result: Any) -> str:
    """SUCCESS, FAILED (the goal ran and failed: exit 1) or ERROR (exit 2)."""
    return {0: "SUCCESS", GRASP_FAILED_EXIT: "FAILED"}.get(exit_code(result), "ERROR")


def result_report(result: Any) -> Dict[str, Any]:
    codes = {v: k for k, v in vars(GraspObject.Result).items()
             if k.startswith("ERROR_") and isinstance(v, int)}
    return {"success": bool(result.success), "outcome": outcome_word(result),
            "error_code": codes.get(result.error_code, str(result.error_code)),
            "message": result.message, "grasped_ids": list(result.grasped_ids),
            "total_time_s": round(float(result.total_time_s), 3),
            "attempts": [attempt_summary(a) for a in result.attempts]}


def exit_code(result: Any) -> int:
    if result.success:
        return 0
    return GRASP_FAILED_EXIT if result.error_code in GOAL_FAILED_CODES else ERROR_EXIT
