"""Where along the object: grasp points moved along its principal axis and its parts.

The candidate search (:mod:`.candidates`) turns a strategy's grasp around the object and
about its approach; this module adds the other freedom a strategy leaves: *where along* the
object the fingers close.

- **Along the principal axis** of a long object (footprint aspect >= ``LONG_ASPECT``, or a
  lying cylinder), for a grasp around the body: the grasp point slides along the axis as far
  as the fingers stay on the body, ``L / 2 - finger_width / 2 - finger_width / 2`` (a pad's
  width of body beyond the pad), in ``ALONG_STEPS`` steps each way. Near a fragile
  neighbour the ranking by clearance then takes the point nearer the end away from it.
- **Along a part**: a grasp on a part that sticks out of the body (a handle) may move up the
  part. The handle of a body stands within the body's height, and the palm, 45 mm above the
  pads' centre (finger length 55 mm less half the 20 mm pad), must pass over the body's top:
  the grasp point rises to where the palm clears the perceived top by ``3 x tcp_sigma_z``,
  and to half way between that and the highest point whose pads still lie within the body's
  height.

Each point is a shift of the base grasp (world frame) with a label and a deviation (the
shift over the object's extent, in the units the ranking breaks ties with). The first point
is always the strategy's own (no shift).
"""
from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np

from agentic_grasp.core.grasping.config import GraspSynthesisConfig
from agentic_grasp.core.arm.closing_axis import closing_axis, wrist_yaw_for_closing_axis
from agentic_grasp.core.types import GraspParameters, ObjectInstance, Shape

#: A footprint this much longer than wide has a principal axis worth sliding along.
LONG_ASPECT = 1.5
#: Points each way along the axis (besides the strategy's own).
ALONG_STEPS = 2
#: Palm clearance above a body's top for a grasp on a part: 3 sigma of the TCP's height
#: error (config/sim.yaml tcp_sigma_z_m = 2 mm).
PALM_OVER_TOP_M = 0.006

Shift = Tuple[np.ndarray, str, float]


def principal_axis(target: ObjectInstance) -> Tuple[np.ndarray, float]:
    """(unit world direction, length) of the perceived object's long axis; length 0 when
    its footprint has none."""
    sx, sy, sz = (float(v) for v in target.size)
    yaw = float(target.yaw)
    if target.shape == Shape.CYLINDER and not target.upright:
        ang, length, width = yaw + math.pi / 2.0, sz, sx
    elif sx >= sy:
        ang, length, width = yaw, sx, sy
    else:
        ang, length, width = yaw + math.pi / 2.0, sy, sx
    if length < LONG_ASPECT * max(width, 1e-6):
        return np.zeros(3), 0.0
    return np.array([math.cos(ang), math.sin(ang), 0.0]), length


def on_part(base: GraspParameters, target: ObjectInstance) -> bool:
    """The grasp point lies outside the perceived body's footprint (on a handle)."""
    centre = np.asarray(target.position, dtype=float)
    c, s = math.cos(float(target.yaw)), math.sin(float(target.yaw))
    d = np.asarray(base.position, dtype=float)[:2] - centre[:2]
    local = np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1]])
    half = np.asarray(target.size[:2], dtype=float) / 2.0
    if target.shape in (Shape.CYLINDER, Shape.SPHERE) and target.upright:
        return float(np.hypot(*local)) > float(max(half)) + 1e-3
    if target.shape == Shape.CYLINDER:
        # lying: its length (size z) along the object's y, as principal_axis has it
        half = np.array([float(target.size[0]), float(target.size[2])]) / 2.0
    return bool(np.any(np.abs(local) > half + 1e-3))


def along_shifts(base: GraspParameters, target: ObjectInstance, cfg: GraspSynthesisConfig,
                 opening: str) -> List[Shift]:
    """The strategy's own point, then the points along the axis or the part (module
    docstring)."""
    out: List[Shift] = [(np.zeros(3), "", 0.0)]
    vertical = float(base.approach[2]) <= -0.99
    hand = cfg.hand
    if opening == "extent":
        axis, length = principal_axis(target)
        reach = length / 2.0 - hand.finger_width_m
        if length <= 0.0 or reach <= 0.0:
            return out
        for k in range(1, ALONG_STEPS + 1):
            s = reach * k / ALONG_STEPS
            for sign in (1.0, -1.0):
                out.append((axis * sign * s, f"along {sign * s * 1e3:+.0f} mm",
                            s / length))
        return out
    if vertical and on_part(base, target):
        top = float(target.position[2] + target.size[2] / 2.0)
        palm_above_tcp = hand.finger_length_m - hand.pad_depth_m / 2.0
        z0 = float(base.position[2])
        z_clear = top + PALM_OVER_TOP_M - palm_above_tcp
        z_max = top - hand.pad_depth_m / 2.0
        levels = [z for z in (z_clear, (z_clear + z_max) / 2.0) if z0 + 1e-3 < z <= z_max]
        for z in levels:
            out.append((np.array([0.0, 0.0, z - z0]), f"up the part {(z - z0) * 1e3:+.0f} mm",
                        (z - z0) / max(float(target.size[2]), 1e-3)))
    return out


#: Content preservation for a grasp on a part beside a filled container's axis (a handle):
#: the content's weight acts at the part's distance d from the axis and turns the container
#: about the closing axis, held only by the pads' torsional friction, 2 x (2/3) mu F r, so
#: F >= CONTENT_SAFETY m g d / ((4/3) mu r). m: the perceived body's volume full of water
#: (1000 kg/m^3: an upper bound of the content, walls and freeboard included, that also
#: covers the container's own mass); r: the radius of the disc of one 20 x 20 mm pad's area
#: (11 mm); mu: the lowest pad friction of the glazed and metal surfaces of containers
#: (0.35, polished steel on rubber); CONTENT_SAFETY 1.5: the lift's jerk peak (x 1.25) and
#: the hand's 5 % force error.
CONTENT_DENSITY_KG_M3 = 1000.0
CONTENT_PAD_FRICTION = 0.35
CONTENT_SAFETY = 1.5
GRAVITY = 9.81


def content_mass(target: ObjectInstance) -> float:
    """The content bound's mass (kg): the perceived body's volume full of water
    (CONTENT_DENSITY_KG_M3), a cylinder's or a box's."""
    sx, sy, sz = (float(v) for v in target.size)
    volume = math.pi * sx * sy / 4.0 * sz if target.shape == Shape.CYLINDER else sx * sy * sz
    return CONTENT_DENSITY_KG_M3 * volume


def content_grip_force(grasp: GraspParameters, target: ObjectInstance,
                       cfg: GraspSynthesisConfig) -> float:
    """The grip force a part grasp of a filled container needs against its turning (see
    CONTENT_SAFETY); 0 for a grasp on the body's axis or a container that is not filled."""
    if not on_part(grasp, target):
        return 0.0
    d = float(np.hypot(*(np.asarray(grasp.position[:2], float)
                         - np.asarray(target.position[:2], float))))
    mass = content_mass(target)
    r = math.sqrt(cfg.hand.finger_width_m * cfg.hand.pad_depth_m / math.pi)
    return CONTENT_SAFETY * mass * GRAVITY * d / (4.0 / 3.0 * CONTENT_PAD_FRICTION * r)


#: The grip a pivot rule may ask for: the Franka Hand's continuous grasping force (70 N;
#: 140 N only as a short peak), also the experience schema's bound on a stored grasp's force
#: (kb_data/schema), so an acquired handle grasp stays a valid experience.
HAND_CONTINUOUS_FORCE_N = 70.0


def pivot_grip_force(grasp: GraspParameters, target: ObjectInstance,
                     cfg: GraspSynthesisConfig) -> float:
    """The grip force a part grasp of a hollow object (a container, empty or not) needs so
    that its own weight does not turn it about the closing axis; 0 for a grasp on the body.

    The same couple as :func:`content_grip_force`: the weight acts at the part's distance d
    from the body's axis and only the pads' torsional friction holds it. The mass bound is
    the same too: a container's own mass stays below the water its perceived volume holds
    (its mean density is below 1000 kg/m^3: the 8 x 9 cm ceramic cup 118 g against 450 g,
    a 12 cm stoneware mug 0.36 kg against 0.60 kg), so the bound that covers a filled
    container's content also covers an empty one. The caller applies it to containers only
    (a solid object's mass is not bounded by its volume of water) and not to fragile ones
    (the force that holds the torque could crush them)."""
    return content_grip_force(grasp, target, cfg)


#: The lightest a rigid, non-fragile handled container weighs for the water its perceived
#: volume holds: a ceramic mug, 118 g for 450 ml (0.26; pivot_grip_force's docstring);
#: thinner walls (paper, thin plastic) are fragile, which the rule leaves alone. The content
#: bound of :func:`content_grip_force` over-states an empty container's weight by at most
#: 1 / LIGHTEST_CONTAINER_FRACTION, so the grip a part grasp needs is at least that fraction
#: of the bound. The decision hangs on no digit of it: at the bound a 15 x 22 cm kettle's
#: handle needs 14 times the hand's 70 N and the tallest mug's 1.3 times, so any fraction
#: from 0.07 to 0.79 sends the one to its rim and keeps the other on its handle.
LIGHTEST_CONTAINER_FRACTION = 0.118 / 0.45


def part_cannot_hold(grasp: GraspParameters, target: ObjectInstance,
                     cfg: GraspSynthesisConfig) -> bool:
    """A part grasp (a handle) whose pads' torsional friction cannot hold the container's
    weight's moment at the hand's continuous grip, however light the container is for its
    size: even LIGHTEST_CONTAINER_FRACTION of the content bound needs more than
    HAND_CONTINUOUS_FORCE_N. The 15 x 22 cm kettle's handle, 92 mm from the axis, needs
    about 1000 N by the bound, 260 N at that fraction; a 7 x 10 cm mug's handle 51 N and 13
    N, which the hand gives."""
    need = content_grip_force(grasp, target, cfg)
    return need * LIGHTEST_CONTAINER_FRACTION > HAND_CONTINUOUS_FORCE_N


def rim_grip_force(target: ObjectInstance, cfg: GraspSynthesisConfig) -> float:
    """The grip force a rim pinch of a container needs against its turning about the
    closing axis, with the same content bound and safety as :func:`content_grip_force`:
    pinched radially at the rim, the weight acts at the body's radius R from the pads and
    the pads' pressure couple holds it with the pad's depth d as its lever, F d, so
    F >= CONTENT_SAFETY m g R / d."""
    radius = min(float(target.size[0]), float(target.size[1])) / 2.0
    return CONTENT_SAFETY * content_mass(target) * GRAVITY * radius / cfg.hand.pad_depth_m


#: Outward pitches of a grasp on a part that sticks out of the body: the 10-degree grid of
#: ``tilts_rad``, up to the last step below 45 degrees (beyond it the approach is nearer
#: horizontal than vertical, and a horizontal approach from beyond the object points the
#: hand back at the robot; IK-reachability then rules on each).
PITCH_STEP_RAD = math.radians(10.0)
PITCH_MAX_RAD = math.radians(45.0)


def part_pitches(base: GraspParameters, target: ObjectInstance,
                 cfg: GraspSynthesisConfig) -> List[Tuple[GraspParameters, str, float]]:
    """A top-down grasp on a part outside the body (a handle), pitched outward: the approach
    tilts about the closing axis, away from the body, so the hand leans away from it.

    The closing axis is kept, so the pads stay flat on the part's faces (a roll about the
    part's radial line tilts them against a flat face, which grips along an edge), while the
    palm's lower edge and the wrist move out by about (palm height over the pads) x sin(t):
    away from the body and from a neighbour beside it. The pads' inner lower corner would
    move in by (w/2)(1 - cos t) + (d/2) sin t (pad width w, pad depth d), so the grasp point
    moves out by that much along the lean and the fingers clear the body as before.

    The pitches are also taken with the closing axis turned by each of the search's wrist
    offsets a part allows (``wrist_offsets_rad`` within ``part_wrist_limit_rad``, the
    opening widened by 1 / cos as for the untilted turns): the pitch then tilts about the
    turned axis, in the vertical plane normal to it, towards the side away from the body.
    A handle turned towards a neighbour puts the palm's end, 10 cm along the closing axis,
    over that neighbour; the turn swings that end away while the pitch lifts the palm off
    the body: neither alone may clear both.
    Returns (grasp, label, deviation = the pitch plus the turn in rad); none for a grasp on
    the body."""
    if float(base.approach[2]) > -0.99 or not on_part(base, target):
        return []
    radial = np.asarray(base.position[:2], float) - np.asarray(target.position[:2], float)
    n = float(np.linalg.norm(radial))
    if n < 1e-6:
        return []
    r = np.array([radial[0] / n, radial[1] / n, 0.0])
    axis0 = closing_axis(base.approach, base.wrist_yaw)
    w, d = cfg.hand.finger_width_m, cfg.hand.pad_depth_m
    deltas = [x for x in cfg.wrist_offsets_rad if abs(x) <= cfg.part_wrist_limit_rad + 1e-9]
    if not any(abs(x) < 1e-12 for x in deltas):
        deltas = [0.0] + list(deltas)
    out = []
    for delta in deltas:
        c, s = math.cos(delta), math.sin(delta)
        axis = np.array([c * axis0[0] - s * axis0[1], s * axis0[0] + c * axis0[1], 0.0])
        # the horizontal normal of the (turned) closing axis on the part's outer side
        lean = np.array([-axis[1], axis[0], 0.0])
        norm = float(np.linalg.norm(lean))
        if norm < 1e-9:
            continue
        lean = lean / norm
        if float(lean @ r) < 0.0:
            lean = -lean
        width = float(base.width) if abs(delta) < 1e-12 else min(
            cfg.hand.max_opening_m, float(base.width) / math.cos(delta))
        turn = f"wrist {math.degrees(delta):+.0f} deg, "
        k = 1
        while k * PITCH_STEP_RAD < PITCH_MAX_RAD:
            tilt = k * PITCH_STEP_RAD
            a = np.array([0.0, 0.0, -math.cos(tilt)]) - math.sin(tilt) * lean
            shift = w / 2.0 * (1.0 - math.cos(tilt)) + d / 2.0 * math.sin(tilt)
            g = base.copy(position=np.asarray(base.position, float) + lean * shift,
                          approach=a, wrist_yaw=wrist_yaw_for_closing_axis(a, axis),
                          width=width)
            out.append((g, f"{turn}pitched {math.degrees(tilt):.0f} deg out along the "
                           f"part, {shift * 1e3:+.0f} mm", tilt + abs(delta)))
            k += 1
    return out


def finger_body_gap(finger_corners: np.ndarray, target: ObjectInstance) -> float:
    """Smallest horizontal gap of the finger boxes' corners (N, 3) outside a standing round
    body's circle (< 0: a finger inside it): a round body curves away from the fingers of
    a grasp on its handle, which its square bounding box would not show."""
    centre = np.asarray(target.position, dtype=float)
    r = float(max(target.size[0], target.size[1])) / 2.0
    radial = np.hypot(finger_corners[:, 0] - centre[0], finger_corners[:, 1] - centre[1])
    below_top = finger_corners[:, 2] <= centre[2] + float(target.size[2]) / 2.0
    if not np.any(below_top):
        return math.inf
    return float(np.min(radial[below_top]) - r)


__all__ = ["ALONG_STEPS", "HAND_CONTINUOUS_FORCE_N", "LIGHTEST_CONTAINER_FRACTION",
           "LONG_ASPECT", "PALM_OVER_TOP_M", "along_shifts", "content_grip_force", "content_mass",
           "finger_body_gap", "on_part", "part_cannot_hold", "part_pitches",
           "pivot_grip_force", "principal_axis", "rim_grip_force"]
