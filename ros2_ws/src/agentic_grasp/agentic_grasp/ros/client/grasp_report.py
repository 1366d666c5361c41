"""A GraspObject result as the command line shows it: JSON-ready dicts and an exit status.

``agentic-grasp grasp`` prints these; they read the action's messages (their constants name
the grasp types and error codes), so they live on the ROS side and the command imports them.
"""
from __future__ import annotations

from typing import Any, Dict

from agentic_grasp_interfaces.action import GraspObject
from agentic_grasp_interfaces.msg import GraspParameters as GraspMsg

GRASP_FAILED_EXIT = 1
ERROR_EXIT = 2


def attempt_summary(record: Any) -> Dict[str, Any]:
    """The essentials of one AttemptRecord, JSON-ready."""
    g = record.grasp
    types = {GraspMsg.GRASP_POWER: "power", GraspMsg.GRASP_PINCH: "pinch",
             GraspMsg.GRASP_SIDE: "side"}
    d = record.diagnosis
    return {"subgoal": int(record.subgoal_index), "target": record.target_id,
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


def result_report(result: Any) -> Dict[str, Any]:
    codes = {v: k for k, v in vars(GraspObject.Result).items()
             if k.startswith("ERROR_") and isinstance(v, int)}
    return {"success": bool(result.success),
            "error_code": codes.get(result.error_code, str(result.error_code)),
            "message": result.message, "grasped_ids": list(result.grasped_ids),
            "total_time_s": round(float(result.total_time_s), 3),
            "attempts": [attempt_summary(a) for a in result.attempts]}


def exit_code(result: Any) -> int:
    if result.success:
        return 0
    return GRASP_FAILED_EXIT if result.error_code == GraspObject.Result.ERROR_GRASP_FAILED \
        else ERROR_EXIT
