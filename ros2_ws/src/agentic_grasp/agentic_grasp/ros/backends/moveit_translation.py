"""Everything the MoveIt arm backend computes, without MoveIt: poses, goals, scene, outcomes.

:mod:`agentic_grasp.ros.backends.moveit_arm` talks to moveit_py and the franka_ros2 gripper; this
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
import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.errors import ConfigError
# Rotation helpers live in core.geometry; re-exported here for moveit_arm and the tests.
from agentic_grasp.core.geometry import (matrix_to_quaternion, quaternion_to_matrix,
                                         rpy_to_matrix, yaw_quaternion)
from agentic_grasp.core.kinematics import PandaKinematics, closing_axis
from agentic_grasp.core.sim.params import QualityParams
from agentic_grasp.core.sim.quality import quality_score
from agentic_grasp.core.types import (
    GRIPPER_MAX_WIDTH_M, QUALITY_FACTOR_NAMES, AttemptOutcome, FailureType, GraspParameters,
    ObjectInstance, Phase, PhysicalEvent, Shape)

LOG = logging.getLogger(__name__)

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

#: shape_msgs/msg/SolidPrimitive type constants.
SOLID_BOX, SOLID_SPHERE, SOLID_CYLINDER = 1, 2, 3


def moveit_error_name(code: int) -> str:
    """Readable name of a MoveItErrorCodes value (for messages and events)."""
    return _CODE_NAMES.get(int(code), f"error {int(code)}")


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


# ---------------------------------------------------------------------------- config
def _d(text: str) -> Dict[str, str]:
    return {"description": text}


@dataclass
class MoveItBackendConfig:
    """Parameters ``moveit.*`` of the executor (config/executor.yaml).

    Defaults describe the Panda of moveit_resources_panda_moveit_config (mock hardware) with
    the franka_ros2 gripper actions; config/executor.yaml documents the FR3 values.
    """

    # --- MoveItPy and the robot description
    node_name: str = field(default="executor_moveit_py", metadata=_d(
        "Name of the rclcpp node MoveItPy creates inside the executor process"))
    robot_name: str = field(default="panda", metadata=_d(
        "Robot name given to MoveItConfigsBuilder"))
    moveit_config_package: str = field(default="moveit_resources_panda_moveit_config",
                                       metadata=_d("MoveIt config package (SRDF, kinematics, "
                                                   "joint limits, pipelines)"))
    urdf_file: str = field(default="config/panda.urdf.xacro", metadata=_d(
        "URDF/xacro, relative to the config package, absolute or package://<pkg>/<path>"))
    urdf_mappings: List[str] = field(default_factory=lambda: ["ros2_control_hardware_type:="
                                                              "mock_components"], metadata=_d(
        "xacro arguments for the URDF as name:=value strings"))
    srdf_file: str = field(default="config/panda.srdf", metadata=_d(
        "SRDF (or .srdf.xacro), relative to the config package, absolute or package://"))
    srdf_mappings: List[str] = field(default_factory=lambda: [""], metadata=_d(
        "xacro arguments for the SRDF as name:=value strings"))
    kinematics_file: str = field(default="config/kinematics.yaml", metadata=_d(
        "IK solver parameters (robot_description_kinematics)"))
    joint_limits_file: str = field(default="config/joint_limits.yaml", metadata=_d(
        "Joint limits with accelerations (robot_description_planning; Pilz needs them)"))
    controllers_file: str = field(default="config/moveit_controllers.yaml", metadata=_d(
        "MoveIt controller manager yaml (moveit_controller_manager and "
        "moveit_simple_controller_manager keys)"))
    moveit_py_file: str = field(default="moveit/moveit_py.yaml", metadata=_d(
        "MoveItPy options (scene monitor, pipelines, plan requests), under config/"))
    pilz_cartesian_limits_file: str = field(
        default="package://agentic_grasp/config/moveit/pilz_cartesian_limits.yaml",
        metadata=_d("Pilz Cartesian limits (MoveItConfigsBuilder.pilz_cartesian_limits); "
                    "franka_fr3_moveit_config ships none, so this package does"))
    # --- start-up
    joint_state_topic: str = field(default="/joint_states", metadata=_d(
        "JointState topic of the whole robot that MoveItPy's state monitor reads (a value "
        "other than /joint_states is passed to MoveItPy as a remapping of joint_states)"))
    startup_retry_s: float = field(default=5.0, metadata=_d(
        "Wait between attempts to start MoveItPy when no complete joint state came (s)"))
    startup_attempts: int = field(default=0, metadata=_d(
        "Attempts to start MoveItPy before the executor gives up (0: keep trying)"))
    # --- planning
    planning_group: str = field(default="panda_arm", metadata=_d("Planning group of the arm"))
    planning_frame: str = field(default="panda_link0", metadata=_d(
        "Frame of every pose and collision object (world = panda_link0 / fer_link0)"))
    ik_link: str = field(default="panda_link8", metadata=_d(
        "Link whose pose goals are sent (the group tip: panda_link8, or fer_hand_tcp)"))
    ik_link_to_tcp_xyz: List[float] = field(default_factory=lambda: [0.0, 0.0, 0.1034],
                                            metadata=_d("TCP position in the ik_link frame (m)"))
    ik_link_to_tcp_rpy: List[float] = field(default_factory=lambda: [0.0, 0.0, -math.pi / 4],
                                            metadata=_d("TCP orientation in the ik_link frame "
                                                        "(roll, pitch, yaw; rad)"))
    transit_request: str = field(default="transit", metadata=_d(
        "Plan-request namespace (moveit_py.yaml) for the free motion to the pre-grasp"))
    cartesian_method: str = field(default="pilz_lin", metadata=_d(
        "Straight-line motions: pilz_lin (moveit_py + Pilz LIN) or service "
        "(move_group /compute_cartesian_path)"))
    cartesian_request: str = field(default="cartesian", metadata=_d(
        "Plan-request namespace for Pilz LIN segments"))
    cartesian_service: str = field(default="/compute_cartesian_path", metadata=_d(
        "moveit_msgs/srv/GetCartesianPath service of move_group"))
    apply_planning_scene_service: str = field(default="/apply_planning_scene", metadata=_d(
        "moveit_msgs/srv/ApplyPlanningScene service of move_group: with cartesian_method "
        "service the table and neighbours are sent there too, since move_group checks "
        "/compute_cartesian_path against its own scene"))
    at_rest_velocity_radps: float = field(default=0.01, metadata=_d(
        "Largest measured joint speed still taken as an arm at rest when a plan starts; "
        "Pilz refuses any start velocity >= 1e-8, so the start state's velocities are "
        "zeroed and a faster arm is reported (rad/s)"))
    cartesian_max_step_m: float = field(default=0.005, metadata=_d(
        "Interpolation step of /compute_cartesian_path (m)"))
    min_cartesian_fraction: float = field(default=0.98, metadata=_d(
        "Below this fraction of a straight segment the segment counts as not reachable"))
    waypoint_spacing_m: float = field(default=0.02, metadata=_d(
        "Spacing of the descent and lift waypoints (m)"))
    max_trans_vel_mps: float = field(default=1.0, metadata=_d(
        "Pilz cartesian_limits.max_trans_vel: grasp.speed / this = velocity scaling"))
    transit_velocity_scaling: float = field(default=0.2, metadata=_d(
        "Velocity scaling of the free motion (0, 1]"))
    liftoff_height_m: float = field(default=0.02, metadata=_d(
        "First lift segment; an object lost here was not held statically (slip)"))
    lift_height_m: float = field(default=0.10, metadata=_d("Total vertical lift (m)"))
    dropoff_position: List[float] = field(default_factory=lambda: [0.35, -0.45, 0.20],
                                          metadata=_d("Where a held object is released before "
                                                      "the next attempt (TCP, top-down, m)"))
    # --- planning scene
    table_size: List[float] = field(default_factory=lambda: [0.6, 0.8, 0.04], metadata=_d(
        "Table box (x, y, thickness) with its top at z = 0 (m)"))
    table_center_xy: List[float] = field(default_factory=lambda: [0.5, 0.0], metadata=_d(
        "Table centre in the planning frame (m)"))
    object_padding_m: float = field(default=0.01, metadata=_d(
        "Added to each perceived neighbour's size (perception uncertainty, m)"))
    perception_topic: str = field(default="/perception/result", metadata=_d(
        "PerceptionResult topic that provides the scene objects and the target's width"))
    # --- gripper (franka_ros2 franka_gripper)
    gripper_interface: str = field(default="gripper_command", metadata=_d(
        "franka (franka_msgs Grasp/Move/Homing) or gripper_command "
        "(control_msgs GripperCommand, e.g. mock hardware)"))
    gripper_action_ns: str = field(default="/franka_gripper", metadata=_d(
        "Namespace of the franka_gripper actions grasp, move, homing (e.g. /fr3_gripper)"))
    gripper_command_action: str = field(default="/panda_hand_controller/gripper_cmd", metadata=_d(
        "control_msgs/action/GripperCommand action (gripper_interface gripper_command)"))
    gripper_joint_states: str = field(default="/joint_states", metadata=_d(
        "JointState topic of the two finger joints (width = their sum)"))
    gripper_joint_names: List[str] = field(default_factory=lambda: [
        "panda_finger_joint1", "panda_finger_joint2"], metadata=_d("Finger joint names"))
    gripper_open_speed_mps: float = field(default=0.1, metadata=_d("Move action speed (m/s)"))
    gripper_close_speed_mps: float = field(default=0.05, metadata=_d("Grasp action speed (m/s)"))
    gripper_max_speed_mps: float = field(default=0.1, metadata=_d(
        "Franka Hand speed limit (m/s)"))
    grasp_epsilon_m: float = field(default=0.01, metadata=_d(
        "Grasp epsilon inner and outer around the perceived width (m)"))
    min_object_width_m: float = field(default=0.003, metadata=_d(
        "Narrower than this the fingers closed on nothing (m)"))
    lost_width_tolerance_m: float = field(default=0.004, metadata=_d(
        "Fingers closing further than this after the grasp mean the object is gone (m)"))
    action_timeout_s: float = field(default=15.0, metadata=_d(
        "Timeout of each gripper action and of each trajectory (s)"))
    homing_on_start: bool = field(default=True, metadata=_d(
        "Home the Franka Hand once when the backend starts"))

    def __post_init__(self) -> None:
        for name in ("cartesian_max_step_m", "waypoint_spacing_m", "max_trans_vel_mps",
                     "lift_height_m", "gripper_open_speed_mps", "gripper_close_speed_mps",
                     "gripper_max_speed_mps", "action_timeout_s", "startup_retry_s",
                     "at_rest_velocity_radps"):
            if not float(getattr(self, name)) > 0.0:
                raise ConfigError(f"moveit.{name} must be > 0, got {getattr(self, name)}")
        if int(self.startup_attempts) < 0:
            raise ConfigError("moveit.startup_attempts must be >= 0 (0: keep trying)")
        if not 0.0 < self.transit_velocity_scaling <= 1.0:
            raise ConfigError("moveit.transit_velocity_scaling must be in (0, 1]")
        if not 0.0 < self.min_cartesian_fraction <= 1.0:
            raise ConfigError("moveit.min_cartesian_fraction must be in (0, 1]")
        if not 0.0 <= self.liftoff_height_m < self.lift_height_m:
            raise ConfigError("moveit.liftoff_height_m must be in [0, lift_height_m)")
        if self.cartesian_method not in ("pilz_lin", "service"):
            raise ConfigError(f"moveit.cartesian_method must be pilz_lin or service, got "
                              f"{self.cartesian_method!r}")
        if self.gripper_interface not in ("franka", "gripper_command"):
            raise ConfigError(f"moveit.gripper_interface must be franka or gripper_command, "
                              f"got {self.gripper_interface!r}")
        for name, n in (("ik_link_to_tcp_xyz", 3), ("ik_link_to_tcp_rpy", 3),
                        ("dropoff_position", 3), ("table_size", 3), ("table_center_xy", 2),
                        ("gripper_joint_names", 2)):
            if len(getattr(self, name)) != n:
                raise ConfigError(f"moveit.{name} needs {n} values, got {getattr(self, name)}")
        for name in ("grasp_epsilon_m", "min_object_width_m", "lost_width_tolerance_m",
                     "object_padding_m"):
            if float(getattr(self, name)) < 0.0:
                raise ConfigError(f"moveit.{name} must be >= 0")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MoveItBackendConfig":
        """Build from the declared parameters; unknown keys are a configuration error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown moveit parameters: {', '.join(unknown)}")
        return cls(**{k: (list(v) if isinstance(v, tuple) else v) for k, v in data.items()})

    def link_to_tcp(self) -> np.ndarray:
        """4x4 pose of the TCP in the ik_link frame."""
        T = np.eye(4)
        T[:3, :3] = rpy_to_matrix(*self.ik_link_to_tcp_rpy)
        T[:3, 3] = self.ik_link_to_tcp_xyz
        return T

    def mapping_dict(self, name: str) -> Dict[str, str]:
        """``urdf_mappings`` / ``srdf_mappings`` as the dict MoveItConfigsBuilder gives xacro."""
        out: Dict[str, str] = {}
        for item in getattr(self, name):
            if not item:
                continue
            if ":=" not in item:
                raise ConfigError(f"moveit.{name}: expected name:=value, got {item!r}")
            key, value = item.split(":=", 1)
            out[key.strip()] = value.strip()
        return out


def resolve_path(spec: str, package_share: str, share_of: Callable[[str], str]) -> str:
    """A configured file: ``package://pkg/rel`` (ament share of pkg), absolute, or relative
    to ``package_share`` (the MoveIt config package)."""
    if spec.startswith("package://"):
        package, _, rel = spec[len("package://"):].partition("/")
        if not package or not rel:
            raise ConfigError(f"expected package://<package>/<path>, got {spec!r}")
        return os.path.join(share_of(package), rel)
    if os.path.isabs(spec):
        return spec
    return os.path.join(package_share, spec)


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


# ---------------------------------------------------------------------------- outcome
@dataclass
class AttemptObservation:
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


def outcome_from_observation(obs: AttemptObservation, cfg: MoveItBackendConfig,
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
    import time

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


def cartesian_limits_from_yaml(data: Any, cfg: MoveItBackendConfig) -> Dict[str, float]:
    """Check a Pilz Cartesian limits file (the ``cartesian_limits`` mapping) and return it.

    Pilz reads ``robot_description_planning.cartesian_limits.{max_trans_vel, max_trans_acc,
    max_trans_dec, max_rot_vel}``; MoveItConfigsBuilder.pilz_cartesian_limits() wraps the
    file in ``robot_description_planning`` (moveit_configs_builder.py:483-504). The
    backend's velocity scaling divides grasp.speed by ``max_trans_vel_mps``, so both must
    agree.
    """
    try:
        limits = {k: float(v) for k, v in dict(data["cartesian_limits"]).items()}
        needed = ("max_trans_vel", "max_trans_acc", "max_trans_dec", "max_rot_vel")
        values = [limits[k] for k in needed]
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"Pilz Cartesian limits: missing or malformed field ({exc})") from None
    vel, acc, dec, rot = values
    if not (vel > 0.0 and acc > 0.0 and dec < 0.0 and rot > 0.0):
        raise ConfigError("Pilz Cartesian limits: max_trans_vel, max_trans_acc, max_rot_vel "
                          "must be > 0 and max_trans_dec < 0")
    if not math.isclose(vel, cfg.max_trans_vel_mps, rel_tol=1e-9):
        raise ConfigError(f"Pilz cartesian_limits.max_trans_vel {vel} differs from "
                          f"moveit.max_trans_vel_mps {cfg.max_trans_vel_mps}")
    return limits


# ---------------------------------------------------------------------------- params
def merge_params(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> Dict[str, Any]:
    """Deep merge of two parameter trees (overlay wins; dicts merge, anything else replaces).

    MoveItConfigsBuilder's ``to_dict`` puts joint limits and Pilz Cartesian limits under the
    same ``robot_description_planning`` key; merging our overlay deeply keeps both.
    """
    out: Dict[str, Any] = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_params(out[key], value)
        else:
            out[key] = value
    return out


def unwrap_repeated_keys(params: Mapping[str, Any]) -> Dict[str, Any]:
    """``{k: {k: v, ...}}`` -> ``{k: {v ...}}`` for the top-level keys.

    Some MoveIt config packages (moveit_resources panda joint_limits.yaml) already wrap their
    content in ``robot_description_planning:``, which MoveItConfigsBuilder wraps again; MoveIt
    would then read no joint limits and Pilz would refuse to plan.
    """
    out: Dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, Mapping) and isinstance(value.get(key), Mapping):
            inner = dict(value)
            nested = inner.pop(key)
            value = merge_params(inner, nested)
        out[key] = value
    return out


#: MoveItConfigs attributes combined into MoveItPy's parameters, in this order.
MOVEIT_CONFIG_PARTS = ("robot_description", "robot_description_semantic",
                       "robot_description_kinematics", "planning_pipelines",
                       "trajectory_execution", "planning_scene_monitor", "joint_limits",
                       "moveit_cpp", "pilz_cartesian_limits")


def combine_moveit_params(parts: Sequence[Mapping[str, Any]],
                          overlay: Mapping[str, Any]) -> Dict[str, Any]:
    """MoveItPy's ``config_dict``: the builder's parts deep-merged, then our overlay.

    ``MoveItConfigs.to_dict`` uses a flat ``dict.update``, so the Pilz Cartesian limits
    replace the joint limits (both live under ``robot_description_planning``); a deep merge
    keeps both, which Pilz LIN needs.
    """
    params: Dict[str, Any] = {}
    for part in parts:
        params = merge_params(params, unwrap_repeated_keys(part))
    return merge_params(params, overlay)


# ---------------------------------------------------------------------------- camera
@dataclass(frozen=True)
class CameraExtrinsics:
    """Hand-eye calibration result: pose of the camera optical frame in the parent frame."""

    parent_frame: str
    child_frame: str
    T_parent_child: np.ndarray

    def static_transform_args(self) -> List[str]:
        """Arguments of ``ros2 run tf2_ros static_transform_publisher`` (Jazzy flag form)."""
        x, y, z = (f"{v:.6f}" for v in self.T_parent_child[:3, 3])
        qx, qy, qz, qw = (f"{v:.9f}" for v in matrix_to_quaternion(self.T_parent_child))
        return ["--x", x, "--y", y, "--z", z, "--qx", qx, "--qy", qy, "--qz", qz, "--qw", qw,
                "--frame-id", self.parent_frame, "--child-frame-id", self.child_frame]


def camera_extrinsics_from_dict(data: Mapping[str, Any]) -> CameraExtrinsics:
    """Read the ``camera_extrinsics`` mapping of config/moveit/camera_extrinsics.yaml."""
    try:
        section = data["camera_extrinsics"]
        t = [float(v) for v in section["translation"]]
        q = [float(v) for v in section["rotation_xyzw"]]
        parent, child = str(section["parent_frame"]), str(section["child_frame"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"camera extrinsics: missing or malformed field ({exc})") from None
    if len(t) != 3 or len(q) != 4 or abs(np.linalg.norm(q) - 1.0) > 1e-3:
        raise ConfigError("camera extrinsics: need a 3-vector translation and a unit quaternion")
    T = np.eye(4)
    T[:3, :3] = quaternion_to_matrix(q)
    T[:3, 3] = t
    return CameraExtrinsics(parent, child, T)


__all__ = [
    "AttemptObservation", "COLLISION_ADD", "COLLISION_REMOVE", "CameraExtrinsics",
    "CancelPlan", "CollisionObjectSpec", "JointStatesMissing", "PSM_START_FAILURE",
    "cartesian_limits_from_yaml", "is_transient_start_failure", "rest_start_velocities",
    "scene_diff", "start_with_retries",
    "GraspMotion", "GripperGraspGoal", "GripperMoveGoal", "MOVEIT_CONFIG_PARTS",
    "MOVEIT_ERROR_CODES", "MoveItBackendConfig", "Pose", "SOLID_BOX", "SOLID_CYLINDER",
    "SOLID_SPHERE", "TABLE_ID", "camera_extrinsics_from_dict", "cancel_plan",
    "combine_moveit_params", "dropoff_pose", "finger_width", "gripper_grasp_goal",
    "gripper_open_goal", "is_system_error", "matrix_to_quaternion", "merge_params",
    "moveit_error_name", "object_collision_object", "object_extent_along",
    "outcome_from_observation", "plan_grasp_motion", "quaternion_to_matrix", "resolve_path",
    "rpy_to_matrix", "scene_collision_objects", "table_collision_object", "tcp_to_link_pose",
    "unwrap_repeated_keys", "velocity_scaling",
]
