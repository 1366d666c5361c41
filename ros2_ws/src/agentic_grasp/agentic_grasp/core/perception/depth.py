"""From an image location to a 3-D object: robust depth, back-projection, centre and size.

The VLM only points at objects (a pixel and a box); every metre in a perceived object comes
from the depth image and the camera model (:meth:`Camera.backproject`). Method:

1. Surface depth: the median of the valid depths (finite, inside ``[min_depth_m,
   max_depth_m]``; zeros and NaN are "no return", REP 118) in a square window of radius
   ``window_radius_px`` around the pointed pixel. A median ignores the few pixels of table
   or neighbour that a window at an object's edge catches. When the window holds no valid
   depth, the fallback is the box: the median of the nearest third of its valid depths
   (the object is in front of the table behind it).
2. Surface point S: back-projection of the pixel at that depth.
3. Object points: pixels of the box (subsampled to at most ``max_bbox_samples``) with valid
   depth, back-projected, keeping those above the table (``z > table_z +
   min_height_above_table_m``) and within ``max_object_radius_m`` of S horizontally. The top
   of the object is their 98th percentile in z; its bottom their 2nd percentile, snapped to
   the table when within ``snap_to_table_m`` (an object standing on the table), otherwise
   kept (a stacked object).
4. Width w: the spread (2nd to 98th percentile) of the object points across the horizontal
   viewing direction, capped by the box width at the surface depth ``(x2 - x1) * z / fx``
   (the camera has no roll, so image x is horizontal; the box alone overestimates tall
   objects, whose top is nearer the camera). The tabletop objects of Table I are roughly
   axisymmetric (cups, bottles, fruit, balls), so the object's extent along the viewing
   direction is taken to equal w.
5. Centre: S pushed back by half that extent along the horizontal part of the viewing ray
   (the visible surface is the object's front; its axis lies w/2 behind it), at the height
   halfway between bottom and top. Size: (w, w, top - bottom), yaw unknown (0).

When too few object points survive (an object thinner than the filters, a noisy frame), the
centre is S + ray * w/2 and the height the box height at the surface depth: coarse, and
reported as such in ``ObjectGeometry.notes``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ConfigError

#: Smallest extent reported for any axis (m): a flat phone still has a 1 cm box.
MIN_EXTENT_M = 0.01


@dataclass(frozen=True)
class DepthConfig:
    """Parameters of the depth-to-geometry step (``depth.*`` in config/perception.yaml)."""

    window_radius_px: int = 3
    min_depth_m: float = 0.05
    max_depth_m: float = 5.0
    table_z: float = 0.0
    min_height_above_table_m: float = 0.005
    snap_to_table_m: float = 0.02
    max_object_radius_m: float = 0.15
    min_object_points: int = 12
    max_bbox_samples: int = 1500
    default_extent_m: float = 0.05

    def __post_init__(self) -> None:
        if self.window_radius_px < 0:
            raise ConfigError("depth.window_radius_px must be >= 0")
        if not 0.0 <= self.min_depth_m < self.max_depth_m:
            raise ConfigError("depth: need 0 <= min_depth_m < max_depth_m")
        for name in ("max_object_radius_m", "default_extent_m"):
            if getattr(self, name) <= 0.0:
                raise ConfigError(f"depth.{name} must be > 0")
        if self.min_object_points < 1 or self.max_bbox_samples < 1:
            raise ConfigError("depth.min_object_points and max_bbox_samples must be >= 1")

    @classmethod
    def from_params(cls, params: Optional[Mapping[str, Any]]) -> "DepthConfig":
        """Build from a ``depth:`` mapping; unknown keys are a ConfigError (typos)."""
        params = dict(params or {})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ConfigError(f"depth: unknown parameter(s) {', '.join(unknown)}")
        kwargs = {}
        for key, value in params.items():
            kwargs[key] = int(value) if known[key].type in ("int", int) else float(value)
        return cls(**kwargs)


@dataclass
class ObjectGeometry:
    """What depth says about one pointed-at object (all world frame, metres)."""

    position: np.ndarray
    size: np.ndarray
    surface_point: np.ndarray
    surface_depth: float
    depth_source: str          # "window" or "bbox"
    support: float             # fraction of valid depths in the window, 0..1
    n_points: int              # object points that survived the filters
    notes: List[str] = field(default_factory=list)


def valid_depth_mask(values: np.ndarray, cfg: DepthConfig) -> np.ndarray:
    """True where a depth sample is a real return (finite and within range)."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(values) & (values >= cfg.min_depth_m) & (values <= cfg.max_depth_m)


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


def backproject_many(camera: Camera, us: np.ndarray, vs: np.ndarray,
                     zs: np.ndarray) -> np.ndarray:
    """World points of many pixels at once (the vectorised :meth:`Camera.backproject`)."""
    pc = np.stack([(us - camera.cx) * zs / camera.fx, (vs - camera.cy) * zs / camera.fy, zs],
                  axis=-1)
    return camera.cam_to_world(pc)


def _object_points(depth: np.ndarray, camera: Camera, box: Tuple[int, ...],
                   surface: np.ndarray, cfg: DepthConfig) -> np.ndarray:
    x1, y1, x2, y2 = box
    n_px = (x2 - x1 + 1) * (y2 - y1 + 1)
    stride = max(1, int(np.ceil(np.sqrt(n_px / cfg.max_bbox_samples))))
    vs, us = np.mgrid[y1:y2 + 1:stride, x1:x2 + 1:stride]
    zs = depth[vs, us]
    ok = valid_depth_mask(zs, cfg)
    if not ok.any():
        return np.empty((0, 3))
    pts = backproject_many(camera, us[ok].astype(float), vs[ok].astype(float),
                           zs[ok].astype(float))
    above = pts[:, 2] > cfg.table_z + cfg.min_height_above_table_m
    near = np.hypot(pts[:, 0] - surface[0], pts[:, 1] - surface[1]) < cfg.max_object_radius_m
    return pts[above & near]


def estimate_geometry(depth: np.ndarray, camera: Camera, pixel: Sequence[float],
                      bbox: Optional[Sequence[float]], cfg: DepthConfig
                      ) -> Optional[ObjectGeometry]:
    """Centre and size of the object at ``pixel`` (with optional box), or None without depth.

    See the module docstring for the method and its assumptions.
    """
    u, v = float(pixel[0]), float(pixel[1])
    z_s, source, support = robust_depth(depth, u, v, cfg, bbox)
    if z_s is None:
        return None
    height_px, width_px = depth.shape[:2]
    surface = camera.backproject(u, v, z_s)
    ray = surface - camera.position
    ray /= np.linalg.norm(ray)
    ray_h = np.array([ray[0], ray[1], 0.0])
    norm_h = float(np.linalg.norm(ray_h))
    ray_h = ray_h / norm_h if norm_h > 1e-6 else np.zeros(3)
    notes: List[str] = []

    box = _clip_box(bbox, width_px, height_px) if bbox is not None else None
    if box is not None:
        width = max(MIN_EXTENT_M, (box[2] - box[0] + 1) * z_s / camera.fx)
        box_height = max(MIN_EXTENT_M, (box[3] - box[1] + 1) * z_s / camera.fy)
    else:
        width = box_height = cfg.default_extent_m
        notes.append("no box: default extent used")

    points = (_object_points(depth, camera, box, surface, cfg) if box is not None
              else np.empty((0, 3)))
    if len(points) >= cfg.min_object_points:
        bottom, top = (float(q) for q in np.percentile(points[:, 2], (2.0, 98.0)))
        if bottom - cfg.table_z <= cfg.snap_to_table_m:
            bottom = cfg.table_z
        height = max(MIN_EXTENT_M, top - bottom)
        if norm_h > 1e-6:
            # Silhouette width across the view: the box width at the surface depth
            # overestimates tall objects, whose top is nearer the camera than S.
            across = np.array([-ray_h[1], ray_h[0], 0.0])
            lo, hi = np.percentile(points @ across, (2.0, 98.0))
            width = max(MIN_EXTENT_M, min(width, float(hi - lo)))
        centre = surface + ray_h * (width / 2.0)
        centre[2] = bottom + height / 2.0
    else:
        notes.append(f"only {len(points)} object points: centre from the ray, height from "
                     "the box")
        height = box_height
        centre = surface + ray * (width / 2.0)
    size = np.array([width, width, height])
    return ObjectGeometry(position=centre, size=size, surface_point=surface,
                          surface_depth=z_s, depth_source=source, support=support,
                          n_points=int(len(points)), notes=notes)
