"""Everything the MoveIt arm backend computes, without MoveIt: poses, goals, scene, outcomes.

:mod:`agentic_grasp.ros.executor.moveit.arm` talks to moveit_py and the franka_ros2 gripper; this
module holds the arithmetic and the decisions it needs, so they are unit-tested on machines
without MoveIt (it imports numpy and the project core only, no ROS package):

- the motion of one attempt (:func:`plan_grasp_motion`): pre-grasp pose at
  ``approach_height`` behind the grasp point, the straight descent, a short lift-off and the
  vertical lift, as poses of the planning link (the TCP pose comes from
  :meth:`PandaKinematics.tcp_pose`, the same frame the simulator uses);
- the gripper goals (:func:`gripper_open_goal`, :func:`gripper_grasp_goal`): franka_msgs
  ``Move`` (width, speed) and ``Grasp`` (width, epsilon.inner/outer, speed, force), with the
  expected width taken from the perceived target;
- the planning scene (:func:`scene_collision_objects`): the table and the perceived
  neighbours as boxes, cylinders and spheres (``shape_msgs/SolidPrimitive`` conventions);
- what happened, as an :class:`AttemptOutcome` in the paper's failure taxonomy
  (:func:`outcome_from_observation`), and what a cancel must do (:func:`cancel_plan`).

Failure mapping (events, so the planner's ClassifyFailure reads them first):

===============================================  ==========================================
observation                                      event (FailureType)
===============================================  ==========================================
no plan to the pre-grasp or grasp pose           unreachable_pose (approach)
  (NO_IK_SOLUTION, PLANNING_FAILED, GOAL_*)
goal pose in collision (GOAL_IN_COLLISION)       collision (approach)
Cartesian descent/lift below ``min_cartesian``   unreachable_pose (approach) / collision (lift)
trajectory execution aborted (Franka reflex)     collision (phase of the motion)
Grasp action failed, fingers on something        width_mismatch (close), opening margin kept
Grasp action failed, fingers closed on nothing   position_error (close), as the simulator
object lost during the lift-off segment          slip (lift): static load not held
object lost later in the lift                    drop (lift): held statically, lost in motion
===============================================  ==========================================

Observed quality: a real robot has no Eq. 2 model, so phi is the observation itself, one
factor per stage (1 where the stage went right, 0 where it failed, 1 where it cannot be
observed) and Q = sum w_k phi_k with the configured Eq. 2 weights (the caller passes them;
the paper's by default); the events carry the diagnosis.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.geometry import (matrix_to_quaternion, quaternion_to_matrix, rpy_to_matrix,
                                         yaw_quaternion)
from agentic_grasp.core.arm.kinematics import PandaKinematics
from agentic_grasp.core.arm.closing_axis import closing_axis
from agentic_grasp.core.types import GRIPPER_MAX_WIDTH_M, GraspParameters, ObjectInstance, Shape
from agentic_grasp.ros.executor.moveit.config import MoveItBackendConfig


LOG = logging.getLogger(__name__)


#: shape_msgs/msg/SolidPrimitive type constants.
SOLID_BOX, SOLID_SPHERE, SOLID_CYLINDER = 1, 2, 3


@dataclass(frozen=True)
class Pose:
    """A pose in the planning frame: position (m) and quaternion (x, y, z, w)."""

    position: Tuple[float, float, float]
    orientation: Tuple[float, float, float, float]

    @classmethod
    def from_matrix(cls, T: np.ndarray) -> "Pose":
        T = np.asarray(T, dtype=float)
        return cls(tuple(float(v) for v in T[:3, 3]),
                   tuple(float(v) for v in matrix_to_quaternion(T[:3, :3])))

    def matrix(self) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = quaternion_to_matrix(self.orientation)
        T[:3, 3] = self.position
        return T


# ---------------------------------------------------------------------------- motion
@dataclass
class GraspMotion:
    """The poses of one attempt, for the planning link (ik_link) in the planning frame."""

    pre_grasp: Pose
    grasp: Pose
    descent: List[Pose]          # waypoints after pre_grasp, ending at grasp
    liftoff: List[Pose]          # first lift segment (slip check after it)
    lift: List[Pose]             # rest of the lift, ending lift_height_m above the grasp
    tcp_pre_grasp: np.ndarray    # 4x4 TCP poses, for logs and tests
    tcp_grasp: np.ndarray
    descent_velocity_scaling: float
    lift_velocity_scaling: float


def tcp_to_link_pose(T_tcp: np.ndarray, cfg: MoveItBackendConfig) -> Pose:
    """Pose of the ik_link that puts the TCP at ``T_tcp`` (T_link = T_tcp inv(T_link_tcp))."""
    return Pose.from_matrix(np.asarray(T_tcp, dtype=float) @ np.linalg.inv(cfg.link_to_tcp()))


def _segment(T_from: np.ndarray, offset: np.ndarray, spacing: float,
             cfg: MoveItBackendConfig) -> List[Pose]:
    """Waypoints moving the TCP by ``offset`` (world) at fixed orientation, end included."""
    length = float(np.linalg.norm(offset))
    n = max(1, int(math.ceil(length / spacing - 1e-9)))
    poses = []
    for k in range(1, n + 1):
        T = np.array(T_from, dtype=float)
        T[:3, 3] = T_from[:3, 3] + offset * (k / n)
        poses.append(tcp_to_link_pose(T, cfg))
    return poses


def velocity_scaling(speed_mps: float, cfg: MoveItBackendConfig) -> float:
    """Pilz LIN scales the Cartesian limits: factor = speed / max_trans_vel, in (0, 1]."""
    return float(min(1.0, max(1e-3, speed_mps / cfg.max_trans_vel_mps)))


def plan_grasp_motion(grasp: GraspParameters, cfg: MoveItBackendConfig) -> GraspMotion:
    """Pre-grasp, straight descent along the approach, lift-off and vertical lift.

    The TCP orientation is :meth:`PandaKinematics.tcp_pose` (z = approach, y = closing axis),
    so the real arm holds the hand exactly as the simulator scores it.
    """
    a = np.asarray(grasp.approach, dtype=float)
    T_grasp = PandaKinematics.tcp_pose(grasp.position, a, grasp.wrist_yaw)
    T_pre = PandaKinematics.tcp_pose(grasp.position - a * grasp.approach_height, a,
                                     grasp.wrist_yaw)
    descent = (_segment(T_pre, a * grasp.approach_height, cfg.waypoint_spacing_m, cfg)
               if grasp.approach_height > 0.0 else [tcp_to_link_pose(T_grasp, cfg)])
    up = np.array([0.0, 0.0, 1.0])
    liftoff = (_segment(T_grasp, up * cfg.liftoff_height_m, cfg.waypoint_spacing_m, cfg)
               if cfg.liftoff_height_m > 0.0 else [])
    T_liftoff = np.array(T_grasp)
    T_liftoff[2, 3] += cfg.liftoff_height_m
    lift = _segment(T_liftoff, up * (cfg.lift_height_m - cfg.liftoff_height_m),
                    cfg.waypoint_spacing_m, cfg)
    scaling = velocity_scaling(grasp.speed, cfg)
    return GraspMotion(pre_grasp=tcp_to_link_pose(T_pre, cfg),
                       grasp=tcp_to_link_pose(T_grasp, cfg), descent=descent, liftoff=liftoff,
                       lift=lift, tcp_pre_grasp=T_pre, tcp_grasp=T_grasp,
                       descent_velocity_scaling=scaling, lift_velocity_scaling=scaling)


def dropoff_pose(cfg: MoveItBackendConfig) -> Pose:
    """Where a held object is released: top-down TCP at ``dropoff_position``."""
    T = PandaKinematics.tcp_pose(cfg.dropoff_position, (0.0, 0.0, -1.0), 0.0)
    return tcp_to_link_pose(T, cfg)


# ---------------------------------------------------------------------------- gripper
@dataclass(frozen=True)
class GripperMoveGoal:
    """franka_msgs/action/Move: width (m), speed (m/s)."""

    width: float
    speed: float


@dataclass(frozen=True)
class GripperGraspGoal:
    """franka_msgs/action/Grasp: succeeds when width - inner < d < width + outer."""

    width: float
    epsilon_inner: float
    epsilon_outer: float
    speed: float
    force: float

    @property
    def window(self) -> Tuple[float, float]:
        return self.width - self.epsilon_inner, self.width + self.epsilon_outer


def object_extent_along(obj: ObjectInstance, axis: Sequence[float]) -> float:
    """Width of the object's primitive measured along a (unit) closing axis (m).

    Box: the support width sum_i |axis . e_i| s_i. Cylinder (axis = object z): the height
    part along z plus the diameter across. Sphere: the diameter.
    """
    u = np.asarray(axis, dtype=float)
    u = u / np.linalg.norm(u)
    sx, sy, sz = (float(v) for v in obj.size)
    if obj.shape == Shape.SPHERE:
        return max(sx, sy, sz)
    if obj.shape == Shape.CYLINDER:
        radial = math.sqrt(max(0.0, 1.0 - u[2] * u[2]))
        return abs(u[2]) * sz + radial * max(sx, sy)
    c, s = math.cos(obj.yaw), math.sin(obj.yaw)
    ex, ey = np.array([c, s, 0.0]), np.array([-s, c, 0.0])
    return abs(float(u @ ex)) * sx + abs(float(u @ ey)) * sy + abs(float(u[2])) * sz


def gripper_open_goal(grasp: GraspParameters, cfg: MoveItBackendConfig) -> GripperMoveGoal:
    """Open to the commanded width before the approach (Move action)."""
    width = min(max(grasp.width, 0.0), GRIPPER_MAX_WIDTH_M)
    return GripperMoveGoal(width=width, speed=min(cfg.gripper_open_speed_mps,
                                                  cfg.gripper_max_speed_mps))


def gripper_grasp_goal(grasp: GraspParameters, target: Optional[ObjectInstance],
                       cfg: MoveItBackendConfig) -> GripperGraspGoal:
    """The Grasp goal: expected width from the perceived target, force from the grasp.

    With a perceived target the window is its extent along the closing axis +- the epsilon
    (never above the opening); without one it accepts anything between min_object_width_m
    and the opening, so only closing on nothing fails.
    """
    opening = min(max(grasp.width, 0.0), GRIPPER_MAX_WIDTH_M)
    speed = min(cfg.gripper_close_speed_mps, cfg.gripper_max_speed_mps)
    if target is not None:
        axis = closing_axis(grasp.approach, grasp.wrist_yaw)
        expected = min(object_extent_along(target, axis), opening)
        inner = min(cfg.grasp_epsilon_m, max(0.0, expected - cfg.min_object_width_m))
        return GripperGraspGoal(width=expected, epsilon_inner=inner,
                                epsilon_outer=cfg.grasp_epsilon_m, speed=speed,
                                force=float(grasp.force))
    lo = min(cfg.min_object_width_m, opening)
    centre = 0.5 * (lo + opening)
    return GripperGraspGoal(width=centre, epsilon_inner=centre - lo,
                            epsilon_outer=opening - centre + cfg.grasp_epsilon_m, speed=speed,
                            force=float(grasp.force))


def finger_width(names: Sequence[str], positions: Sequence[float],
                 joint_names: Sequence[str]) -> Optional[float]:
    """Gripper width from a JointState: the sum of the two finger joints, None if absent."""
    index = {n: i for i, n in enumerate(names)}
    if not all(j in index for j in joint_names):
        return None
    return float(sum(positions[index[j]] for j in joint_names))


# ---------------------------------------------------------------------------- scene
@dataclass(frozen=True)
class CollisionObjectSpec:
    """One moveit_msgs/CollisionObject with one SolidPrimitive."""

    id: str
    primitive_type: int                 # SOLID_BOX / SOLID_CYLINDER / SOLID_SPHERE
    dimensions: Tuple[float, ...]       # BOX (x, y, z); CYLINDER (height, radius); SPHERE (r,)
    pose: Pose
    frame_id: str


TABLE_ID = "table"


def table_collision_object(cfg: MoveItBackendConfig) -> CollisionObjectSpec:
    """The table as a box whose top face is the plane z = 0."""
    sx, sy, thickness = (float(v) for v in cfg.table_size)
    cx, cy = (float(v) for v in cfg.table_center_xy)
    return CollisionObjectSpec(TABLE_ID, SOLID_BOX, (sx, sy, thickness),
                               Pose((cx, cy, -thickness / 2.0), (0.0, 0.0, 0.0, 1.0)),
                               cfg.planning_frame)


def object_collision_object(obj: ObjectInstance, cfg: MoveItBackendConfig) -> CollisionObjectSpec:
    """A perceived object as its primitive, padded, rotated by its yaw about z."""
    pad = cfg.object_padding_m
    sx, sy, sz = (float(v) + pad for v in obj.size)
    q = yaw_quaternion(obj.yaw)
    pose = Pose(tuple(float(v) for v in obj.position), q)
    if obj.shape == Shape.CYLINDER:
        return CollisionObjectSpec(obj.id, SOLID_CYLINDER, (sz, max(sx, sy) / 2.0), pose,
                                   cfg.planning_frame)
    if obj.shape == Shape.SPHERE:
        return CollisionObjectSpec(obj.id, SOLID_SPHERE, (max(sx, sy, sz) / 2.0,), pose,
                                   cfg.planning_frame)
    return CollisionObjectSpec(obj.id, SOLID_BOX, (sx, sy, sz), pose, cfg.planning_frame)


def scene_collision_objects(objects: Sequence[ObjectInstance], target_id: str,
                            cfg: MoveItBackendConfig) -> List[CollisionObjectSpec]:
    """Table plus every perceived object except the target (the fingers must reach it)."""
    out = [table_collision_object(cfg)]
    out += [object_collision_object(o, cfg) for o in objects if o.id != target_id]
    return out


@dataclass(frozen=True)
class CancelPlan:
    """What a cancel does: stop the arm; never open a gripper that may hold the object."""

    stop_motion: bool
    cancel_gripper_goal: bool
    open_gripper: bool


def cancel_plan(holding: bool, gripper_goal_active: bool) -> CancelPlan:
    """Stop motion always; cancel a running gripper goal (franka_gripper stops the fingers);
    open only when nothing can be in the hand (not holding and no grasp running)."""
    return CancelPlan(stop_motion=True, cancel_gripper_goal=gripper_goal_active,
                      open_gripper=not holding and not gripper_goal_active)


# ---------------------------------------------------------------------------- start state
def rest_start_velocities(measured: Mapping[str, float]) -> Tuple[Dict[str, float], float]:
    """Velocities for a plan's start state: all zero, and the largest measured |v|.

    Pilz refuses a start state with any group joint at |v| >= 1e-8 rad/s
    (moveit2 2.12.4 pilz_industrial_motion_planner/src/trajectory_generator.cpp:147-151,
    ``VELOCITY_TOLERANCE`` in trajectory_generator.hpp:275; error INVALID_ROBOT_STATE, -17),
    and ``set_start_state_to_current_state()`` plans from the measured velocities
    (moveit_cpp/src/planning_component.cpp:341-347 copies the current RobotState), which
    are sensor noise, not 0, on an arm at rest. Every plan here starts after the previous
    motion finished, so the arm is at rest: the caller zeroes the velocities and reports
    the measured maximum when it exceeds ``at_rest_velocity_radps``.
    """
    values = [abs(float(v)) for v in measured.values() if not math.isnan(float(v))]
    return dict.fromkeys(measured, 0.0), (max(values) if values else 0.0)


# ---------------------------------------------------------------------------- scene sync
#: moveit_msgs/msg/CollisionObject operation constants.
COLLISION_ADD, COLLISION_REMOVE = 0, 1


def scene_diff(previous_ids: Sequence[str], specs: Sequence[CollisionObjectSpec]
               ) -> List[Tuple[int, str, Optional[CollisionObjectSpec]]]:
    """(operation, id, spec) that turn the last scene into ``specs``.

    Objects no longer perceived are removed; every current one is ADDed, which replaces an
    object of the same id (PlanningScene::processCollisionObjectAdd). The same list goes to
    MoveItPy's own monitor and, for ``cartesian_method: service``, to move_group's
    /apply_planning_scene (a default move_group capability, move_group.cpp:64-76):
    move_group's /compute_cartesian_path checks collisions against its own scene
    (cartesian_path_service_capability.cpp:158-171), which never sees MoveItPy's.
    """
    current = {s.id for s in specs}
    ops: List[Tuple[int, str, Optional[CollisionObjectSpec]]] = [
        (COLLISION_REMOVE, old, None) for old in previous_ids if old not in current]
    ops += [(COLLISION_ADD, s.id, s) for s in specs]
    return ops


# ---------------------------------------------------------------------------- start-up
#: MoveItCpp's message when no complete robot state came in time (moveit2 2.12.4
#: moveit_ros/planning/moveit_cpp/src/moveit_cpp.cpp:58).
PSM_START_FAILURE = "Unable to configure planning scene monitor"


class JointStatesMissing(RuntimeError):
    """No JointState arrived on the robot's joint state topic in time."""


def is_transient_start_failure(exc: BaseException) -> bool:
    """A start-up failure that waiting can cure: no joint states yet, or not all joints."""
    return isinstance(exc, JointStatesMissing) or PSM_START_FAILURE in str(exc)


def start_with_retries(start: Callable[[], Any], attempts: int, retry_s: float,
                       on_failure: Callable[[int, BaseException], None],
                       sleep: Callable[[float], None] = None,
                       retryable: Callable[[BaseException], bool] = is_transient_start_failure
                       ) -> Any:
    """Call ``start()`` until it returns; a transient RuntimeError is reported and retried.

    MoveItCpp throws std::runtime_error("Unable to configure planning scene monitor") when
    no complete joint state arrives within wait_for_initial_state_timeout
    (moveit_ros/planning/moveit_cpp/src/moveit_cpp.cpp:56-60, 117-121); pybind11 raises it
    as RuntimeError. Uncaught, it ended the executor process. ``attempts`` 0 means keep
    trying (a robot driver may come up after the graph); otherwise the last error is
    raised as a ConfigError after ``attempts`` tries. Any other RuntimeError (a robot model
    that cannot be built, no planning pipeline) is a configuration error: reported once and
    raised as a ConfigError at once.
    """
    sleep = sleep or time.sleep
    attempt = 0
    while True:
        attempt += 1
        try:
            return start()
        except RuntimeError as exc:
            on_failure(attempt, exc)
            if not retryable(exc):
                raise ConfigError(f"MoveItPy cannot start: {exc}") from exc
            if attempts and attempt >= attempts:
                raise ConfigError(f"MoveItPy did not start after {attempt} attempt(s): "
                                  f"{exc}") from exc
            sleep(retry_s)


__all__ = [
    "cancel_plan", "CancelPlan", "COLLISION_ADD", "COLLISION_REMOVE", "CollisionObjectSpec",
    "dropoff_pose", "finger_width", "GraspMotion", "gripper_grasp_goal", "gripper_open_goal",
    "GripperGraspGoal", "GripperMoveGoal", "is_transient_start_failure", "JointStatesMissing",
    "matrix_to_quaternion", "object_collision_object", "object_extent_along", "plan_grasp_motion",
    "Pose", "PSM_START_FAILURE", "quaternion_to_matrix", "rest_start_velocities", "rpy_to_matrix",
    "scene_collision_objects", "scene_diff", "SOLID_BOX", "SOLID_CYLINDER", "SOLID_SPHERE",
    "start_with_retries", "table_collision_object", "TABLE_ID", "tcp_to_link_pose",
    "velocity_scaling",
]
