"""The sections of config/planner.yaml: one dataclass per section, defaults equal to the
file (where each value is derived); the grasp limits and the level-2 templates are grasp
configuration and live in core/grasping/config.py. Configuration only: no module here
imports a planner algorithm, so the algorithms (failure, recovery, memory, uncover) and
PlannerConfig (configurations.py) all read their constants from here.

The hand's physical bounds are not restated: the planner's force and width ceilings default to
the gripper's (core/types.py GRIPPER_MAX_FORCE_N, GRIPPER_MAX_WIDTH_M).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Dict, Mapping

from agentic_grasp.core.config import require_positive as _positive
from agentic_grasp.core.errors import ConfigError
# the grasp limits and the level-2 templates are grasp configuration (their home is
# core/grasping/config.py); PlannerConfig holds them as sections of planner.yaml
from agentic_grasp.core.grasping.config import Level2Config, Limits
from agentic_grasp.core.types import QUALITY_FACTOR_NAMES, GraspType


@dataclass
class DefaultGrasp:
    width_m: float = 0.04
    force_n: float = 20.0
    grasp_type: str = "power"
    approach_height_m: float = 0.10
    speed_mps: float = 0.10
    wrist_yaw_rad: float = 0.0

    def __post_init__(self) -> None:
        _positive(self, "planner.default_grasp", skip=("wrist_yaw_rad",))
        self.grasp_type = GraspType.parse(str(self.grasp_type)).value


@dataclass
class ClassificationConfig:
    attempt_timeout_s: float = 30.0
    phi_thresholds: Dict[str, float] = field(default_factory=lambda: {
        "position_accuracy": 0.3, "width_compatibility": 0.4, "approach_clearance": 0.2,
        "grasp_type_matching": 0.2, "force_appropriateness": 0.2, "grip_security": 0.3})
    too_wide_margin_m: float = 0.02

    def __post_init__(self) -> None:
        thresholds = {}
        for name, value in dict(self.phi_thresholds).items():
            if name not in QUALITY_FACTOR_NAMES:
                raise ConfigError(f"planner.classification.phi_thresholds: unknown factor "
                                  f"{name!r}; expected one of {QUALITY_FACTOR_NAMES}")
            value = float(value)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"planner.classification.phi_thresholds.{name} must be in "
                                  f"[0, 1], got {value}")
            thresholds[name] = value
        self.phi_thresholds = thresholds
        _positive(self, "planner.classification")


@dataclass
class CorrectionConfig:
    slip_force_scale: float = 1.2
    drop_force_scale: float = 1.3
    force_damage_scale: float = 0.7
    deformation_force_scale: float = 0.8
    width_step_m: float = 0.01
    collision_height_m: float = 0.03
    table_collision_raise_m: float = 0.01
    palm_alignment_rad: float = math.pi / 4.0
    recentre_step_m: float = 0.01
    landing_raise_m: float = 0.01
    execution_error_m: float = 0.009
    unreachable_wrist_rad: float = math.pi / 2.0
    unreachable_height_m: float = 0.03
    approach_angle_raise_m: float = 0.01
    orientation_wrist_rad: float = math.pi / 2.0
    constraint_speed_scale: float = 0.5

    def __post_init__(self) -> None:
        _positive(self, "planner.corrections")


@dataclass
class Level3Config:
    perturbation_m: float = 0.01

    def __post_init__(self) -> None:
        _positive(self, "planner.level3", allow_zero=("perturbation_m",))


@dataclass
class TimeModel:
    perception_s: float = 0.0
    retrieval_s: float = 0.01
    scene_graph_s: float = 0.005
    thought_s: float = 0.0
    reflection_s: float = 0.005

    def __post_init__(self) -> None:
        _positive(self, "planner.time_model",
                  allow_zero=tuple(f.name for f in fields(self)))


@dataclass
class UncoverConfig:
    """``uncover:`` of config/planner.yaml (the derivations are there)."""

    enabled: bool = True
    probe_size_m: float = 0.04
    max_views: int = 3

    def __post_init__(self) -> None:
        self.enabled = bool(self.enabled)
        self.probe_size_m = float(self.probe_size_m)
        if not math.isfinite(self.probe_size_m) or self.probe_size_m <= 0.0:
            raise ConfigError("planner.uncover.probe_size_m must be > 0")
        if isinstance(self.max_views, bool) or int(self.max_views) != self.max_views \
                or int(self.max_views) < 0:
            raise ConfigError("planner.uncover.max_views must be an integer >= 0")
        self.max_views = int(self.max_views)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "UncoverConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown planner.uncover parameter(s) {unknown}")
        return cls(**dict(data))


@dataclass
class TransferRules:
    """How far memory reaches beyond the category (config/planner.yaml ``memory``: the
    derivation of each value is there)."""

    similar_objects: bool = True
    corrections: bool = True
    size_tolerance_m: float = 0.01
    fragility_band_ratio: float = 0.7

    def __post_init__(self) -> None:
        self.similar_objects = bool(self.similar_objects)
        self.corrections = bool(self.corrections)
        self.size_tolerance_m = float(self.size_tolerance_m)
        self.fragility_band_ratio = float(self.fragility_band_ratio)
        if not math.isfinite(self.size_tolerance_m) or self.size_tolerance_m < 0.0:
            raise ConfigError("planner.memory.size_tolerance_m must be a finite number >= 0")
        if not 0.0 < self.fragility_band_ratio < 1.0:
            raise ConfigError("planner.memory.fragility_band_ratio must be in (0, 1)")

    def same_fragility_band(self, a: float, b: float) -> bool:
        """Whether fragilities ``a`` and ``b`` share a band: strength is read as (1 - f) of
        the material's (the catalogue's strength model), and two strengths within one force
        step of recovery (``fragility_band_ratio``) of each other cannot be told apart by
        the forces the planner tries. A band around each value, not fixed bins: perception
        reports a fragility with noise, and a fixed boundary would split one object from
        itself."""
        sa, sb = max(1.0 - float(a), 1e-3), max(1.0 - float(b), 1e-3)
        return min(sa, sb) / max(sa, sb) >= self.fragility_band_ratio - 1e-9


__all__ = ["ClassificationConfig", "CorrectionConfig", "DefaultGrasp", "Level2Config",
           "Level3Config", "Limits", "TimeModel", "TransferRules", "UncoverConfig"]
