"""Perception from the simulator's ground truth, with optional seeded VLM-like errors.

The embedded default backend: it answers the same :class:`PerceptionResult` as the VLM
(pixel and box from projecting the object with the camera, world centre and size, state,
fragility, the target's affordance) so everything downstream runs unchanged, but every
label and metre comes from ground truth. Results are labelled ``backend="oracle"``.

Errors a VLM makes can be switched on, each drawn from one ``numpy`` generator seeded at
construction (same seed and same calls -> same answers):

- category confusion: with ``category_confusion_prob`` a reported category is replaced by
  one of its partners in ``confusion_map`` (data, e.g. cup <-> mug, vase <-> wine glass);
  categories with no partner are never confused;
- fragility error: Gaussian with ``fragility_std``, clipped to [0, 1];
- position error: Gaussian with ``position_std`` (m) on each world axis of the centre (the
  pixel is the projection of the noisy centre, so image and world answers agree);
- affordance type confusion: with ``affordance_confusion_prob`` the target's type is
  replaced by one of the 7 other types, uniformly.

Objects whose centre does not project into the image are not reported (the camera does not
see them). The oracle ignores rgb and depth (no occlusion reasoning).

:func:`resolve_targets` maps an instruction to object ids; the planner reuses it for
multi-object instructions.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Callable, List, Optional, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.perception.config import OracleConfig
from agentic_grasp.core.perception.backend import (PerceivedObject, PerceptionBackend,
                                                   PerceptionResult)
from agentic_grasp.core.instructions import resolve_targets
from agentic_grasp.core.types import AffordanceDescriptor, AffordanceType, ObjectInstance

LOGGER = logging.getLogger(__name__)

BACKEND_NAME = "oracle"

class OracleBackend(PerceptionBackend):
    """Ground-truth perception with configurable, seeded errors (module docstring)."""

    name = BACKEND_NAME

    def __init__(self, ground_truth_provider: Callable[[], List[ObjectInstance]],
                 config: Optional[OracleConfig] = None, seed: int = 0):
        self._provider = ground_truth_provider
        self.config = config or OracleConfig()
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)

    def _confuse_category(self, obj: ObjectInstance) -> Tuple[str, str]:
        """(category, name) as reported: the truth, or a confusion partner."""
        cfg = self.config
        category = obj.category.lower()
        name = obj.name or obj.category
        if cfg.category_confusion_prob <= 0.0:
            return category, name
        draw = self._rng.random()
        partners = cfg.confusion_map.get(category) or cfg.confusion_map.get(name.lower())
        if partners and draw < cfg.category_confusion_prob:
            wrong = partners[int(self._rng.integers(len(partners)))]
            return wrong, wrong
        return category, name

    def _noisy_fragility(self, value: float) -> float:
        if self.config.fragility_std <= 0.0:
            return float(value)
        return float(np.clip(value + self._rng.normal(0.0, self.config.fragility_std), 0, 1))

    def _noisy_position(self, position: np.ndarray) -> np.ndarray:
        if self.config.position_std <= 0.0:
            return np.asarray(position, dtype=float).copy()
        return position + self._rng.normal(0.0, self.config.position_std, size=3)

    def _affordance(self, obj: ObjectInstance, fragility: float
                    ) -> Optional[AffordanceDescriptor]:
        truth = obj.affordance
        if truth is None:
            return None
        a_type = truth.type
        prob = self.config.affordance_confusion_prob
        if prob > 0.0 and self._rng.random() < prob:
            others = [t for t in AffordanceType if t != truth.type]
            a_type = others[int(self._rng.integers(len(others)))]
        return AffordanceDescriptor(type=a_type, material=truth.material,
                                    fragility=fragility, region=truth.region)

    def perceive(self, rgb: np.ndarray, depth: np.ndarray, camera: Camera,
                 instruction: str) -> PerceptionResult:
        start = time.perf_counter()
        try:
            return self._perceive(camera, instruction, start)
        except Exception as exc:  # noqa: BLE001 - perceive() must never raise (contract)
            LOGGER.exception("oracle perception failed")
            return PerceptionResult.failure(
                BACKEND_NAME, f"perception failed: {type(exc).__name__}: {exc}",
                latency_s=time.perf_counter() - start)

    def _perceive(self, camera: Camera, instruction: str, start: float) -> PerceptionResult:
        truth = list(self._provider())
        warnings: List[str] = []
        visible: List[Tuple[ObjectInstance, Tuple[float, float], Tuple[int, ...]]] = []
        for obj in truth:
            pixel, bbox = project_object(camera, obj)
            if pixel is None:
                warnings.append(f"'{obj.id}' is outside the camera view; not reported")
                continue
            visible.append((obj, pixel, bbox))
        targets = resolve_targets(instruction, [v[0] for v in visible])
        target_id = targets[0] if targets else None
        if target_id is None:
            hidden = resolve_targets(instruction, truth)
            warnings.append("target not found: " + (
                f"'{hidden[0]}' is outside the camera view" if hidden
                else "no object matches the instruction"))
        elif len(targets) > 1:
            warnings.append(f"instruction names {len(targets)} objects "
                            f"({', '.join(targets)}); target is the first")
        objects: List[PerceivedObject] = []
        target: Optional[PerceivedObject] = None
        for obj, true_pixel, true_bbox in visible:
            category, name = self._confuse_category(obj)
            fragility = self._noisy_fragility(obj.fragility)
            position = self._noisy_position(obj.position)
            pixel, bbox = true_pixel, true_bbox
            if self.config.position_std > 0.0:
                pixel, bbox = project_object(camera, obj, centre=position)
                if pixel is None:   # noise pushed the centre out of view: keep the truth's
                    pixel, bbox = true_pixel, true_bbox
            is_target = obj.id == target_id
            perceived = PerceivedObject(
                id=obj.id, category=category, pixel=pixel, bbox=bbox, position=position,
                size=np.asarray(obj.size, dtype=float).copy(), state=obj.state,
                fragility=fragility,
                affordance=self._affordance(obj, fragility) if is_target else None,
                confidence=1.0, name=name, shape=obj.shape, yaw=float(obj.yaw),
                yaw_known=True, upright=bool(obj.upright))
            if is_target:
                target = perceived
                if perceived.affordance is None:
                    warnings.append(f"target '{obj.id}' has no ground-truth affordance")
            objects.append(perceived)
        return PerceptionResult(
            backend=BACKEND_NAME, target_found=target is not None, target=target,
            objects=objects, warnings=warnings, error="",
            latency_s=time.perf_counter() - start, prompt_tokens=0, completion_tokens=0,
            requests=0, raw="")


def _corners(obj: ObjectInstance, centre: np.ndarray) -> np.ndarray:
    half = np.asarray(obj.size, dtype=float) / 2.0
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    local = signs * half
    c, s = np.cos(obj.yaw), np.sin(obj.yaw)
    rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return local @ rot.T + centre


def project_object(camera: Camera, obj: ObjectInstance, centre: Optional[np.ndarray] = None
                   ) -> Tuple[Optional[Tuple[float, float]], Optional[Tuple[int, int, int, int]]]:
    """(pixel, bbox) of an object in ``camera``; (None, None) when its centre is not in view.

    The pixel is the projection of the centre, the box the image extent of the 8 corners of
    its bounding box, clipped to the image.
    """
    centre = np.asarray(obj.position if centre is None else centre, dtype=float)
    uv, z = camera.project(np.vstack([centre[None, :], _corners(obj, centre)]))
    u, v = float(uv[0, 0]), float(uv[0, 1])
    if not (z[0] > 0 and 0.0 <= u <= camera.width - 1 and 0.0 <= v <= camera.height - 1):
        return None, None
    cuv = uv[1:][z[1:] > 0]
    if len(cuv) == 0:
        return (u, v), None
    lo, hi = cuv.min(axis=0), cuv.max(axis=0)
    x1 = int(min(max(math.floor(lo[0]), 0), camera.width - 1))
    y1 = int(min(max(math.floor(lo[1]), 0), camera.height - 1))
    x2 = int(min(max(math.ceil(hi[0]), 0), camera.width - 1))
    y2 = int(min(max(math.ceil(hi[1]), 0), camera.height - 1))
    return (u, v), (x1, y1, x2, y2)
