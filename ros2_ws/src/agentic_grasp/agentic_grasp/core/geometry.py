"""Rigid-body geometry in one place: angles, yaw rotations, quaternions, object frames.

Conventions (shared by the simulator, the knowledge base, the planner and the MoveIt
backend):

- Angles are radians; :func:`wrap_angle` maps a direction to [-pi, pi), and
  :func:`wrap_half_pi` maps the angle of an *axis* (period pi) to [-pi/2, pi/2).
- A yaw is a rotation about the world's z axis (up); :func:`yaw_matrix` is R_z(yaw).
- Quaternions are (x, y, z, w), geometry_msgs' order, unit length.
- The object frame of a perceived object is its bounding-box centre with its yaw: a
  stored grasp is in that frame (paper Sec. III-A; see
  :mod:`agentic_grasp.core.retrieval.knowledge_base`) because world positions of a past
  scene mean nothing in a new one. :func:`grasp_to_world` places an object-frame grasp on
  an object of the current scene, :func:`grasp_to_object_frame` does the reverse.

Pure numpy; imports nothing from ROS.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Sequence, Tuple, Union

import numpy as np

from agentic_grasp.core.types import GraspParameters, ObjectInstance


# ---------------------------------------------------------------------------- angles
def wrap_angle(angle: float) -> float:
    """The same direction in [-pi, pi)."""
    return float((angle + math.pi) % (2.0 * math.pi) - math.pi)


def wrap_half_pi(angle: float) -> float:
    """Angle of an axis (period pi) in [-pi/2, pi/2)."""
    return (angle + math.pi / 2.0) % math.pi - math.pi / 2.0


# ---------------------------------------------------------------------------- rotations
def yaw_matrix(yaw: float) -> np.ndarray:
    """R_z(yaw): the rotation by ``yaw`` about the z axis."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rpy_to_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF convention: R = Rz(yaw) Ry(pitch) Rx(roll) (fixed axes x, y, z)."""
    cr, sr, cp, sp = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


# ---------------------------------------------------------------------------- quaternions
def yaw_quaternion(yaw: float) -> Tuple[float, float, float, float]:
    """The quaternion (x, y, z, w) of R_z(yaw)."""
    return (0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0))


def quaternion_yaw(x: float, y: float, z: float, w: float) -> float:
    """The yaw (rotation about z) of a quaternion; exact for a pure yaw rotation."""
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def matrix_to_quaternion(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (x, y, z, w) of a rotation matrix, w >= 0 (Shepperd's method)."""
    R = np.asarray(R, dtype=float)[:3, :3]
    trace = R[0, 0] + R[1, 1] + R[2, 2]
    if trace > 0.0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = [(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s]
    elif R[0, 0] > R[1, 1] and R[0, 0] > R[2, 2]:
        s = 2.0 * math.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        q = [0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s, (R[2, 1] - R[1, 2]) / s]
    elif R[1, 1] > R[2, 2]:
        s = 2.0 * math.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        q = [(R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s, (R[0, 2] - R[2, 0]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        q = [(R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s, (R[1, 0] - R[0, 1]) / s]
    q = np.array(q)
    q /= np.linalg.norm(q)
    return -q if q[3] < 0.0 else q


def quaternion_to_matrix(q: Sequence[float]) -> np.ndarray:
    """Rotation matrix of a quaternion (x, y, z, w); normalises first."""
    x, y, z, w = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


# ---------------------------------------------------------------------------- object frame
def grasp_to_world(grasp: Union[GraspParameters, Mapping[str, Any]],
                   obj: ObjectInstance) -> GraspParameters:
    """An object-frame grasp (or its dict) placed on ``obj`` (its bbox centre and yaw)."""
    local = grasp if isinstance(grasp, GraspParameters) else GraspParameters.from_dict(grasp)
    R = yaw_matrix(obj.yaw)
    return local.copy(position=np.asarray(obj.position, dtype=float) + R @ local.position,
                      approach=R @ local.approach,
                      wrist_yaw=wrap_angle(local.wrist_yaw + obj.yaw))


def grasp_to_object_frame(grasp: GraspParameters, obj: ObjectInstance) -> Dict[str, Any]:
    """The world-frame ``grasp`` on ``obj`` expressed in the object frame (a record's grasp)."""
    R = yaw_matrix(obj.yaw)
    local = grasp.copy(position=R.T @ (grasp.position - np.asarray(obj.position, dtype=float)),
                       approach=R.T @ grasp.approach,
                       wrist_yaw=wrap_angle(grasp.wrist_yaw - obj.yaw))
    return local.to_dict()


__all__ = ["grasp_to_object_frame", "grasp_to_world", "matrix_to_quaternion",
           "quaternion_to_matrix", "quaternion_yaw", "rpy_to_matrix", "wrap_angle",
           "wrap_half_pi", "yaw_matrix", "yaw_quaternion"]
