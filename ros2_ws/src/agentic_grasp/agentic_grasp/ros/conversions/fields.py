"""Message fields every converter shares: vectors, points, yaw quaternions and
the message enums (grasp type, object state) by name.
"""
from __future__ import annotations

from typing import Sequence

from geometry_msgs.msg import Point, Quaternion, Vector3

from agentic_grasp.core import geometry
from agentic_grasp.core.types import GraspType, ObjectState
from agentic_grasp_interfaces.msg import GraspParameters as GraspMsg, ObjectObservation as ObjectMsg


_GRASP_TYPES = {GraspType.POWER: GraspMsg.GRASP_POWER, GraspType.PINCH: GraspMsg.GRASP_PINCH,
                GraspType.SIDE: GraspMsg.GRASP_SIDE}
_GRASP_TYPES_INV = {v: k for k, v in _GRASP_TYPES.items()}
_STATES = {ObjectState.EMPTY: ObjectMsg.STATE_EMPTY, ObjectState.FILLED: ObjectMsg.STATE_FILLED,
           ObjectState.STACKED: ObjectMsg.STATE_STACKED}
_STATES_INV = {v: k for k, v in _STATES.items()}


def vec3(values: Sequence[float]) -> Vector3:
    return Vector3(x=float(values[0]), y=float(values[1]), z=float(values[2]))


def point(values: Sequence[float]) -> Point:
    return Point(x=float(values[0]), y=float(values[1]), z=float(values[2]))


def yaw_quaternion(yaw: float) -> Quaternion:
    x, y, z, w = geometry.yaw_quaternion(yaw)
    return Quaternion(x=x, y=y, z=z, w=w)


def quaternion_yaw(q: Quaternion) -> float:
    return geometry.quaternion_yaw(q.x, q.y, q.z, q.w)
