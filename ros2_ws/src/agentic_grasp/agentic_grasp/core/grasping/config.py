"""Constants of grasp fitting and clearance-aware candidates (config/planner.yaml,
``grasp_synthesis:``). Defaults equal the file; every number is derived there from the hand's
geometry or the robot's accuracy, never from the benchmark scenes. Also the heuristic
baselines' rule constants (:class:`HeuristicConfig`, :mod:`.heuristic`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Mapping, Tuple

from agentic_grasp.core.config import require_positive as _positive
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.types import GRIPPER_MAX_FORCE_N, GRIPPER_MAX_WIDTH_M, GraspType

CONSTRAINT_MODES = ("paper", "clearance")


@dataclass
class Limits:
    min_force_n: float = 2.0
    max_force_n: float = GRIPPER_MAX_FORCE_N
    max_width_m: float = GRIPPER_MAX_WIDTH_M
    min_approach_height_m: float = 0.02
    max_approach_height_m: float = 0.30
    min_speed_mps: float = 0.01
    max_speed_mps: float = 0.5
    min_grasp_z_m: float = 0.0

    def __post_init__(self) -> None:
        _positive(self, "planner.limits", allow_zero=("min_grasp_z_m",))
        if self.min_force_n > self.max_force_n or self.min_speed_mps > self.max_speed_mps \
                or self.min_approach_height_m > self.max_approach_height_m:
            raise ConfigError("planner.limits: a minimum exceeds its maximum")


@dataclass
class Level2Config:
    grasp_type_order: Tuple[str, ...] = ("power", "pinch", "side")
    force_scale: float = 0.9
    power_depth_m: float = 0.03
    pinch_depth_m: float = 0.012
    pinch_width_m: float = 0.03
    side_height_fraction: float = 0.5
    side_min_height_m: float = 0.05
    opening_margin_m: float = 0.02

    def __post_init__(self) -> None:
        order = tuple(GraspType.parse(str(t)).value for t in self.grasp_type_order)
        if len(set(order)) != len(order) or not order:
            raise ConfigError("planner.level2.grasp_type_order must list distinct grasp types")
        self.grasp_type_order = order
        _positive(self, "planner.level2")
        if not 0.0 < self.side_height_fraction <= 1.0:
            raise ConfigError("planner.level2.side_height_fraction must be in (0, 1]")


@dataclass
class HandConfig:
    """Franka Hand geometry (franka_description / MoveIt panda hand), gripper frame:
    z = approach, y = closing axis, TCP at the centre of the finger pads."""

    max_opening_m: float = GRIPPER_MAX_WIDTH_M         # the gripper's stroke (core/types.py)
    finger_width_m: float = 0.020
    finger_thickness_m: float = 0.012
    finger_length_m: float = 0.055
    pad_depth_m: float = 0.020
    palm_size_m: Tuple[float, float, float] = (0.06, 0.20, 0.07)
    wrist_size_m: Tuple[float, float, float] = (0.09, 0.09, 0.10)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            vals = tuple(float(v) for v in value) if isinstance(value, (list, tuple)) \
                else (float(value),)
            if any(not math.isfinite(v) or v <= 0.0 for v in vals):
                raise ConfigError(f"planner.grasp_synthesis.hand.{f.name} must be > 0")
            setattr(self, f.name, vals if isinstance(value, (list, tuple)) else vals[0])
        if len(self.palm_size_m) != 3 or len(self.wrist_size_m) != 3:
            raise ConfigError("planner.grasp_synthesis.hand: palm/wrist sizes are 3-vectors")


@dataclass
class HandLimitsConfig:
    """``planner.grasp_synthesis.hand_limits`` (config/planner.yaml, where each number is
    derived): when the planner refuses an object as beyond the hand (grasping/limits.py)."""

    enabled: bool = True
    width_margin_m: float = 0.008
    payload_kg: float = 3.0
    hand_mass_kg: float = 0.73

    def __post_init__(self) -> None:
        self.enabled = bool(self.enabled)
        for name in ("width_margin_m", "payload_kg", "hand_mass_kg"):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value < 0.0:
                raise ConfigError(f"planner.grasp_synthesis.hand_limits.{name} must be >= 0")
            setattr(self, name, value)
        if self.hand_mass_kg >= self.payload_kg:
            raise ConfigError("planner.grasp_synthesis.hand_limits: hand_mass_kg must be "
                              "below payload_kg")


@dataclass
class GraspSynthesisConfig:
    constraint_mode: str = "clearance"
    fit_strategies: bool = True
    retrieve_k: int = 6
    opening_margin_m: float = 0.02
    finger_clearance_m: float = 0.001
    min_part_opening_m: float = 0.02
    table_clearance_m: float = 0.002
    required_clearance_m: float = 0.022
    neighbour_radius_m: float = 0.15
    unknown_neighbour_size_m: float = 0.12
    wrist_offsets_rad: Tuple[float, ...] = (0.0, 0.2617993877991494, -0.2617993877991494,
                                            0.5235987755982988, -0.5235987755982988,
                                            0.7853981633974483, -0.7853981633974483,
                                            1.5707963267948966)
    part_wrist_limit_rad: float = 0.5235987755982988
    around_steps: int = 8
    tilts_rad: Tuple[float, ...] = (0.0, 0.17453292519943295, 0.3490658503988659)
    filled_rim_wall_m: float = 0.01
    hand: HandConfig = field(default_factory=HandConfig)
    hand_limits: HandLimitsConfig = field(default_factory=HandLimitsConfig)

    def __post_init__(self) -> None:
        if self.constraint_mode not in CONSTRAINT_MODES:
            raise ConfigError(f"planner.grasp_synthesis.constraint_mode must be one of "
                              f"{CONSTRAINT_MODES}, got {self.constraint_mode!r}")
        self.fit_strategies = bool(self.fit_strategies)
        if isinstance(self.hand, Mapping):
            self.hand = HandConfig(**dict(self.hand))
        if isinstance(self.hand_limits, Mapping):
            self.hand_limits = HandLimitsConfig(**dict(self.hand_limits))
        for name in ("opening_margin_m", "finger_clearance_m", "min_part_opening_m",
                     "table_clearance_m",
                     "required_clearance_m", "neighbour_radius_m", "unknown_neighbour_size_m",
                     "part_wrist_limit_rad", "filled_rim_wall_m"):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value < 0.0:
                raise ConfigError(f"planner.grasp_synthesis.{name} must be >= 0")
            setattr(self, name, value)
        self.retrieve_k = int(self.retrieve_k)
        if self.retrieve_k < 1:
            raise ConfigError("planner.grasp_synthesis.retrieve_k must be >= 1")
        self.around_steps = int(self.around_steps)
        if self.around_steps < 1:
            raise ConfigError("planner.grasp_synthesis.around_steps must be >= 1")
        self.wrist_offsets_rad = tuple(float(v) for v in self.wrist_offsets_rad)
        self.tilts_rad = tuple(float(v) for v in self.tilts_rad)
        if not self.wrist_offsets_rad or not self.tilts_rad:
            raise ConfigError("planner.grasp_synthesis: wrist_offsets_rad and tilts_rad "
                              "must not be empty")
        if any(not 0.0 <= t < math.pi / 2 for t in self.tilts_rad):
            raise ConfigError("planner.grasp_synthesis.tilts_rad must be in [0, pi/2)")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "GraspSynthesisConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown planner.grasp_synthesis parameter(s) {unknown}")
        kwargs: Dict[str, Any] = dict(data)
        if isinstance(kwargs.get("hand"), Mapping):
            hk = {f.name for f in fields(HandConfig)}
            bad = sorted(set(kwargs["hand"]) - hk)
            if bad:
                raise ConfigError(f"unknown planner.grasp_synthesis.hand parameter(s) {bad}")
            kwargs["hand"] = HandConfig(**dict(kwargs["hand"]))
        if isinstance(kwargs.get("hand_limits"), Mapping):
            lk = {f.name for f in fields(HandLimitsConfig)}
            bad = sorted(set(kwargs["hand_limits"]) - lk)
            if bad:
                raise ConfigError("unknown planner.grasp_synthesis.hand_limits "
                                  f"parameter(s) {bad}")
            kwargs["hand_limits"] = HandLimitsConfig(**dict(kwargs["hand_limits"]))
        return cls(**kwargs)


@dataclass
class HeuristicConfig:
    finger_depth_m: float = field(default=0.025, metadata={
        "description": "How far below the object's top the finger pads close (m)"})
    opening_margin_m: float = field(default=0.02, metadata={
        "description": "Opening added to the object's extent across the fingers (m)"})
    assumed_friction: float = field(default=0.5, metadata={
        "description": "Friction coefficient assumed when sizing the force"})
    safety_factor: float = field(default=2.0, metadata={
        "description": "Force margin over the weight-holding minimum"})
    min_force_n: float = field(default=8.0, metadata={"description": "Lowest force used (N)"})
    max_force_n: float = field(default=40.0, metadata={"description": "Highest force used (N)"})
    fragile_force_scale: float = field(default=0.5, metadata={
        "description": "Force multiplier at fragility 1 (linear in fragility)"})
    approach_height_m: float = field(default=0.10, metadata={
        "description": "Pre-grasp stand-off above the grasp point (m)"})
    speed_mps: float = field(default=0.10, metadata={"description": "Descent/lift speed (m/s)"})
    fragile_speed_mps: float = field(default=0.05, metadata={
        "description": "Speed for objects with fragility >= 0.5 (m/s)"})
    # Weight from the perceived volume: water's density, the top of the range of solid
    # household items (fruit 0.8-0.95, wood 0.5-0.7 g/cm^3; hollow vessels far less), so the
    # estimate errs on the side of holding.
    assumed_density_kg_m3: float = field(default=1000.0, metadata={
        "description": "Density that turns the perceived volume into a weight (kg/m^3)"})
    # A handle sticks out of the body by about its own width: the Franka pads (20 mm) must
    # meet it clear of the body, so the grasp point is one pad width outside the body.
    handle_reach_m: float = field(default=0.02, metadata={
        "description": "Handle grasp point outside the perceived body (m)"})
