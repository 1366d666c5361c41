"""What the renderer draws of an object (:mod:`agentic_grasp.core.render`): its catalogue
model's solid parts as primitives in the object frame, or its bounding primitive.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.types import ObjectInstance, Shape

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


__all__ = ["DrawnPart", "drawn_parts", "half_extents"]
