"""Know the hand's limits: refuse, before any attempt, an object the hand cannot take.

The Franka Hand opens 80 mm (:class:`.config.HandConfig`) and the Panda carries 3 kg at
the flange, the hand included. An object is refused at planning (zero attempts, its own
error code ``GraspObject ERROR_BEYOND_HAND_LIMITS``) when, from what perception reports:

- **too wide**: every direction the fingers can close in is wider than the widest body the
  hand can enclose, ``max_opening - 2 x finger_clearance`` (fit.py's own rule for skipping
  a body grasp), by more than ``width_margin_m``. The fingers close horizontally on an
  object standing on the table (they cannot pass under it), so the directions are the
  horizontal ones: a box's narrower footprint side, a standing cylinder's or a sphere's
  diameter, a lying cylinder's diameter or its length, whichever is smaller. An object is
  only judged by its body when nothing narrower is offered: a perceived handle side, or an
  affordance whose region is a part (a handle, a rim, a neck, a stem; the VLM names it),
  may fit where the body does not, so such an object is never refused for width;
- **too heavy**: a mass estimate, where perception gives one (``mass_kg`` on the perceived
  object; the camera and the simulated VLM give none today, so this check is idle there),
  above ``payload_kg - hand_mass_kg``.

The margin: the perceived width is noisy, and an object that fits must never be refused,
so the measured width must exceed the limit by more than its error can explain
(config/planner.yaml ``hand_limits``).
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from agentic_grasp.core.grasping.config import HandConfig, HandLimitsConfig
from agentic_grasp.core.types import Shape

#: GoalOutcome.status of a target refused at planning (planner.py's other statuses).
STATUS_BEYOND_HAND = "beyond_hand_limits"
#: Rubber on the hand's rubber pads, the highest pad friction of household surfaces (0.9;
#: felt and fruit skin reach 0.8): the friction cone a sphere's chord is read with. The
#: highest contact on a sphere that the pads still hold is at the tilt atan(mu) above its
#: equator, so the higher the friction, the narrower the chord that holds: with the highest
#: friction of any surface, no sphere that some surface would let the pads hold is refused.
SPHERE_PAD_FRICTION = 0.9
#: Affordance regions that are the whole body (anything else names a part that may fit).
BODY_REGIONS = ("", "body", "object", "whole")


def narrowest_width(shape: Any, size: Any, upright: bool = True) -> float:
    """The narrowest horizontal extent of a perceived body (m): what the fingers must span
    in the best direction they can close in (module docstring)."""
    sx, sy, sz = (float(v) for v in np.asarray(size, dtype=float).reshape(3))
    shape = Shape(shape) if shape is not None else Shape.BOX
    if shape == Shape.SPHERE:
        # held above its equator, where the contact normal is still inside the pads'
        # friction cone: at best a chord of 2 r cos(atan mu), with the highest pad friction
        # of household surfaces (SPHERE_PAD_FRICTION), so no sphere that could be held is
        # refused
        return sx * math.cos(math.atan(SPHERE_PAD_FRICTION))
    if shape == Shape.CYLINDER and not upright:
        return min(sx, sz)          # lying: its diameter across, its length along
    return min(sx, sy)


def check_hand_limits(perceived: Any, target: Any, hand: HandConfig,
                      cfg: HandLimitsConfig, finger_clearance_m: float) -> Optional[str]:
    """The reason ``target`` (the perceived object as an instance; ``perceived`` its
    PerceivedObject, may be None) is beyond the hand, or None when it may fit."""
    if not cfg.enabled:
        return None
    mass = getattr(perceived, "mass_kg", None)
    max_mass = cfg.payload_kg - cfg.hand_mass_kg
    if mass is not None and math.isfinite(float(mass)) and float(mass) > max_mass:
        return (f"{target.id} weighs about {float(mass):.2f} kg, above the arm's "
                f"{max_mass:.2f} kg payload left with the hand ({cfg.payload_kg:.1f} kg - "
                f"{cfg.hand_mass_kg:.2f} kg)")
    if getattr(perceived, "handle_yaw", None) is not None:
        return None                 # a perceived handle may fit where the body does not
    aff = getattr(target, "affordance", None)
    region = str(getattr(aff, "region", "") or "").strip().lower()
    if aff is not None and region not in BODY_REGIONS:
        return None                 # the named part (rim, neck, handle) may fit
    size = getattr(target, "size", None)
    if size is None or not np.all(np.isfinite(np.asarray(size, dtype=float))):
        return None                 # not measured: nothing to judge by
    width = narrowest_width(target.shape, size, bool(getattr(target, "upright", True)))
    limit = hand.max_opening_m - 2.0 * finger_clearance_m
    if width > limit + cfg.width_margin_m:
        return (f"{target.id} is {width * 1e3:.0f} mm wide in its narrowest graspable "
                f"direction; the hand encloses at most {limit * 1e3:.0f} mm "
                f"({hand.max_opening_m * 1e3:.0f} mm opening less "
                f"{finger_clearance_m * 1e3:.0f} mm finger clearance a side), and the "
                f"perceived width is certain to {cfg.width_margin_m * 1e3:.0f} mm")
    return None


__all__ = ["BODY_REGIONS", "HandLimitsConfig", "STATUS_BEYOND_HAND", "check_hand_limits",
           "narrowest_width"]
