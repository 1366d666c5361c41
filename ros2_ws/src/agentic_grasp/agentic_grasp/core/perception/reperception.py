"""Re-perception policy: ask the VLM again only when the scene changed around the target.

A real VLM call costs seconds (prefill + ~150 tok/s decode); the planner re-perceives
after every failed attempt. :class:`ReperceivingPerception` wraps a VLM backend (``vlm`` or
``vlm_sim``) and keeps, per instruction, the last answer (its raw JSON) and the depth
image around the target's box at that moment. On the next call with the same instruction:

- the target's box, grown by ``box_margin`` of its size on each side, is compared pixel by
  pixel with the new depth image. A pixel changed when its depth moved by more than
  ``noise_sigmas`` x ``depth_noise_std_m`` (4 sigma: a false alarm rate of 6e-5 per
  pixel from noise alone), or when it gained or lost its depth return;
- the scene changed when the changed pixels are at least the silhouette a shift of
  ``min_shift_m`` sweeps: ``fx * min_shift_m / z`` columns times the box height in rows,
  z the target's depth (min_shift_m = 2 mm, the smallest motion the planner rebases on);
- changed, or the target lost (its fresh depth geometry fails): the VLM is called again;
- otherwise the kept answer is validated and located again in the *fresh* depth image
  (positions and extents are new, labels and boxes are the last answer's): no VLM call.

The result says which happened in ``requests`` (0 = reused) and in a warning. The wrapper
is itself a :class:`PerceptionBackend`, so the perception node and the in-process episode
use it the same way. Not thread-safe (the perception node serves one call at a time).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.perception.backend import PerceptionBackend, PerceptionResult
from agentic_grasp.core.perception.config import ReperceptionConfig
from agentic_grasp.core.perception.vlm.sim import check_raw, locate_answer

LOGGER = logging.getLogger(__name__)


@dataclass
class _Kept:
    raw: str
    interp: Any                            # vlm_client.Interpretation of ``raw``
    box: Tuple[int, int, int, int]         # grown target box, exclusive ends
    depth: np.ndarray                      # depth inside ``box`` when the answer was given
    threshold_px: float


def depth_change(before: np.ndarray, after: np.ndarray, tolerance_m: float) -> int:
    """Pixels whose depth moved by more than ``tolerance_m`` or gained / lost a return."""
    valid_b = np.isfinite(before) & (before > 0)
    valid_a = np.isfinite(after) & (after > 0)
    both = valid_b & valid_a
    moved = np.zeros(before.shape, dtype=bool)
    moved[both] = np.abs(after[both] - before[both]) > tolerance_m
    return int(np.count_nonzero(moved | (valid_b != valid_a)))


class ReperceivingPerception(PerceptionBackend):
    """A VLM backend behind the re-perception policy (module docstring)."""

    def __init__(self, backend: PerceptionBackend,
                 config: Optional[ReperceptionConfig] = None) -> None:
        client = getattr(backend, "client", backend)
        if not (hasattr(client, "check") and hasattr(client, "locate")):
            raise ConfigError(f"re-perception needs a VLM backend, got {backend.name!r}")
        self.backend = backend
        self.client = client
        self.config = config or ReperceptionConfig()
        self.name = backend.name
        self._kept: Dict[str, _Kept] = {}
        self.vlm_calls = 0
        self.reused = 0

    def reset(self) -> None:
        """Forget every kept answer (a new scene, e.g. a new trial)."""
        self._kept.clear()
        self.vlm_calls = self.reused = 0

    def perceive(self, rgb: np.ndarray, depth: np.ndarray, camera: Camera,
                 instruction: str) -> PerceptionResult:
        kept = self._kept.get(instruction) if self.config.enabled else None
        if kept is not None:
            reused = self._reuse(kept, rgb, depth, camera)
            if reused is not None:
                self.reused += 1
                return reused
        result = self.backend.perceive(rgb, depth, camera, instruction)
        self.vlm_calls += 1
        self._keep(instruction, result, depth, camera, rgb.shape[:2])
        return result

    def _reuse(self, kept: _Kept, rgb: np.ndarray, depth: np.ndarray, camera: Camera
               ) -> Optional[PerceptionResult]:
        u0, v0, u1, v1 = kept.box
        if depth.shape[0] < v1 or depth.shape[1] < u1:
            return None
        tol = self.config.noise_sigmas * self.config.depth_noise_std_m
        changed = depth_change(kept.depth, depth[v0:v1, u0:u1], tol)
        if changed >= kept.threshold_px:
            LOGGER.debug("scene changed around the target (%d px >= %.0f): asking the VLM",
                         changed, kept.threshold_px)
            return None
        result = locate_answer(self.client, self.name, kept.interp, kept.raw, rgb.shape[:2],
                               depth, camera)
        if not result.ok or result.target is None or result.target.position is None:
            return None                      # the target was lost: ask again
        result.warnings.append(f"re-perception: reused the last VLM answer ({changed} px of "
                               f"depth changed around the target < {kept.threshold_px:.0f})")
        result.requests = 0
        return result

    def _keep(self, instruction: str, result: PerceptionResult, depth: np.ndarray,
              camera: Camera, image_shape: Tuple[int, int]) -> None:
        self._kept.pop(instruction, None)
        target = result.target
        if not result.ok or not result.raw or target is None or target.bbox is None \
                or target.position is None:
            return
        x1, y1, x2, y2 = target.bbox
        mu = self.config.box_margin * (x2 - x1 + 1)
        mv = self.config.box_margin * (y2 - y1 + 1)
        box = (max(0, int(math.floor(x1 - mu))), max(0, int(math.floor(y1 - mv))),
               min(depth.shape[1], int(math.ceil(x2 + 1 + mu))),
               min(depth.shape[0], int(math.ceil(y2 + 1 + mv))))
        if box[2] <= box[0] or box[3] <= box[1]:
            return
        z = float(camera.world_to_cam(np.asarray(target.position, dtype=float))[0, 2])
        if not (math.isfinite(z) and z > 0):
            return
        interp = getattr(self.backend, "last_interpretation", None)
        if interp is None:                       # the real client: check its raw answer
            interp, _ = check_raw(self.client, result.raw, image_shape)
            if interp is None:
                return
        shift_px = camera.fx * self.config.min_shift_m / z
        threshold = max(1.0, shift_px * (y2 - y1 + 1))
        self._kept[instruction] = _Kept(result.raw, interp, box,
                                        depth[box[1]:box[3], box[0]:box[2]].copy(), threshold)


__all__ = ["ReperceivingPerception", "depth_change"]
