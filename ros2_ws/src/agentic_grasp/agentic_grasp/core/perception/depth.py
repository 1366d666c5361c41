"""From an image location to a 3-D object: robust depth, back-projection and geometry.

The VLM only points at objects (a pixel and a box); every metre in a perceived object comes
from the depth image and the camera model (:meth:`Camera.backproject`):

1. Surface depth: the median of the valid depths (finite, inside ``[min_depth_m,
   max_depth_m]``; zeros and NaN are "no return", REP 118) in a square window of radius
   ``window_radius_px`` around the pointed pixel; when the window holds none, the median of
   the nearest third of the box's valid depths. The surface point S is the pixel
   back-projected at that depth.
2. The object's own pixels in the box, its height, shape class (box / cylinder / sphere),
   oriented footprint (centre, length >= width, yaw), upright flag, handle side and open
   interior: :mod:`agentic_grasp.core.perception.geometry` (segmentation by depth steps and
   table-plane removal, OpenCV ``minAreaRect`` / ``minEnclosingCircle`` / convex hull on the
   top view, a least-squares sphere). Without a box the same is done in a square of
   ``search_radius_px`` around the point.

When too few object points survive (an object thinner than the filters, a noisy frame), the
centre is S pushed back by half the default extent along the viewing ray and the height the
box height at the surface depth: coarse, and reported as such in ``ObjectGeometry.notes``.
"""
from __future__ import annotations

import copy
import math
from collections import OrderedDict
from typing import List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.perception.config import DepthConfig
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.perception.geometry import (MIN_EXTENT_M, ObjectGeometry, bbox_from_pixels,
                                                    describe)
from agentic_grasp.core.perception.segmentation import segment_object, valid_depth_mask

__all__ = ["robust_depth", "estimate_geometry"]


def _clip_box(bbox: Sequence[float], width: int, height: int) -> Optional[Tuple[int, ...]]:
    x1, y1, x2, y2 = (int(round(float(c))) for c in bbox)
    x1, x2 = max(0, min(x1, x2)), min(width - 1, max(x1, x2))
    y1, y2 = max(0, min(y1, y2)), min(height - 1, max(y1, y2))
    if x2 < x1 or y2 < y1:
        return None
    return x1, y1, x2, y2


def robust_depth(depth: np.ndarray, u: float, v: float, cfg: DepthConfig,
                 bbox: Optional[Sequence[float]] = None) -> Tuple[Optional[float], str, float]:
    """(depth, source, support) at pixel (u, v); depth None when nothing valid is found.

    ``source`` says where the value came from ("window" or "bbox"); ``support`` is the
    fraction of valid samples in the window (a confidence for the point).
    """
    height, width = depth.shape[:2]
    ui, vi = int(round(u)), int(round(v))
    r = cfg.window_radius_px
    support = 0.0
    if 0 <= ui < width and 0 <= vi < height:
        win = depth[max(0, vi - r):vi + r + 1, max(0, ui - r):ui + r + 1]
        ok = valid_depth_mask(win, cfg)
        support = float(ok.mean()) if win.size else 0.0
        if ok.any():
            return float(np.median(win[ok])), "window", support
    if bbox is not None:
        box = _clip_box(bbox, width, height)
        if box is not None:
            x1, y1, x2, y2 = box
            region = depth[y1:y2 + 1, x1:x2 + 1]
            vals = region[valid_depth_mask(region, cfg)]
            if vals.size:
                vals = np.sort(vals)
                nearest = vals[:max(1, vals.size // 3)]
                return float(np.median(nearest)), "bbox", support
    return None, "", support


def _grow(box: Tuple[int, int, int, int], touches: Sequence[bool], width: int,
          height: int) -> Tuple[int, int, int, int]:
    """``box`` grown by half its size on each side in ``touches`` (left, top, right,
    bottom), clipped to the image."""
    x1, y1, x2, y2 = box
    gx = max(8, (x2 - x1 + 1) // 2)
    gy = max(8, (y2 - y1 + 1) // 2)
    left, top, right, bottom = touches
    return (max(0, x1 - gx) if left else x1, max(0, y1 - gy) if top else y1,
            min(width - 1, x2 + gx) if right else x2,
            min(height - 1, y2 + gy) if bottom else y2)


def _padded(bbox: Sequence[float], frac: float, px: int) -> Sequence[float]:
    """The box grown on every side: a VLM's box may cut the object's edge, and the
    segmentation, not the box, decides which pixels are the object's."""
    try:
        x1, y1, x2, y2 = (float(c) for c in bbox)
    except (TypeError, ValueError):
        return bbox
    if not all(math.isfinite(c) for c in (x1, y1, x2, y2)):
        return bbox
    gx = max(px, frac * abs(x2 - x1))
    gy = max(px, frac * abs(y2 - y1))
    return (min(x1, x2) - gx, min(y1, y2) - gy, max(x1, x2) + gx, max(y1, y2) + gy)


#: Memo of :func:`estimate_geometry` (see :func:`_memo_key`), least recently used last.
_MEMO: "OrderedDict[tuple, Optional[ObjectGeometry]]" = OrderedDict()
_MEMO_SIZE = 32


def _memo_key(depth: np.ndarray, camera: Camera, pixel: Sequence[float],
              bbox: Optional[Sequence[float]], cfg: DepthConfig) -> Optional[tuple]:
    """Everything :func:`estimate_geometry` reads: the arguments and the depth pixels of
    the largest region it can look at (the box grown ``max_box_growths`` times on every
    side, the rows below it that the support test reads, the window around the point).
    Re-perception locates a kept answer in every new frame, and a neighbour nothing touched
    shows the same pixels: its geometry is looked up instead of computed again. None: no
    key (odd inputs go the plain way)."""
    if depth.ndim != 2:
        return None
    try:
        u, v = float(pixel[0]), float(pixel[1])
        box_key = None if bbox is None else tuple(float(c) for c in bbox)
    except (TypeError, ValueError, IndexError):
        return None
    if not (math.isfinite(u) and math.isfinite(v)):
        return None
    height_px, width_px = depth.shape
    padded = _padded(bbox, cfg.box_pad_frac, cfg.box_pad_px) if bbox is not None else None
    box, _ = bbox_from_pixels(padded, width_px, height_px)
    if box is None:
        r = cfg.search_radius_px
        box, _ = bbox_from_pixels((u - r, v - r, u + r, v + r), width_px, height_px)
        if box is None:
            return None
    for _ in range(cfg.max_box_growths):
        box = _grow(box, (True, True, True, True), width_px, height_px)
    x1, y1, x2, y2 = box
    n_px = (x2 - x1 + 1) * (y2 - y1 + 1)
    stride = max(1, int(math.ceil(math.sqrt(n_px / float(cfg.max_bbox_samples)))))
    ui, vi, r = int(round(u)), int(round(v)), cfg.window_radius_px
    x1, y1 = max(0, min(x1, ui - r)), max(0, min(y1, vi - r))
    x2, y2 = min(width_px - 1, max(x2, ui + r)), min(height_px - 1, max(y2 + stride, vi + r))
    region = depth[y1:y2 + 1, x1:x2 + 1]
    cam = (camera.width, camera.height, camera.fx, camera.fy, camera.cx, camera.cy,
           np.asarray(camera.T_world_cam, dtype=float).tobytes())
    return (cfg, cam, u, v, box_key, depth.shape, depth.dtype.str, (x1, y1, x2, y2),
            np.ascontiguousarray(region).tobytes())


def estimate_geometry(depth: np.ndarray, camera: Camera, pixel: Sequence[float],
                      bbox: Optional[Sequence[float]], cfg: DepthConfig
                      ) -> Optional[ObjectGeometry]:
    """Geometry of the object at ``pixel`` (with optional box), or None without any depth.

    See the module docstring for the method; every problem with the inputs (no box, a box
    outside the image, a point off the object, several surfaces in the box, NaN depth) is a
    note on the result rather than an exception. Results are memoised on everything the
    method reads (:func:`_memo_key`); each call gets its own copy.
    """
    key = _memo_key(depth, camera, pixel, bbox, cfg)
    if key is not None and key in _MEMO:
        _MEMO.move_to_end(key)
        return copy.deepcopy(_MEMO[key])
    geom = _estimate_geometry(depth, camera, pixel, bbox, cfg)
    if key is not None:
        _MEMO[key] = copy.deepcopy(geom)
        if len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return geom


def _estimate_geometry(depth: np.ndarray, camera: Camera, pixel: Sequence[float],
                       bbox: Optional[Sequence[float]], cfg: DepthConfig
                       ) -> Optional[ObjectGeometry]:
    height_px, width_px = depth.shape[:2]
    notes: List[str] = []
    u, v = float(pixel[0]), float(pixel[1])
    if not (math.isfinite(u) and math.isfinite(v)):
        return None
    if bbox is not None:
        bbox = _padded(bbox, cfg.box_pad_frac, cfg.box_pad_px)
    box, problem = bbox_from_pixels(bbox, width_px, height_px)
    if problem and bbox is not None:
        notes.append(problem)
    search = box
    if box is None:
        r = cfg.search_radius_px
        search, _ = bbox_from_pixels((u - r, v - r, u + r, v + r), width_px, height_px)
        notes.append(f"{problem}: searched {2 * r + 1} px around the point")
        if search is None:
            return None
    z_s, source, support = robust_depth(depth, u, v, cfg, search)
    if z_s is None:
        return None
    u_c = min(max(u, 0.0), width_px - 1.0)
    v_c = min(max(v, 0.0), height_px - 1.0)
    surface = camera.backproject(u_c, v_c, z_s)
    window = depth[search[1]:search[3] + 1, search[0]:search[2] + 1]
    n_nan = int(np.isnan(window).sum())
    if n_nan:
        notes.append(f"{n_nan} NaN depth pixel(s) in the box ignored")
    seg = segment_object(depth, camera, search, (u, v), cfg, cfg.max_bbox_samples)
    for _ in range(cfg.max_box_growths):
        # The object's surface runs into the box's edge: the box cut it (a VLM's box is
        # not exact). Grow those sides by half the box and segment again.
        grown = _grow(search, seg.touches, width_px, height_px)
        if grown == search:
            break
        search = grown
        seg = segment_object(depth, camera, search, (u, v), cfg, cfg.max_bbox_samples)
    if search != box and box is not None:
        notes.append("the object runs past its box; the box was grown to hold it")
    notes.extend(seg.notes)
    if len(seg.points) >= cfg.min_object_points:
        geom = describe(seg.points, cfg, seg.support_z, seg.stride)
        geom.surface_point, geom.surface_depth = surface, z_s
        geom.depth_source, geom.support = source, support
        geom.notes = notes + geom.notes
        return geom
    ray = surface - camera.position
    ray /= np.linalg.norm(ray)
    width = max(MIN_EXTENT_M, (search[2] - search[0] + 1) * z_s / camera.fx)
    box_height = max(MIN_EXTENT_M, (search[3] - search[1] + 1) * z_s / camera.fy)
    if box is None:
        width = box_height = cfg.default_extent_m
    notes.append(f"only {len(seg.points)} object points: centre from the ray, height from "
                 "the box")
    return ObjectGeometry(position=surface + ray * (width / 2.0),
                          size=np.array([width, width, box_height]), surface_point=surface,
                          surface_depth=z_s, depth_source=source, support=support,
                          n_points=int(len(seg.points)), notes=notes)
