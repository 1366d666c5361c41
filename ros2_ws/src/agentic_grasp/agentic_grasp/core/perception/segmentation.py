"""The pointed-at object's pixels in its box, from one depth image (no ground truth).

The box's pixels with a valid depth are back-projected; those above the table plane
(``z > table_z + min_height_above_table_m``) are candidates. Neighbouring pixels whose
optical depths differ by more than ``edge_jump_m`` (per pixel of the sampling
stride) lie on different surfaces: the farther pixel of such a pair is cut, so the nearer
surface keeps its full outline. OpenCV's connected components (4-connectivity) of what is
left are the surfaces in the box. The object is the component under the pointed pixel;
a point on the table or in a gap takes the nearest component (with a warning), a point on
a small surface that does not fill the box (a neighbour's edge) the component that fills
it best (with a warning). Smaller components that touch it in the image and stay within
``part_reach_m`` of its footprint in top view (a handle seen across a depth step) are
merged into it.

What the object stands on is found where segmentation could not cut it off: a horizontal level
below the pointed pixel wider than everything above it, or the surface seen just below the
object's lowest pixel per column. :mod:`.geometry` describes the chosen points.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import cv2
import numpy as np

from agentic_grasp.core.camera import Camera, backproject_many


@dataclass
class Segment:
    """The object's pixels in the box: points (N, 3) and how they were chosen."""

    points: np.ndarray
    n_components: int
    notes: List[str]
    support_z: Optional[float] = None    # what it stands on; None: bottom not in view
    stride: int = 1                      # pixel sampling step of the points
    touches: Tuple[bool, bool, bool, bool] = (False, False, False, False)  # l, t, r, b


def valid_depth_mask(values: np.ndarray, cfg) -> np.ndarray:
    """True where a depth sample is a real return (finite and within ``cfg``'s range,
    a :class:`.depth.DepthConfig`)."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(values) & (values >= cfg.min_depth_m) & (values <= cfg.max_depth_m)


def segment_object(depth: np.ndarray, camera: Camera, box: Tuple[int, int, int, int],
                   pixel: Tuple[float, float], cfg, max_samples: int) -> Segment:
    """The surface of the pointed-at object inside ``box`` (see step 1 of the docstring)."""
    x1, y1, x2, y2 = box
    n_px = (x2 - x1 + 1) * (y2 - y1 + 1)
    stride = max(1, int(math.ceil(math.sqrt(n_px / float(max_samples)))))
    vs, us = np.mgrid[y1:y2 + 1:stride, x1:x2 + 1:stride]
    zs = depth[vs, us].astype(np.float64)
    valid = valid_depth_mask(zs, cfg)
    zs = np.where(valid, zs, 0.0)
    pts = backproject_many(camera, us.ravel().astype(float), vs.ravel().astype(float),
                           zs.ravel()).reshape(us.shape + (3,))
    above = valid & (pts[..., 2] > cfg.table_z + cfg.min_height_above_table_m)
    # Depth steps: cut the farther pixel of a neighbouring pair on different surfaces.
    jump = cfg.edge_jump_m * stride
    cut = np.zeros_like(above)
    dh = zs[:, 1:] - zs[:, :-1]
    step_h = (np.abs(dh) > jump) & valid[:, 1:] & valid[:, :-1]
    cut[:, 1:] |= step_h & (dh > 0)
    cut[:, :-1] |= step_h & (dh < 0)
    dv = zs[1:, :] - zs[:-1, :]
    step_v = (np.abs(dv) > jump) & valid[1:, :] & valid[:-1, :]
    cut[1:, :] |= step_v & (dv > 0)
    cut[:-1, :] |= step_v & (dv < 0)
    mask = (above & ~cut).astype(np.uint8)
    n_labels, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=4)
    notes: List[str] = []
    min_px = max(1, int(math.ceil(cfg.min_object_points / float(stride * stride))))
    big = [k for k in range(1, n_labels) if stats[k, cv2.CC_STAT_AREA] >= min_px]
    if not big:
        return Segment(np.empty((0, 3)), 0, notes)
    pu = int(round((pixel[0] - x1) / stride))
    pv = int(round((pixel[1] - y1) / stride))
    inside = 0 <= pu < labels.shape[1] and 0 <= pv < labels.shape[0]
    seed = int(labels[pv, pu]) if inside else 0
    if seed not in big:
        sel = np.isin(labels, big)
        rows, cols = np.nonzero(sel)
        d2 = (cols - pu) ** 2 + (rows - pv) ** 2
        k = int(np.argmin(d2))
        seed = int(labels[rows[k], cols[k]])
        where = "outside the box" if not inside else "not on an object surface"
        notes.append(f"the point is {where} (table, gap or no depth); used the nearest "
                     f"surface in the box, {math.sqrt(float(d2[k])) * stride:.0f} px away")

    def fill(k: int) -> float:
        """How well component k spans the box (its extent over the box's, both axes)."""
        w = stats[k, cv2.CC_STAT_WIDTH] / float(labels.shape[1])
        h = stats[k, cv2.CC_STAT_HEIGHT] / float(labels.shape[0])
        return min(w, h)

    best = max(big, key=fill)
    if best != seed and fill(seed) < 0.5 * fill(best):
        notes.append(f"the point lies on a surface that spans {fill(seed):.0%} of the box "
                     f"(a neighbour?); used the surface that fills it ({fill(best):.0%})")
        seed = best
    members = [seed]
    seed_mask = (labels == seed).astype(np.uint8)
    ring = cv2.dilate(seed_mask, np.ones((5, 5), np.uint8)).astype(bool)
    seed_xy = pts[labels == seed][:, :2]
    centre_xy = np.median(seed_xy, axis=0)
    reach = float(np.max(np.hypot(*(seed_xy - centre_xy).T))) + cfg.part_reach_m
    seed_area = stats[seed, cv2.CC_STAT_AREA]
    # the components the ring meets, found once (a noisy box holds hundreds of specks)
    in_ring = np.zeros(n_labels, dtype=bool)
    in_ring[np.unique(labels[ring])] = True
    for k in range(1, n_labels):
        if k == seed or stats[k, cv2.CC_STAT_AREA] > 0.5 * seed_area or not in_ring[k]:
            continue
        comp = labels == k
        comp_xy = pts[comp][:, :2]
        if np.all(np.hypot(*(comp_xy - centre_xy).T) <= reach):
            members.append(k)
    others = [k for k in big if k not in members]
    if others:
        notes.append(f"the box holds {len(others) + 1} separate surfaces; kept the one "
                     "under the point")
    chosen = np.isin(labels, members)
    level = _support_level(pts, chosen, pts[pv, pu, 2] if inside and chosen[pv, pu]
                           else None, cfg)
    if level is not None:
        chosen &= pts[..., 2] > level + cfg.min_height_above_table_m
        notes.append(f"stands on a wider surface at z = {level * 1e3:.0f} mm, joined to it "
                     "without a depth step; split off")
    support_z = _support_below(depth, camera, chosen, us, vs, zs, stride, cfg)
    touches = (bool(chosen[:, 0].any()), bool(chosen[0, :].any()),
               bool(chosen[:, -1].any()), bool(chosen[-1, :].any()))
    return Segment(pts[chosen], len(big), notes, support_z, stride, touches)


def _support_level(pts: np.ndarray, chosen: np.ndarray, point_z: Optional[float],
                   cfg) -> Optional[float]:
    """z of a horizontal surface the object stands on that segmentation could not cut off.

    A block on a box meets the box's top face without a depth step, so both are one
    component. The box top shows as a horizontal level (many points at one z, 2 mm bins)
    below the pointed pixel whose footprint is wider than everything above it; the object's
    own top face is the highest level and a handle's top is narrower than the body.
    """
    P = pts[chosen]
    if len(P) < 3 * cfg.min_object_points:
        return None
    z = P[:, 2]
    ref = float(np.median(z)) if point_z is None else float(point_z)
    top = float(np.percentile(z, 99.0))
    bins = np.round(z / 0.002).astype(np.int64)
    values, counts = np.unique(bins, return_counts=True)
    for b in values[np.argsort(-values)]:
        zl = float(b) * 0.002
        n = int(counts[values == b][0])
        if zl >= ref - 0.005 or zl >= top - 0.01 or n < max(20, 0.1 * len(P)):
            continue
        on = np.abs(z - zl) <= 0.002
        above = z > zl + cfg.min_height_above_table_m
        if int(above.sum()) < cfg.min_object_points:
            continue
        (_, (w1, h1), _) = cv2.minAreaRect(np.ascontiguousarray(P[on, :2], np.float32))
        (_, (w2, h2), _) = cv2.minAreaRect(np.ascontiguousarray(P[above, :2], np.float32))
        if w1 * h1 > 1.5 * w2 * h2:
            return zl
    return None


def _support_below(depth: np.ndarray, camera: Camera, chosen: np.ndarray, us: np.ndarray,
                   vs: np.ndarray, zs: np.ndarray, stride: int, cfg) -> Optional[float]:
    """World z of what the object stands on, seen just below its lowest pixel per column.

    A support meets the object's bottom edge without a depth step (the table in front of a
    box, the top of the box a block stands on); a step means the bottom is hidden (below a
    ball's or a lying bottle's curve, or behind a nearer object). None when no column shows
    a support, i.e. the bottom is not visible.
    """
    cols = np.flatnonzero(chosen.any(axis=0))
    if cols.size == 0:
        return None
    rows = chosen.shape[0] - 1 - np.argmax(chosen[::-1, cols], axis=0)
    u_edge = us[rows, cols]
    v_below = vs[rows, cols] + stride
    z_edge = zs[rows, cols]
    ok = v_below < depth.shape[0]
    u_edge, v_below, z_edge = u_edge[ok], v_below[ok], z_edge[ok]
    if u_edge.size == 0:
        return None
    z_below = depth[v_below, u_edge].astype(np.float64)
    # Only columns whose lowest pixel is at the object's bottom: elsewhere the pixel below
    # is the object's own face, left out by a depth step on a face seen edge-on.
    edge = backproject_many(camera, u_edge.astype(float), vs[rows, cols][ok].astype(float),
                            z_edge)[:, 2]
    low = edge <= float(np.percentile(edge, 5.0)) + max(cfg.top_band_m, 0.003)
    cont = low & valid_depth_mask(z_below, cfg) & (np.abs(z_below - z_edge)
                                                   <= cfg.edge_jump_m * stride)
    if int(cont.sum()) < max(3, 0.2 * int(low.sum())):
        return None
    below = backproject_many(camera, u_edge[cont].astype(float), v_below[cont].astype(float),
                             z_below[cont])
    return float(np.median(below[:, 2]))
