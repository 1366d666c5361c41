"""What the knowledge base knows a category to be: its fragility and its size.

Each experience of the knowledge base records the affordance fragility and the rendered size
of the object it was made on. A category's experiences are instances of it, so their mean is
what the category is known to be, and their spread is how much one instance differs from it.
One category has few experiences (one to ten), too few for its own spread, so the spread is
pooled over every category that has two or more (the within-category variance, weighted by
its degrees of freedom: the standard one-way pooled estimate). A new instance then differs
from its category's mean by that spread and by the mean's own error (variance s^2 (1 + 1/n),
the predictive variance of one more draw).

Size is taken as the logarithm of the bounding-box volume (what a sort by size orders), whose
spread is relative, so a category of small objects is not given a centimetre-scale spread.

The sorting of a long-horizon task weighs these against perception (planner/instruction/
sorting.py). The priors are read from the knowledge-base files only, so the planner node and
the in-process planner read the same numbers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from agentic_grasp.core.retrieval.knowledge_base import KnowledgeBase
from agentic_grasp.core.retrieval.taxonomy import Taxonomy, normalise_word


@dataclass(frozen=True)
class CategoryPrior:
    """A category's known fragility and log volume (m^3), each with the spread of one new
    instance about it (module docstring); ``n``: the experiences behind it."""

    category: str
    fragility: float
    fragility_sd: float
    log_volume: Optional[float]
    log_volume_sd: float
    n: int


def _pooled_sd(groups: Iterable[List[float]]) -> float:
    """Pooled within-group standard deviation over the groups with two or more values
    (0 when none has)."""
    num, dof = 0.0, 0
    for values in groups:
        if len(values) > 1:
            num += float(np.var(values, ddof=1)) * (len(values) - 1)
            dof += len(values) - 1
    return math.sqrt(num / dof) if dof else 0.0


class CategoryKnowledge:
    """The per-category priors of one knowledge base (module docstring)."""

    def __init__(self, experiences: Iterable[object], taxonomy: Optional[Taxonomy] = None
                 ) -> None:
        self.taxonomy = taxonomy
        fragility: Dict[str, List[float]] = {}
        volume: Dict[str, List[float]] = {}
        for exp in experiences:
            cat = str(getattr(exp, "category"))
            fragility.setdefault(cat, []).append(float(exp.affordance.fragility))
            spec = getattr(exp, "render_spec", None) or {}
            size = spec.get("size") if isinstance(spec, dict) else None
            if size is not None and len(size) == 3 and all(float(s) > 0 for s in size):
                volume.setdefault(cat, []).append(math.log(float(np.prod(size))))
        self.fragility_spread = _pooled_sd(fragility.values())
        self.log_volume_spread = _pooled_sd(volume.values())
        self._priors: Dict[str, CategoryPrior] = {}
        for cat, frags in fragility.items():
            n = len(frags)
            vols = volume.get(cat, [])
            self._priors[cat] = CategoryPrior(
                cat, float(np.mean(frags)), self.fragility_spread * math.sqrt(1.0 + 1.0 / n),
                float(np.mean(vols)) if vols else None,
                self.log_volume_spread * math.sqrt(1.0 + 1.0 / max(len(vols), 1)), n)

    def prior(self, category: str) -> Optional[CategoryPrior]:
        """The prior of a perceived category word ("wine glass", an alias), None when the
        knowledge base has no experience of that exact category (a superclass is not the
        category: a kettle is not known by what other containers are)."""
        word = normalise_word(category)
        if self.taxonomy is not None:
            word = self.taxonomy.canonical(word) or word
        return self._priors.get(word)

    def __len__(self) -> int:
        return len(self._priors)


@lru_cache(maxsize=4)
def load_category_knowledge(path: Optional[str] = None) -> CategoryKnowledge:
    """The priors of the knowledge base at ``path`` (default: the shipped one), read once
    per process."""
    kb = KnowledgeBase.load(path)
    return CategoryKnowledge(kb.experiences, kb.taxonomy)


def inverse_variance(values: Iterable[Tuple[float, float]]) -> Tuple[float, float]:
    """(estimate, sd) of independent (value, sd) measurements of one quantity, weighted by
    their inverse variances; a zero sd is exact and wins alone."""
    pairs = [(float(v), float(s)) for v, s in values]
    exact = [v for v, s in pairs if s <= 0.0]
    if exact:
        return float(np.mean(exact)), 0.0
    w = [1.0 / (s * s) for _, s in pairs]
    total = sum(w)
    return sum(wi * v for wi, (v, _) in zip(w, pairs)) / total, math.sqrt(1.0 / total)


__all__ = ["CategoryKnowledge", "CategoryPrior", "inverse_variance",
           "load_category_knowledge"]
