"""Clearance-aware candidate grasps.

Around a base grasp (a retrieved strategy fitted to the perceived object) the generator
varies what the strategy leaves free: the grasp point around a round object (a rim pinch
can be taken anywhere on the rim; a box is symmetric under a half turn), the wrist yaw
(any yaw for a grasp around the body, whose opening is refitted to the extent across the
new closing axis; up to ``part_wrist_limit_rad`` for a part, the opening widened by
1 / cos), and approach tilts away from each perceived neighbour. Each candidate's hand is
swept along its approach against the perceived neighbours' boxes (:mod:`.hand`); hard
limits: fingertips above the table, palm and wrist clear of the target, and no finger inside
the rim of a filled container. The chosen candidate has the largest clearance, counted up
to ``required_clearance_m`` (beyond it more clearance buys nothing); ties go to the smallest
change from the strategy. Without a feasible candidate the least-bad one is returned and
flagged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from agentic_grasp.core.grasping.along import along_shifts, part_pitches
from agentic_grasp.core.grasping.config import GraspSynthesisConfig
from agentic_grasp.core.grasping.fit import extent_at
from agentic_grasp.core.geometry import yaw_matrix
from agentic_grasp.core.grasping.hand import Box, HandModel, gap_arrays, object_box
from agentic_grasp.core.arm.closing_axis import closing_axis, wrist_yaw_for_closing_axis
from agentic_grasp.core.types import GraspParameters, ObjectInstance, Shape

VERTICAL = np.array([0.0, 0.0, -1.0])

#: A finger beside the body (a grasp on its handle) must clear it by one sigma of the
#: TCP's lateral error (config/sim.yaml tcp_sigma_xy_m, 3 mm): nearer, the lateral error
#: lands that finger on the body in more than one attempt in six.
FINGER_BODY_MARGIN_M = 0.003


@dataclass
class Candidate:
    grasp: GraspParameters
    clearance_m: float              # swept hand vs perceived neighbours
    nearest: str                    # "<hand part> vs <object id>"
    table_gap_m: float
    target_gap_m: float             # palm / wrist vs the target's box
    feasible: bool
    deviation: float
    label: str

    def to_dict(self) -> Dict[str, Any]:
        def r(v: float) -> Optional[float]:
            return None if not math.isfinite(v) else round(float(v), 4)
        return {"label": self.label, "clearance_m": r(self.clearance_m),
                "nearest": self.nearest, "table_gap_m": r(self.table_gap_m),
                "target_gap_m": r(self.target_gap_m), "feasible": self.feasible,
                "grasp": self.grasp.to_dict()}


@dataclass
class CandidateSet:
    ranked: List[Candidate] = field(default_factory=list)
    n_generated: int = 0
    collision_free: bool = True
    notes: List[str] = field(default_factory=list)

    @property
    def best(self) -> Optional[Candidate]:
        return self.ranked[0] if self.ranked else None

    def summary(self) -> Dict[str, Any]:
        best = self.best
        return {"n_candidates": self.n_generated, "collision_free": self.collision_free,
                "chosen": None if best is None else best.to_dict(), "notes": list(self.notes)}


def _tilted(base: GraspParameters, tilt: float, away: np.ndarray,
            axis: Optional[np.ndarray] = None) -> GraspParameters:
    """The grasp with its approach tilted by ``tilt`` so the hand leans towards ``away``
    (same finger line), as the paper's collision bias does. ``axis``: ``base``'s closing
    axis when the caller already has it (one per grasp, however many tilts)."""
    a = base.approach - math.tan(tilt) * np.array([away[0], away[1], 0.0])
    a = a / np.linalg.norm(a)
    if axis is None:
        axis = closing_axis(base.approach, base.wrist_yaw)
    if abs(float(axis @ a)) > 0.95:
        return base.copy(approach=a)
    return base.copy(approach=a, wrist_yaw=wrist_yaw_for_closing_axis(a, axis))


def _opened(g: GraspParameters, target: ObjectInstance, cfg: GraspSynthesisConfig
            ) -> Optional[GraspParameters]:
    """``g`` opened to the perceived body's section across its closing axis plus the fit
    margin (capped at the hand's opening), None when the section leaves no finger clearance."""
    max_w = cfg.hand.max_opening_m
    extent = extent_at(target, g, cfg.hand.pad_depth_m)
    if extent > max_w - 2.0 * cfg.finger_clearance_m:
        return None
    return g.copy(width=min(max_w, extent + cfg.opening_margin_m))


def _score(grasps: Sequence[GraspParameters], labels: Sequence[str], devs: Sequence[float],
           base: GraspParameters, target: ObjectInstance, neighbours: Sequence[Box],
           hand: HandModel, cfg: GraspSynthesisConfig, filled: bool) -> List[Candidate]:
    """Sweep each grasp's hand against the neighbours, the table and the target (unsorted)."""
    centre = np.asarray(target.position, dtype=float)
    sx, sy = float(target.size[0]), float(target.size[1])
    # one TCP rotation per grasp serves its swept boxes, lowest point and finger points;
    # the boxes of all grasps are built as arrays at once (HandModel.swept_arrays)
    rotations = [hand.rotation(g) for g in grasps]
    centres, halves, rots, lowest, at = hand.swept_arrays(grasps, rotations, with_pose=True)
    nb = centres.shape[1]
    Ac, Ah = centres.reshape(-1, 3), halves.reshape(-1, 3)
    AR = np.repeat(rots, nb, axis=0)
    gaps = gap_arrays(Ac, AR, Ah, *_box_arrays(neighbours)).reshape(len(grasps), nb, -1) \
        if neighbours else np.full((len(grasps), nb, 1), np.inf)
    if neighbours:
        # Boxes sharing a name bound one round neighbour (its box and the box turned 45 deg,
        # clearance.round_boxes): it lies inside both, so the larger gap bounds its distance.
        nb_names = [n.name for n in neighbours]
        unique = list(dict.fromkeys(nb_names))
        if len(unique) < len(nb_names):
            gaps = np.stack([gaps[:, :, [j for j, n in enumerate(nb_names) if n == u]]
                             .max(axis=2) for u in unique], axis=2)
            neighbours = [neighbours[nb_names.index(u)] for u in unique]
    tgt = gap_arrays(Ac, AR, Ah, *_box_arrays([object_box(target)])).reshape(len(grasps), nb)
    names = [name for name, _, _ in hand.local_boxes(0.0)]
    cands: List[Candidate] = []
    half_in = min(sx, sy) / 2.0 - cfg.filled_rim_wall_m
    local = yaw_matrix(float(target.yaw)).T @ (base.position - centre)
    outside = bool(np.any(np.abs(local[:2]) > np.asarray(target.size[:2]) / 2.0))
    round_body = target.shape == Shape.CYLINDER and bool(target.upright) \
        and abs(sx - sy) < 0.004
    if round_body:
        outside = float(np.hypot(*local[:2])) > sx / 2.0
    body_gaps: List[float] = []
    if outside and round_body:
        body_gaps = _round_body_gaps(hand, grasps, rotations, at, target)
    nearest_k = np.argmin(gaps.reshape(len(grasps), -1), axis=1).tolist()
    palm_wrist = tgt[:, [j for j, n in enumerate(names) if n in ("palm", "wrist")]].min(axis=1)
    finger_tgt = tgt[:, [j for j, n in enumerate(names) if n == "finger"]].min(axis=1)
    n_nb = gaps.shape[2]
    for i, g in enumerate(grasps):
        k = divmod(nearest_k[i], n_nb)
        clear = float(gaps[i][k])
        nearest = "" if not neighbours else f"{names[k[0]]} vs {neighbours[k[1]].name}"
        table = float(lowest[i])
        t_gap = float(palm_wrist[i])
        feasible = table >= 0.0 and t_gap > 0.0 and clear > 0.0
        if outside:     # a part outside the body (a handle): the fingers must clear the body
            if round_body:
                f_gap = body_gaps[i]
            else:
                f_gap = float(finger_tgt[i])
            if f_gap <= FINGER_BODY_MARGIN_M:
                feasible = False
                nearest = (nearest + "; " if nearest else "") + "finger meets the body"
        if filled:
            fingers = hand.finger_points(g, rotation=rotations[i])
            if np.any(np.linalg.norm(fingers[:, :2] - centre[:2], axis=1) < half_in):
                feasible = False
                nearest = (nearest + "; " if nearest else "") + "finger inside the rim"
        cands.append(Candidate(g, clear, nearest, table, t_gap, feasible, devs[i], labels[i]))
    return cands


#: A neighbour's away direction within this angle of a part grasp's closing axis makes a
#: roll (a tilt about the part's radial line); farther off, the tilt would swing the fingers
#: towards the body.
ROLL_CONE_RAD = math.pi / 4.0


def roll_dirs(grasp: GraspParameters, away_dirs: Sequence[np.ndarray]) -> List[np.ndarray]:
    """The away directions of a part grasp along which a tilt is a roll (ROLL_CONE_RAD)."""
    axis = closing_axis(grasp.approach, grasp.wrist_yaw)
    out = []
    for u in away_dirs:
        h = np.array([u[0], u[1], 0.0])
        n = float(np.linalg.norm(h))
        if n > 1e-9 and abs(float(h @ axis)) / n >= math.cos(ROLL_CONE_RAD):
            out.append(u)
    return out


def _box_arrays(boxes: Sequence[Box]) -> tuple:
    """Centres, rotations and half extents of ``boxes`` as the arrays gap_arrays takes."""
    return tuple(np.array([getattr(b, k) for b in boxes]) for k in ("c", "R", "h"))


def _finger_samples(boxes: Sequence[Box]) -> np.ndarray:
    """Points on the fingers' boxes (corners, edge midpoints, face centres of the top and
    bottom faces): where a finger meets a round body first."""
    grid = np.array([[x, y, z] for x in (-1.0, 0.0, 1.0) for y in (-1.0, 0.0, 1.0)
                     for z in (-1.0, 1.0)])
    pts = [b.c + (grid * b.h) @ b.R.T for b in boxes if b.name == "finger"]
    return np.concatenate(pts, axis=0)


#: Corners, edge midpoints and face centres of a box's top and bottom faces, in half extents.
_FACE_GRID = np.array([[x, y, z] for x in (-1.0, 0.0, 1.0) for y in (-1.0, 0.0, 1.0)
                       for z in (-1.0, 1.0)])


def _round_body_gaps(hand: HandModel, grasps: Sequence[GraspParameters],
                     rotations: Sequence[np.ndarray], at: np.ndarray,
                     target: ObjectInstance) -> List[float]:
    """Per grasp, ``min(finger_body_gap(_finger_samples(boxes(g, swept=False))),
    finger_body_gap(_between_fingers(g)))``, bit for bit: the same points (each finger box
    at its grasp-pose centre ``at`` from :meth:`HandModel.swept_arrays`, the same per-grasp
    products), and one masked minimum over both point sets of all grasps. A minimum is
    exact, and ``x - r`` is monotonic in ``x``, so min(a - r, b - r) = min(a, b) - r."""
    local = hand.local_boxes(0.0)
    fingers = [(k, half) for k, (name, _, half) in enumerate(local) if name == "finger"]
    n_face = len(_FACE_GRID)
    pts = np.empty((len(grasps), n_face * len(fingers) + 30, 3))
    for i, (g, R) in enumerate(zip(grasps, rotations)):
        for j, (k, half) in enumerate(fingers):
            pts[i, j * n_face:(j + 1) * n_face] = at[i, k] + (_FACE_GRID * half) @ R.T
        pts[i, n_face * len(fingers):] = _between_fingers(hand, g, R)
    centre = np.asarray(target.position, dtype=float)
    r = float(max(target.size[0], target.size[1])) / 2.0
    radial = np.hypot(pts[..., 0] - centre[0], pts[..., 1] - centre[1])
    below_top = pts[..., 2] <= centre[2] + float(target.size[2]) / 2.0
    return (np.where(below_top, radial, np.inf).min(axis=1) - r).tolist()


def _between_fingers(hand: HandModel, grasp: GraspParameters,
                     rotation: Optional[np.ndarray] = None) -> np.ndarray:
    """Points of the region the pads close over (pad width x opening x pad depth): material
    there is what the fingers must span, so a round body in it makes the part too wide.
    ``rotation``: the hand's rotation at ``grasp`` when the caller has it."""
    c = hand.cfg
    R = hand.rotation(grasp) if rotation is None else rotation
    w = min(float(grasp.width), c.max_opening_m)
    grid = np.array([[x * c.finger_width_m / 2.0, y * w / 2.0, z * c.pad_depth_m / 2.0]
                     for x in (-1.0, 0.0, 1.0) for y in (-1.0, -0.5, 0.0, 0.5, 1.0)
                     for z in (-1.0, 1.0)])
    return np.asarray(grasp.position, dtype=float) + grid @ R.T


def generate_candidates(base: GraspParameters, target: ObjectInstance,
                        neighbours: Sequence[Box], cfg: GraspSynthesisConfig,
                        hand: HandModel, opening: str = "part", vertical_only: bool = False,
                        filled: bool = False, away_dirs: Sequence[np.ndarray] = (),
                        roll: Optional[bool] = None) -> CandidateSet:
    """Rank candidates around ``base`` (module docstring). A part grasp is rolled (``roll``)
    only when no untilted candidate is feasible: a pad tilted against a flat part's face
    touches it along an edge, which grips less than the whole pad."""
    if roll is None and opening != "extent" and float(base.approach[2]) <= -0.99 \
            and len(away_dirs):
        flat = generate_candidates(base, target, neighbours, cfg, hand, opening,
                                   vertical_only, filled, away_dirs, roll=False)
        if flat.collision_free or not flat.ranked:
            return flat
        return generate_candidates(base, target, neighbours, cfg, hand, opening,
                                   vertical_only, filled, away_dirs, roll=True)
    centre = np.asarray(target.position, dtype=float)
    sx, sy = float(target.size[0]), float(target.size[1])
    round_obj = target.shape in (Shape.CYLINDER, Shape.SPHERE) and abs(sx - sy) < 0.004
    offset = base.position[:2] - centre[:2]
    off_h = float(np.linalg.norm(offset))
    vertical = float(base.approach[2]) <= -0.99
    # A grasp point outside the perceived body is on a part that sticks out on one side (a
    # handle): it exists there only, so it is not moved around the body.
    local = yaw_matrix(float(target.yaw)).T @ (base.position - centre)
    on_part = off_h > max(sx, sy) / 2.0 + 1e-3 if round_obj else \
        bool(np.any(np.abs(local[:2]) > np.array([sx, sy]) / 2.0 + 1e-3))
    if off_h > 0.001 and vertical and round_obj and not on_part:
        arounds = [2.0 * math.pi * k / cfg.around_steps for k in range(cfg.around_steps)]
    elif off_h > 0.001 and vertical and not on_part:
        arounds = [0.0, math.pi]
    else:
        arounds = [0.0]
    deltas = [d for d in cfg.wrist_offsets_rad
              if opening == "extent" or abs(d) <= cfg.part_wrist_limit_rad + 1e-9]
    if not vertical:
        deltas = [0.0]
    # a part (handle, rim) is pinched along its own direction: tilting the fingers sideways
    # swings them into the body, so only grasps around the body are tilted
    # A part pinched across its thickness (a handle) may still roll about the part's own
    # radial line: the closing axis tilts in its plane, the fingers stay beside the part,
    # and the palm's end over a neighbour rises (roll_dirs). The container is not tilted,
    # so content preservation allows it.
    tilts = [0.0] if (not vertical or (vertical_only and opening == "extent")
                      or (opening != "extent" and not roll)) else list(cfg.tilts_rad)
    max_w = cfg.hand.max_opening_m
    grasps: List[GraspParameters] = []
    labels: List[str] = []
    devs: List[float] = []
    points = along_shifts(base, target, cfg, opening)
    for phi, (shift, where, dev_s) in ((p, s) for p in arounds for s in points):
        R = yaw_matrix(phi)
        pos = base.position.copy()
        pos[:2] = centre[:2] + (R[:2, :2] @ offset)
        g_phi = base.copy(position=pos + shift, wrist_yaw=base.wrist_yaw + phi)
        for delta in deltas:
            g = g_phi.copy(wrist_yaw=g_phi.wrist_yaw + delta)
            if opening == "extent":
                g = _opened(g, target, cfg)
                if g is None:
                    continue
            elif delta:
                g = g.copy(width=min(max_w, base.width / math.cos(delta)))
            axis = None
            for tilt in tilts:
                dirs = [None] if tilt == 0.0 else (
                    list(away_dirs) if opening == "extent" else roll_dirs(g, away_dirs))
                for u in dirs:
                    if u is not None and axis is None:
                        axis = closing_axis(g.approach, g.wrist_yaw)
                    gt = g if u is None else _tilted(g, tilt, u, axis)
                    if u is not None and opening == "extent":
                        # the closing axis leaves the horizontal when the tilt is not about
                        # it, and the body's section along it grows (a box's height adds
                        # sz * sin(tilt)): the opening is fitted to the tilted section
                        gt = _opened(gt, target, cfg)
                        if gt is None:
                            continue
                    grasps.append(gt)
                    phi_w = abs(math.atan2(math.sin(phi), math.cos(phi)))
                    devs.append(abs(delta) + phi_w + tilt + dev_s)
                    labels.append(f"around {math.degrees(phi):.0f} deg, wrist "
                                  f"{math.degrees(delta):+.0f} deg, tilt "
                                  f"{math.degrees(tilt):.0f} deg"
                                  + (f", {where}" if where else ""))
    if on_part and opening != "extent":
        # pads flat on the part: its outward pitches compete with the untilted grasps (and
        # with the rolls, when those are searched)
        for g, where, dev in part_pitches(base, target, cfg):
            grasps.append(g)
            devs.append(dev)
            labels.append(f"around 0 deg, {where}")
    out = CandidateSet(n_generated=len(grasps))
    if not grasps:
        out.collision_free = False
        out.notes.append("no candidate fits the hand's opening")
        return out
    cands = _score(grasps, labels, devs, base, target, neighbours, hand, cfg, filled)
    req = cfg.required_clearance_m

    def key(c: Candidate):
        worst = min(c.clearance_m, c.table_gap_m, c.target_gap_m)
        return (not c.feasible, -min(c.clearance_m, req) if c.feasible else -worst,
                c.deviation)

    cands.sort(key=key)
    out.ranked = cands
    best = cands[0]
    out.collision_free = best.feasible
    if not best.feasible:
        out.notes.append(f"no collision-free candidate among {len(cands)}: the least-bad one "
                         f"({best.label}, clearance {best.clearance_m * 1e3:.0f} mm, "
                         f"{best.nearest or 'table/target'})")
    return out


def evaluate(grasp: GraspParameters, target: ObjectInstance, neighbours: Sequence[Box],
             cfg: GraspSynthesisConfig, hand: HandModel, filled: bool = False,
             label: str = "") -> Candidate:
    """One grasp scored as a candidate (the same sweep and hard limits as the search), for
    grasps the search did not generate, e.g. a level-1 correction's."""
    return _score([grasp], [label], [0.0], grasp, target, neighbours, hand, cfg, filled)[0]


__all__ = ["Candidate", "CandidateSet", "evaluate", "generate_candidates"]
