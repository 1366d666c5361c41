"""What perception answers, and the one interface both perception backends implement.

The planner, the scene graph and HAA-RAG consume a :class:`PerceptionResult` and never care
whether it came from Qwen3-VL (``backend="vlm"``) or from the simulator's ground truth
(``backend="oracle"``). Both backends answer in image terms (a pixel and a box per object)
and in world terms (a centre and a size); the VLM only points, geometry comes from depth
(:mod:`agentic_grasp.core.perception.depth`).

A backend never raises out of :meth:`PerceptionBackend.perceive`: an unreachable server, an
invalid answer or a target without depth is reported in ``error`` (empty when usable) and
non-fatal oddities in ``warnings``, so one bad frame cannot take the planner node down.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.types import AffordanceDescriptor, ObjectInstance, ObjectState, Shape

#: Size given to an object whose extent could not be estimated (m); a small cube keeps the
#: scene graph's neighbour checks meaningful without pretending to know the real size.
DEFAULT_SIZE_M = 0.05

#: Category keywords -> collision primitive, for perceived objects that carry no shape.
_SHAPE_HINTS = (
    (("ball", "apple", "orange", "fruit", "sphere"), Shape.SPHERE),
    (("cup", "mug", "bottle", "glass", "vase", "bowl", "can", "jar", "cylinder"),
     Shape.CYLINDER),
)


def shape_hint(category: str) -> Shape:
    """Collision primitive guessed from a category name (box when nothing matches)."""
    words = category.lower()
    for keys, shape in _SHAPE_HINTS:
        if any(key in words for key in keys):
            return shape
    return Shape.BOX


@dataclass
class PerceivedObject:
    """One object as perception reports it.

    ``pixel`` is the (u, v) image location of the object's centre and ``bbox`` its box
    (x1, y1, x2, y2) in pixels of the image given to ``perceive``. ``position`` (the centre
    of the object's bounding box) and ``size`` are in ``world``; None when depth gave
    nothing usable. ``affordance`` is filled for the target only (the VLM is asked for the
    target's affordance, the other objects only need what the scene graph uses).
    ``name`` is an optional extra (the oracle knows it).

    Geometry from depth (:mod:`.geometry`; the oracle copies the truth): ``size`` holds the
    extents along the object's own axes and ``yaw`` the world-z angle of its x axis, so that
    standing objects have size = (length >= width, width, height) with yaw along the length;
    a lying cylinder (``upright`` False) follows the simulator's knocked-over convention
    (a standing cylinder turned 90 deg about x: size = (d, d, axis length)). ``yaw_known``
    is False for round footprints, whose yaw is arbitrary. ``shape`` None = unknown (the
    category hint is used). ``handle_yaw`` is the world angle of the side a handle sticks
    out on, None when none is seen (hidden handles are unknown, never guessed). ``rim_z``
    and ``interior_depth`` describe an open container seen from above (None otherwise).
    ``warnings`` are the problems found perceiving this object.
    """

    id: str
    category: str
    pixel: Tuple[float, float]
    bbox: Optional[Tuple[int, int, int, int]]
    position: Optional[np.ndarray]
    size: Optional[np.ndarray]
    state: ObjectState
    fragility: float
    affordance: Optional[AffordanceDescriptor]
    confidence: float
    name: str = ""
    shape: Optional[Shape] = None
    yaw: float = 0.0
    yaw_known: bool = False
    upright: bool = True
    handle_yaw: Optional[float] = None
    rim_z: Optional[float] = None
    interior_depth: Optional[float] = None
    warnings: List[str] = field(default_factory=list)

    def to_object_instance(self) -> Optional[ObjectInstance]:
        """The object as a scene-graph node, or None when it has no 3-D position."""
        if self.position is None or not np.isfinite(self.position).all():
            return None
        size = self.size
        if size is None or not np.isfinite(size).all() or (np.asarray(size) <= 0).any():
            size = np.full(3, DEFAULT_SIZE_M)
        material = self.affordance.material if self.affordance is not None else "unknown"
        return ObjectInstance(
            id=self.id,
            category=self.category,
            shape=self.shape if self.shape is not None else shape_hint(self.category),
            position=np.asarray(self.position, dtype=float).copy(),
            size=np.asarray(size, dtype=float).copy(),
            yaw=float(self.yaw),
            material=material,
            fragility=float(self.fragility),
            state=self.state,
            affordance=self.affordance,
            name=self.name or self.category,
            upright=bool(self.upright),
        )


@dataclass
class PerceptionResult:
    """One perception call: the target, every object seen, and what it cost.

    ``error`` is empty when the result is usable for grasping the target; ``target_found``
    is the model's (or ground truth's) verdict on whether the instruction's object is in
    view. ``latency_s`` is wall time of the whole call; the token counts are the server's
    ``usage`` summed over ``requests`` HTTP requests (0 for the oracle). ``raw`` keeps the
    model's last raw answer for the episode log.
    """

    backend: str
    target_found: bool
    target: Optional[PerceivedObject]
    objects: List[PerceivedObject] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    error: str = ""
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    raw: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    def to_object_instances(self) -> List[ObjectInstance]:
        """Every object with a 3-D position, as scene-graph / planner input (target first)."""
        ordered = list(self.objects)
        if self.target is not None:
            ordered = [self.target] + [o for o in ordered if o.id != self.target.id]
        out: List[ObjectInstance] = []
        for obj in ordered:
            inst = obj.to_object_instance()
            if inst is not None:
                out.append(inst)
        return out

    def summary(self) -> str:
        """One log line: backend, verdict, target and cost."""
        tgt = "-"
        if self.target is not None:
            pos = ("none" if self.target.position is None
                   else "(" + ", ".join(f"{v:.3f}" for v in self.target.position) + ")")
            tgt = f"{self.target.id}:{self.target.category}@{pos}"
        status = "ok" if self.ok else f"error={self.error!r}"
        return (f"[{self.backend}] found={self.target_found} target={tgt} "
                f"objects={len(self.objects)} {status} warnings={len(self.warnings)} "
                f"latency={self.latency_s * 1e3:.1f}ms requests={self.requests} "
                f"tokens={self.prompt_tokens}+{self.completion_tokens}")

    @classmethod
    def failure(cls, backend: str, error: str, *, latency_s: float = 0.0, requests: int = 0,
                prompt_tokens: int = 0, completion_tokens: int = 0, raw: str = "",
                warnings: Optional[List[str]] = None) -> "PerceptionResult":
        """A result that says perception could not be used, and why."""
        return cls(backend=backend, target_found=False, target=None, objects=[],
                   warnings=list(warnings or []), error=error, latency_s=latency_s,
                   prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                   requests=requests, raw=raw)


class PerceptionBackend(ABC):
    """Swappable perception (VLM or oracle); see the module docstring for the contract."""

    name: str = "abstract"

    @abstractmethod
    def perceive(self, rgb: np.ndarray, depth: np.ndarray, camera: Camera,
                 instruction: str) -> PerceptionResult:
        """Find the instruction's target and the other objects in one RGB-D frame.

        ``rgb`` is HxWx3 uint8 in RGB order, ``depth`` HxW float32 metres along the
        optical axis (0 or NaN where invalid), both in the resolution of ``camera``.
        Never raises: failures come back in ``PerceptionResult.error``.
        """
