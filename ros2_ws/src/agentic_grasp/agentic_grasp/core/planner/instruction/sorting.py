"""The order of a sort: each object's fragility or size, from what its category is known to
be weighed against what perception measured, each by its stated error.

Perception names a fragility with the VLM's error (config/perception.yaml
``vlm_sim.fragility_std``, 0.1: the assumed accuracy of a VLM's fragility, the same number
the simulated VLM draws its error with; the oracle's own ``fragility_std``, 0 by default, for
the oracle). Read alone, two objects whose fragilities differ by 0.15 swap places with a
chance of P(N(0, 0.1 sqrt 2) > 0.15) = 14 % per pair, and a sort of three has two such pairs.
The knowledge base knows a category's fragility with the spread of one instance about it
(core/retrieval/priors.py: the pooled within-category spread of its experiences, 0.09, times
sqrt(1 + 1/n)). The two are independent, so they are combined by their inverse variances;
an object whose category the knowledge base does not know keeps perception's value.

The category's value is a prior about a typical instance, and some instances are not typical
(a glass bottle in a knowledge base of plastic ones) or not of the category perception named
(a bottle named a vase). Where perception and the category disagree by more than their
combined error allows at 95 % (|difference| > 1.96 sqrt(sd_p^2 + sd_k^2), the two-sided
consistency test of two normal measurements), they are not measuring the same thing, and the
object keeps what perception measured of it, with the reason in its note.

Size is the logarithm of the bounding-box volume. Perception measures each extent from depth
between two edges, each with the camera's depth noise (``reperception.depth_noise_std_m``,
1 mm), so an extent e errs by sqrt(2) 1 mm and the log volume by the root sum of
(sqrt(2) 1 mm / e)^2 over the three extents. The knowledge base's spread of a category's
log volume (0.31) is far wider, so perception leads a sort by size and the category only
matters where depth gave no extent.

Nothing here reads the simulator: the inputs are the perceived objects, the knowledge base
and perception's configuration.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.perception.params import load_params
from agentic_grasp.core.retrieval.priors import CategoryKnowledge, inverse_variance
from agentic_grasp.core.types import ObjectInstance

BY_FRAGILITY = "fragility"
#: Two-sided 95 % quantile of the normal: the consistency test of perception and category.
CONSISTENT_Z = 1.959964
BY_SIZE = "size"


@dataclass(frozen=True)
class PerceptionError:
    """Perception's stated errors: fragility (1 sigma, on the 0..1 scale) and depth (m)."""

    fragility_sd: float
    depth_sd_m: float


@lru_cache(maxsize=4)
def perception_error(backend: str) -> PerceptionError:
    """The stated errors of ``backend`` from config/perception.yaml (module docstring); the
    real VLM states none, so it is given the simulated VLM's, the accuracy assumed of it."""
    params = load_params()
    section = "oracle" if backend == "oracle" else "vlm_sim"
    frag = float((params.get(section) or {}).get("fragility_std", 0.0))
    depth = float((params.get("reperception") or {}).get("depth_noise_std_m", 0.001))
    return PerceptionError(frag, depth)


@dataclass(frozen=True)
class SortEstimate:
    """One object's value for the sort with its error, and how it was reached."""

    object_id: str
    value: float
    sd: float
    note: str


def _log_volume_sd(size: np.ndarray, depth_sd: float) -> float:
    per_edge = math.sqrt(2.0) * depth_sd
    return math.sqrt(sum((per_edge / max(float(e), 1e-3)) ** 2 for e in size))


def estimate(obj: ObjectInstance, by: str, knowledge: Optional[CategoryKnowledge],
             error: PerceptionError) -> SortEstimate:
    """The object's fragility, or log volume (m^3), for a sort (module docstring)."""
    prior = knowledge.prior(obj.category) if knowledge is not None else None
    if by == BY_FRAGILITY:
        seen = (float(obj.fragility), error.fragility_sd)
        if prior is None:
            return SortEstimate(obj.id, seen[0], seen[1],
                                f"perceived fragility {seen[0]:.2f} (category not in the "
                                "knowledge base)")
        known = (prior.fragility, prior.fragility_sd)
        if abs(seen[0] - known[0]) > CONSISTENT_Z * math.hypot(seen[1], known[1]):
            return SortEstimate(obj.id, seen[0], seen[1],
                                f"perceived fragility {seen[0]:.2f} +- {seen[1]:.2f}, kept: "
                                f"known for {prior.category} {known[0]:.2f} +- {known[1]:.2f},"
                                " not this instance at 95 %")
        value, sd = inverse_variance([seen, known])
        return SortEstimate(obj.id, value, sd,
                            f"fragility {value:.2f} +- {sd:.2f}: perceived {seen[0]:.2f} +- "
                            f"{seen[1]:.2f}, known for {prior.category} {prior.fragility:.2f}"
                            f" +- {prior.fragility_sd:.2f}")
    size = np.asarray(obj.size, dtype=float)
    measured = size.shape == (3,) and bool(np.all(np.isfinite(size)) and np.all(size > 0))
    pairs: List[Tuple[float, float]] = []
    parts = []
    if measured:
        pairs.append((math.log(float(np.prod(size))), _log_volume_sd(size, error.depth_sd_m)))
        parts.append(f"perceived {math.exp(pairs[-1][0]) * 1e6:.0f} cm^3")
    if prior is not None and prior.log_volume is not None:
        pairs.append((prior.log_volume, prior.log_volume_sd))
        parts.append(f"known for {prior.category} {math.exp(prior.log_volume) * 1e6:.0f} cm^3")
    if not pairs:
        return SortEstimate(obj.id, -math.inf, math.inf, "no size perceived or known")
    value, sd = inverse_variance(pairs)
    return SortEstimate(obj.id, value, sd, f"volume {math.exp(value) * 1e6:.0f} cm^3 ("
                        + ", ".join(parts) + ")")


def sort_view(objects: Sequence[ObjectInstance], by: str,
              knowledge: Optional[CategoryKnowledge], error: PerceptionError
              ) -> Tuple[List[ObjectInstance], Dict[str, SortEstimate]]:
    """The objects as the sort should see them (fragility, or the size scaled to the
    estimated volume, replaced by the estimate), with each estimate. The objects themselves
    are not changed: grasping keeps what perception measured."""
    out, notes = [], {}
    for obj in objects:
        est = estimate(obj, by, knowledge, error)
        notes[obj.id] = est
        if by == BY_FRAGILITY:
            out.append(replace(obj, fragility=float(min(1.0, max(0.0, est.value)))))
        elif math.isfinite(est.value):
            size = np.asarray(obj.size, dtype=float)
            if size.shape == (3,) and bool(np.all(np.isfinite(size)) and np.all(size > 0)):
                scale = math.exp((est.value - math.log(float(np.prod(size)))) / 3.0)
                out.append(replace(obj, size=size * scale))
            else:
                out.append(replace(obj, size=np.full(3, math.exp(est.value / 3.0))))
        else:
            out.append(obj)
    return out, notes


__all__ = ["BY_FRAGILITY", "BY_SIZE", "PerceptionError", "SortEstimate", "estimate",
           "perception_error", "sort_view"]
