"""Object geometry for the scene graph: validated inputs and yaw-aware footprints.

Every object is a vertical prism over its footprint (the model of :mod:`.graph`'s
docstring); this module checks the perceived objects and holds the closed-form footprint
distances, containment and line-of-sight tests the relations are defined on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Tuple, Union

import numpy as np

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.types import ObjectInstance, ObjectState, Shape

BOX, CYLINDER, SPHERE = 0, 1, 2
SHAPE_CODE = {Shape.BOX: BOX, Shape.CYLINDER: CYLINDER, Shape.SPHERE: SPHERE}
EPS = 1e-12


# --------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------

def as_instance(obj: Union[ObjectInstance, Mapping[str, Any]], index: int) -> ObjectInstance:
    if isinstance(obj, ObjectInstance):
        return obj
    if not isinstance(obj, Mapping):
        raise ValidationError(f"object {index}: expected ObjectInstance or mapping, got "
                              f"{type(obj).__name__}")
    try:
        return ObjectInstance(
            id=str(obj["id"]), category=str(obj.get("category", "unknown")),
            shape=obj.get("shape", Shape.BOX), position=obj["position"], size=obj["size"],
            yaw=obj.get("yaw", 0.0), fragility=obj.get("fragility", 0.0),
            state=obj.get("state", ObjectState.EMPTY), upright=bool(obj.get("upright", True)),
            name=str(obj.get("name", "")))
    except KeyError as exc:
        raise ValidationError(f"object {index}: missing field {exc.args[0]!r}") from None
    except ValueError as exc:  # Shape(...) of an unknown shape name
        raise ValidationError(f"object {index}: {exc}") from None


def validated_objects(objects: Iterable[Union[ObjectInstance, Mapping[str, Any]]]
               ) -> Tuple[List[ObjectInstance], np.ndarray, np.ndarray, np.ndarray]:
    """Objects plus (n, 3) positions, (n, 3) sizes and (n,) yaws, all re-checked.

    ObjectInstance validates at construction, but its fields are mutable (a perceiver or a
    simulator may write a NaN later) and plain dicts are accepted too, so check again. The
    checks run on stacked arrays; the per-object loop only runs to name an offender.
    """
    out: List[ObjectInstance] = []
    seen: Dict[str, int] = {}
    for index, raw in enumerate(objects):
        obj = as_instance(raw, index)
        if not obj.id:
            raise ValidationError(f"object {index}: empty id")
        if obj.id in seen:
            raise ValidationError(f"duplicate object id {obj.id!r} (objects {seen[obj.id]} and "
                                  f"{index}); ids must be unique in a scene")
        seen[obj.id] = index
        out.append(obj)
    n = len(out)
    try:
        pos = np.array([o.position for o in out], dtype=float).reshape(n, 3)
        size = np.array([o.size for o in out], dtype=float).reshape(n, 3)
        yaw = np.array([o.yaw for o in out], dtype=float).reshape(n)
        frag = np.array([o.fragility for o in out], dtype=float).reshape(n)
    except (ValueError, TypeError):
        pos = size = yaw = frag = None
    if (pos is None or not np.all(np.isfinite(pos)) or not np.all(np.isfinite(size))
            or np.any(size <= 0) or not np.all(np.isfinite(yaw))
            or not np.all((frag >= 0.0) & (frag <= 1.0))):
        for o in out:
            p = np.asarray(o.position, dtype=float).reshape(-1)
            sz = np.asarray(o.size, dtype=float).reshape(-1)
            if p.shape != (3,) or not np.all(np.isfinite(p)):
                raise ValidationError(f"object {o.id!r}: position must be 3 finite numbers, "
                                      f"got {p.tolist()}")
            if sz.shape != (3,) or not np.all(np.isfinite(sz)) or np.any(sz <= 0):
                raise ValidationError(f"object {o.id!r}: size must be 3 positive finite "
                                      f"numbers, got {sz.tolist()}")
            if not math.isfinite(float(o.yaw)):
                raise ValidationError(f"object {o.id!r}: yaw must be finite, got {o.yaw}")
            if not 0.0 <= float(o.fragility) <= 1.0:   # also rejects NaN
                raise ValidationError(f"object {o.id!r}: fragility must be in [0, 1], got "
                                      f"{o.fragility}")
    return out, pos, size, yaw


# --------------------------------------------------------------------------------------------
# Vectorised footprint geometry
#
# A footprint is a rounded rectangle: a core rectangle (centre c, unit axes u and v from the
# yaw, half extents h, possibly zero) grown by a radius r. A box is its rectangle with r = 0; a
# circular cylinder or sphere is a point core with r = radius; an elliptic one (sx != sy) is a
# stadium with the same two semi-axes. Distances and containment then have closed forms.
# --------------------------------------------------------------------------------------------

@dataclass
class Footprints:
    c: np.ndarray        # (n, 2) centre
    u: np.ndarray        # (n, 2) object x axis in world
    v: np.ndarray        # (n, 2) object y axis in world
    h: np.ndarray        # (n, 2) core half extents along u, v
    r: np.ndarray        # (n,) rounding radius
    corners: np.ndarray  # (n, 4, 2) core corners
    circum: np.ndarray   # (n,) circumradius |h| + r, for pruning

    @classmethod
    def of(cls, centres: np.ndarray, half: np.ndarray, yaw: np.ndarray,
           shape: np.ndarray) -> "Footprints":
        n = centres.shape[0]
        c = centres[:, :2].copy()
        u = np.stack([np.cos(yaw), np.sin(yaw)], axis=1)
        v = np.stack([-u[:, 1], u[:, 0]], axis=1)
        round_ = shape != BOX
        r = np.where(round_, half[:, :2].min(axis=1), 0.0)
        h = half[:, :2] - r[:, None]
        signs = np.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])
        corners = (c[:, None, :] + (signs[None, :, 0, None] * h[:, None, 0, None]) * u[:, None]
                   + (signs[None, :, 1, None] * h[:, None, 1, None]) * v[:, None])
        circum = np.linalg.norm(h, axis=1) + r if n else np.zeros(0)
        return cls(c, u, v, h, r, corners, circum)


def sdf_core(points: np.ndarray, fp: Footprints, idx: np.ndarray) -> np.ndarray:
    """Signed distance of points (m, q, 2) to the core rectangles fp[idx] (m): < 0 inside."""
    rel = points - fp.c[idx][:, None, :]
    lx = np.abs(np.einsum("mqd,md->mq", rel, fp.u[idx])) - fp.h[idx][:, None, 0]
    ly = np.abs(np.einsum("mqd,md->mq", rel, fp.v[idx])) - fp.h[idx][:, None, 1]
    outside = np.hypot(np.maximum(lx, 0.0), np.maximum(ly, 0.0))
    return outside + np.minimum(np.maximum(lx, ly), 0.0)


def footprint_gap(fp: Footprints, ii: np.ndarray, jj: np.ndarray
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """(gap_xy, depth_xy) of footprint pairs: gap 0 when they overlap, depth > 0 only then.

    Separated cores: their distance is attained at a corner of one of them (convexity), so it
    is the smaller corner-to-rectangle distance, and the rounded gap is exact. Intersecting
    cores: the separating-axis overlap (4 axes) gives the core penetration.
    """
    d = fp.c[jj] - fp.c[ii]
    # rows: u_i, v_i, u_j, v_j; each scaled by its half extent, they are the cores' "arms"
    axes = np.stack([fp.u[ii], fp.v[ii], fp.u[jj], fp.v[jj]], axis=1)          # (m, 4, 2)
    arms = axes * np.concatenate([fp.h[ii], fp.h[jj]], axis=1)[:, :, None]    # (m, 4, 2)
    reach = np.abs(np.einsum("mad,mbd->mab", axes, arms)).sum(axis=2)         # (m, 4)
    overlap = (reach - np.abs(np.einsum("mad,md->ma", axes, d))).min(axis=1)
    cores_meet = overlap >= 0.0
    core_dist = np.zeros(ii.size)
    apart = ~cores_meet
    if np.any(apart):
        ia, ja = ii[apart], jj[apart]
        core_dist[apart] = np.minimum(sdf_core(fp.corners[ia], fp, ja).min(axis=1),
                                      sdf_core(fp.corners[ja], fp, ia).min(axis=1))
    sep = np.where(cores_meet, -overlap, core_dist) - fp.r[ii] - fp.r[jj]
    return np.maximum(sep, 0.0), np.maximum(-sep, 0.0)


def centre_inside(fp: Footprints, ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
    """Is the centre of footprint ii inside footprint jj?"""
    return sdf_core(fp.c[ii][:, None, :], fp, jj)[:, 0] - fp.r[jj] <= 0.0


def footprint_inside(fp: Footprints, ii: np.ndarray, jj: np.ndarray,
                      tolerance: float) -> np.ndarray:
    """Does footprint ii lie within footprint jj (up to ``tolerance`` outside)?

    The signed distance to a convex set is convex and 1-Lipschitz, so its maximum over the
    rounded rectangle ii is reached at a core corner plus r_ii.
    """
    worst = sdf_core(fp.corners[ii], fp, jj).max(axis=1) + fp.r[ii] - fp.r[jj]
    return worst <= tolerance


def segment_hits(p0: np.ndarray, p1: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Does the segment p0 -> p1 (local coordinates, solid scaled to unit size) hit the solid?

    Box: the cube [-1, 1]^3; cylinder: x^2 + y^2 <= 1, |z| <= 1; sphere: the unit ball.
    """
    d = p1 - p0
    hit = np.zeros(p0.shape[0], dtype=bool)
    tiny = np.abs(d) < 1e-12
    safe = np.where(tiny, 1.0, d)
    t_a = (-1.0 - p0) / safe
    t_b = (1.0 - p0) / safe
    lo = np.where(tiny, np.where(np.abs(p0) <= 1.0, -np.inf, np.inf), np.minimum(t_a, t_b))
    hi = np.where(tiny, np.where(np.abs(p0) <= 1.0, np.inf, -np.inf), np.maximum(t_a, t_b))
    # box
    box = code == BOX
    if np.any(box):
        t0 = np.maximum(lo[box].max(axis=1), 0.0)
        t1 = np.minimum(hi[box].min(axis=1), 1.0)
        hit[box] = t0 <= t1
    cyl = code == CYLINDER
    if np.any(cyl):
        q0, dq = p0[cyl, :2], d[cyl, :2]
        qa = np.einsum("ij,ij->i", dq, dq)
        qb = 2.0 * np.einsum("ij,ij->i", q0, dq)
        qc = np.einsum("ij,ij->i", q0, q0) - 1.0
        disc = qb * qb - 4.0 * qa * qc
        flat = qa < 1e-18
        root = np.sqrt(np.maximum(disc, 0.0))
        den = np.where(flat, 1.0, 2.0 * qa)
        r_lo = np.where(flat, np.where(qc <= 0.0, -np.inf, np.inf), (-qb - root) / den)
        r_hi = np.where(flat, np.where(qc <= 0.0, np.inf, -np.inf), (-qb + root) / den)
        r_lo = np.where(~flat & (disc < 0.0), np.inf, r_lo)
        t0 = np.maximum(np.maximum(r_lo, lo[cyl, 2]), 0.0)
        t1 = np.minimum(np.minimum(r_hi, hi[cyl, 2]), 1.0)
        hit[cyl] = t0 <= t1
    sph = code == SPHERE
    if np.any(sph):
        q0, dq = p0[sph], d[sph]
        t = np.clip(-np.einsum("ij,ij->i", q0, dq)
                    / np.maximum(np.einsum("ij,ij->i", dq, dq), EPS), 0.0, 1.0)
        closest = q0 + t[:, None] * dq
        hit[sph] = np.einsum("ij,ij->i", closest, closest) <= 1.0
    return hit
