"""The planner's goal log: one GoalLog message per GraspObject goal, on ``planner/goal_log``.

Neither a goal's configuration nor its final result travel on a topic otherwise (the goal and
result of an action are service calls, which rosbag2 does not record), so a recording could
not say under which configuration a goal ran or how it ended. The planner publishes this
message once per goal, when its result is set, refused goals included.

QoS: reliable and transient local (latched) with a history of :data:`HISTORY` goals, so a
recorder or a ``show`` started between goals still receives the goals before it, not only
the last one.
"""
from __future__ import annotations

from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from agentic_grasp_interfaces.msg import GoalLog

TOPIC = "planner/goal_log"
#: Goals a late subscriber receives (a session of a few hundred goals keeps its last 100).
HISTORY = 100
QOS = QoSProfile(depth=HISTORY, history=HistoryPolicy.KEEP_LAST,
                 reliability=ReliabilityPolicy.RELIABLE,
                 durability=DurabilityPolicy.TRANSIENT_LOCAL)


def goal_log_msg(goal_id: str, instruction: str, requested_configuration: str,
                 configuration: str, start_stamp: Any, end_stamp: Any, result: Any) -> Any:
    """The GoalLog of one goal from its GraspObject result (attempts are counted, not
    copied: they are on ``planner/attempts``)."""
    return GoalLog(version=GoalLog.VERSION, goal_id=goal_id, instruction=instruction,
                   requested_configuration=requested_configuration,
                   configuration=configuration, start_stamp=start_stamp,
                   end_stamp=end_stamp, success=bool(result.success),
                   error_code=int(result.error_code), message=str(result.message),
                   grasped_ids=list(result.grasped_ids),
                   attempt_count=len(result.attempts))
