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
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.geometry import yaw_matrix
from agentic_grasp.core.render.hits import hit_box, hit_cylinder, hit_hollow_cylinder, hit_sphere
from agentic_grasp.core.render.parts import drawn_parts
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


def object_rect(camera: Camera, obj: ObjectInstance, table: TableSpec,
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


def camera_and_table(camera: Optional[Camera], table: Optional[TableSpec]
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
    camera, table = camera_and_table(camera, table)
    if not math.isfinite(depth_noise_std) or depth_noise_std < 0.0:
        raise ValidationError(f"depth_noise_std must be >= 0, got {depth_noise_std}")
    frame, z_per_t = _render(objects, camera, table, (0, 0, camera.width, camera.height))
    return _finish(frame, z_per_t, objects, table, float(depth_noise_std), rng)


_EMPTY: Dict[Tuple[int, int], Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def empty_frame(width: int, height: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rgb, depth, instance) of a frame with no return anywhere, built once per size."""
    frame = _EMPTY.get((width, height))
    if frame is None:
        rgb = np.empty((height, width, 3), dtype=np.uint8)
        rgb[...] = np.asarray(BACKGROUND_RGB, dtype=np.uint8)
        frame = _EMPTY[(width, height)] = (
            rgb, np.zeros((height, width), dtype=np.float32),
            np.full((height, width), BACKGROUND_ID, dtype=np.int32))
    return frame


def render_region(objects: Sequence[ObjectInstance], camera: Camera, table: TableSpec,
                  roi: _Rect, depth_noise_std: float = 0.0,
                  rng: Optional[np.random.Generator] = None) -> RenderResult:
    """The frame of the pixels of ``roi`` alone (the region's size), ray cast with every
    object; depth noise as :func:`render_scene` draws it. What the partial renders of
    :mod:`agentic_grasp.core.render.views` paste into an empty frame."""
    frame, z_per_t = _render(objects, camera, table, roi)
    return _finish(frame, z_per_t, objects, table, depth_noise_std, rng)

