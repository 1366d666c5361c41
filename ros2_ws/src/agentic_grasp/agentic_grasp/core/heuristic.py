"""Size-and-fragility grasp rules: the paper's heuristic baseline and the demo's grasp.

No retrieval, no VLM: the grasp comes from the object's perceived box alone. A top-down grasp
closes across the narrower horizontal side; the fingers reach ``finger_depth_m`` below the
top (or the centre for short objects); force is what holds the estimated weight with a margin,
reduced for fragile objects.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from agentic_grasp.core.types import (
    GRIPPER_MAX_WIDTH_M, GraspParameters, GraspType, ObjectInstance)

G = 9.81


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


def heuristic_grasp(obj: ObjectInstance, config: HeuristicConfig | None = None) -> GraspParameters:
    """A top-down grasp of ``obj`` from its box, mass estimate and fragility."""
    cfg = config or HeuristicConfig()
    sx, sy, sz = (float(v) for v in obj.size)
    # Close across the narrower horizontal side: along the object's x if sx <= sy.
    if sx <= sy:
        extent, closing_yaw = sx, obj.yaw
    else:
        extent, closing_yaw = sy, obj.yaw + math.pi / 2.0
    # wrist_yaw = 0 closes along world y, so rotate by -90 deg to close along the object x axis.
    wrist_yaw = math.atan2(math.sin(closing_yaw - math.pi / 2.0),
                           math.cos(closing_yaw - math.pi / 2.0))
    width = min(GRIPPER_MAX_WIDTH_M, extent + cfg.opening_margin_m)
    grasp_z = max(obj.position[2], obj.top_z - cfg.finger_depth_m)
    hold = obj.mass * G * cfg.safety_factor / (2.0 * cfg.assumed_friction)
    force = float(np.clip(hold, cfg.min_force_n, cfg.max_force_n))
    force *= 1.0 - (1.0 - cfg.fragile_force_scale) * obj.fragility
    grasp_type = GraspType.POWER if extent >= 0.03 else GraspType.PINCH
    speed = cfg.fragile_speed_mps if obj.fragility >= 0.5 else cfg.speed_mps
    return GraspParameters(position=np.array([obj.position[0], obj.position[1], grasp_z]),
                           approach=np.array([0.0, 0.0, -1.0]), width=width, force=force,
                           grasp_type=grasp_type, approach_height=cfg.approach_height_m,
                           speed=speed, wrist_yaw=wrist_yaw)
