"""Geometry of the simulator: placed solids, rays along the finger closing axis, and swept
oriented boxes (the paper's "geometric collision detection using a gripper envelope model").

Two tools, chosen for exactness where it decides outcomes and speed elsewhere:
- the fingers meet the target through rays cast along the closing axis from a grid over the
  finger's cross-section (exact intervals for boxes, cylinders, hollow cylinders and spheres),
  which gives the material the fingers must clear, where they touch and the surface normals;
- the hand (palm, wrist, fingers) moving along the approach is a swept oriented box tested
  against neighbours' boxes with the separating-axis theorem, which also yields the first
  contact along the path and a clearance (the largest separating gap, a lower bound of the
  true distance).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from agentic_grasp.core.geometry import yaw_matrix
from agentic_grasp.core.sim.objects import ObjectModel, PartSpec
from agentic_grasp.core.types import ObjectInstance, Shape

_BIG = 1e3
_EPS = 1e-12
# Local frame of a cylinder whose axis is object x / y / z: a cyclic permutation keeps it a
# rotation and puts the axis on local z.
_AXIS_FRAMES = (np.array([[0.0, 0, 1], [1, 0, 0], [0, 1, 0]]),
                np.array([[0.0, 1, 0], [0, 0, 1], [1, 0, 0]]),
                np.eye(3))


@dataclass
class Solid:
    """A part placed in the world: local frame R (columns), centre c, half extents h."""

    name: str
    shape: Shape
    R: np.ndarray
    c: np.ndarray
    h: np.ndarray            # half extents in the local frame (cylinder axis = local z)
    wall: float = 0.0
    floor: float = 0.0
    friction: Optional[float] = None
    crush_limit_n: Optional[float] = None

    def __post_init__(self) -> None:
        self.radius = float(np.linalg.norm(self.h))     # bounding sphere


def place_part(part: PartSpec, instance: ObjectInstance) -> Solid:
    """World placement of a catalogue part of an upright object."""
    frame = _AXIS_FRAMES[part.axis] if part.shape == Shape.CYLINDER else np.eye(3)
    rot = yaw_matrix(instance.yaw)
    half = frame.T @ (part.size / 2.0)
    return Solid(part.name, part.shape, rot @ frame, instance.position + rot @ part.centre,
                 np.abs(half), part.wall_m, part.floor_m, part.friction, part.crush_limit_n)


def place_object(instance: ObjectInstance, model: ObjectModel) -> List[Solid]:
    return [place_part(p, instance) for p in model.parts]


# ------------------------------------------------------------------------------ rays
@dataclass
class RayHits:
    """Material intervals along +y_g for N rays, K columns (two per solid hit).

    ``t_in``/``t_out`` are (K, N) with NaN for absent intervals (comparisons with NaN are
    False, which the callers rely on); every ray starts on the plane y_g = 0, so t is the y
    coordinate in the gripper frame. ``solid`` (K,) says which solid each column came from;
    :meth:`normal_at` gives the outward surface normal where asked.
    """

    t_in: np.ndarray
    t_out: np.ndarray
    solid: np.ndarray
    _ctx: List[Tuple[Solid, np.ndarray, np.ndarray, np.ndarray]]  # solid, o (3, N), d, M

    def normal_at(self, col: int, ray: int, t: float) -> np.ndarray:
        """Outward surface normal (gripper frame) where ray ``ray`` meets column ``col``."""
        solid, o, d, M = self._ctx[col // 2]
        point = o[:, ray] + t * d
        return surface_normal(solid, point) @ M


def surface_normal(solid: Solid, pt: np.ndarray) -> np.ndarray:
    """Outward normal of the primitive at a surface point (local frame)."""
    h = solid.h
    x, y, z = float(pt[0]), float(pt[1]), float(pt[2])
    if solid.shape == Shape.SPHERE:
        return np.array([x, y, z]) / float(h[0])
    if solid.shape == Shape.BOX:
        ratios = [abs(x) / h[0], abs(y) / h[1], abs(z) / h[2]]
        k = ratios.index(max(ratios))
        n = np.zeros(3)
        n[k] = math.copysign(1.0, (x, y, z)[k])
        return n
    r, hz = float(h[0]), float(h[2])
    rad = math.hypot(x, y)
    unit = np.array([x / rad, y / rad, 0.0]) if rad > 1e-12 else np.array([1.0, 0.0, 0.0])
    if solid.wall > 0.0:
        ri, z_floor = r - solid.wall, -hz + solid.floor
        if abs(rad - ri) < 1e-6 and z > z_floor - 1e-9:
            return -unit                       # inner wall: faces the cavity
        if abs(z - z_floor) < 1e-6 and rad < ri + 1e-9:
            return np.array([0.0, 0.0, 1.0])   # floor of the cavity
    if rad / r >= abs(z) / hz:
        return unit
    return np.array([0.0, 0.0, math.copysign(1.0, z)])


def _slab(o: np.ndarray, d: float, lo_b: float, hi_b: float, lo: np.ndarray, hi: np.ndarray,
          ok: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intersect running intervals [lo, hi] with the slab lo_b <= o + t d <= hi_b."""
    if abs(d) < _EPS:
        return lo, hi, ok & (o >= lo_b) & (o <= hi_b)
    t1 = (lo_b - o) / d
    t2 = (hi_b - o) / d
    if d < 0:
        t1, t2 = t2, t1
    return np.maximum(lo, t1), np.minimum(hi, t2), ok


def _cyl_interval(o: np.ndarray, d: np.ndarray, r: float, z_lo: float,
                  z_hi: float) -> Tuple[np.ndarray, np.ndarray]:
    """Ray (o + t d) vs solid cylinder r, z in [z_lo, z_hi]; local frame, o is (3, N)."""
    n = o.shape[1]
    a = d[0] * d[0] + d[1] * d[1]
    c = o[0] * o[0] + o[1] * o[1] - r * r
    if a < _EPS:
        lo, hi, ok = np.full(n, -_BIG), np.full(n, _BIG), c <= 0.0
    else:
        b = 2.0 * (o[0] * d[0] + o[1] * d[1])
        disc = b * b - 4.0 * a * c
        ok = disc >= 0.0
        root = np.sqrt(np.maximum(disc, 0.0))
        lo, hi = (-b - root) / (2.0 * a), (-b + root) / (2.0 * a)
    lo, hi, ok = _slab(o[2], float(d[2]), z_lo, z_hi, lo, hi, ok)
    ok &= lo < hi
    return np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)


def cast_rays(solid: Solid, xz: np.ndarray, R_g: np.ndarray,
              p_g: np.ndarray) -> Tuple[np.ndarray, np.ndarray, Tuple]:
    """Intervals of ``solid`` along +y_g for rays from (x, 0, z) in the gripper frame, with
    ``xz`` the (2, N) stacked x and z: (t_in (2, N), t_out (2, N), context for normals)."""
    M = solid.R.T @ R_g                       # gripper -> local rotation
    o = M[:, 0::2] @ xz + (solid.R.T @ (p_g - solid.c))[:, None]
    d = M[:, 1]
    n = xz.shape[1]
    h = solid.h
    t_in = np.full((2, n), np.nan)
    t_out = np.full((2, n), np.nan)
    if solid.shape == Shape.BOX:
        lo, hi, ok = np.full(n, -_BIG), np.full(n, _BIG), np.ones(n, dtype=bool)
        for k in range(3):
            lo, hi, ok = _slab(o[k], float(d[k]), -h[k], h[k], lo, hi, ok)
        ok &= lo < hi
        t_in[0] = np.where(ok, lo, np.nan)
        t_out[0] = np.where(ok, hi, np.nan)
    elif solid.shape == Shape.SPHERE:
        r = float(h[0])
        b = 2.0 * (o[0] * d[0] + o[1] * d[1] + o[2] * d[2])
        c = o[0] * o[0] + o[1] * o[1] + o[2] * o[2] - r * r
        disc = b * b - 4.0 * c
        ok = disc > 0.0
        root = np.sqrt(np.maximum(disc, 0.0))
        t_in[0] = np.where(ok, (-b - root) / 2.0, np.nan)
        t_out[0] = np.where(ok, (-b + root) / 2.0, np.nan)
    else:
        r, hz = float(h[0]), float(h[2])
        ti, to = _cyl_interval(o, d, r, -hz, hz)
        if solid.wall <= 0.0:
            t_in[0], t_out[0] = ti, to
        else:
            ci, co = _cyl_interval(o, d, r - solid.wall, -hz + solid.floor, hz + 1.0)
            cav = (ci < to) & (co > ti)               # the cavity cuts this ray's material
            first_end = np.where(cav, np.minimum(to, ci), to)
            keep1 = first_end > ti + 1e-12
            t_in[0] = np.where(keep1, ti, np.nan)
            t_out[0] = np.where(keep1, first_end, np.nan)
            keep2 = cav & (co < to - 1e-12)
            t_in[1] = np.where(keep2, np.maximum(co, ti), np.nan)
            t_out[1] = np.where(keep2, to, np.nan)
    return t_in, t_out, (solid, o, d, M)


def cast_all(solids: List[Solid], xs: np.ndarray, zs: np.ndarray, xz: np.ndarray,
             R_g: np.ndarray, p_g: np.ndarray) -> Optional[RayHits]:
    """Rays against several solids, columns stacked (solids off the ray bundle skipped)."""
    x0, x1, z0, z1 = float(xs[0]), float(xs[-1]), float(zs[-1]), float(zs[0])
    t_ins, t_outs, ids, ctx = [], [], [], []
    for k, s in enumerate(solids):
        # the rays fill a slab |x| <= .., z0 <= z <= z1 (any y): skip solids whose box misses it
        rel = R_g.T @ (s.c - p_g)
        reach = np.abs(R_g.T @ s.R) @ s.h
        if rel[0] - reach[0] > x1 or rel[0] + reach[0] < x0 \
                or rel[2] - reach[2] > z1 or rel[2] + reach[2] < z0:
            continue
        ti, to, c = cast_rays(s, xz, R_g, p_g)
        t_ins.append(ti)
        t_outs.append(to)
        ids += [k, k]
        ctx.append(c)
    if not ctx:
        return None
    if len(ctx) == 1:
        return RayHits(t_ins[0], t_outs[0], np.array(ids), ctx)
    return RayHits(np.vstack(t_ins), np.vstack(t_outs), np.array(ids), ctx)


# ------------------------------------------------------------------------------ boxes
@dataclass
class OBB:
    """Oriented box: centre c, axes as the columns of R, half extents h."""

    c: np.ndarray
    R: np.ndarray
    h: np.ndarray
    name: str = ""

    def __post_init__(self) -> None:
        self.radius = float(np.linalg.norm(self.h))     # bounding sphere

    def corners(self) -> np.ndarray:
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        return self.c + (signs * self.h) @ self.R.T


def solid_obb(solid: Solid) -> OBB:
    return OBB(solid.c.copy(), solid.R, solid.h.copy(), solid.name)


def object_obb(instance: ObjectInstance, solids: List[Solid]) -> OBB:
    """Yaw-aligned box around the whole object, protruding parts (handles) included."""
    rot = yaw_matrix(instance.yaw)
    pts = np.vstack([solid_obb(s).corners() for s in solids]
                    + [OBB(instance.position, rot, instance.size / 2.0).corners()])
    local = (pts - instance.position) @ rot
    lo, hi = local.min(axis=0), local.max(axis=0)
    return OBB(instance.position + rot @ ((lo + hi) / 2.0), rot, (hi - lo) / 2.0, instance.id)


def separation(A: OBB, B: OBB) -> float:
    """Largest separating gap between two boxes (> 0: apart by at least that; <= 0: overlap)."""
    res = sweep_batch([A], np.zeros(3), 0.0, [B])
    return float(res.gap[0])


@dataclass
class SweepBatch:
    """Results of :func:`sweep_batch`, one entry per (moving, static) pair."""

    hit: np.ndarray          # (P,) bool: contact somewhere on the path
    s: np.ndarray            # (P,) travel at first contact (m), inf when no hit
    normal: np.ndarray       # (P, 3) unit push direction on the static box at first contact
    gap: np.ndarray          # (P,) separating gap of the swept volume (lower bound of distance)


def sweep_batch(moving: List[OBB], v: np.ndarray, length: float,
                static: List[OBB]) -> SweepBatch:
    """Boxes ``moving[i]`` translated by s * v (s in [0, length]) against ``static[i]``."""
    return sweep_arrays(np.array([b.c for b in moving]), np.array([b.R for b in moving]),
                        np.array([b.h for b in moving]), v, length,
                        np.array([b.c for b in static]), np.array([b.R for b in static]),
                        np.array([b.h for b in static]))


def sweep_arrays(Ac: np.ndarray, AR: np.ndarray, Ah: np.ndarray, v: np.ndarray, length: float,
                 Bc: np.ndarray, BR: np.ndarray, Bh: np.ndarray) -> SweepBatch:
    """:func:`sweep_batch` on stacked centres (P, 3), rotations (P, 3, 3), half extents.

    Separating-axis test on the 15 axes of each pair, written as intervals of travel s: on
    each axis the projections overlap for an interval of s; the pair touches where all
    intervals meet, first at the latest interval start (that axis is the contact normal).
    The swept volume of a box moving along one of its own axes is a box on the same axes,
    so its separating gap (a lower bound of the distance) comes from the same projections.
    """
    P = len(Ac)
    Aax = AR.transpose(0, 2, 1)
    Bax = BR.transpose(0, 2, 1)
    a_, b_ = Aax[:, :, None, :], Bax[:, None, :, :]
    cross = np.stack([a_[..., 1] * b_[..., 2] - a_[..., 2] * b_[..., 1],
                      a_[..., 2] * b_[..., 0] - a_[..., 0] * b_[..., 2],
                      a_[..., 0] * b_[..., 1] - a_[..., 1] * b_[..., 0]], axis=-1).reshape(P, 9, 3)
    axes = np.concatenate([Aax, Bax, cross], axis=1)
    norm = np.sqrt(np.einsum("pkj,pkj->pk", axes, axes))
    ok = norm > 1e-6
    axes = axes / np.where(ok, norm, 1.0)[:, :, None]
    r = np.einsum("pki,pi->pk", np.abs(axes @ AR), Ah) \
        + np.einsum("pki,pi->pk", np.abs(axes @ BR), Bh)
    d0 = np.einsum("pkj,pj->pk", axes, Ac - Bc)
    vl = axes @ v
    r = np.where(ok, r, np.inf)
    gap = np.abs(d0 + vl * length / 2.0) - r - np.abs(vl) * length / 2.0
    gap = np.where(ok, gap, -np.inf).max(axis=1)
    moving_ax = np.abs(vl) > 1e-9
    safe = np.where(moving_ax, vl, 1.0)
    s1 = np.where(moving_ax, (-r - d0) / safe, -np.inf)
    s2 = np.where(moving_ax, (r - d0) / safe, np.inf)
    lo = np.where(ok, np.minimum(s1, s2), -np.inf)
    hi = np.where(ok, np.maximum(s1, s2), np.inf)
    lo_max = lo.max(axis=1)
    s_in = np.maximum(lo_max, 0.0)
    hit = (gap <= 0.0) & (s_in <= np.minimum(hi.min(axis=1), length))
    k = np.where(lo_max > 0.0, lo.argmax(axis=1),
                 np.where(ok, r - np.abs(d0), np.inf).argmin(axis=1))
    normal = axes[np.arange(P), k]
    flip = np.einsum("pj,pj->p", normal, Bc - (Ac + s_in[:, None] * v)) < 0
    normal = np.where(flip[:, None], -normal, normal)
    return SweepBatch(hit, np.where(hit, s_in, np.inf), normal, gap)


def support_width(solid: Solid, direction: np.ndarray) -> float:
    """Full width of a solid along a unit world direction (exact for all three primitives)."""
    local = solid.R.T @ direction
    if solid.shape == Shape.BOX:
        return float(2.0 * np.abs(local) @ solid.h)
    if solid.shape == Shape.SPHERE:
        return float(2.0 * solid.h[0])
    axial = abs(float(local[2]))
    return float(2.0 * solid.h[0] * math.sqrt(max(0.0, 1.0 - axial * axial))
                 + 2.0 * solid.h[2] * axial)
