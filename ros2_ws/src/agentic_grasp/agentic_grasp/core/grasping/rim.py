"""A rim pinch: the fingers astride an open container's wall, closing radially.

The grasp for a container whose body is wider than the hand (a bowl, a kettle, a wide paper
cup) and whose opening perception sees (``rim_z``, the rim's height from depth): the
fingers straddle the wall at the rim point nearest the robot base, where the arm reaches
with the least joint travel, closing along the radius with the part opening
(``min_part_opening_m``, the 20 mm pad width, which spans a wall of a few millimetres with
room for the approach error), their pads half a pad below the rim.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from agentic_grasp.core.arm.closing_axis import wrist_yaw_for_closing_axis
from agentic_grasp.core.grasping.operations import VERTICAL
from agentic_grasp.core.types import GraspParameters, GraspType, ObjectInstance


def rim_opening(synth) -> float:
    """The opening of a rim pinch chosen from a perceived radius: the part opening plus the
    perceived width's error bound on either side, so the wall, at a perceived radius that may
    be off by that much, falls between the pads (``synth``: GraspSynthesisConfig)."""
    return synth.min_part_opening_m + 2.0 * synth.hand_limits.width_margin_m


def rim_grasp(obj: ObjectInstance, base: GraspParameters, rim_z: float,
              synth, opening: Optional[float] = None,
              away_from: Optional[np.ndarray] = None) -> GraspParameters:
    """``base`` moved onto the rim of ``obj`` (module docstring); ``synth``: the planner's
    GraspSynthesisConfig; ``opening``: the width (default the part opening);
    ``away_from``: a horizontal direction from the centre (a neighbour the hand met) whose
    opposite rim point is taken instead of the one nearest the robot. Force, speed and
    approach height stay ``base``'s."""
    centre = np.asarray(obj.position, dtype=float)
    if away_from is not None:
        toward = -np.asarray(away_from, dtype=float)[:2]
        toward = toward / max(float(np.linalg.norm(toward)), 1e-6)
    else:
        toward = -centre[:2] / max(float(np.linalg.norm(centre[:2])), 1e-6)
    radius = min(float(obj.size[0]), float(obj.size[1])) / 2.0
    point = centre[:2] + toward * radius
    z = max(float(base.position[2]), float(rim_z) - synth.hand.pad_depth_m / 2.0)
    axis = np.array([toward[0], toward[1], 0.0])
    return base.copy(position=np.array([point[0], point[1], z]), approach=VERTICAL.copy(),
                     width=synth.min_part_opening_m if opening is None else float(opening),
                     grasp_type=GraspType.PINCH,
                     wrist_yaw=wrist_yaw_for_closing_axis(VERTICAL, axis))


__all__ = ["rim_grasp", "rim_opening"]
