"""RGB-D rendering of the simulated table top from the fixed camera.

Perception must see real pixels, so the simulator renders its ground-truth objects here:
exact per-pixel ray casting of the primitives (boxes, cylinders, spheres), the table slab and
a floor, nearest hit wins. Depth is therefore geometrically exact: back-projecting a pixel
with :meth:`Camera.backproject` returns the surface point the ray hit. Shading is Lambertian
with one fixed light plus ambient. Everything is vectorised numpy; each primitive only casts
the rays inside the pixel rectangle its bounding box projects to.

Object placement (:class:`ObjectInstance`): ``position`` is the centre of the object's box,
``size`` its full extents, ``yaw`` a rotation about world z. Cylinders have their axis along
the object z, spheres have diameter ``size[0]``.

What is drawn of an object is what the simulator's contact model uses: the solid ``parts``
of its catalogue entry (config/objects.yaml, through ``Catalogue.model_for``, so a scaled
instance gets scaled parts), each at its pose in the object frame: a cup's handle sticking out
of its body, a bottle's neck above its shoulder, a screwdriver's shaft above its grip, and a
hollow part (``wall_m`` > 0, open towards +axis) as an open container whose rim, inner wall
and floor the camera sees. An object without a catalogue entry (a hand-made test object) is
its bounding primitive, as the physics' derived model is. An object with ``upright=False`` has been
knocked over: it is drawn rotated 90 deg about its own x axis (so its y extent becomes the
height and a cylinder lies along the object's y direction), keeping its x, y and resting on
its old support: its bottom stays at ``position_z - size_z / 2`` but never sinks below the
table top when it lies over the table (so a simulator may or may not lower the centre).
"""
from __future__ import annotations

import logging
import math
from collections import OrderedDict
from dataclasses import dataclass, fields, replace
from typing import Dict, List, Optional, Sequence, Tuple

import cv2
import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.geometry import yaw_matrix
from agentic_grasp.core.render_hits import hit_box, hit_cylinder, hit_hollow_cylinder, hit_sphere
from agentic_grasp.core.render_parts import drawn_parts
from agentic_grasp.core.types import ObjectInstance, Shape

logger = logging.getLogger(__name__)

#: Depth of the floor plane (m); the robot and table stand on a 0.75 m high bench.
FLOOR_Z = -0.75
#: Colour of the floor and of pixels with no return (RGB).
FLOOR_RGB = (92, 92, 98)
BACKGROUND_RGB = (40, 44, 52)
#: Farthest optical depth that returns a measurement (m); beyond it depth is 0.
MAX_RANGE_M = 5.0
#: Unit vector towards the light (above, slightly in front of the table and to the left).
LIGHT_DIR = tuple(np.array([0.45, 0.3, 1.0]) / np.linalg.norm([0.45, 0.3, 1.0]))
#: Share of the light that is ambient (unshaded faces still show their colour).
AMBIENT = 0.35
#: Brightness factor of damaged objects (visibly darker, e.g. a cracked glass).
DAMAGED_SHADE = 0.75
#: Instance ids of the non-object surfaces.
TABLE_ID = -1
BACKGROUND_ID = -2

_Rect = Tuple[int, int, int, int]        # u0, v0, u1, v1 with exclusive ends


@dataclass
class TableSpec:
    """The table slab: its top face is the plane z at the given x / y extents (m)."""

    x_min: float = 0.2
    x_max: float = 0.8
    y_min: float = -0.4
    y_max: float = 0.4
    z: float = 0.0
    color: Tuple[int, int, int] = (160, 120, 80)
    thickness: float = 0.04

    def __post_init__(self) -> None:
        if not (self.x_max > self.x_min and self.y_max > self.y_min and self.thickness > 0):
            raise ValidationError(f"degenerate table {self}")


@dataclass
class RenderResult:
    """One rendered frame.

    rgb: (H, W, 3) uint8 in RGB order. depth: (H, W) float32, metres along the optical z
    axis, 0 where nothing was hit within ``MAX_RANGE_M``. instance: (H, W) int32, the index
    of the visible object in the rendered list, ``TABLE_ID`` (-1) for the table and
    ``BACKGROUND_ID`` (-2) for floor or empty space.
    """

    rgb: np.ndarray
    depth: np.ndarray
    instance: np.ndarray


class _Rays:
    """Per-camera pixel rays (world frame) and the optical-z factor, computed once."""

    def __init__(self, camera: Camera) -> None:
        self.origin = camera.position
        u, v = np.meshgrid(np.arange(camera.width, dtype=float),
                           np.arange(camera.height, dtype=float))
        d = np.stack([(u - camera.cx) / camera.fx, (v - camera.cy) / camera.fy,
                      np.ones_like(u)], axis=-1)
        norm = np.linalg.norm(d, axis=-1)
        #: optical depth per unit of ray length (the z component of the unit ray)
        self.z_per_t = 1.0 / norm
        self.dirs = (d / norm[..., None]) @ camera.T_world_cam[:3, :3].T
        self.key: tuple = ()                #: the camera's, set by _rays_for


_RAY_CACHE: Dict[tuple, _Rays] = {}


def _rays_for(camera: Camera) -> _Rays:
    key = (camera.width, camera.height, camera.fx, camera.fy, camera.cx, camera.cy,
           np.asarray(camera.T_world_cam, dtype=float).tobytes())
    rays = _RAY_CACHE.get(key)
    if rays is None:
        if len(_RAY_CACHE) >= 4:
            _RAY_CACHE.clear()
        rays = _RAY_CACHE[key] = _Rays(camera)
        rays.key = key
    return rays


def _object_pose(obj: ObjectInstance, table: TableSpec) -> Tuple[np.ndarray, np.ndarray]:
    """World rotation and centre of the object as drawn (see the module docstring)."""
    R = yaw_matrix(obj.yaw)
    centre = np.asarray(obj.position, dtype=float).copy()
    if not obj.upright and obj.shape != Shape.SPHERE:
        R = R @ np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # RotX(90)
        bottom = centre[2] - obj.size[2] / 2.0
        over_table = (table.x_min <= centre[0] <= table.x_max
                      and table.y_min <= centre[1] <= table.y_max)
        if over_table:
            bottom = max(bottom, table.z)
        centre[2] = bottom + obj.size[1] / 2.0
    return R, centre


def _object_rect(camera: Camera, obj: ObjectInstance, table: TableSpec,
                 clip: _Rect) -> Optional[_Rect]:
    """Union of the projected rectangles of the object's drawn parts (None: out of view)."""
    R, centre = _object_pose(obj, table)
    rects = [r for r in (_projected_rect(camera, R @ p.R, centre + R @ p.c, p.half, clip)
                         for p in drawn_parts(obj)) if r is not None]
    if not rects:
        return None
    return (min(r[0] for r in rects), min(r[1] for r in rects),
            max(r[2] for r in rects), max(r[3] for r in rects))


def _projected_rect(camera: Camera, R: np.ndarray, centre: np.ndarray,
                    half: np.ndarray, clip: _Rect) -> Optional[_Rect]:
    """Pixel rectangle (clipped to ``clip``) covering the projection of an oriented box."""
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    corners = centre + (signs * half) @ R.T
    uv, z = camera.project(corners)
    u0, v0, u1, v1 = clip
    if np.any(z <= 1e-6):  # straddles the camera plane: fall back to the whole clip
        return clip
    a0 = max(u0, int(math.floor(uv[:, 0].min())) - 1)
    a1 = min(u1, int(math.ceil(uv[:, 0].max())) + 2)
    b0 = max(v0, int(math.floor(uv[:, 1].min())) - 1)
    b1 = min(v1, int(math.ceil(uv[:, 1].max())) + 2)
    if a0 >= a1 or b0 >= b1:
        return None
    return a0, b0, a1, b1


def _shade(ndotl: np.ndarray) -> np.ndarray:
    return AMBIENT + (1.0 - AMBIENT) * np.maximum(ndotl, 0.0)


class _Frame:
    """Z-buffer, material and shade buffers of the region of interest ``roi``."""

    def __init__(self, roi: _Rect) -> None:
        self.roi = roi
        u0, v0, u1, v1 = roi
        shape = (v1 - v0, u1 - u0)
        self.t = np.full(shape, np.inf)
        self.material = np.zeros(shape, dtype=np.int32)    # 0 nothing, 1 floor, 2 table, 3+i
        self.shade = np.ones(shape)

    def merge(self, rect: _Rect, t: np.ndarray, ndotl: np.ndarray, material: int) -> None:
        """Keep the new surface where it is nearer than what the pixel already shows."""
        u0, v0 = self.roi[:2]
        a0, b0, a1, b1 = rect
        window = (slice(b0 - v0, b1 - v0), slice(a0 - u0, a1 - u0))
        tb = self.t[window]
        closer = t < tb
        np.copyto(tb, t, where=closer)
        np.copyto(self.material[window], material, where=closer)
        np.copyto(self.shade[window], _shade(ndotl), where=closer)


def _floor_and_table(camera: Camera, table: TableSpec, rays: _Rays, roi: _Rect) -> _Frame:
    """The buffers of ``roi`` with only the floor and the table slab drawn."""
    frame = _Frame(roi)
    origin = rays.origin
    light = np.asarray(LIGHT_DIR)
    u0, v0, u1, v1 = roi
    # Floor: a horizontal plane that only rays going down can meet.
    dz = rays.dirs[v0:v1, u0:u1, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        frame.t[...] = np.where(dz < -1e-9, (FLOOR_Z - origin[2]) / dz, np.inf)
    frame.material[np.isfinite(frame.t)] = 1
    frame.shade[...] = _shade(np.asarray(light[2]))
    # Table: an axis-aligned slab.
    centre = np.array([(table.x_min + table.x_max) / 2, (table.y_min + table.y_max) / 2,
                       table.z - table.thickness / 2])
    half = np.array([(table.x_max - table.x_min) / 2, (table.y_max - table.y_min) / 2,
                     table.thickness / 2])
    rect = _projected_rect(camera, np.eye(3), centre, half, roi)
    if rect is not None:
        a0, b0, a1, b1 = rect
        t, ndotl = hit_box(origin - centre, rays.dirs[b0:b1, a0:a1], half, light)
        frame.merge(rect, t, ndotl, 2)
    return frame


_BACKGROUND_CACHE: Dict[tuple, Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _background(camera: Camera, table: TableSpec, rays: _Rays
                ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t, material, shade) of the floor and table over the whole image, cast once per
    camera and table (read-only: callers copy the part they need)."""
    key = (camera.width, camera.height, camera.fx, camera.fy, camera.cx, camera.cy,
           np.asarray(camera.T_world_cam, dtype=float).tobytes(), table.x_min, table.x_max,
           table.y_min, table.y_max, table.z, table.thickness)
    cached = _BACKGROUND_CACHE.get(key)
    if cached is None:
        if len(_BACKGROUND_CACHE) >= 4:
            _BACKGROUND_CACHE.clear()
        frame = _floor_and_table(camera, table, rays, (0, 0, camera.width, camera.height))
        for array in (frame.t, frame.material, frame.shade):
            array.setflags(write=False)
        cached = _BACKGROUND_CACHE[key] = (frame.t, frame.material, frame.shade)
    return cached


#: Recent primitive casts (see :func:`_cast`), least recently used first.
_CAST_CACHE: "OrderedDict[tuple, Tuple[np.ndarray, np.ndarray]]" = OrderedDict()
_CAST_CACHE_SIZE = 16


def _cast(rays: _Rays, shape: Shape, R: np.ndarray, centre: np.ndarray, half: np.ndarray,
          rect: _Rect, wall: float = 0.0, floor: float = 0.0
          ) -> Tuple[np.ndarray, np.ndarray]:
    """(t, Lambert factor) of one primitive over the pixels of ``rect``. A trial renders
    a frame per attempt and most objects have not moved since the last one: a cast of the
    same rays (same camera), primitive and pose is reused (read-only arrays)."""
    key = (rays.key, shape, R.tobytes(), centre.tobytes(), np.asarray(half).tobytes(), rect,
           wall, floor)
    hit_before = _CAST_CACHE.get(key)
    if hit_before is not None:
        _CAST_CACHE.move_to_end(key)
        return hit_before
    origin = rays.origin
    light = np.asarray(LIGHT_DIR)
    a0, b0, a1, b1 = rect
    d_world = rays.dirs[b0:b1, a0:a1]
    if shape == Shape.SPHERE:
        t, ndotl = hit_sphere(origin - centre, d_world, float(half[0]), light)
    elif shape == Shape.BOX:
        t, ndotl = hit_box((origin - centre) @ R, d_world @ R, half, light @ R)
    elif wall > 0.0:
        t, ndotl = hit_hollow_cylinder((origin - centre) @ R, d_world @ R, half, light @ R,
                                        wall, floor)
    else:
        t, ndotl = hit_cylinder((origin - centre) @ R, d_world @ R, half, light @ R)
    t.setflags(write=False)
    ndotl.setflags(write=False)
    _CAST_CACHE[key] = (t, ndotl)
    if len(_CAST_CACHE) > _CAST_CACHE_SIZE:
        _CAST_CACHE.popitem(last=False)
    return t, ndotl


def _render(objects: Sequence[ObjectInstance], camera: Camera, table: TableSpec,
            roi: _Rect) -> Tuple[_Frame, np.ndarray]:
    """Ray cast the pixels of ``roi``; returns the buffers and the optical-z factors."""
    rays = _rays_for(camera)
    frame = _Frame(roi)
    u0, v0, u1, v1 = roi
    # Floor and table: the same for every frame of this camera and table, so ray cast once
    # over the whole image and cut to the region (per-pixel arithmetic: the same values).
    t, material, shade = _background(camera, table, rays)
    frame.t[...] = t[v0:v1, u0:u1]
    frame.material[...] = material[v0:v1, u0:u1]
    frame.shade[...] = shade[v0:v1, u0:u1]
    for index, obj in enumerate(objects):
        R_obj, c_obj = _object_pose(obj, table)
        for part in drawn_parts(obj):
            R, centre, half = R_obj @ part.R, c_obj + R_obj @ part.c, part.half
            rect = _projected_rect(camera, R, centre, half, roi)
            if rect is None:
                logger.debug("part %s of %s projects outside the rendered region",
                             part.name, obj.id)
                continue
            t, ndotl = _cast(rays, part.shape, R, centre, half, rect, part.wall, part.floor)
            frame.merge(rect, t, ndotl, 3 + index)
    u0, v0, u1, v1 = roi
    return frame, rays.z_per_t[v0:v1, u0:u1]


def _palette(objects: Sequence[ObjectInstance], table: TableSpec) -> np.ndarray:
    colours = [BACKGROUND_RGB, FLOOR_RGB, table.color]
    for obj in objects:
        rgb = np.asarray(obj.color, dtype=float)
        colours.append(tuple(rgb * DAMAGED_SHADE) if obj.damaged else tuple(rgb))
    return np.asarray(colours, dtype=np.float32)


def _check_camera_table(camera: Optional[Camera], table: Optional[TableSpec]
                        ) -> Tuple[Camera, TableSpec]:
    return (camera if camera is not None else Camera(),
            table if table is not None else TableSpec())


def _finish(frame: _Frame, z_per_t: np.ndarray, objects: Sequence[ObjectInstance],
            table: TableSpec, depth_noise_std: float,
            rng: Optional[np.random.Generator]) -> RenderResult:
    material = frame.material
    depth = frame.t * z_per_t
    no_return = ~(depth <= MAX_RANGE_M)            # also true for inf (nothing hit)
    material[no_return & (material == 1)] = 0      # the floor beyond range is background
    depth[no_return] = 0.0
    depth = depth.astype(np.float32)
    shade = frame.shade.astype(np.float32)
    shade[material == 0] = 1.0
    # (palette * shade + 0.5) in float32, in place: the same roundings, fewer temporaries
    rgb = _palette(objects, table)[material]
    rgb *= shade[..., None]
    rgb += 0.5
    rgb = rgb.astype(np.uint8)
    instance = material - 3
    instance[material == 2] = TABLE_ID
    instance[material < 2] = BACKGROUND_ID
    if depth_noise_std > 0.0:
        gen = rng if rng is not None else np.random.default_rng(0)
        valid = depth > 0.0
        noise = gen.normal(0.0, depth_noise_std, size=int(valid.sum())).astype(np.float32)
        depth[valid] = np.maximum(depth[valid] + noise, np.float32(1e-4))
    return RenderResult(rgb=rgb, depth=depth, instance=instance)


def render_scene(objects: Sequence[ObjectInstance], camera: Optional[Camera] = None,
                 table: Optional[TableSpec] = None, depth_noise_std: float = 0.0,
                 rng: Optional[np.random.Generator] = None) -> RenderResult:
    """Render RGB, depth and instance images of the objects on the table.

    Deterministic unless ``depth_noise_std`` > 0, in which case zero-mean Gaussian noise with
    that standard deviation (m) is drawn from ``rng`` (a generator seeded with 0 when None, so
    that a frame is still reproducible) and added to every pixel with a return.
    """
    camera, table = _check_camera_table(camera, table)
    if not math.isfinite(depth_noise_std) or depth_noise_std < 0.0:
        raise ValidationError(f"depth_noise_std must be >= 0, got {depth_noise_std}")
    frame, z_per_t = _render(objects, camera, table, (0, 0, camera.width, camera.height))
    return _finish(frame, z_per_t, objects, table, float(depth_noise_std), rng)


_EMPTY: Dict[Tuple[int, int], Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _empty_frame(width: int, height: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rgb, depth, instance) of a frame with no return anywhere, built once per size."""
    frame = _EMPTY.get((width, height))
    if frame is None:
        rgb = np.empty((height, width, 3), dtype=np.uint8)
        rgb[...] = np.asarray(BACKGROUND_RGB, dtype=np.uint8)
        frame = _EMPTY[(width, height)] = (
            rgb, np.zeros((height, width), dtype=np.float32),
            np.full((height, width), BACKGROUND_ID, dtype=np.int32))
    return frame


def render_view(objects: Sequence[ObjectInstance], camera: Optional[Camera] = None,
                table: Optional[TableSpec] = None, margin: float = 0.25,
                min_margin_px: int = 24, depth_noise_std: float = 0.0,
                rng: Optional[np.random.Generator] = None) -> RenderResult:
    """A full-size frame of which only the regions around the objects are ray cast.

    Each object's projected rectangle is grown by ``margin`` of its larger side, at least
    ``min_margin_px``, on every side (so the table around an object is in the frame, as the
    depth geometry and a noisy box need it); overlapping regions are merged, and every
    region is ray cast with all objects. Outside the regions the frame reads "no return"
    (depth 0, background). Inside them the pixels equal :func:`render_scene`'s (exact ray
    casting either way). The in-process benchmark uses it: perception reads only pixels
    around the objects, and ray casting the table and floor of the whole 640x480 frame
    costs about 5x more (23 ms vs. 3-5 ms on one core).
    """
    camera, table = _check_camera_table(camera, table)
    if not math.isfinite(margin) or margin < 0.0 or min_margin_px < 0:
        raise ValidationError(f"margin must be >= 0, got {margin}, {min_margin_px}")
    key = _view_key(objects, camera, table, margin, min_margin_px) \
        if depth_noise_std == 0.0 else None
    if key is not None:
        cached = _VIEW_CACHE.get(key)
        if cached is not None:
            _VIEW_CACHE.move_to_end(key)
            return RenderResult(*(a.copy() for a in cached))
    result = _render_view(objects, camera, table, margin, min_margin_px, depth_noise_std, rng)
    if key is not None:
        _VIEW_CACHE[key] = tuple(a.copy() for a in (result.rgb, result.depth,
                                                    result.instance))
        if len(_VIEW_CACHE) > _VIEW_CACHE_SIZE:
            _VIEW_CACHE.popitem(last=False)
    return result


#: Recent noise-free frames of render_view by everything they are drawn from (see
#: _view_key): a trial perceives an unchanged world again after an attempt that moved
#: nothing, and the configurations of a sweep see the same jittered scenes. 4.5 MB each.
_VIEW_CACHE: "OrderedDict[tuple, Tuple[np.ndarray, np.ndarray, np.ndarray]]" = OrderedDict()
_VIEW_CACHE_SIZE = 8


def _view_key(objects: Sequence[ObjectInstance], camera: Camera, table: TableSpec,
              margin: float, min_margin_px: int) -> Optional[tuple]:
    """Everything a noise-free render_view frame is drawn from: the camera (as its rays are
    keyed), the table, the margins and every field of every object (in order: the instance
    ids are indices). None when a field is unhashable (no caching then)."""
    objs = []
    for o in objects:
        objs.append((o.id, o.category, o.shape, np.asarray(o.position, float).tobytes(),
                     np.asarray(o.size, float).tobytes(), float(o.yaw), o.material,
                     o.fragility, o.mass, o.friction, o.state, o.affordance, o.name,
                     tuple(o.color), bool(o.upright), bool(o.damaged)))
    key = (camera.width, camera.height, camera.fx, camera.fy, camera.cx, camera.cy,
           np.asarray(camera.T_world_cam, dtype=float).tobytes(),
           tuple(getattr(table, f.name) for f in fields(table)), float(margin),
           int(min_margin_px), tuple(objs))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _render_view(objects: Sequence[ObjectInstance], camera: Camera, table: TableSpec,
                 margin: float, min_margin_px: int, depth_noise_std: float,
                 rng: Optional[np.random.Generator]) -> RenderResult:
    """render_view without its cache."""
    full = (0, 0, camera.width, camera.height)
    rects: List[List[int]] = []
    for obj in objects:
        rect = _object_rect(camera, obj, table, full)
        if rect is None:
            continue
        a0, b0, a1, b1 = rect
        grow = max(int(min_margin_px), int(math.ceil(margin * max(a1 - a0, b1 - b0))))
        rects.append([max(0, a0 - grow), max(0, b0 - grow), min(camera.width, a1 + grow),
                      min(camera.height, b1 + grow)])
    merged = True
    while merged:                       # merge overlapping regions (few objects: quadratic)
        merged = False
        for i in range(len(rects)):
            for j in range(i + 1, len(rects)):
                a, b = rects[i], rects[j]
                if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                    rects[i] = [min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]),
                                max(a[3], b[3])]
                    del rects[j]
                    merged = True
                    break
            if merged:
                break
    rgb, depth, instance = (a.copy() for a in _empty_frame(camera.width, camera.height))
    for roi in rects:
        frame, z_per_t = _render(objects, camera, table, tuple(roi))
        part = _finish(frame, z_per_t, objects, table, float(depth_noise_std), rng)
        u0, v0, u1, v1 = roi
        rgb[v0:v1, u0:u1] = part.rgb
        depth[v0:v1, u0:u1] = part.depth
        instance[v0:v1, u0:u1] = part.instance
    return RenderResult(rgb=rgb, depth=depth, instance=instance)


def object_bbox(result: RenderResult, index: int) -> Optional[Tuple[int, int, int, int]]:
    """(u_min, v_min, u_max, v_max), inclusive, of the visible pixels of object ``index``."""
    mask = result.instance == index
    cols = np.flatnonzero(mask.any(axis=0))
    if cols.size == 0:
        return None
    rows = np.flatnonzero(mask.any(axis=1))
    return int(cols[0]), int(rows[0]), int(cols[-1]), int(rows[-1])


def crop_object(result: RenderResult, index: int, size: int = 64,
                pad: float = 0.15, camera: Optional[Camera] = None) -> Optional[np.ndarray]:
    """Square RGB crop (size x size, uint8) around object ``index``, or None if not visible.

    The square's side is the larger side of the visible bounding box grown by ``pad`` of it
    on each side, centred on the box; parts outside the image repeat the border pixels.
    Resized with area interpolation, as a visual-embedding backend expects a fixed size.
    With ``camera`` (the camera that rendered ``result``) the crop is cut in the object-facing
    view of :func:`crop_box`.
    """
    if size < 1 or not math.isfinite(pad) or pad < 0.0:
        raise ValidationError(f"crop size must be >= 1 and pad >= 0, got {size}, {pad}")
    box = object_bbox(result, index)
    if box is None:
        return None
    return crop_box(result.rgb, box, size=size, pad=pad, camera=camera)


def crop_box(rgb: np.ndarray, box: Tuple[int, int, int, int], size: int = 64,
             pad: float = 0.15, camera: Optional[Camera] = None) -> np.ndarray:
    """Square crop (size x size) of ``rgb`` around the inclusive pixel box ``box``.

    The crop :func:`crop_object` makes from a render, made from any box: the planner crops
    the camera image at the perceived box with it, so a camera query and a knowledge-base
    entry are cut and scaled the same way.

    ``camera`` (the camera that took ``rgb``): cut the crop in the object-facing view, the
    image the same camera would take turned about the vertical through its optical centre
    until the box centre lies on its middle column (:func:`_facing_homography`). Without it,
    the crop is cut from ``rgb`` as it is.
    """
    if size < 1 or not math.isfinite(pad) or pad < 0.0:
        raise ValidationError(f"crop size must be >= 1 and pad >= 0, got {size}, {pad}")
    u_min, v_min, u_max, v_max = (int(b) for b in box)
    if u_max < u_min or v_max < v_min:
        raise ValidationError(f"empty crop box {box}")
    if camera is not None:
        return _facing_crop(rgb, (u_min, v_min, u_max, v_max), size, pad, camera)
    side = max(u_max - u_min + 1, v_max - v_min + 1) * (1.0 + 2.0 * pad)
    half = max(1, int(round(side / 2.0)))
    cu, cv = (u_min + u_max + 1) // 2, (v_min + v_max + 1) // 2
    a0, a1, b0, b1 = cu - half, cu + half, cv - half, cv + half
    h, w = rgb.shape[:2]
    border = max(0, -a0, -b0, a1 - w, b1 - h)
    image = rgb
    if border:
        image = cv2.copyMakeBorder(image, border, border, border, border, cv2.BORDER_REPLICATE)
    patch = image[b0 + border:b1 + border, a0 + border:a1 + border]
    interp = cv2.INTER_AREA if patch.shape[0] >= size else cv2.INTER_LINEAR
    return np.ascontiguousarray(cv2.resize(patch, (size, size), interpolation=interp))


def _facing_homography(camera: Camera, u: float, v: float) -> np.ndarray:
    """3x3 map from pixels of the object-facing view to pixels of ``camera``'s image.

    Why: an object's vertical edges converge towards the vertical vanishing point, which for
    this downward-looking camera lies below the image on its middle column; an object off that
    column is therefore drawn leaning (about 9 deg at the Table IV query's place, 7.6 cm of
    image off centre), and a crop-level descriptor reads the lean as another silhouette and
    other edge orientations. Turning the camera about the world vertical through its optical
    centre (a pan) changes no ray, only which image pixel a ray lands on: the new image is an
    exact homography of the old one, K R^T Rz(theta) R K^-1, for any scene. Panned until the
    pixel (u, v) lies on the middle column, the object is seen as one standing on that column
    is: upright. What a pan cannot undo is physical: the object is still seen from its own
    side (azimuth) and height (elevation). A camera looking straight down has no pan to make
    (every ray's lean is radial): the identity then.
    """
    K = np.array([[camera.fx, 0.0, camera.cx], [0.0, camera.fy, camera.cy], [0.0, 0.0, 1.0]])
    R = np.asarray(camera.T_world_cam, dtype=float)[:3, :3]          # camera -> world
    ray = R @ np.array([(u - camera.cx) / camera.fx, (v - camera.cy) / camera.fy, 1.0])
    axis = R[:, 2]
    if math.hypot(axis[0], axis[1]) < 1e-6 or math.hypot(ray[0], ray[1]) < 1e-6:
        return np.eye(3)
    theta = math.atan2(ray[1], ray[0]) - math.atan2(axis[1], axis[0])
    c, s = math.cos(theta), math.sin(theta)
    Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return K @ R.T @ Rz @ R @ np.linalg.inv(K)


def _facing_crop(rgb: np.ndarray, box: Tuple[int, int, int, int], size: int, pad: float,
                 camera: Camera) -> np.ndarray:
    """crop_box in the object-facing view (see :func:`crop_box`): the square of the same
    side (the box's larger side grown by ``pad``, scaled by the view change's local
    magnification), centred on the box centre's image in the facing view, sampled through
    the homography at no less than the camera's resolution and area-resized to ``size``.
    The square's side comes from the camera's box, not from the box's corners mapped into
    the facing view: those outline the leaning silhouette, which is wider than the upright
    one by its height times the lean."""
    u_min, v_min, u_max, v_max = box
    cu, cv = (u_min + u_max) / 2.0, (v_min + v_max) / 2.0       # pixel centres are integers
    to_camera = _facing_homography(camera, cu, cv)
    to_facing = np.linalg.inv(to_camera)

    def facing(u: float, v: float) -> np.ndarray:
        p = to_facing @ np.array([u, v, 1.0])
        return p[:2] / p[2]

    centre = facing(cu, cv)
    jac = np.column_stack([(facing(cu + 0.5, cv) - facing(cu - 0.5, cv)),
                           (facing(cu, cv + 0.5) - facing(cu, cv - 0.5))])
    magnification = math.sqrt(abs(float(np.linalg.det(jac))))
    side = max(u_max - u_min + 1, v_max - v_min + 1) * (1.0 + 2.0 * pad) * magnification
    n = max(int(size), int(math.ceil(side)))
    step = side / n
    # output pixel j (centre j) covers facing-view [left + j step, left + (j + 1) step]
    corner = centre - side / 2.0 + 0.5 * step
    to_patch = np.array([[step, 0.0, corner[0]], [0.0, step, corner[1]], [0.0, 0.0, 1.0]])
    patch = cv2.warpPerspective(rgb, to_camera @ to_patch, (n, n),
                                flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                borderMode=cv2.BORDER_REPLICATE)
    if n != size:
        patch = cv2.resize(patch, (size, size), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(patch)


#: Where :func:`render_object_crop` puts an object (table centre line, in front of the camera).
CANONICAL_XY = (0.5, 0.0)


def open_table(table: TableSpec) -> TableSpec:
    """``table`` with its top extended ``MAX_RANGE_M`` past every edge: what the knowledge
    base's renders stand on.

    Why: the crop of an object is square and padded, and over a tall object it shows what lies
    behind it. On the 0.6 m deep table, the camera's ray over the top of a 22 cm bottle at the
    table's centre meets the table plane 3 cm before its far edge, so the padded crop of an
    entry showed the floor beyond that edge in a band above the object, a band that depends on
    where an arbitrary table ends, not on the object. A crop-level descriptor takes a band of
    another colour for part of the object (its silhouette and colours). An entry has no scene:
    it is drawn with table top behind it, as a query object on the table mostly is.
    """
    return replace(table, x_min=table.x_min - MAX_RANGE_M, x_max=table.x_max + MAX_RANGE_M,
                   y_min=table.y_min - MAX_RANGE_M, y_max=table.y_max + MAX_RANGE_M)


def render_object_crop(obj: ObjectInstance, camera: Optional[Camera] = None,
                       size: int = 64) -> np.ndarray:
    """Crop of the object alone on the table, for knowledge-base visual embeddings.

    The object keeps its shape, size, yaw, colour, upright and damaged flags but is moved to
    ``CANONICAL_XY`` standing on the table, so an entry's embedding does not depend on where
    its description happened to place it; the crop is made exactly as :func:`crop_object`
    makes it from a full scene render, in the object-facing view (``crop_object(...,
    camera=camera)``), the view a query crop is compared in wherever its object stands.
    The table is :func:`open_table`: table top all round the object. Only the pixels around
    the object are ray cast.
    """
    camera, table = _check_camera_table(camera, None)
    table = open_table(table)
    placed = obj.copy()
    placed.position = np.array([CANONICAL_XY[0], CANONICAL_XY[1],
                                table.z + float(obj.size[2]) / 2.0])
    full = (0, 0, camera.width, camera.height)
    rect = _object_rect(camera, placed, table, full)
    if rect is None:
        raise ValidationError(f"object {obj.id} is not in view of the camera")
    # Grow the rectangle to hold the padded square crop (and the border it replicates).
    a0, b0, a1, b1 = rect
    grow = max(a1 - a0, b1 - b0)
    roi = (max(0, a0 - grow), max(0, b0 - grow), min(camera.width, a1 + grow),
           min(camera.height, b1 + grow))
    # The ROI holds the whole padded crop square (and the few pixels the object-facing view
    # moves it by) unless it meets the image border, where both crops replicate the same
    # edge pixels.
    frame, z_per_t = _render([placed], camera, table, roi)
    part = _finish(frame, z_per_t, [placed], table, 0.0, None)
    # Pasted into a full frame at the ROI's place, so the crop's view change works in the
    # camera's own pixel coordinates, as it does on a full scene render.
    result = RenderResult(*(a.copy() for a in _empty_frame(camera.width, camera.height)))
    u0, v0, u1, v1 = roi
    result.rgb[v0:v1, u0:u1] = part.rgb
    result.depth[v0:v1, u0:u1] = part.depth
    result.instance[v0:v1, u0:u1] = part.instance
    crop = crop_object(result, 0, size=size, camera=camera)
    if crop is None:
        raise ValidationError(f"object {obj.id} is not visible from the camera")
    return crop
