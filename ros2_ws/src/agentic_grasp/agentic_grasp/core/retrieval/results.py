"""What a HAA-RAG retrieval answers: the top-k scored strategies with each one's score
breakdown and explanation (:class:`ScoredStrategy`), and why the list is what it is
(:class:`RetrievalResult`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

from agentic_grasp.core.retrieval.knowledge_base import Experience


@dataclass
class ScoredStrategy:
    """One retrieved experience and why it was chosen.

    s_aff_terms holds the four raw terms of Eq. 1 (type match 0/1, s_mat, 1 - |delta
    fragility|, s_reg) before weighting; penalty is the fraction removed from s_final (0.3
    for a failed experience, else 0).
    """

    experience: Experience
    s_cat: float
    s_aff: float
    s_aff_terms: Dict[str, float]
    s_vis: float
    penalty: float
    s_final: float
    rank: int
    explanation: str
    mode: str = "haa"

    def to_dict(self) -> Dict[str, Any]:
        exp = self.experience
        return {"id": exp.id, "category": exp.category, "success": exp.success,
                "affordance": {"type": exp.affordance.type.value,
                               "material": exp.affordance.material,
                               "fragility": exp.affordance.fragility,
                               "region": exp.affordance.region},
                "grasp": dict(exp.grasp), "provenance": exp.provenance,
                "s_cat": self.s_cat, "s_aff": self.s_aff, "s_aff_terms": dict(self.s_aff_terms),
                "s_vis": self.s_vis, "penalty": self.penalty, "s_final": self.s_final,
                "rank": self.rank, "explanation": self.explanation, "mode": self.mode}


@dataclass
class RetrievalResult:
    """Top-k strategies, why the list is what it is, and the counts after levels 1 and 2."""

    strategies: List[ScoredStrategy]
    reason: str
    n_level1: int
    n_level2: int
    n_candidates: int = 0          # same-category or same-superclass entries before the k1 cut
    category: str = ""             # the query category after normalisation ('' if unknown)
    superclass: str = ""
    mode: str = "haa"
    embedding_model: str = ""
    fallback: bool = False         # ranked by affordance / size over the whole KB (level 1 empty)

    @property
    def best(self) -> Optional[ScoredStrategy]:
        return self.strategies[0] if self.strategies else None

    def to_dict(self) -> Dict[str, Any]:
        out = asdict(self)
        out["strategies"] = [s.to_dict() for s in self.strategies]
        return out
