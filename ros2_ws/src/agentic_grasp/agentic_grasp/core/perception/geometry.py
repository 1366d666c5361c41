"""Object geometry from one depth image, a pointed pixel and a box (no ground truth).

What the planner and the scene graph need of a pointed-at object, recovered from the depth
pixels of its box (camera model: :class:`~agentic_grasp.core.camera.Camera`):

1. **Segmentation** (:mod:`.segmentation`): the object's pixels in the box, cut from the
   table and from other surfaces by depth steps, and what it stands on.
2. **Height.** Top = 99th percentile of the points' z; bottom = 1st percentile, snapped to
   the table when within ``snap_to_table_m`` (standing on it), otherwise kept (stacked).
3. **Shape class** (box / cylinder / sphere) from the points:
   - sphere: a least-squares sphere fits the points within ``sphere_rms_frac`` of its radius
     (or ``sphere_rms_floor_m``, the depth noise) and its top is the points' top;
   - lying cylinder (``upright`` False): across the footprint's short axis the top is curved
     (points 75-95 % of the way to the side are more than ``curvature_drop_frac`` of the width
     below the top), where a box or a standing object is flat;
   - standing cylinder vs box: the top face (points within ``top_band_m`` of the top) is a
     disc or a rectangle; the ratio of its convex hull's area to its minimum-area rectangle's
     is pi/4 = 0.79 for a disc and 1 for a rectangle, split at ``disc_hull_ratio``.
4. **Oriented footprint.** Box: ``cv2.minAreaRect`` of the top-view points (the top face is
   always in view of a camera above the table, and the side faces project inside it), giving
   the centre, length >= width and the yaw of the long side. Standing cylinder:
   ``cv2.minEnclosingCircle`` of the top face (the rim, not the handle). Sphere: the fitted
   centre and diameter. Lying cylinder: the rectangle, with diameter = width = height.
5. **Handle.** For a standing cylinder, points farther than ``handle_margin_m`` outside the
   body's circle (and within ``part_reach_m``) are a protrusion; at least
   ``min_handle_points`` of them give the handle side as the angle of their mean direction
   from the axis. Fewer (a hidden handle) give ``None``: unknown, never guessed.
6. **Open container.** For a standing cylinder or box, top-face pixels well inside the rim
   (beyond ``interior_margin_m`` from it) that lie more than ``interior_drop_m`` below the
   rim are the interior: the rim height is the top and the interior depth the rim minus the
   lowest interior point. A closed top gives ``None`` for both.

Problems (no depth, a point off the object, a box holding several surfaces, NaN depth, a box
outside the image) become ``notes`` on the result; the function returns None only when no
depth at all is found near the point, and never raises on bad pixels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import cv2
import numpy as np

from agentic_grasp.core.geometry import wrap_half_pi
from agentic_grasp.core.types import Shape

#: Smallest extent reported for any axis (m): a flat phone still has a 1 cm box.
MIN_EXTENT_M = 0.01


@dataclass
class ObjectGeometry:
    """What depth says about one pointed-at object (world frame, metres, radians).

    ``size`` is (length, width, height) with length >= width along the footprint axes;
    ``yaw`` the world-z angle of the length axis in [-pi/2, pi/2) (meaningless when
    ``yaw_defined`` is False: a disc or a sphere). ``handle_yaw`` is the world angle of the
    side a handle sticks out on, None when none is seen. ``axis_yaw`` is the world angle of
    a lying cylinder's axis (None for standing objects). ``rim_z`` and ``interior_depth``
    are set for an open container only.
    """

    position: np.ndarray
    size: np.ndarray
    surface_point: np.ndarray
    surface_depth: float
    depth_source: str          # "window" or "bbox"
    support: float             # fraction of valid depths in the window, 0..1
    n_points: int              # object points that survived the filters
    yaw: float = 0.0
    yaw_defined: bool = False
    shape: Shape = Shape.BOX
    upright: bool = True
    handle_yaw: Optional[float] = None
    axis_yaw: Optional[float] = None
    rim_z: Optional[float] = None
    interior_depth: Optional[float] = None
    notes: List[str] = field(default_factory=list)


def fit_sphere(points: np.ndarray) -> Tuple[np.ndarray, float, float]:
    """(centre, radius, rms residual) of the least-squares sphere through ``points``."""
    A = np.column_stack([2.0 * points, np.ones(len(points))])
    b = np.einsum("ij,ij->i", points, points)
    sol, *_ = np.linalg.lstsq(A, b, rcond=None)
    centre = sol[:3]
    r2 = float(sol[3] + centre @ centre)
    radius = math.sqrt(r2) if r2 > 0 else 0.0
    rms = float(np.sqrt(np.mean((np.linalg.norm(points - centre, axis=1) - radius) ** 2)))
    return centre, radius, rms


#: Angular bins of :func:`body_radius` (10 deg each) and the share of them that may belong to
#: a part sticking out on one side (a handle spans 15-30 deg of a body's circumference).
_RADIUS_BINS = 36
_RADIUS_QUANTILE = 75.0


def body_radius(radial_vec: np.ndarray, radial: np.ndarray) -> float:
    """The radius of a standing round body from all its points about its axis.

    Coaxial parts stacked on a body (a bottle's neck, a vase's neck, a screwdriver's shaft)
    make the top face narrower than the body, so the top face alone under-measures it. In
    each 10 deg sector around the axis the outermost point is the body's silhouette (its
    side wall or the outer edge of its shoulder / rim); a handle makes a few sectors
    larger, so the 75th percentile over the sectors with points is the body's radius.
    """
    if len(radial) < 3:
        return 0.0
    ang = np.arctan2(radial_vec[:, 1], radial_vec[:, 0])
    k = np.minimum(((ang + math.pi) / (2.0 * math.pi) * _RADIUS_BINS).astype(np.int64),
                   _RADIUS_BINS - 1)
    outer = np.full(_RADIUS_BINS, -1.0)
    np.maximum.at(outer, k, radial)
    outer = outer[outer >= 0.0]
    return float(np.percentile(outer, _RADIUS_QUANTILE)) if outer.size else 0.0


def _rect_frame(rect) -> Tuple[np.ndarray, float, float, float]:
    """(centre, length, width, yaw of the length axis) of a cv2.minAreaRect result."""
    (cx, cy), (w, h), angle = rect
    theta = math.radians(angle)
    if w >= h:
        length, width, yaw = w, h, theta
    else:
        length, width, yaw = h, w, theta + math.pi / 2.0
    return np.array([cx, cy]), float(length), float(width), wrap_half_pi(yaw)


def describe(points: np.ndarray, cfg, support_z: Optional[float] = None,
             stride: int = 1) -> ObjectGeometry:
    """Height, shape class, oriented footprint, handle and interior of segmented points.

    ``points`` must hold at least ``cfg.min_object_points`` rows; ``support_z`` is the
    height of what the object visibly stands on (None: its bottom is hidden, so it is taken
    to stand on the table). ``stride`` is the pixel step the points were sampled at (point
    counts are compared in full-resolution pixels). ``surface_*`` fields are left for the
    caller.
    """
    min_pts = max(3, int(math.ceil(cfg.min_handle_points / float(stride * stride))))
    notes: List[str] = []
    z = points[:, 2]
    top = float(np.percentile(z, 99.0))
    bottom = float(np.percentile(z, 1.0))
    if support_z is not None and support_z - cfg.table_z > cfg.snap_to_table_m \
            and support_z < top:
        bottom = support_z                     # stacked: stands on another object
    elif support_z is None and bottom - cfg.table_z > cfg.snap_to_table_m:
        notes.append(f"bottom hidden (lowest visible point {bottom * 1e3:.0f} mm above the "
                     "table); taken to stand on the table")
        bottom = cfg.table_z
    else:
        bottom = cfg.table_z
    height = max(MIN_EXTENT_M, top - bottom)
    xy = np.ascontiguousarray(points[:, :2], dtype=np.float32)
    rect_centre, length, width, yaw = _rect_frame(cv2.minAreaRect(xy))
    band = z >= top - max(cfg.top_band_m, 0.0)
    top_xy = xy[band] if int(band.sum()) >= 3 else xy

    # Sphere: the points themselves say so.
    centre_s, radius, rms = fit_sphere(points)
    # (Its lower part is hidden from a camera above the table, so the fit's own top and
    # footprint are checked, not the visible height.)
    if (radius > 0.0 and rms <= max(cfg.sphere_rms_frac * radius, cfg.sphere_rms_floor_m)
            and abs(centre_s[2] + radius - top) <= max(0.003, 0.1 * radius)
            and 2.0 * radius <= 2.0 * max(length, width, top - bottom)
            and centre_s[2] - radius >= cfg.table_z - max(0.005, 0.1 * radius)):
        d = max(MIN_EXTENT_M, 2.0 * radius)
        return ObjectGeometry(position=centre_s, size=np.array([d, d, d]),
                              surface_point=centre_s, surface_depth=0.0, depth_source="",
                              support=0.0, n_points=len(points), shape=Shape.SPHERE,
                              upright=True, notes=notes)

    # Lying cylinder: the top is curved across its axis (the footprint's long axis for a
    # bottle on its side, the short one for a bowl on its rim), and the curve's diameter is
    # the height.
    axis = np.array([math.cos(yaw), math.sin(yaw)])
    across = np.array([-axis[1], axis[0]])
    local = (xy - rect_centre) @ np.column_stack([axis, across])
    for k, (along_ext, across_ext) in enumerate(((length, width), (width, length))):
        offs = local[:, 1 - k]
        half = max(across_ext / 2.0, 1e-6)
        side = (np.abs(offs) >= 0.75 * half) & (np.abs(offs) <= 0.95 * half)
        # The visible width of a lying cylinder is 0.75..1 of its diameter (its back is
        # hidden), and the diameter is the height.
        if int(side.sum()) < 5 or not 0.6 * height <= across_ext <= 1.25 * height:
            continue
        side_top = float(np.percentile(z[side], 90.0))
        if top - side_top > cfg.curvature_drop_frac * across_ext:
            # The back of a lying cylinder is hidden, so its cross-section (across, z) is a
            # circle fitted to the visible arc, not the footprint's visible width.
            # End caps (flat discs at the ends of the axis) are left out of the fit.
            mid = np.abs(local[:, k]) <= 0.4 * along_ext
            if int(mid.sum()) < 10:
                mid = np.ones(len(z), dtype=bool)
            A = np.column_stack([2.0 * offs[mid], 2.0 * z[mid], np.ones(int(mid.sum()))])
            sol, *_ = np.linalg.lstsq(A, offs[mid] ** 2 + z[mid] ** 2, rcond=None)
            r2 = float(sol[2] + sol[0] ** 2 + sol[1] ** 2)
            radius = math.sqrt(r2) if r2 > 0 else 0.5 * across_ext
            if not 0.3 * across_ext <= radius <= 0.8 * max(across_ext, height):
                radius, sol[0] = 0.5 * (across_ext + height) / 2.0, 0.0
            d = max(MIN_EXTENT_M, 2.0 * radius)
            dirs = (axis, across) if k == 0 else (across, axis)
            centre_xy = rect_centre + dirs[1] * float(sol[0])
            centre = np.array([centre_xy[0], centre_xy[1], bottom + d / 2.0])
            foot = sorted((along_ext, d), reverse=True)
            axis_yaw = yaw if k == 0 else wrap_half_pi(yaw + math.pi / 2.0)
            return ObjectGeometry(position=centre, size=np.array([foot[0], foot[1], d]),
                                  surface_point=centre, surface_depth=0.0, depth_source="",
                                  support=0.0, n_points=len(points), yaw=yaw,
                                  yaw_defined=length >= 1.05 * width, shape=Shape.CYLINDER,
                                  upright=False, axis_yaw=axis_yaw, notes=notes)

    # Standing: disc or rectangle on top.
    shape = Shape.BOX
    hull_ratio = 1.0
    if len(top_xy) >= 8:
        hull = cv2.convexHull(top_xy)
        _, (rw, rh), _ = cv2.minAreaRect(top_xy)
        if rw * rh > 0:
            hull_ratio = float(cv2.contourArea(hull)) / float(rw * rh)
        # An elongated top face is a disc only as a segment or arc of one (a rim seen in
        # part), which fills at most pi/4 of its minimum rectangle (a half disc exactly, so
        # there the sampling decides; a thinner segment 2/3, an arc less); a bar's top (a
        # stapler, 40 x 160 mm) can fall below the hull ratio from its sampled edges but
        # fills more than that.
        elongated = max(rw, rh) > cfg.disc_max_aspect * max(min(rw, rh), 1e-6)
        if hull_ratio < cfg.disc_hull_ratio and (not elongated or hull_ratio <= math.pi / 4.0):
            shape = Shape.CYLINDER
    handle_yaw: Optional[float] = None
    if shape == Shape.CYLINDER:
        (cx, cy), r_top = cv2.minEnclosingCircle(top_xy)
        centre_xy = np.array([cx, cy])
        radial_vec = xy - centre_xy
        radial = np.hypot(radial_vec[:, 0], radial_vec[:, 1])
        r = max(float(r_top), body_radius(radial_vec, radial))
        d = max(MIN_EXTENT_M, 2.0 * float(r))
        length = width = d
        yaw, yaw_defined = 0.0, False
        out = (radial > r + cfg.handle_margin_m) & (radial <= r + cfg.part_reach_m)
        if int(out.sum()) >= min_pts:
            mean_dir = (radial_vec[out] / radial[out, None]).mean(axis=0)
            if np.linalg.norm(mean_dir) > 0.5:     # one side, not a ring of noise
                handle_yaw = math.atan2(float(mean_dir[1]), float(mean_dir[0]))
                yaw = handle_yaw
            else:
                notes.append("points stick out of the body on several sides; handle unknown")
        # An open top is a rim: the top face is a ring at the body's radius (a cup, a
        # bowl), not a disc (a bottle's cap or a screwdriver's shaft above the body).
        # Points below the rim inside its inner edge (the inner wall seen across the
        # opening, the floor) are the interior; a quarter of the margin allows for noise.
        rim_inner = float(np.percentile(radial[band], 5.0)) if int(band.sum()) >= 3 else 0.0
        inner_r = rim_inner + 0.25 * cfg.interior_margin_m
        inside = radial <= inner_r if rim_inner >= 2.0 * cfg.interior_margin_m \
            else np.zeros(len(radial), dtype=bool)
    else:
        centre_xy = rect_centre
        yaw_defined = length >= 1.05 * width
        if not yaw_defined:
            yaw = 0.0
        local = (xy - centre_xy) @ np.column_stack([axis, across])
        inside = ((np.abs(local[:, 0]) <= length / 2.0 - cfg.interior_margin_m)
                  & (np.abs(local[:, 1]) <= width / 2.0 - cfg.interior_margin_m))
    rim_z = interior_depth = None
    deep = inside & (z < top - cfg.interior_drop_m)
    if int(deep.sum()) >= min_pts and int(inside.sum()) > 0:
        rim_z = top
        interior_depth = float(top - np.percentile(z[deep], 1.0))
    centre = np.array([centre_xy[0], centre_xy[1], bottom + height / 2.0])
    size = np.array([max(MIN_EXTENT_M, length), max(MIN_EXTENT_M, width), height])
    return ObjectGeometry(position=centre, size=size, surface_point=centre,
                          surface_depth=0.0, depth_source="", support=0.0,
                          n_points=len(points), yaw=float(yaw), yaw_defined=yaw_defined,
                          shape=shape, upright=True, handle_yaw=handle_yaw, rim_z=rim_z,
                          interior_depth=interior_depth, notes=notes)


def bbox_from_pixels(bbox: Optional[Sequence[float]], width: int, height: int
                     ) -> Tuple[Optional[Tuple[int, int, int, int]], str]:
    """(clipped integer box, problem): None with a reason when nothing of it is usable."""
    if bbox is None:
        return None, "no box"
    try:
        coords = [float(c) for c in bbox]
    except (TypeError, ValueError):
        return None, f"box {bbox!r} is not four numbers"
    if len(coords) != 4 or not all(math.isfinite(c) for c in coords):
        return None, f"box {list(bbox)} is not four finite numbers"
    x1, y1, x2, y2 = coords
    x1, x2 = sorted((x1, x2))
    y1, y2 = sorted((y1, y2))
    if x2 < 0 or y2 < 0 or x1 > width - 1 or y1 > height - 1:
        return None, (f"box ({x1:.0f}, {y1:.0f}, {x2:.0f}, {y2:.0f}) is outside the "
                      f"{width}x{height} image")
    box = (int(max(0, math.floor(x1))), int(max(0, math.floor(y1))),
           int(min(width - 1, math.ceil(x2))), int(min(height - 1, math.ceil(y2))))
    problem = ""
    if (x1 < 0 or y1 < 0 or x2 > width - 1 or y2 > height - 1):
        problem = "box partly outside the image; clipped"
    return box, problem


def object_frame(geom: ObjectGeometry) -> Tuple[np.ndarray, float]:
    """(size, yaw) in the ObjectInstance convention (the renderer's and the simulator's).

    Standing objects: (length, width, height) with yaw along the length (for a standing
    cylinder with a handle, the handle side, where the catalogue puts it: +x). A lying
    cylinder is a standing one turned 90 deg about its x axis: size (d, d, axis length) and
    yaw = its axis direction - pi/2.
    """
    if geom.shape == Shape.CYLINDER and not geom.upright and geom.axis_yaw is not None:
        d = float(geom.size[2])
        along_length = abs(wrap_half_pi(geom.axis_yaw - geom.yaw)) < math.pi / 4.0
        axis_len = float(geom.size[0] if along_length else geom.size[1])
        return np.array([d, d, axis_len]), wrap_half_pi(geom.axis_yaw - math.pi / 2.0)
    if geom.shape == Shape.CYLINDER and geom.handle_yaw is not None:
        return np.asarray(geom.size, dtype=float).copy(), float(geom.handle_yaw)
    return np.asarray(geom.size, dtype=float).copy(), float(geom.yaw)
