"""Thresholds of the scene graph and its constraint analyzer (paper Sec. III-B).

The relation bands (contact, touch, adjacent, near, far), the occlusion share and the
analyzer's radii and adjustments, read from config/scene_graph.yaml.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Tuple, Union

from agentic_grasp.core.config import node_params
from agentic_grasp.core.errors import ConfigError, ValidationError

_DEFAULT_CONTAINERS = ("cup", "mug", "bowl", "glass", "vase", "box", "basket", "jar", "pot",
                       "tray", "bin", "container")



@dataclass
class SceneGraphConfig:
    """Every threshold of the scene graph and the constraint analyzer (metres, radians).

    Defaults equal config/scene_graph.yaml; a test keeps the two in step. The analyzer's
    constants live here too because one ROS node (scene_graph) owns both stages.
    """

    # --- relation thresholds --------------------------------------------------------------
    contact_tolerance: float = field(default=0.01, metadata={
        "description": "Resting contact (m): |bottom_a - top_b| for On_Top_Of, and the gap for"
                       " Leaning_On"})
    touch_tolerance: float = field(default=0.005, metadata={
        "description": "Touching band upper edge and Under's footprint overlap depth (m)"})
    adjacent_gap: float = field(default=0.05, metadata={
        "description": "Adjacent_To band upper edge, surface gap (m)"})
    near_gap: float = field(default=0.15, metadata={
        "description": "Near band upper edge, surface gap (m); equal to delta_check"})
    far_gap: float = field(default=0.30, metadata={
        "description": "Far_From lower edge, surface gap (m)"})
    far_from_max_objects: int = field(default=40, metadata={
        "description": "Far_From edges (O(n^2)) are only materialised up to this many objects"})
    directional_max_gap: float = field(default=0.15, metadata={
        "description": "Behind / In_Front_Of / Left_Of / Right_Of only between objects at most"
                       " this far apart (m)"})
    directional_margin: float = field(default=0.01, metadata={
        "description": "Minimum centre offset for a directional relation (m)"})
    containment_tolerance: float = field(default=0.005, metadata={
        "description": "How far a's footprint may exceed b's for Inside (m)"})
    container_categories: Tuple[str, ...] = field(default=_DEFAULT_CONTAINERS, metadata={
        "description": "Category words that make an object a container (Inside/Contains)"})
    occlusion_min_fraction: float = field(default=0.5, metadata={
        "description": "Share of the target's 6 line-of-sight samples an object must block to "
                       "Occlude it, in (0, 1]"})
    # --- constraint analyzer (paper Sec. III-B) -------------------------------------------
    delta_check: float = field(default=0.15, metadata={
        "description": "Neighbourhood radius around the target, surface gap (m) (paper)"})
    delta_safe: float = field(default=0.10, metadata={
        "description": "Fragile-neighbour radius for collision avoidance, surface gap (m) "
                       "(paper)"})
    fragile_threshold: float = field(default=0.5, metadata={
        "description": "Fragility at or above which a neighbour counts as fragile"})
    collision_force_scale: float = field(default=0.8, metadata={
        "description": "Grip force multiplier near a fragile neighbour (paper: 0.8)"})
    collision_height_delta: float = field(default=0.03, metadata={
        "description": "Approach height added near a fragile neighbour (m) (paper: 0.03)"})
    collision_tilt_angle: float = field(default=math.radians(20.0), metadata={
        "description": "Tilt of the approach away from a fragile neighbour (rad)"})
    content_speed_cap: float = field(default=0.05, metadata={
        "description": "Speed cap for a filled target (m/s)"})
    occlusion_tilt_angle: float = field(default=math.radians(45.0), metadata={
        "description": "Tilt of the lateral approach away from an occluder (rad)"})

    def __post_init__(self) -> None:
        self.container_categories = tuple(str(c).lower() for c in self.container_categories)
        self.far_from_max_objects = int(self.far_from_max_objects)
        for f in fields(self):
            if f.name in ("container_categories", "far_from_max_objects"):
                continue
            value = float(getattr(self, f.name))
            if not math.isfinite(value) or value < 0.0:
                raise ValidationError(f"scene_graph.{f.name} must be finite and >= 0, "
                                      f"got {value}")
            setattr(self, f.name, value)
        if not (self.touch_tolerance < self.adjacent_gap < self.near_gap < self.far_gap):
            raise ValidationError("scene_graph thresholds must satisfy touch_tolerance < "
                                  "adjacent_gap < near_gap < far_gap")
        if self.delta_safe > self.delta_check:
            raise ValidationError("scene_graph.delta_safe must not exceed delta_check")
        if not 0.0 < self.collision_force_scale <= 1.0:
            raise ValidationError("scene_graph.collision_force_scale must be in (0, 1]")
        if not 0.0 < self.occlusion_min_fraction <= 1.0:
            raise ValidationError("scene_graph.occlusion_min_fraction must be in (0, 1]")
        if not 0.0 <= self.fragile_threshold <= 1.0:
            raise ValidationError("scene_graph.fragile_threshold must be in [0, 1]")
        for name in ("collision_tilt_angle", "occlusion_tilt_angle"):
            if getattr(self, name) >= math.pi / 2:
                raise ValidationError(f"scene_graph.{name} must be below pi/2 rad")
        if self.content_speed_cap <= 0.0:
            raise ValidationError("scene_graph.content_speed_cap must be > 0")

    @classmethod
    def from_config(cls, path: Union[str, Path, None] = None) -> "SceneGraphConfig":
        """Read ``scene_graph: ros__parameters:`` from config/scene_graph.yaml (or ``path``)."""
        params = node_params("scene_graph", path)
        return cls.from_params(params, source=str(path or "config/scene_graph.yaml"))

    @classmethod
    def from_params(cls, params: Mapping[str, Any],
                    source: str = "parameters") -> "SceneGraphConfig":
        """Build from a flat parameter mapping (a node's declared parameters)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown scene_graph parameter(s) {unknown}")
        try:
            return cls(**dict(params))
        except (ValidationError, TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: {exc}") from None

    def is_container(self, category: str) -> bool:
        """True when any word of the category ("wine glass", "ceramic_cup") is a container."""
        return _is_container(str(category), self.container_categories)


@lru_cache(maxsize=1024)
def _is_container(category: str, containers: Tuple[str, ...]) -> bool:
    words = category.lower().replace("-", " ").replace("_", " ").split()
    return any(w in containers for w in words)


__all__ = ["SceneGraphConfig"]
