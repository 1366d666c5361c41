"""The approach phase: the hand swept from the pre-grasp pose along the approach direction.

The hand is four boxes (palm, wrist and the two fingers at the commanded opening, franka
hand dimensions in config/sim.yaml). Their swept volumes are tested against the table,
every neighbour's box and the target's own parts (the fingers meet the target through the
rays of :mod:`contact`). A neighbour that is hit receives the impact of the hand stopped
by its collision reflex: it may break, slide or tip over (energy and displacement
criteria); see :func:`impact`.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import numpy as np

from agentic_grasp.core.sim.physics.bodies import Body, make_event
from agentic_grasp.core.sim.collision import OBB, support_width, sweep_arrays
from agentic_grasp.core.sim.physics.contact import ContactGeometry
from agentic_grasp.core.sim.params import PhysicsParams
from agentic_grasp.core.types import (GRIPPER_MAX_WIDTH_M, FailureType, GraspParameters,
                                      ObjectState, Phase, PhysicalEvent, Shape)


def _hand_local(opening: float, prm: PhysicsParams) -> Tuple[List[str], np.ndarray, np.ndarray]:
    """Names, centres and half extents of palm, wrist and both fingers (gripper frame)."""
    px, py, pz = prm.palm_size_m
    wx, wy, wz = prm.wrist_size_m
    t, L = prm.finger_thickness_m, prm.finger_length_m
    zf = (prm.z_palm + prm.z_tip) / 2.0
    centres = np.array([[0.0, 0.0, prm.z_palm - pz / 2.0],
                        [0.0, 0.0, prm.z_palm - pz - wz / 2.0],
                        [0.0, opening / 2.0 + t / 2.0, zf],
                        [0.0, -opening / 2.0 - t / 2.0, zf]])
    half = np.array([[px, py, pz], [wx, wy, wz], [prm.finger_width_m, t, L],
                     [prm.finger_width_m, t, L]]) / 2.0
    return ["palm", "wrist", "finger", "finger"], centres, half


def gripper_boxes(R: np.ndarray, p: np.ndarray, opening: float, prm: PhysicsParams) -> List[OBB]:
    """Palm, wrist and both fingers at TCP pose (R, p), gripper frame -> world."""
    names, centres, half = _hand_local(opening, prm)
    return [OBB(p + R @ c, R, h, n) for n, c, h in zip(names, centres, half)]


_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)],
                  dtype=float)


def sweep_hand(target: Body, others: List[Body], R: np.ndarray, p: np.ndarray,
               g: GraspParameters, prm: PhysicsParams) -> Dict[str, Any]:
    """Sweep the hand from the pre-grasp pose: first contacts and clearances.

    Pairs whose bounding spheres stay apart, or whose static box lies entirely beyond the
    hand box's deepest reach along the approach, are not tested further; their clearance is
    that gap (a lower bound of the distance, like the separating-axis gap of tested pairs).
    """
    a, h = g.approach, g.approach_height
    names, centres, half = _hand_local(g.width, prm)
    start = p + centres @ R.T - a * h                       # (4, 3) at the pre-grasp pose
    z1 = float(np.min(start[:, None, 2] + a[2] * h + (_SIGNS[None] * half[:, None]) @ R[2]))
    z0 = z1 - a[2] * h
    sweep_c = start + a * (h / 2.0)
    sweep_r = np.sqrt((half * half).sum(axis=1)) + h / 2.0
    static: List[Tuple[str, Any, OBB]] = [("neighbour", b, b.obb) for b in others]
    static += [("palm", None, box) for box in target.solid_boxes]
    hits: List[Tuple[float, int, str, Any, OBB]] = []
    gaps = {"neighbour": math.inf, "palm": math.inf}
    pairs: List[Tuple[int, int]] = []
    # deepest reach of each hand box along the approach at the end of the descent
    reach = centres[:, 2] + half[:, 2]
    z_axis = R[:, 2]
    for j, (kind, _, box) in enumerate(static):
        dist = np.sqrt(((sweep_c - box.c) ** 2).sum(axis=1)) - sweep_r - box.radius
        # nearest point of the box along the approach (the hand only moves towards +z)
        z_near = float((box.c - p) @ z_axis) - float(np.abs(box.R.T @ z_axis) @ box.h)
        for i in range(2 if kind == "palm" else 4):         # the fingers meet the target by rays
            ahead = z_near - reach[i]
            if dist[i] > 0.0 or ahead > 0.0:
                gaps[kind] = min(gaps[kind], max(float(dist[i]), ahead))
            else:
                pairs.append((i, j))
    if pairs:
        mi = [i for i, _ in pairs]
        boxes = [static[j][2] for _, j in pairs]
        res = sweep_arrays(start[mi], np.broadcast_to(R, (len(pairs), 3, 3)), half[mi], a, h,
                           np.array([b.c for b in boxes]), np.array([b.R for b in boxes]),
                           np.array([b.h for b in boxes]))
        for n, (i, j) in enumerate(pairs):
            kind, body, _ = static[j]
            gaps[kind] = min(gaps[kind], max(float(res.gap[n]), 0.0))
            if res.hit[n]:
                info = (body, res.normal[n]) if body is not None else res.normal[n]
                hits.append((float(res.s[n]), 2 if body is not None else 1, kind, info,
                             OBB(start[i], R, half[i], names[i])))
    tol = prm.pad_compliance_m
    if z0 < -tol:
        hits.append((0.0, 3, "table", None, None))
    elif z1 < -tol:
        hits.append((h * (z0 + tol) / (z0 - z1), 3, "table", None, None))
    return {"hits": sorted(hits, key=lambda x: (x[0], x[1])), "clearance": gaps["neighbour"],
            "palm_clearance": gaps["palm"], "table_clearance": min(z0, z1)}


def impact(body: Body, normal: np.ndarray, box: OBB, s: float, g: GraspParameters,
           prm: PhysicsParams, phase: Phase) -> Tuple[List[PhysicalEvent], Dict[str, Any], float]:
    """What the hand's impact does to an object: crush, tip over or slide it.

    The hand stops within ``collision_stop_time_s`` (collision reflex), so the impact force is
    m_eff * v_n / t_stop. A sideways push tips the object rather than sliding it when it acts
    above r / mu_table (r: half the base along the push), and then knocks it over if the
    object's kinetic energy (it takes the hand's speed) clears the potential barrier of
    rolling over its base edge, or the hand keeps pushing far enough to tilt it past it.
    """
    inst = body.instance
    v_n = g.speed if s <= 0.0 else g.speed * max(float(g.approach @ normal), 0.0)
    force = prm.hand_effective_mass_kg * v_n / prm.collision_stop_time_s
    events: List[PhysicalEvent] = []
    change: Dict[str, Any] = {}
    if force > body.model.crush_limit_n:
        change["damaged"] = True
        events.append(make_event("damaged", phase, f"impact {force:.0f} N > crush limit "
                                 f"{body.model.crush_limit_n:.0f} N", inst.id))
    n_h = np.array([normal[0], normal[1], 0.0])
    hf = float(np.linalg.norm(n_h))
    if hf > 0.5 and v_n > 0.0:
        n_h /= hf
        v_h = v_n * hf
        low = float(np.min((box.corners() + g.approach * s)[:, 2]))
        h_c = float(np.clip(low, inst.bottom_z, inst.top_z) - inst.bottom_z)
        r = float(np.abs(body.obb.R.T @ n_h) @ body.obb.h)
        h_com = max(1e-3, inst.size[2] / 2.0 + float(body.model.com[2]))
        barrier = prm.gravity_mps2 * (math.hypot(r, h_com) - h_com)
        push = v_h * prm.push_travel_time_s
        tips = h_c * prm.table_friction > r and (
            0.5 * v_h ** 2 >= barrier or push >= h_c * math.atan2(r, h_com))
        if tips and inst.upright:
            change["upright"] = False
            events.append(make_event("knocked_over", phase, f"pushed at {h_c * 100:.1f} cm "
                                     f"height with {v_h:.2f} m/s", inst.id))
            if inst.fragility >= prm.break_fragility:
                change["damaged"] = True
                events.append(make_event("damaged", phase, "broke falling over", inst.id))
            if inst.state == ObjectState.FILLED and body.model.fill is not None \
                    and body.model.fill.spillable:
                change.update(state=ObjectState.EMPTY,
                              mass=max(inst.mass - body.model.fill.mass_kg, 1e-4))
                events.append(make_event("spill", phase, "content spilled", inst.id))
        elif push > 0.0:
            change["position"] = inst.position + n_h * push
            events.append(make_event("pushed", phase, f"slid {push * 1000:.0f} mm", inst.id))
    return events, change, force


def finger_in_liquid(target: Body, R: np.ndarray, p: np.ndarray, opening: float,
                     prm: PhysicsParams) -> str:
    """Which finger dips into a filled, spillable container's liquid ('' when none).

    A finger whose tip, at the executed grasp pose, lies inside a hollow part's inner radius
    and below the liquid surface (the rim minus the freeboard) is in the content: an upright
    open container is entered from above only, so the tip height and radius decide it.
    """
    inst = target.instance
    fill = target.model.fill
    if inst.state != ObjectState.FILLED or fill is None or not fill.spillable:
        return ""
    off = opening / 2.0 + prm.finger_thickness_m / 2.0
    tips = [p + R @ np.array([0.0, side * off, prm.z_tip]) for side in (1.0, -1.0)]
    for solid in target.solids:
        if solid.wall <= 0.0 or solid.shape != Shape.CYLINDER or abs(float(solid.R[2, 2])) < 0.99:
            continue
        r_in = float(solid.h[0]) - solid.wall
        surface = float(solid.h[2]) - fill.freeboard_m
        for tip in tips:
            local = solid.R.T @ (tip - solid.c)
            if math.hypot(float(local[0]), float(local[1])) < r_in \
                    and float(local[2]) < surface and float(local[2]) > -float(solid.h[2]):
                return (f"spill: a finger enters the liquid in {inst.id} "
                        f"{(surface - float(local[2])) * 1000:.0f} mm below its surface")
    return ""


def diagnose_landing(geo: ContactGeometry, g: GraspParameters, prm: PhysicsParams,
                      surround: float) -> Tuple[FailureType, str]:
    """Why a finger lands on the target: too narrow, wrong wrist yaw, or off position."""
    if surround > GRIPPER_MAX_WIDTH_M:
        return FailureType.WIDTH_MISMATCH, (f"finger lands inside an object {surround * 1000:.0f}"
                                            f" mm wide, more than the aperture")
    width = max((w for w in (geo.land_extent, geo.extent) if math.isfinite(w)), default=math.nan)
    if math.isfinite(width) and width > g.width - 2.0 * prm.finger_clearance_m:
        if geo.width_along > GRIPPER_MAX_WIDTH_M and geo.width_across < GRIPPER_MAX_WIDTH_M:
            return FailureType.ORIENTATION, (f"closing along the long side "
                                             f"({geo.width_along * 1000:.0f} mm); across it is "
                                             f"{geo.width_across * 1000:.0f} mm")
        return FailureType.WIDTH_MISMATCH, (f"finger lands on the object: {width * 1000:.0f} mm "
                                            f"of material vs {g.width * 1000:.0f} mm opening")
    return FailureType.POSITION_ERROR, "finger lands on the object: TCP offset beyond the clearance"


def surrounding_width(target: Body, R: np.ndarray, p: np.ndarray) -> float:
    """How wide an object around the grasp axis is, when it is wider than the hand in every
    direction across the approach (a bowl around the fingers, not a banana along them): the
    smaller of its widths along the closing axis and the pad-width axis, over the target's
    parts whose outline (seen along the approach) holds the TCP; 0 when none does."""
    width = 0.0
    for solid in target.solids:
        rel = p - solid.c
        rel = rel - R[:, 2] * float(rel @ R[:, 2])          # project along the approach
        local = np.abs(solid.R.T @ rel)
        if solid.shape == Shape.BOX:
            inside = bool(np.all(local <= solid.h + 1e-9))
        else:
            inside = math.hypot(local[0], local[1]) <= solid.h[0] and local[2] <= solid.h[2]
        if inside:
            width = max(width, min(support_width(solid, R[:, 1]), support_width(solid, R[:, 0])))
    return width
