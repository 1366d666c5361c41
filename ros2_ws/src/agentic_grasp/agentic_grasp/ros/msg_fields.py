"""Readers of message fields that need no ROS install: rclpy messages and the objects
rosbags deserialises alike (duck-typed), for conversions.py and for reading bags on a
machine without ROS (ros/recording/replay.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from agentic_grasp.core.types import Phase, PhysicalEvent


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


__all__ = ["event_from_msg", "float32_decimal", "from_xyz"]
