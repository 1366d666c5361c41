"""The MoveIt backend's configuration (``executor.moveit.*``) and the
MoveIt parameter files it combines (MoveItConfigsBuilder parts, Pilz Cartesian limits), plus
the fixed camera's extrinsics for a real cell. No ROS or MoveIt import.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, List, Mapping, Sequence

import numpy as np

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.geometry import matrix_to_quaternion, quaternion_to_matrix, rpy_to_matrix


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
    "camera_extrinsics_from_dict", "CameraExtrinsics", "cartesian_limits_from_yaml",
    "combine_moveit_params", "merge_params", "MOVEIT_CONFIG_PARTS", "MoveItBackendConfig",
    "resolve_path", "unwrap_repeated_keys",
]
