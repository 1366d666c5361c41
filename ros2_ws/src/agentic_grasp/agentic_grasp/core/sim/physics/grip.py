"""Closing and lifting: contact forces, damage, friction and torque capacity, content.

Close: the fingers stop on the outermost material inside the opening (see :mod:`contact`);
the applied force is compared with the crush limit of the touched part and the object's
deformation limit. Lift: the load (weight plus the lift's inertia, times the dynamic factor
for jerk and vibration) against what the contacts can carry (:func:`hold`); liquid in an
open container rises at the wall by the slosh of the lift's lateral acceleration and spills
over the freeboard, or spills when the container pivots in a grasp that cannot hold its
torque.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional

import numpy as np

from agentic_grasp.core.sim.physics.approach import surrounding_width
from agentic_grasp.core.sim.physics.bodies import AttemptNoise, Body, PhaseReport, make_event
from agentic_grasp.core.sim.collision import support_width
from agentic_grasp.core.sim.physics.contact import ContactGeometry
from agentic_grasp.core.sim.params import PhysicsParams
from agentic_grasp.core.types import (GRIPPER_MAX_WIDTH_M, FailureType, GraspParameters,
                                      ObjectState, Phase)


def hold(body: Body, geo: ContactGeometry, R: np.ndarray, p: np.ndarray, force: float,
         noise: AttemptNoise, prm: PhysicsParams) -> Dict[str, float]:
    """Load the grasp can carry: friction per contact minus wedging, and three torque couples.

    Per contact the pad presses with F_n = F / cos(normal, closing axis); the part of that
    push tangent to the pad drives the object along the surface. Only its component along
    the lift direction matters: sideways components make the object, still standing on the
    table, slide into a seated contact before it is lifted, while a downward component (a
    sphere squeezed above its equator, a rounded fingertip on an edge) must be overcome by
    friction for the whole lift. With flat vertical faces this gives the 2 mu F of
    docs/paper_facts.md.
    """
    u = R[2].tolist()                                   # world up in the gripper frame
    u_t = math.hypot(u[0], u[2])                        # lift component in the pad plane
    lam, mu_all, fn_all, tilt = [], [], [], 0.0
    for patch in geo.patches:
        own = body.solids[patch.solid].friction
        mu = (own if own is not None else body.instance.friction) * noise.friction_scale
        mu *= 1.0 if patch.on_pad else prm.off_pad_friction_factor
        n = patch.normal.tolist()
        f_n = force / max(abs(n[1]), 0.2)
        push_up = -f_n * (n[0] * u[0] + n[2] * u[2]) / max(u_t, 1e-9)
        down = max(0.0, -push_up)                       # wedging against the lift
        tilt = max(tilt, down / max(force, 1e-9))
        lam.append(min(max(0.0, mu * f_n - down) / max(u_t, 1e-3), (1.0 + mu) * f_n))
        mu_all.append(mu)
        fn_all.append(f_n)
    capacity = float(sum(lam))
    pa, pb = geo.patches
    xs, zs = (pa.x + pb.x) / 2.0, (pa.z + pb.z) / 2.0
    centre = p + R @ np.array([xs, (geo.y_plus + geo.y_minus) / 2.0, zs])
    lever = body.com_world() - centre
    # gravity torque per unit load, lever x (0, 0, -1), in the gripper frame: about the pad
    # width axis (normal-pressure couple), the closing axis (torsional friction) and the
    # approach axis (pressure couple across the pad width)
    arms = np.abs(R.T @ np.array([-lever[1], lever[0], 0.0])).tolist()
    caps = [force * (pa.span_z + pb.span_z) / 2.0,
            sum(2.0 / 3.0 * m * f * pt.radius for m, f, pt in zip(mu_all, fn_all, geo.patches)),
            force * (pa.span_x + pb.span_x) / 2.0]
    per_axis = [c / a if a > 1e-9 else math.inf for c, a in zip(caps, arms)]
    k = per_axis.index(min(per_axis))
    return {"capacity": capacity, "torque_limit": per_axis[k], "torque_arm": arms[k],
            "torque_cap": caps[k], "mu": sum(mu_all) / 2.0, "tilt": tilt}


def measure_contact(target: Body, geo: ContactGeometry, R: np.ndarray, p: np.ndarray,
                    g: GraspParameters, prm: PhysicsParams, noise: AttemptNoise,
                    m: Dict[str, float]) -> float:
    """Fill the contact and force measurements (also for attempts that fail earlier, so the
    quality factors can explain the failure); returns the applied force."""
    inst = target.instance
    force = g.force * noise.force_scale
    m["applied_force_n"] = force
    extent = geo.extent
    surround = 0.0 if geo.landed or geo.closed_on_material else surrounding_width(target, R, p)
    if surround > GRIPPER_MAX_WIDTH_M:
        extent = surround          # the fingers went down inside an object wider than the hand
    elif not math.isfinite(extent):            # closed on air: judge the width of the nearest part
        nearest = min(target.solids, key=lambda s: float(np.sum((s.c - p) ** 2)))
        extent = support_width(nearest, R[:, 1])
    m["object_extent_m"] = extent
    m["land_extent_m"] = geo.land_extent
    width = max(extent, geo.land_extent) if math.isfinite(geo.land_extent) else extent
    m["opening_margin_m"] = (g.width - width) / 2.0
    m["closing_offset_m"] = geo.offset
    m["pad_offset_x_m"], m["pad_offset_z_m"] = geo.pad_x, geo.pad_z
    if math.isfinite(geo.pad_x):
        m["position_error_m"] = math.hypot(math.hypot(geo.pad_x, geo.pad_z), geo.offset)
    deform = target.model.deform_limit_n or math.inf
    m["damage_limit_n"] = min(target.model.crush_limit_n, deform)
    m["load_n"] = inst.mass * (prm.gravity_mps2 + m["lift_accel_mps2"]) * prm.dynamic_load_factor
    if not geo.closed_on_material:
        m.update(friction_capacity_n=0.0, hold_margin=0.0, static_margin=0.0,
                 contact_depth_m=0.0, contact_width_m=0.0)
        return force
    pa, pb = geo.patches
    m["damage_limit_n"] = min(target.crush_limit(pa.solid), target.crush_limit(pb.solid), deform)
    held = hold(target, geo, R, p, force, noise, prm)
    load_s = inst.mass * prm.gravity_mps2
    limit_w = min(held["capacity"], held["torque_limit"])
    m.update(friction_capacity_n=held["capacity"], torque_limit_n=held["torque_limit"],
             static_margin=limit_w / load_s, hold_margin=limit_w / m["load_n"],
             friction_coefficient=held["mu"], contact_tilt=held["tilt"],
             torque_load_nm=held["torque_arm"] * m["load_n"],
             torque_capacity_nm=held["torque_cap"],
             contact_depth_m=(pa.span_z + pb.span_z) / 2.0,
             contact_width_m=(pa.span_x + pb.span_x) / 2.0,
             contact_on_pad=float(pa.on_pad and pb.on_pad))
    m["required_force_n"] = force / m["hold_margin"] if m["hold_margin"] > 0 else math.inf
    return force


def close(target: Body, geo: ContactGeometry, R: np.ndarray, force: float,
          g: GraspParameters, prm: PhysicsParams, m: Dict[str, float],
          report: PhaseReport) -> Optional[np.ndarray]:
    """The CLOSE phase. Returns the object's position after the fingers centred it, or None
    when the phase failed (closing on air, crushing, denting)."""
    inst = target.instance
    extent = m["object_extent_m"]
    travel = max(g.width - (extent if math.isfinite(extent) else 0.0), 0.0) / 2.0
    report.duration_s = travel / prm.finger_speed_mps + 0.1
    if not geo.closed_on_material:
        if math.isfinite(extent) and extent > GRIPPER_MAX_WIDTH_M:
            report.events.append(make_event(
                FailureType.WIDTH_MISMATCH, Phase.CLOSE,
                f"object {extent * 1000:.0f} mm wide surrounds the hand", inst.id))
        else:
            report.events.append(make_event(FailureType.POSITION_ERROR, Phase.CLOSE,
                                            "fingers closed on nothing", inst.id))
        return None
    # the first finger to touch pushes the object (free on the table) to the hand's centre
    shift = -R[:, 1] * (geo.y_plus + geo.y_minus) / 2.0
    shift[2] = 0.0
    position = inst.position + shift
    if abs(shift[0]) + abs(shift[1]) > 1e-4:
        report.changes.append((inst.id, {"position": position.copy()}))
    crush = min(target.crush_limit(pt.solid) for pt in geo.patches)
    deform = target.model.deform_limit_n
    if force > crush:
        report.events.append(make_event(FailureType.FORCE_DAMAGE, Phase.CLOSE,
                                        f"{force:.0f} N > crush limit {crush:.0f} N", inst.id))
    elif deform is not None and force > deform:
        report.events.append(make_event(
            FailureType.DEFORMATION, Phase.CLOSE,
            f"{force:.0f} N > deformation limit {deform:.0f} N", inst.id))
    else:
        return position
    report.changes.append((inst.id, {"damaged": True}))
    return None


def lift(target: Body, g: GraspParameters, prm: PhysicsParams, noise: AttemptNoise,
         m: Dict[str, float], report: PhaseReport, position: np.ndarray) -> bool:
    """The LIFT phase; True when the object ends up held with its content."""
    inst, model = target.instance, target.model
    report.duration_s = prm.lift_height_m / g.speed + prm.accel_ramp_s
    events: List = report.events
    change: Dict = {}
    torque_bound = m["torque_limit_n"] < m["friction_capacity_n"]
    spill = ""
    if inst.state == ObjectState.FILLED and model.fill is not None and model.fill.spillable:
        hollow = [s.h[0] - s.wall for s in target.solids if s.wall > 0]
        r_in = float(max(hollow, default=float(np.min(inst.size[:2])) / 2.0))
        a_lat = prm.slosh_lateral_fraction * m["lift_accel_mps2"]
        rise = r_in * a_lat / prm.gravity_mps2 * prm.slosh_amplification
        m["slosh_rise_m"] = rise
        if torque_bound and m["hold_margin"] < prm.grip_tilt_limit:
            spill = "spill: the container pivots in the grasp"
        elif rise > model.fill.freeboard_m and m["static_margin"] >= 1.0:
            spill = (f"spill: the liquid rises {rise * 1000:.0f} mm at the wall during the lift "
                     f"(freeboard {model.fill.freeboard_m * 1000:.0f} mm)")
    failure = None
    if m["static_margin"] < 1.0:
        why = "pivots out of the pads (torque)" if torque_bound else "friction below the weight"
        failure = make_event(FailureType.SLIP, Phase.LIFT, f"object stays on the table: {why}",
                             inst.id)
    elif m["hold_margin"] < 1.0:
        fall = prm.lift_height_m * noise.drop_fraction
        failure = make_event(FailureType.DROP, Phase.LIFT,
                             f"lost during the lift after {fall * 100:.0f} cm", inst.id)
        change["position"] = position
        if inst.size[2] > prm.drop_topple_aspect * float(np.min(inst.size[:2])):
            change["upright"] = False
        if inst.fragility >= prm.break_fragility and fall >= prm.drop_break_height_m:
            change["damaged"] = True
            events.append(make_event("damaged", Phase.LIFT, "broke when dropped", inst.id))
    if failure is not None:
        events.insert(0, failure)
    if spill:
        change.update(state=ObjectState.EMPTY, mass=max(inst.mass - model.fill.mass_kg, 1e-4))
        kind = FailureType.CONSTRAINT_VIOLATION if failure is None else "spill"
        events.append(make_event(kind, Phase.LIFT, spill, inst.id))
    success = failure is None and not spill
    if success:
        change["position"] = position + np.array([0.0, 0.0, prm.lift_height_m])
        change["held"] = True
    elif failure is None:
        change["position"] = position           # set back down once the spill is seen
    if change:
        report.changes.append((inst.id, change))
    return success
