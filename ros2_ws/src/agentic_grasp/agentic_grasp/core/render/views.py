"""Partial renders: a full-size frame of which only some pixels are ray cast.

:func:`render_view` ray casts the regions around the objects of a scene (what the in-process
benchmark's perception reads), with a cache of recent noise-free frames; :func:`render_object_crop`
ray casts one object alone, moved to a canonical place on an open table, and crops it (what the
knowledge base's visual embeddings are made from). Both paste :func:`render_region`'s pixels into
:func:`empty_frame`, so inside the regions the pixels equal :func:`render_scene`'s.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import fields, replace
from typing import List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.render.crops import crop_object
from agentic_grasp.core.render.raycast import (MAX_RANGE_M, RenderResult, TableSpec,
                                               camera_and_table, empty_frame, object_rect,
                                               render_region)
from agentic_grasp.core.types import ObjectInstance


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
    camera, table = camera_and_table(camera, table)
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
        rect = object_rect(camera, obj, table, full)
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
    rgb, depth, instance = (a.copy() for a in empty_frame(camera.width, camera.height))
    for roi in rects:
        part = render_region(objects, camera, table, tuple(roi), float(depth_noise_std), rng)
        u0, v0, u1, v1 = roi
        rgb[v0:v1, u0:u1] = part.rgb
        depth[v0:v1, u0:u1] = part.depth
        instance[v0:v1, u0:u1] = part.instance
    return RenderResult(rgb=rgb, depth=depth, instance=instance)


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
    camera, table = camera_and_table(camera, None)
    table = open_table(table)
    placed = obj.copy()
    placed.position = np.array([CANONICAL_XY[0], CANONICAL_XY[1],
                                table.z + float(obj.size[2]) / 2.0])
    full = (0, 0, camera.width, camera.height)
    rect = object_rect(camera, placed, table, full)
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
    part = render_region([placed], camera, table, roi, 0.0, None)
    # Pasted into a full frame at the ROI's place, so the crop's view change works in the
    # camera's own pixel coordinates, as it does on a full scene render.
    result = RenderResult(*(a.copy() for a in empty_frame(camera.width, camera.height)))
    u0, v0, u1, v1 = roi
    result.rgb[v0:v1, u0:u1] = part.rgb
    result.depth[v0:v1, u0:u1] = part.depth
    result.instance[v0:v1, u0:u1] = part.instance
    crop = crop_object(result, 0, size=size, camera=camera)
    if crop is None:
        raise ValidationError(f"object {obj.id} is not visible from the camera")
    return crop
