"""Configuration of perception's own steps (config/perception.yaml): the depth-to-geometry
step (``depth.*``), the ground-truth oracle's errors (``oracle.*``) and the re-perception
policy (``reperception.*``). The VLM's and the simulated VLM's settings are
:mod:`.vlm.config`'s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional

from agentic_grasp.core.config import reject_unknown
from agentic_grasp.core.errors import ConfigError


@dataclass(frozen=True)
class DepthConfig:
    """Parameters of the depth-to-geometry step (``depth.*`` in config/perception.yaml)."""

    window_radius_px: int = field(default=3, metadata={
        "description": "Surface depth = median of the valid depths in a square window of this "
                       "radius around the pointed pixel (px)"})
    min_depth_m: float = field(default=0.05, metadata={
        "description": "Depths below this are no return (m)"})
    max_depth_m: float = field(default=5.0, metadata={
        "description": "Depths above this are no return (m)"})
    table_z: float = field(default=0.0, metadata={
        "description": "Height of the table top in world (m)"})
    min_height_above_table_m: float = field(default=0.005, metadata={
        "description": "Object points must be this far above the table (m)"})
    snap_to_table_m: float = field(default=0.02, metadata={
        "description": "An object whose bottom is this close to the table stands on it (m)"})
    min_object_points: int = field(default=12, metadata={
        "description": "With fewer object points the centre comes from the ray and the height "
                       "from the box (coarse)"})
    max_bbox_samples: int = field(default=6000, metadata={
        "description": "At most this many box pixels are back-projected"})
    default_extent_m: float = field(default=0.05, metadata={
        "description": "Extent of an object the model gave no box for (m)"})
    search_radius_px: int = 40
    box_pad_frac: float = 0.1
    box_pad_px: int = 4
    max_box_growths: int = 2
    edge_jump_m: float = 0.01
    part_reach_m: float = 0.035
    top_band_m: float = 0.006
    sphere_rms_frac: float = 0.03
    sphere_rms_floor_m: float = 0.0015
    curvature_drop_frac: float = 0.12
    disc_hull_ratio: float = 0.9
    disc_max_aspect: float = 1.5
    handle_margin_m: float = 0.005
    min_handle_points: int = 12
    interior_margin_m: float = 0.008
    interior_drop_m: float = 0.01

    def __post_init__(self) -> None:
        if self.window_radius_px < 0:
            raise ConfigError("depth.window_radius_px must be >= 0")
        if not 0.0 <= self.min_depth_m < self.max_depth_m:
            raise ConfigError("depth: need 0 <= min_depth_m < max_depth_m")
        for name in ("default_extent_m", "edge_jump_m",
                     "part_reach_m", "sphere_rms_frac", "curvature_drop_frac",
                     "interior_drop_m"):
            if getattr(self, name) <= 0.0:
                raise ConfigError(f"depth.{name} must be > 0")
        if self.min_object_points < 1 or self.max_bbox_samples < 1:
            raise ConfigError("depth.min_object_points and max_bbox_samples must be >= 1")
        if self.search_radius_px < 1 or self.min_handle_points < 1:
            raise ConfigError("depth.search_radius_px and min_handle_points must be >= 1")
        if not 0.5 < self.disc_hull_ratio < 1.0:
            raise ConfigError("depth.disc_hull_ratio must be in (0.5, 1)")
        if not self.disc_max_aspect >= 1.0:
            raise ConfigError("depth.disc_max_aspect must be >= 1")
        if self.box_pad_px < 0 or self.max_box_growths < 0:
            raise ConfigError("depth.box_pad_px and max_box_growths must be >= 0")
        for name in ("top_band_m", "handle_margin_m", "interior_margin_m", "box_pad_frac",
                     "sphere_rms_floor_m"):
            if getattr(self, name) < 0.0:
                raise ConfigError(f"depth.{name} must be >= 0")

    @classmethod
    def from_params(cls, params: Optional[Mapping[str, Any]]) -> "DepthConfig":
        """Build from a ``depth:`` mapping; unknown keys are a ConfigError (typos)."""
        params = dict(params or {})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ConfigError(f"depth: unknown parameter(s) {', '.join(unknown)}")
        kwargs = {}
        for key, value in params.items():
            kwargs[key] = int(value) if known[key].type in ("int", int) else float(value)
        return cls(**kwargs)


#: Default category confusions (symmetric pairs of visually similar categories).
DEFAULT_CONFUSION_MAP: Dict[str, List[str]] = {
    "cup": ["mug"], "mug": ["cup"],
    "vase": ["wine glass"], "wine glass": ["vase"],
    "glass vase": ["wine glass"],
    "bottle": ["vase"],
    "apple": ["ball"], "ball": ["apple"], "tennis ball": ["apple"],
    "cube": ["block"], "block": ["cube"], "toy block": ["cube"], "wood cube": ["block"],
    "smartphone": ["phone"], "phone": ["smartphone"],
}


@dataclass
class OracleConfig:
    """Noise of the oracle (``oracle.*`` in config/perception.yaml); zero = exact truth."""

    category_confusion_prob: float = field(default=0.0, metadata={
        "description": "Probability that an object's category is replaced by a confusion "
                       "partner (oracle.confusion_map)"})
    confusion_map: Dict[str, List[str]] = field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_CONFUSION_MAP.items()})
    fragility_std: float = field(default=0.0, metadata={
        "description": "Standard deviation of Gaussian noise on fragility (clipped to [0, 1])"})
    position_std: float = field(default=0.0, metadata={
        "description": "Standard deviation of Gaussian noise on each world axis of a centre "
                       "(m)"})
    affordance_confusion_prob: float = field(default=0.0, metadata={
        "description": "Probability that the target's affordance type is replaced by another, "
                       "uniformly"})

    def __post_init__(self) -> None:
        for name in ("category_confusion_prob", "affordance_confusion_prob"):
            value = float(getattr(self, name))
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"oracle.{name} must be in [0, 1], got {value}")
            setattr(self, name, value)
        for name in ("fragility_std", "position_std"):
            value = float(getattr(self, name))
            if not value >= 0.0:
                raise ConfigError(f"oracle.{name} must be >= 0, got {value}")
            setattr(self, name, value)
        cleaned: Dict[str, List[str]] = {}
        for key, partners in dict(self.confusion_map or {}).items():
            if isinstance(partners, str):
                partners = [partners]
            names = [" ".join(str(p).replace("_", " ").lower().split()) for p in partners]
            names = [p for p in names if p]
            if names:
                cleaned[" ".join(str(key).replace("_", " ").lower().split())] = names
        self.confusion_map = cleaned

    @classmethod
    def from_params(cls, params: Optional[Mapping[str, Any]]) -> "OracleConfig":
        params = dict(params or {})
        params.pop("seed", None)
        reject_unknown("oracle", params, ("category_confusion_prob", "confusion_map",
                                          "fragility_std", "position_std",
                                          "affordance_confusion_prob"))
        return cls(**params)


@dataclass
class ReperceptionConfig:
    """``reperception.*`` of config/perception.yaml (see the module docstring)."""

    enabled: bool = field(default=True, metadata={
        "description": "Reuse the last VLM answer when the depth did not change around the "
                       "target"})
    depth_noise_std_m: float = field(default=0.001, metadata={
        "description": "Depth noise of the camera, 1 sigma (m)"})
    noise_sigmas: float = field(default=4.0, metadata={
        "description": "A pixel changed when its depth moved by more than this many sigma"})
    min_shift_m: float = field(default=0.002, metadata={
        "description": "The scene changed when the changed pixels cover the silhouette this "
                       "shift of the target sweeps (m)"})
    box_margin: float = field(default=0.25, metadata={
        "description": "The target box is grown by this fraction on each side for the check"})

    def __post_init__(self) -> None:
        if isinstance(self.enabled, str):
            self.enabled = self.enabled.strip().lower() in ("1", "true", "yes", "on")
        self.enabled = bool(self.enabled)
        for name in ("depth_noise_std_m", "noise_sigmas", "min_shift_m", "box_margin"):
            value = float(getattr(self, name))
            if not (math.isfinite(value) and value >= 0.0):
                raise ConfigError(f"reperception.{name} must be >= 0, got {value}")
            setattr(self, name, value)

    @classmethod
    def from_params(cls, params: Optional[Mapping[str, Any]]) -> "ReperceptionConfig":
        params = dict(params or {})
        reject_unknown("reperception", params, cls.__dataclass_fields__)
        return cls(**params)
