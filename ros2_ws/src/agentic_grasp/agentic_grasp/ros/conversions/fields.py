"""Message fields every converter shares: vectors, points, yaw quaternions, float32
decimals, the GraspEvent reader and the message enums by name.

The enums travel as the message's own constants (``GraspParameters.GRASP_PINCH``,
``ObjectObservation.STATE_FILLED``, ``SHAPE_CYLINDER``): the tables below name the constant
for each core value, and the number is read from the message class at hand, an rclpy class
in the nodes or the rosbags class a bag was decoded with in replay, so no code here or in
replay writes a code as a bare integer.

The readers (``*_from_msg`` in every concept module) are duck-typed: they read rclpy
messages and the objects rosbags deserialises alike, so the planner node and bag replay
read with the same functions. A field that older bags lack is read with ``getattr`` and
the default it had before the field existed.
"""
from __future__ import annotations

import array
import struct
from typing import Any, Dict, Mapping, Sequence, TypeVar

import numpy as np
from geometry_msgs.msg import Point, Quaternion, Vector3

from agentic_grasp.core import geometry
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.types import GraspType, ObjectState, Phase, PhysicalEvent, Shape

E = TypeVar("E")

#: GraspParameters.grasp_type: the core type -> the message constant's name.
GRASP_TYPE_NAMES: Dict[GraspType, str] = {
    GraspType.POWER: "GRASP_POWER", GraspType.PINCH: "GRASP_PINCH", GraspType.SIDE: "GRASP_SIDE"}
#: ObjectObservation.state.
STATE_NAMES: Dict[ObjectState, str] = {
    ObjectState.EMPTY: "STATE_EMPTY", ObjectState.FILLED: "STATE_FILLED",
    ObjectState.STACKED: "STATE_STACKED"}
#: ObjectObservation.shape (SHAPE_UNKNOWN is no core shape: None).
SHAPE_NAMES: Dict[Shape, str] = {
    Shape.BOX: "SHAPE_BOX", Shape.CYLINDER: "SHAPE_CYLINDER", Shape.SPHERE: "SHAPE_SPHERE"}


def enum_code(msg_type: Any, names: Mapping[E, str], value: E) -> int:
    """The number ``msg_type`` gives the constant named for ``value``."""
    return int(getattr(msg_type, names[value]))


def enum_value(msg: Any, names: Mapping[E, str], code: Any, field: str) -> E:
    """The core value whose constant in ``type(msg)`` is ``code``; ValidationError naming
    the field and the constants otherwise."""
    by_code = {int(getattr(type(msg), name)): value for value, name in names.items()}
    try:
        return by_code[int(code)]
    except (KeyError, TypeError, ValueError):
        known = ", ".join(f"{c} ({names[v]})" for c, v in sorted(by_code.items()))
        raise ValidationError(f"{field} {code!r} is not one of {known}") from None


def from_xyz(msg: Any) -> np.ndarray:
    """A Point / Vector3 as a float array."""
    return np.array([msg.x, msg.y, msg.z], dtype=float)


def float32_decimal(value: float) -> float:
    """The shortest decimal that a float32 field value stands for (0.30000001 -> 0.3)."""
    return float(np.format_float_positional(np.float32(value), unique=True, trim="-"))


def event_from_msg(msg: Any) -> PhysicalEvent:
    """A GraspEvent as the core event (an unknown phase reads as approach, as in text)."""
    phase = Phase(msg.phase) if msg.phase in Phase._value2member_map_ else Phase.APPROACH
    return PhysicalEvent(kind=msg.kind, phase=phase, detail=msg.detail, other_id=msg.other_id)


def vec3(values: Sequence[float]) -> Vector3:
    return Vector3(x=float(values[0]), y=float(values[1]), z=float(values[2]))


def point(values: Sequence[float]) -> Point:
    return Point(x=float(values[0]), y=float(values[1]), z=float(values[2]))


def yaw_quaternion(yaw: float) -> Quaternion:
    x, y, z, w = geometry.yaw_quaternion(yaw)
    return Quaternion(x=x, y=y, z=z, w=w)


def quaternion_yaw(q: Any) -> float:
    return geometry.quaternion_yaw(q.x, q.y, q.z, q.w)


def message_values(msg: Any) -> Any:
    """A message as nested plain values (dicts by field, lists), every float as its
    IEEE-754 bits so NaN equals NaN: what two messages are compared or keyed by. Not their
    CDR bytes: the serializer leaves the alignment padding between fields uninitialised, so
    two serialisations of one message can differ."""
    if hasattr(msg, "get_fields_and_field_types"):
        return {name: message_values(getattr(msg, name))
                for name in msg.get_fields_and_field_types()}
    if isinstance(msg, (list, tuple, np.ndarray, array.array)):     # sequences, arrays
        return [message_values(v) for v in msg]
    if isinstance(msg, (float, np.floating)):
        return struct.pack("<d", float(msg))
    if isinstance(msg, np.integer):
        return int(msg)
    return msg


def message_key(msg: Any) -> bytes:
    """A hashable key of a message's content (:func:`message_values`): equal messages, equal
    keys."""
    return repr(message_values(msg)).encode()
