"""Consolidation of acquired experiences, so the knowledge base does not bloat.

Two rules, applied to ACQUIRED experiences only (authored ones are never merged or evicted):

1. Near-duplicates merge. Two acquired experiences of the same category and grasp type whose
   object-frame grasps fall in the same tolerance cell (position, approach, wrist yaw modulo
   pi -- the parallel gripper is symmetric --, opening, force ratio) are one entry with
   success and failure counts. The entry keeps its FIRST member's id, grasp and render spec
   (file order, so a restart gives the same state), is labelled successful when successes >=
   failures, and HAA-RAG's failure penalty scales with failures / (successes + failures)
   (:attr:`Experience.failure_rate`). Cells are a hash grid: O(1) per new experience, and two
   grasps just either side of a cell boundary stay apart (a documented approximation).
2. A cap per category. When a category has more entries than ``cap_per_category``, half the
   cap is kept for the best (Wilson lower bound of the success rate, then attempts) and the
   rest for the most recent (last attempt time); everything else is dropped and reported.

Tolerances live in config/acquisition.yaml with the reasoning for each value.
"""
from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.retrieval.config import ConsolidationConfig
from agentic_grasp.core.retrieval.knowledge_base import Experience, is_ground_truth

_LOG = logging.getLogger(__name__)


def wilson_lower(successes: int, n: int, z: float = 1.96) -> float:
    """Lower end of the Wilson score interval of a success rate (0 when n = 0)."""
    if n <= 0:
        return 0.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / denom)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> Tuple[float, float]:
    """(low, high) Wilson score interval of a success rate."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - spread), min(1.0, centre + spread)


def _cell(exp: Experience, cfg: ConsolidationConfig) -> Tuple[Any, ...]:
    g = exp.grasp
    pos = np.asarray(g.get("position", (0, 0, 0)), dtype=float)
    app = np.asarray(g.get("approach", (0, 0, -1)), dtype=float)
    app = app / max(float(np.linalg.norm(app)), 1e-9)
    # approach as two angles (tilt from -z, azimuth); the azimuth is meaningless when top-down
    tilt = math.acos(max(-1.0, min(1.0, -float(app[2]))))
    azimuth = math.atan2(float(app[1]), float(app[0])) if tilt > cfg.approach_tol_rad else 0.0
    yaw = float(g.get("wrist_yaw", 0.0)) % math.pi
    force = max(float(g.get("force", 1.0)), 1e-3)
    return (exp.category, str(g.get("grasp_type", "")),
            tuple(int(math.floor(v / cfg.position_tol_m)) for v in pos),
            int(math.floor(tilt / cfg.approach_tol_rad)),
            int(math.floor(azimuth / cfg.approach_tol_rad)),
            int(math.floor(yaw / cfg.wrist_yaw_tol_rad)) % max(
                1, int(round(math.pi / cfg.wrist_yaw_tol_rad))),
            int(math.floor(float(g.get("width", 0.0)) / cfg.width_tol_m)),
            int(math.floor(math.log(force) / math.log1p(cfg.force_ratio_tol))),
            # ground truth never merges with what a camera showed: a merged entry keeps its
            # first member's provenance, and oracle entries are served to oracle runs only
            is_ground_truth(exp))


def _counts(exp: Experience) -> Tuple[int, int, Counter]:
    if exp.outcomes:
        modes = Counter({str(k): int(v) for k, v in
                         (exp.outcomes.get("failure_modes") or {}).items()})
        return int(exp.outcomes.get("successes", 0)), int(exp.outcomes.get("failures", 0)), modes
    if exp.success:
        return 1, 0, Counter()
    return 0, 1, Counter({exp.failure_mode or "unknown": 1})


def _time(exp: Experience) -> float:
    acq = exp.acquisition or {}
    try:
        return float(acq.get("time", 0.0))
    except (TypeError, ValueError):
        return 0.0


@dataclass
class _Cluster:
    first: Experience
    successes: int = 0
    failures: int = 0
    modes: Counter = field(default_factory=Counter)
    merged: int = 0
    first_time: float = math.inf
    last_time: float = 0.0
    _built: Optional[Experience] = None

    def add(self, exp: Experience) -> None:
        s, f, modes = _counts(exp)
        self.successes += s
        self.failures += f
        self.modes.update(modes)
        self.merged += int((exp.outcomes or {}).get("merged", 1))
        t = _time(exp)
        self.first_time = min(self.first_time, t)
        self.last_time = max(self.last_time, t)
        self._built = None

    @property
    def n(self) -> int:
        return self.successes + self.failures

    def experience(self) -> Experience:
        """The merged entry (built once per change; its id is the first member's)."""
        if self._built is None:
            success = self.successes >= self.failures
            mode = None if success else (self.modes.most_common(1)[0][0] if self.modes
                                         else "unknown")
            outcomes = {"successes": self.successes, "failures": self.failures,
                        "failure_modes": dict(sorted(self.modes.items())),
                        "merged": self.merged,
                        "first_time": 0.0 if self.first_time == math.inf else self.first_time,
                        "last_time": self.last_time}
            self._built = replace(self.first, success=success, failure_mode=mode,
                                  outcomes=outcomes, embedding=None, embedding_model="")
        return self._built


@dataclass
class Dropped:
    """An entry the cap evicted: its id, category, attempts behind it and why."""

    id: str
    category: str
    attempts: int
    reason: str


class Consolidator:
    """Incremental near-duplicate merging plus the per-category cap (module docstring)."""

    def __init__(self, config: Optional[ConsolidationConfig] = None) -> None:
        self.config = config or ConsolidationConfig()
        self._clusters: Dict[Tuple[Any, ...], _Cluster] = {}
        self._order: List[Tuple[Any, ...]] = []
        self.added = 0
        self.dropped: List[Dropped] = []

    def add(self, experiences: Iterable[Experience]) -> None:
        for exp in experiences:
            key = _cell(exp, self.config)
            cluster = self._clusters.get(key)
            if cluster is None:
                cluster = self._clusters[key] = _Cluster(exp)
                self._order.append(key)
            cluster.add(exp)
            self.added += 1

    def experiences(self) -> List[Experience]:
        """The consolidated entries after the cap, in first-seen order; ``dropped`` is
        refreshed with what the cap evicted."""
        by_category: Dict[str, List[Tuple[Any, ...]]] = {}
        for key in self._order:
            by_category.setdefault(key[0], []).append(key)
        cap = int(self.config.cap_per_category)
        rank = {k: i for i, k in enumerate(self._order)}
        keep: set = set()
        self.dropped = []
        for category, keys in by_category.items():
            if len(keys) <= cap:
                keep.update(keys)
                continue
            clusters = {k: self._clusters[k] for k in keys}
            best = sorted(keys, key=lambda k: (-wilson_lower(clusters[k].successes,
                                                             clusters[k].n,
                                                             self.config.wilson_z),
                                               -clusters[k].n, rank[k]))
            chosen = set(best[:cap // 2])
            recent = sorted((k for k in keys if k not in chosen),
                            key=lambda k: (-clusters[k].last_time, -rank[k]))
            chosen.update(recent[:cap - len(chosen)])
            keep.update(chosen)
            for k in keys:
                if k not in chosen:
                    c = clusters[k]
                    self.dropped.append(Dropped(
                        c.first.id, category, c.n,
                        f"cap {cap} per category: neither among the {cap // 2} best "
                        f"(Wilson lower bound {wilson_lower(c.successes, c.n):.2f}, "
                        f"{c.successes}/{c.n}) nor the most recent"))
        return [self._clusters[k].experience() for k in self._order if k in keep]

    def __len__(self) -> int:
        return len(self._clusters)


def consolidate(experiences: Sequence[Experience],
                config: Optional[ConsolidationConfig] = None,
                ) -> Tuple[List[Experience], List[Dropped]]:
    """One-shot consolidation: (merged entries after the cap, what the cap dropped)."""
    c = Consolidator(config)
    c.add(experiences)
    out = c.experiences()
    return out, list(c.dropped)


__all__ = ["ConsolidationConfig", "Consolidator", "Dropped", "consolidate", "wilson_interval",
           "wilson_lower"]
