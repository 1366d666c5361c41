"""The seven-factor grasp quality model, Eq. 2: Q = sum_k w_k phi_k (paper Sec. IV-D).

Each phi_k in [0, 1] is computed from the physical quantities the simulator measured during
the attempt (the ``measurements`` of :class:`AttemptOutcome`), so the score explains the
outcome instead of deciding it: success comes from the physical events alone.

- phi1 position accuracy: offset of the grasped material from the pad centre (across the pad
  width and depth) and from the TCP along the closing axis, each against what the pads / the
  finger clearance tolerate; 1 - u^2 with u the worst ratio (0 once a finger would land, and
  0 when the pose is out of the arm's reach).
- phi2 width compatibility: per-side clearance (opening - material width) / 2 beyond the
  fingers' deflection allowance. Zero spare clearance scores exactly 0.4, so phi2 < 0.4 is
  the width-mismatch regime (docs/paper_facts.md threshold) in which a finger lands on the object.
- phi3 force appropriateness: where the applied force sits between the force that just holds
  the dynamic load (F_slip) and the damage limit (crush or deformation).
- phi4 grasp-type matching: how well the actual contact geometry fits the commanded type
  (power: a wide body engaged deep along the pads; pinch: a thin part; side: a horizontal
  approach).
- phi5 approach clearance: smallest gap between the swept hand and neighbours, the target's
  own parts (hand body) and the table.
- phi6 object difficulty (intrinsic, 1 = easy): fragility, low friction, mass, and the
  narrowest graspable part against the 80 mm aperture.
- phi7 grip security: capacity / load margin of the grasp under the lift's dynamic load.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Dict, Sequence

import numpy as np

from agentic_grasp.core.sim.collision import support_width
from agentic_grasp.core.sim.params import PhysicsParams, QualityParams
from agentic_grasp.core.types import GRIPPER_MAX_WIDTH_M, GraspParameters, GraspType

if TYPE_CHECKING:  # pragma: no cover
    from agentic_grasp.core.sim.physics.bodies import Body


def ramp(value: float, lo: float, hi: float) -> float:
    """0 at ``lo``, 1 at ``hi`` (either order), linear between, clipped; NaN -> 0."""
    if math.isnan(value):
        return 0.0
    if math.isinf(value):
        return 1.0 if (value > 0) == (hi > lo) else 0.0
    if hi == lo:
        return float(value >= hi)
    return float(min(1.0, max(0.0, (value - lo) / (hi - lo))))


def position_accuracy(m: Dict[str, float], prm: PhysicsParams) -> float:
    if m.get("reachable", 1.0) < 0.5:
        return 0.0                             # the arm cannot bring the TCP there at all
    x, z, off = m.get("pad_offset_x_m", math.nan), m.get("pad_offset_z_m", math.nan), \
        m.get("closing_offset_m", math.nan)
    if not (math.isfinite(x) and math.isfinite(z)):
        return 0.0
    u = max(abs(x) / (prm.pad_width_m / 2.0), abs(z) / (prm.pad_depth_m / 2.0))
    margin = m.get("opening_margin_m", math.nan) - prm.finger_clearance_m
    if math.isfinite(off):
        u = max(u, abs(off) / max(margin, 1e-3) if math.isfinite(margin) and margin >= 0
                else 0.0)
    return float(max(0.0, 1.0 - u * u))


def width_compatibility(m: Dict[str, float], prm: PhysicsParams, qp: QualityParams) -> float:
    margin = m.get("opening_margin_m", math.nan) - prm.finger_clearance_m
    if not math.isfinite(margin):
        return 0.0
    if margin >= 0.0:
        return 0.4 + 0.6 * ramp(margin, 0.0, qp.width_good_margin_m)
    return 0.4 * ramp(margin, -qp.width_bad_overlap_m, 0.0)


def force_appropriateness(m: Dict[str, float], qp: QualityParams) -> float:
    force, limit = m.get("applied_force_n", math.nan), m.get("damage_limit_n", math.inf)
    if not math.isfinite(force) or force <= 0:
        return 0.0
    high = ramp(limit / force, 1.0, qp.force_high_comfort)
    f_slip = m.get("required_force_n", math.nan)
    if math.isnan(f_slip):
        return 0.5 * high                     # no contact: only the damage side is known
    low = ramp(force / f_slip, 1.0, qp.force_low_comfort) if f_slip > 0 else 1.0
    return float(min(low, high))


def grasp_type_matching(m: Dict[str, float], g: GraspParameters, qp: QualityParams) -> float:
    extent = m.get("object_extent_m", math.nan)
    if not math.isfinite(extent):
        return 0.0
    if g.grasp_type == GraspType.POWER:
        return ramp(extent, *qp.power_extent_m) * ramp(m.get("contact_depth_m", 0.0),
                                                       *qp.power_depth_m)
    if g.grasp_type == GraspType.PINCH:
        return 1.0 - ramp(extent, *qp.pinch_extent_m)
    vertical = abs(float(g.approach[2]))
    fits = 1.0 if m.get("friction_capacity_n", 0.0) > 0 else 0.5
    return (1.0 - ramp(vertical, *qp.side_vertical_cos)) * fits


def approach_clearance(m: Dict[str, float], qp: QualityParams) -> float:
    """Neighbours and the target's own parts (the hand body must not meet them), and the
    table under the fingertips."""
    return min(ramp(m.get("min_clearance_m", math.inf), 0.0, qp.clearance_good_m),
               ramp(m.get("palm_clearance_m", math.inf), 0.0, qp.table_clearance_good_m),
               ramp(m.get("table_clearance_m", math.inf), 0.0, qp.table_clearance_good_m))


def object_difficulty(body: "Body", qp: QualityParams) -> float:
    """Intrinsic ease of the object (1 = easy), independent of the grasp."""
    inst = body.instance
    widths = []
    for solid in body.solids:
        if solid.wall > 0:
            widths.append(2.0 * float(solid.h[0]))     # containers: the rim is a part too
            widths.append(min(0.03, solid.wall * 3.0))
        else:
            widths.append(min(support_width(solid, solid.R[:, 0]),
                              support_width(solid, solid.R[:, 1])))
    narrowest = min(widths) if widths else GRIPPER_MAX_WIDTH_M
    w = qp.difficulty_weights
    hard = (w[0] * inst.fragility
            + w[1] * ramp(inst.friction, qp.difficulty_friction_range[1],
                          qp.difficulty_friction_range[0])
            + w[2] * ramp(inst.mass, *qp.difficulty_mass_range_kg)
            + w[3] * ramp(narrowest, *qp.difficulty_size_range_m))
    return float(max(0.0, 1.0 - hard / max(sum(w), 1e-9)))


def grip_security(m: Dict[str, float], qp: QualityParams) -> float:
    return ramp(m.get("hold_margin", 0.0), 1.0, qp.security_good_margin)


def compute_phi(m: Dict[str, float], g: GraspParameters, body: "Body", prm: PhysicsParams,
                qp: QualityParams) -> np.ndarray:
    """phi_1..phi_7 of one attempt from its measurements."""
    return np.array([position_accuracy(m, prm), width_compatibility(m, prm, qp),
                     force_appropriateness(m, qp), grasp_type_matching(m, g, qp),
                     approach_clearance(m, qp), object_difficulty(body, qp),
                     grip_security(m, qp)], dtype=float)


def quality_score(phi: Sequence[float], weights: Sequence[float]) -> float:
    """Eq. 2."""
    return float(np.dot(np.asarray(weights, dtype=float), np.asarray(phi, dtype=float)))
