"""What the renderer draws of an object (:mod:`agentic_grasp.core.render.raycast`): its catalogue
model's solid parts as primitives in the object frame, or its bounding primitive.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.types import ObjectInstance, Shape

_LOG = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from agentic_grasp.core.sim.objects import Catalogue


@dataclass(frozen=True)
class DrawnPart:
    """One primitive of an object as drawn: local frame ``R`` (columns, in the object frame;
    a cylinder's axis is local z), centre ``c`` in the object frame, half extents ``half``
    in the local frame; ``wall`` > 0 makes a cylinder hollow, open towards local +z, with a
    cavity floor ``floor`` above its bottom (the catalogue's PartSpec)."""

    name: str
    shape: Shape
    R: np.ndarray
    c: np.ndarray
    half: np.ndarray
    wall: float = 0.0
    floor: float = 0.0


#: Local frame of a cylinder part whose axis is object x / y / z, as in sim/collision.py
#: (a cyclic permutation keeps it a rotation and puts the axis on local z).
_AXIS_FRAMES = (np.array([[0.0, 0, 1], [1, 0, 0], [0, 1, 0]]),
                np.array([[0.0, 1, 0], [0, 0, 1], [1, 0, 0]]),
                np.eye(3))
_PARTS: Dict[tuple, Tuple[DrawnPart, ...]] = {}


def drawn_parts(obj: ObjectInstance, catalogue: Optional["Catalogue"] = None
                ) -> Tuple[DrawnPart, ...]:
    """The primitives drawn for ``obj``: its catalogue model's ``parts`` (what the contact
    model meets, sim/collision.place_part), or its bounding primitive when the catalogue has
    no entry for it. Cached per (name, shape, size)."""
    key = (obj.name, str(obj.shape), tuple(np.round(np.asarray(obj.size, float), 9)),
           id(catalogue))
    parts = _PARTS.get(key)
    if parts is not None:
        return parts
    # the catalogue on use: importing sim.objects runs the sim package's __init__, which loads
    # the whole simulator into every process that renders (the perception node among them)
    from agentic_grasp.core.sim.objects import load_catalogue

    out: List[DrawnPart] = []
    try:
        specs = (catalogue or load_catalogue()).model_for(obj).parts
    except Exception:  # noqa: BLE001 - no catalogue: the bounding primitive
        specs = ()
    for p in specs:
        frame = _AXIS_FRAMES[p.axis] if p.shape == Shape.CYLINDER else np.eye(3)
        size = np.asarray(p.size, dtype=float)
        half = np.full(3, size[0] / 2.0) if p.shape == Shape.SPHERE \
            else np.abs(frame.T @ (size / 2.0))
        out.append(DrawnPart(p.name, Shape(p.shape), frame,
                             np.asarray(p.centre, dtype=float).copy(), half,
                             float(p.wall_m) if p.shape == Shape.CYLINDER else 0.0,
                             float(p.floor_m)))
    if not out:
        out.append(DrawnPart("body", obj.shape, np.eye(3), np.zeros(3), half_extents(obj)))
    out = [_closed_if_covered(p, out) for p in out]
    if len(_PARTS) >= 256:
        _PARTS.clear()
    parts = _PARTS[key] = tuple(out)
    return parts


def _closed_if_covered(part: DrawnPart, parts: Sequence[DrawnPart]) -> DrawnPart:
    """A hollow part whose open end carries another part of the object (a vase's body under
    its neck: the shoulder closes it) is drawn closed; the catalogue's hollow body only says
    where fingers can enter, and no finger reaches past the neck into the shoulder."""
    if part.wall <= 0.0:
        return part
    axis = part.R[:, 2]
    top = part.c + axis * part.half[2]
    for other in parts:
        if other is part:
            continue
        rel = other.c - top
        along = float(rel @ axis)
        beside = float(np.linalg.norm(rel - along * axis))
        reach = float(np.abs(other.R.T @ axis) @ other.half)   # other's half extent on axis
        if abs(along - reach) <= 1e-3 and beside <= float(part.half[0]) - part.wall:
            return DrawnPart(part.name, part.shape, part.R, part.c, part.half)
    return part


def half_extents(obj: ObjectInstance) -> np.ndarray:
    if obj.shape == Shape.SPHERE:
        return np.full(3, obj.size[0] / 2.0)
    return np.asarray(obj.size, dtype=float) / 2.0


def model_key_for(spec: Mapping[str, Any], category: Optional[str],
                  object_name: Optional[str], catalogue: Any = None,
                  max_stretch: float = 2.0) -> Optional[str]:
    """The key of the catalogue model an object described by ``spec`` (shape, size) is drawn
    as: the model ``object_name`` names, else the model of ``category`` with the spec's shape
    and the nearest size, when stretching it to the spec's size takes no more than
    ``max_stretch`` (largest over smallest per-axis factor); None: its bounding primitive.
    The renderer's model library is the one it draws every object with (drawn_parts)."""
    try:
        shape = str(spec["shape"])
        size = np.asarray([float(v) for v in spec["size"]], dtype=float)
    except (KeyError, TypeError, ValueError):
        return None
    if size.shape != (3,) or not np.all(np.isfinite(size)) or np.any(size <= 0.0):
        return None
    if catalogue is None:
        from agentic_grasp.core.sim.objects import load_catalogue  # on use, see drawn_parts

        try:
            catalogue = load_catalogue()
        except ConfigError as exc:
            _LOG.warning("no object catalogue: objects are drawn as their bounding "
                         "primitives (%s)", exc)
            return None

    def stretch(model: Any) -> float:
        factor = size / np.asarray(model.size, dtype=float)
        return float(factor.max() / factor.min())

    candidates = []
    if object_name:
        try:
            named = catalogue.get(str(object_name))
        except ConfigError:
            named = None
        if named is not None and str(named.shape.value) == shape:
            candidates = [named]
    if not candidates and category:
        candidates = sorted(
            (m for m in catalogue.models.values()
             if m.category == category and str(m.shape.value) == shape),
            key=lambda m: (float(np.max(np.abs(np.log(size / np.asarray(m.size))))), m.key))[:1]
    if candidates and stretch(candidates[0]) <= max_stretch:
        return str(candidates[0].key)
    return None



__all__ = ["model_key_for", "DrawnPart", "drawn_parts", "half_extents"]
