"""Physical constants of the simulator and of the quality model, and the wrist camera's mount
(config/sim.yaml).

The defaults equal config/sim.yaml, where each value carries a comment saying what it is and
why it is plausible; tests that build a Simulator without a file get the same physics.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Optional, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ConfigError

Pair = Tuple[float, float]


@dataclass
class PhysicsParams:
    """Every physical constant of one simulated attempt (see config/sim.yaml)."""

    gravity_mps2: float = 9.81
    table_x_range_m: Pair = (0.2, 0.8)
    table_y_range_m: Pair = (-0.4, 0.4)
    workspace_margin_m: float = 0.05
    max_grasp_height_m: float = 0.5
    speed_range_mps: Pair = (0.005, 1.0)
    approach_height_range_m: Pair = (0.0, 0.30)
    finger_width_m: float = 0.020
    finger_thickness_m: float = 0.012
    finger_length_m: float = 0.055
    finger_clearance_m: float = 0.001
    pad_depth_m: float = 0.020
    pad_width_m: float = 0.020
    pad_edge_m: float = 0.002
    pad_edge_tan: float = 1.0
    pad_compliance_m: float = 0.001
    off_pad_friction_factor: float = 0.6
    palm_size_m: Tuple[float, float, float] = (0.06, 0.20, 0.07)
    wrist_size_m: Tuple[float, float, float] = (0.09, 0.09, 0.10)
    finger_speed_mps: float = 0.05
    ray_spacing_m: float = 0.002
    ray_columns: int = 7
    tcp_sigma_xy_m: float = 0.003
    tcp_sigma_z_m: float = 0.002
    yaw_sigma_rad: float = 0.03
    force_rel_sigma: float = 0.05
    friction_rel_sigma: float = 0.10
    transit_time_s: float = 1.0
    lift_height_m: float = 0.15
    accel_ramp_s: float = 0.05
    max_cart_accel_mps2: float = 13.0
    dynamic_load_factor: float = 1.25
    grip_tilt_limit: float = 1.0
    slosh_lateral_fraction: float = 0.3
    slosh_amplification: float = 2.0
    hand_effective_mass_kg: float = 3.0
    collision_stop_time_s: float = 0.02
    push_travel_time_s: float = 0.05
    table_friction: float = 0.4
    break_fragility: float = 0.6
    drop_break_height_m: float = 0.03
    drop_topple_aspect: float = 1.0

    def __post_init__(self) -> None:
        _coerce(self, "physics")
        if self.ray_columns < 2:
            raise ConfigError("physics.ray_columns: need at least 2")
        if self.pad_depth_m > self.finger_length_m:
            raise ConfigError("physics.pad_depth_m: longer than the finger")

    @property
    def z_tip(self) -> float:
        """Fingertip along the approach axis, gripper frame (TCP = pad centre)."""
        return self.pad_depth_m / 2.0

    @property
    def z_palm(self) -> float:
        """Palm face along the approach axis, gripper frame."""
        return self.z_tip - self.finger_length_m

    def lift_accel(self, speed: float) -> float:
        """Acceleration of the lift: the commanded speed reached within ``accel_ramp_s``."""
        return min(speed / self.accel_ramp_s, self.max_cart_accel_mps2)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "sim.yaml") -> "PhysicsParams":
        return _from_mapping(cls, data, f"{source}: physics")


@dataclass
class QualityParams:
    """Constants of the seven quality factors of Eq. 2 (see config/sim.yaml ``quality``)."""

    weights: Tuple[float, ...] = (0.20, 0.15, 0.10, 0.15, 0.15, 0.10, 0.15)
    width_good_margin_m: float = 0.008
    width_bad_overlap_m: float = 0.010
    force_low_comfort: float = 1.5
    force_high_comfort: float = 1.3
    power_extent_m: Pair = (0.015, 0.030)
    power_depth_m: Pair = (0.004, 0.012)
    pinch_extent_m: Pair = (0.030, 0.060)
    side_vertical_cos: Pair = (0.3, 0.7)
    clearance_good_m: float = 0.03
    table_clearance_good_m: float = 0.01
    security_good_margin: float = 2.0
    difficulty_weights: Tuple[float, ...] = (0.35, 0.20, 0.20, 0.25)
    difficulty_friction_range: Pair = (0.3, 0.9)
    difficulty_mass_range_kg: Pair = (0.05, 1.0)
    difficulty_size_range_m: Pair = (0.05, 0.08)

    def __post_init__(self) -> None:
        _coerce(self, "quality")
        if len(self.weights) != 7 or any(w < 0 for w in self.weights):
            raise ConfigError(f"quality.weights: need 7 non-negative weights, got {self.weights}")
        if abs(sum(self.weights) - 1.0) > 1e-6:
            raise ConfigError(f"quality.weights: must sum to 1, got {sum(self.weights)}")
        if len(self.difficulty_weights) != 4:
            raise ConfigError("quality.difficulty_weights: need 4 weights")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "sim.yaml") -> "QualityParams":
        return _from_mapping(cls, data, f"{source}: quality")


def _coerce(obj: Any, section: str) -> None:
    """Turn YAML values into the declared types; reject non-finite or mistyped values."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        where = f"{section}.{f.name}"
        if isinstance(f.default, tuple):
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"{where}: expected a list, got {value!r}")
            if len(value) != len(f.default):
                raise ConfigError(f"{where}: expected {len(f.default)} numbers, got {value!r}")
            setattr(obj, f.name, tuple(_num(v, where) for v in value))
        elif isinstance(f.default, int) and not isinstance(f.default, bool):
            if isinstance(value, bool) or int(_num(value, where)) != _num(value, where):
                raise ConfigError(f"{where}: expected an integer, got {value!r}")
            setattr(obj, f.name, int(value))
        else:
            setattr(obj, f.name, _num(value, where))


def _num(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ConfigError(f"{where}: must be finite, got {value!r}")
    return float(value)


def _from_mapping(cls, data: Mapping[str, Any], where: str):
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown parameter(s) {unknown}")
    try:
        return cls(**dict(data))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _d(text: str) -> dict:
    return {"description": text}


@dataclass
class WristCameraMount:
    """Where the wrist camera sits on the hand and what it sees (config/sim.yaml
    ``wrist_camera``; the comments there say where each value comes from)."""

    offset_m: Tuple[float, float, float] = field(default=(0.06, 0.0, -0.085), metadata=_d(
        "Wrist camera optical centre in the TCP frame (m; axes as the TCP's, z = approach)"))
    width: int = field(default=640, metadata=_d("Wrist camera image width (px)"))
    height: int = field(default=480, metadata=_d("Wrist camera image height (px)"))
    fx: float = field(default=554.26, metadata=_d("Wrist camera focal length x (px)"))
    fy: float = field(default=554.26, metadata=_d("Wrist camera focal length y (px)"))
    min_range_m: float = field(default=0.18, metadata=_d(
        "Wrist camera nearest valid depth (m); views are never closer"))

    def __post_init__(self) -> None:
        off = tuple(float(v) for v in self.offset_m)
        if len(off) != 3 or not all(math.isfinite(v) for v in off):
            raise ConfigError("wrist_camera.offset_m must be 3 finite numbers")
        self.offset_m = off
        self.width, self.height = int(self.width), int(self.height)
        if self.width < 8 or self.height < 8:
            raise ConfigError("wrist_camera: width and height must be >= 8 px")
        for name in ("fx", "fy", "min_range_m"):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value <= 0.0:
                raise ConfigError(f"wrist_camera.{name} must be > 0")
            setattr(self, name, value)

    @classmethod
    def from_mapping(cls, data: Optional[Mapping[str, Any]],
                     source: str = "sim.yaml") -> "WristCameraMount":
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown wrist_camera parameter(s) {unknown}")
        return cls(**data)

    @property
    def T_tcp_cam(self) -> np.ndarray:
        """Optical frame in the TCP frame: same axes (z = approach), shifted by the mount."""
        pose = np.eye(4)
        pose[:3, 3] = self.offset_m
        return pose

    def camera(self, T_world_cam: np.ndarray) -> Camera:
        """The wrist camera at an optical-frame pose (principal point at the image centre)."""
        return Camera(width=self.width, height=self.height, fx=self.fx, fy=self.fy,
                      cx=(self.width - 1) / 2.0, cy=(self.height - 1) / 2.0,
                      T_world_cam=np.asarray(T_world_cam, dtype=float).copy(),
                      frame_id="wrist_camera_color_optical_frame")

    def intrinsics(self) -> Camera:
        """The camera model at the identity pose (camera_info without extrinsics)."""
        return self.camera(np.eye(4))
