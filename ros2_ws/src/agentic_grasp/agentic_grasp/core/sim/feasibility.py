"""Whether a scene is physical and its target graspable, decided from the catalogue's
physical model before any trial (never from a planner or a trial).

- a placement is physical when the object is inside the arm's reach for a top grasp
  (:func:`reachable`) and stands on its catalogue base with its centre of mass over its
  footprint (:func:`stable`); the layout's gaps are :func:`.scenes.layout_problem`'s;
- footprint extents for placing objects beside one another (:func:`footprint_radius`,
  :func:`extent_towards`);
- a target is feasible when some part of it fits the hand (:func:`target_feasibility`),
  infeasible otherwise. A feasible target counts for success; an infeasible one only as a
  correct or wrong refusal.

What :mod:`.procedural` draws its scenes with.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from agentic_grasp.core.grasping.config import HandConfig, HandLimitsConfig
from agentic_grasp.core.sim.objects import ObjectModel
from agentic_grasp.core.sim.params import PhysicsParams
from agentic_grasp.core.types import GRIPPER_MAX_FORCE_N, ObjectState, Shape

#: The Franka Hand's stroke and the payload left with it: the hand's one home
#: (core/grasping/config.py: 80 mm; 3 kg at the flange less the hand's 0.73 kg).
HAND_MAX_OPENING_M = HandConfig().max_opening_m
PAYLOAD_LEFT_KG = HandLimitsConfig().payload_kg - HandLimitsConfig().hand_mass_kg
#: Panda reach: the wrist centre within 0.855 m of the shoulder (0, 0, 0.333); a top grasp
#: puts it 0.107 (flange) + 0.1034 (TCP) = 0.21 m above the grasp point.
SHOULDER = np.array([0.0, 0.0, 0.333])
REACH_M = 0.855
WRIST_ABOVE_TCP_M = 0.21


@dataclass(frozen=True)
class Feasibility:
    """Whether some grasp of an object fits the hand, and why (or why not)."""

    feasible: bool
    reason: str


def part_width(part) -> float:
    """The narrowest horizontal extent the fingers must span to hold a box or cylinder
    ``part`` (m); a sphere is judged by its chord in :func:`target_feasibility`.

    Fingers close horizontally (they cannot pass under an object on the table): a box
    part's narrower footprint side; a standing cylinder's diameter, or its wall when it is
    hollow and open upwards (a rim pinch); a lying cylinder's diameter or length.
    """
    sx, sy, sz = (float(v) for v in part.size)
    if part.shape == Shape.CYLINDER:
        if part.axis == 2:
            return float(part.wall_m) if part.wall_m > 0.0 else min(sx, sy)
    return min(sx, sy)


def target_feasibility(model: ObjectModel, state: ObjectState = ObjectState.EMPTY,
                       physics: Optional[PhysicsParams] = None) -> Feasibility:
    """Whether some part of ``model`` fits the Franka Hand and can be held (module
    docstring): its width within the stroke less the fingers' clearance on both sides, a
    grip force that holds its weight (two pads, Coulomb friction, the sim's dynamic load
    factor) and, for a part beside the centre of mass, the weight's turning moment (the
    pads' torsional friction, 2 x (2/3) mu F r over a pad's area), below both the gripper's
    140 N and its crush and deformation limits, its mass within the payload; a sphere is
    held where its chord fits the hand, its tilted contacts carrying 2 F (mu cos t - sin t)."""
    physics = physics or PhysicsParams()
    limit = HAND_MAX_OPENING_M - 2.0 * physics.finger_clearance_m
    mass = model.mass_kg + (model.fill.mass_kg if state == ObjectState.FILLED and model.fill
                            else 0.0)
    if mass > PAYLOAD_LEFT_KG:
        return Feasibility(False, f"{mass:.2f} kg is above the {PAYLOAD_LEFT_KG:.2f} kg "
                           "payload left with the hand")
    best: Optional[Tuple[float, str]] = None
    reasons = []
    weight = mass * physics.gravity_mps2 * physics.dynamic_load_factor
    # a pad's torsional friction acts over the disc of its area: 2 pads x (2/3) mu F r
    r_pad = math.sqrt(physics.pad_width_m * physics.pad_depth_m / math.pi)
    for part in model.parts:
        mu = part.friction if part.friction is not None else model.friction
        if part.shape != Shape.SPHERE:
            width = part_width(part)
            hold = weight / (2.0 * mu)
        else:
            # the pads touch a sphere where its chord fits what the hand encloses: above the
            # equator at the tilt t = acos(enclosed / d), where each pad's push has a
            # downward component F sin t that friction must also carry (grip.hold), so two
            # pads hold 2 F (mu cos t - sin t); none at all beyond the friction cone
            d = float(part.size[0])
            tilt = math.acos(min(1.0, limit / d))
            lift = mu * math.cos(tilt) - math.sin(tilt)
            width = min(d, limit)
            hold = weight / (2.0 * lift) if lift > 0.0 else math.inf
        # a part beside the centre of mass (a handle): the weight turns the object about
        # the closing axis with the arm d, held only by the pads' torsion
        d = float(np.hypot(*(np.asarray(part.centre, float)[:2]
                             - np.asarray(model.com, float)[:2])))
        if part.shape == Shape.CYLINDER and part.axis == 2 and part.wall_m > 0.0:
            d = max(d, float(part.size[0]) / 2.0)       # a rim pinch holds at the wall
        hold = max(hold, weight * d / ((4.0 / 3.0) * mu * r_pad))
        crush = part.crush_limit_n if part.crush_limit_n is not None else model.crush_limit_n
        if model.deform_limit_n is not None:
            # a force above the deformation limit damages the object too (grip.close), so
            # a grasp that needs it does not take the object whole
            crush = min(crush, model.deform_limit_n)
        if width > limit:
            reasons.append(f"{part.name} {width * 1e3:.0f} mm wide")
            continue
        if hold > min(GRIPPER_MAX_FORCE_N, crush):
            reasons.append(f"{part.name} needs {hold:.0f} N to hold, above the "
                           f"{min(GRIPPER_MAX_FORCE_N, crush):.0f} N it or the hand takes")
            continue
        if best is None or width < best[0]:
            best = (width, part.name)
    if best is not None:
        return Feasibility(True, f"its {best[1]} ({best[0] * 1e3:.0f} mm) fits the "
                           f"{limit * 1e3:.0f} mm the hand encloses")
    return Feasibility(False, "no part fits the hand: " + ", ".join(reasons)
                       + f" (the hand encloses {limit * 1e3:.0f} mm)")


def reachable(model: ObjectModel, x: float, y: float) -> bool:
    """A top grasp at the object's top is within the Panda's reach (REACH_M)."""
    wrist = np.array([x, y, float(model.size[2]) + WRIST_ABOVE_TCP_M])
    return float(np.linalg.norm(wrist - SHOULDER)) <= REACH_M


def stable(model: ObjectModel) -> bool:
    """The centre of mass is over the footprint (objects stand on their catalogue base)."""
    half = np.asarray(model.size, dtype=float)[:2] / 2.0
    com = np.asarray(model.com, dtype=float)[:2]
    return bool(np.all(np.abs(com) <= half))


def footprint_radius(model: ObjectModel) -> float:
    """Half the footprint's diagonal: the object's extent from its centre in any yaw."""
    return 0.5 * float(np.hypot(model.size[0], model.size[1]))


def extent_towards(model: ObjectModel, yaw: float, direction: np.ndarray) -> float:
    """Half-extent of the footprint box along ``direction`` (unit, world xy)."""
    c, s = math.cos(yaw), math.sin(yaw)
    ax, ay = np.array([c, s]), np.array([-s, c])
    hx, hy = float(model.size[0]) / 2.0, float(model.size[1]) / 2.0
    return abs(float(direction @ ax)) * hx + abs(float(direction @ ay)) * hy
