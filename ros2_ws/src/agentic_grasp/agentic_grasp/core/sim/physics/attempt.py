"""One grasp attempt as physics: approach, close, lift (paper Sec. V-A).

:func:`plan_attempt` computes, for one set of noise draws, everything that will happen: the
events of each phase, the state changes they cause and the measured quantities. Nothing here
knows task ids, object names or planner configurations; outcomes follow from geometry,
forces, friction and noise:
- APPROACH: IK for the pre-grasp and grasp poses (UNREACHABLE_POSE); the hand swept along
  the approach against the table, neighbours (COLLISION; knocked over / slid / damaged by
  the impact) and the target itself (palm: APPROACH_ANGLE; finger landing: WIDTH_MISMATCH,
  ORIENTATION or POSITION_ERROR depending on why it lands);
- CLOSE: fingers close on air (POSITION_ERROR, or WIDTH_MISMATCH when the object surrounds
  the hand), crush (FORCE_DAMAGE) and denting (DEFORMATION) against the object's limits;
- LIFT: friction cone with contact-normal wedging and torsional / pressure couples against
  gravity plus lift inertia (SLIP when the static load is not held, DROP when the dynamic
  one is not), liquid content sloshing or tilting (CONSTRAINT_VIOLATION "spill");
- a finger that reaches into a filled container's liquid (inside the rim, below the surface)
  spills it in the APPROACH phase (CONSTRAINT_VIOLATION).

The pieces live in :mod:`.approach` (hand sweep, impacts on neighbours, landing diagnosis),
:mod:`.contact` (where the fingers meet the target), :mod:`.grip` (close and lift) and
:mod:`..quality` (Eq. 2 from the measurements).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import numpy as np

from agentic_grasp.core.sim import quality
from agentic_grasp.core.sim.physics.approach import (diagnose_landing, finger_in_liquid, impact,
                                                     surrounding_width, sweep_hand)
from agentic_grasp.core.sim.physics.bodies import (AttemptNoise, AttemptPlan, Body, PhaseReport,
                                                   make_event)
from agentic_grasp.core.sim.physics.contact import analyse
from agentic_grasp.core.sim.physics.grip import close, lift, measure_contact
from agentic_grasp.core.sim.params import PhysicsParams, QualityParams
from agentic_grasp.core.sim.sensors import AttemptTruth, SensorModel, observe
from agentic_grasp.core.types import FailureType, GraspParameters, ObjectState, Phase

__all__ = ["AttemptNoise", "AttemptPlan", "Body", "MEASUREMENT_KEYS", "PhaseReport",
           "plan_attempt"]

#: Keys of AttemptOutcome.measurements (always all present; NaN where a quantity does not
#: exist in this attempt, e.g. contact quantities when the fingers never closed on the
#: object; required_force_n is inf when no force can hold the object in that contact).
MEASUREMENT_KEYS = (
    "reachable",            # 1 when IK found pre-grasp and grasp poses
    "tcp_error_m",          # execution error of the TCP (noise), m
    "position_error_m",     # offset of the grasped material from the pad centre / TCP, m
    "pad_offset_x_m", "pad_offset_z_m", "closing_offset_m",   # its components
    "object_extent_m",      # material width the fingers enclose (or surround), m
    "land_extent_m",        # material width where a finger landed, m
    "opening_m", "opening_margin_m",   # commanded opening; per-side clearance (o - extent) / 2
    "applied_force_n",      # grip force actually applied (force noise), N
    "required_force_n",     # force for which the grasp just holds the dynamic load, N
    "friction_capacity_n",  # load the friction contacts carry (wedging included), N
    "torque_limit_n",       # load the torque couples carry, N
    "load_n",               # m (g + a_lift) * dynamic factor, N
    "static_margin", "hold_margin",    # capacity / static load, capacity / dynamic load
    "friction_coefficient", "contact_tilt", "contact_on_pad",
    "contact_depth_m", "contact_width_m",   # contact patch extent along / across the finger
    "torque_load_nm", "torque_capacity_nm",
    "crush_limit_n", "deform_limit_n", "damage_limit_n",
    "min_clearance_m",      # smallest gap hand-neighbours over the approach (capped at 1 m)
    "palm_clearance_m",     # smallest gap hand body-target
    "table_clearance_m",    # lowest point of the hand above the table
    "impact_force_n",       # force of the hand hitting something during the approach
    "lift_accel_mps2", "slosh_rise_m",
)


def plan_attempt(target: Body, others: List[Body], g: GraspParameters, prm: PhysicsParams,
                 qp: QualityParams, noise: AttemptNoise, kinematics: Any,
                 sensor_rng: Optional[np.random.Generator] = None,
                 sensors: Optional[SensorModel] = None) -> AttemptPlan:
    """All consequences of executing grasp ``g`` on ``target`` with this noise, and what
    the arm's sensors report of them (:mod:`..sensors`, drawn from ``sensor_rng``)."""
    inst = target.instance
    truth = AttemptTruth()
    reports = {Phase.APPROACH: PhaseReport()}
    approach = reports[Phase.APPROACH]
    a, h = g.approach, g.approach_height
    m: Dict[str, float] = {"opening_m": g.width, "applied_force_n": math.nan,
                           "lift_accel_mps2": prm.lift_accel(g.speed),
                           "crush_limit_n": target.model.crush_limit_n,
                           "deform_limit_n": target.model.deform_limit_n or math.nan,
                           "tcp_error_m": float(np.linalg.norm(noise.tcp))}
    # ---- kinematics (commanded poses)
    q_pre = kinematics.solve_grasp(g.position - a * h, a, g.wrist_yaw)
    q_grasp = None if q_pre is None else kinematics.solve_grasp(g.position, a, g.wrist_yaw,
                                                                seed=q_pre)
    reachable = q_grasp is not None
    m["reachable"] = float(reachable)
    truth.reachable = reachable
    truth.unreachable_pose = "pre-grasp" if q_pre is None else "grasp"
    # ---- executed pose (noise) and geometry
    p = g.position + noise.tcp
    R = kinematics.tcp_pose(p, a, g.wrist_yaw + noise.yaw)[:3, :3]
    sweep_info = sweep_hand(target, others, R, p, g, prm)
    geo = analyse(target.solids, R, p, g.width, h, prm)
    m["min_clearance_m"] = min(sweep_info["clearance"], 1.0)
    m["palm_clearance_m"] = min(sweep_info["palm_clearance"], 1.0)
    m["table_clearance_m"] = sweep_info["table_clearance"]
    hits = list(sweep_info["hits"])
    if geo.landed:
        hits.append((geo.land_s, 0, "finger", None, None))
        hits.sort(key=lambda x: (x[0], x[1]))
    failed: Optional[Phase] = None
    approach.duration_s = prm.transit_time_s + h / g.speed
    if not reachable:
        which = "pre-grasp" if q_pre is None else "grasp"
        approach.events.append(make_event(
            FailureType.UNREACHABLE_POSE, Phase.APPROACH,
            f"no IK solution within joint limits for the {which} pose"))
        approach.duration_s = 0.0
        failed = Phase.APPROACH
    elif hits:
        s, _, kind, info, box = hits[0]
        approach.duration_s = prm.transit_time_s + s / g.speed
        failed = Phase.APPROACH
        truth.stop_tcp = p - a * (h - s)
        truth.contact_point = _contact_point(kind, box, truth.stop_tcp, R, a, s, g, geo, prm)
        if kind == "neighbour":
            body, normal = info
            approach.events.append(make_event(
                FailureType.COLLISION, Phase.APPROACH,
                f"{box.name} hits {body.instance.id} after {s * 1000:.0f} mm of approach",
                body.instance.id))
            evs, change, force = impact(body, normal, box, s, g, prm, Phase.APPROACH)
            approach.events += evs
            if change:
                approach.changes.append((body.instance.id, change))
            m["impact_force_n"] = force
            truth.impact_n = force
            m["min_clearance_m"] = 0.0
        elif kind == "table":
            truth.impact_n = prm.hand_effective_mass_kg * g.speed / prm.collision_stop_time_s
            approach.events.append(make_event(FailureType.COLLISION, Phase.APPROACH,
                                              "hand reaches the table", "table"))
            m["table_clearance_m"] = min(m["table_clearance_m"], 0.0)
        else:
            if kind == "palm":
                ftype, detail = FailureType.APPROACH_ANGLE, \
                    "the hand body meets the target before the fingers reach the grasp point"
                m["palm_clearance_m"] = 0.0
            else:
                ftype, detail = diagnose_landing(geo, g, prm, surrounding_width(target, R, p))
            approach.events.append(make_event(ftype, Phase.APPROACH, detail, inst.id))
            force = prm.hand_effective_mass_kg * g.speed / prm.collision_stop_time_s
            m["impact_force_n"] = force
            truth.impact_n = force
            if force > target.model.crush_limit_n:
                approach.events.append(make_event("damaged", Phase.APPROACH,
                                                  f"impact {force:.0f} N", inst.id))
                approach.changes.append((inst.id, {"damaged": True}))
    if failed is None:
        dipped = finger_in_liquid(target, R, p, g.width, prm)
        if dipped:
            fill = target.model.fill
            approach.events.append(make_event(FailureType.CONSTRAINT_VIOLATION,
                                              Phase.APPROACH, dipped, inst.id))
            approach.changes.append((inst.id, {"state": ObjectState.EMPTY,
                                               "mass": max(inst.mass - fill.mass_kg, 1e-4)}))
            failed = Phase.APPROACH
            truth.ended_unfelt = True
    force = measure_contact(target, geo, R, p, g, prm, noise, m)
    if failed is None:
        report = reports[Phase.CLOSE] = PhaseReport()
        _closing_truth(truth, target, geo, force, noise)
        position = close(target, geo, R, force, g, prm, m, report)
        if position is None:
            failed = Phase.CLOSE
        else:
            report = reports[Phase.LIFT] = PhaseReport()
            held = lift(target, g, prm, noise, m, report, position)
            _lift_truth(truth, target, m, report, position, prm)
            if not held:
                failed = Phase.LIFT
    m = {key: float(m.get(key, math.nan)) for key in MEASUREMENT_KEYS}
    phi = quality.compute_phi(m, g, target, prm, qp)
    plan = AttemptPlan(reports, failed, m, phi, quality.quality_score(phi, qp.weights))
    duration = sum(r.duration_s for r in reports.values())
    plan.observation = observe(truth, g, p, failed, duration, prm.gravity_mps2,
                               sensors or SensorModel(),
                               sensor_rng if sensor_rng is not None
                               else np.random.default_rng(0))
    return plan


def _contact_point(kind: str, box: Any, stop_tcp: np.ndarray, R: np.ndarray, a: np.ndarray,
                   s: float, g: GraspParameters, geo: Any, prm: PhysicsParams) -> np.ndarray:
    """Where the hand was touched when it stopped (world): the landing finger's tip, the
    palm's face, the hit box's centre (a neighbour), or between the fingertips (table)."""
    if kind == "finger":
        sides = getattr(geo, "land_sides", ()) or \
            ((1,) if not math.isfinite(geo.offset) or geo.offset >= 0.0 else (-1,))
        # both fingers on the material push between them; one, at its own tip
        y = sum(sides) / len(sides) * (g.width / 2.0 + prm.finger_thickness_m / 2.0)
        return stop_tcp + R @ np.array([0.0, y, prm.z_tip])
    if kind == "palm":
        return stop_tcp + R @ np.array([0.0, 0.0, prm.z_palm])
    if kind == "neighbour" and box is not None:
        return np.asarray(box.c, dtype=float) + a * s
    return stop_tcp + R @ np.array([0.0, 0.0, prm.z_tip])


def _closing_truth(truth: AttemptTruth, target: Body, geo: Any, force: float,
                   noise: AttemptNoise) -> None:
    """The material between the pads and the (commanded-force equivalent) force at which
    it gives way: the grip rises to ``force`` = commanded x the force noise."""
    if not geo.closed_on_material:
        return
    truth.contact_width_m = float(geo.y_plus - geo.y_minus)
    crush = min(target.crush_limit(pt.solid) for pt in geo.patches)
    deform = target.model.deform_limit_n
    if force > crush:
        truth.yield_force_n, truth.crushed = crush / noise.force_scale, True
    elif deform is not None and force > deform:
        truth.yield_force_n = deform / noise.force_scale


def _lift_truth(truth: AttemptTruth, target: Body, m: Dict[str, float], report: PhaseReport,
                position: np.ndarray, prm: PhysicsParams) -> None:
    """The load the pads carry at lift-off and what becomes of the object in the lift."""
    inst = target.instance
    truth.com = target.com_world() + (np.asarray(position) - inst.position)
    truth.mass_kg = float(inst.mass)
    weight = inst.mass * prm.gravity_mps2
    kinds = {e.kind for e in report.events}
    if m["static_margin"] < 1.0:
        truth.lost_at_liftoff = True
        truth.carried_n = max(float(m["static_margin"]), 0.0) * weight
        return
    truth.carried_n = weight
    truth.lost_in_lift = FailureType.DROP.value in kinds
    truth.mass_after_kg = float(inst.mass)
    for _, change in report.changes:
        if "mass" in change:
            truth.mass_after_kg = float(change["mass"])
