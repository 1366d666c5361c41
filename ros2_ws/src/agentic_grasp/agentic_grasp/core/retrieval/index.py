"""The knowledge base as HAA-RAG searches it: experiences grouped by category
(level 1), their affordance descriptors as arrays for the vectorised s_aff of Eq. 1
(level 2) and their visual embeddings (level 3), with the top-k selection.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.retrieval.knowledge_base import Experience, KnowledgeBase
from agentic_grasp.core.retrieval.taxonomy import Taxonomy, normalise_word
from agentic_grasp.core.types import AffordanceDescriptor, AffordanceType


AFFORDANCE_TYPES: Tuple[AffordanceType, ...] = tuple(AffordanceType)
_TYPE_INDEX = {t: i for i, t in enumerate(AFFORDANCE_TYPES)}


# --------------------------------------------------------------------------- index
class RetrievalIndex:
    """The knowledge base as columns sorted by (superclass, category, KB order).

    Sorting makes the candidates of a query two nested contiguous slices: its superclass
    [sup_start, sup_end) and inside it its category [cat_start, cat_end). ``kb_row`` maps a
    sorted position back to the knowledge-base order (used for ties and for the experience).
    """

    def __init__(self, taxonomy: Taxonomy, categories: Sequence[str],
                 category_of_row: np.ndarray, type_of_row: np.ndarray,
                 materials: Sequence[str], material_of_row: np.ndarray,
                 fragility: np.ndarray, regions: Sequence[str], region_of_row: np.ndarray,
                 success: np.ndarray, vectors: Optional[np.ndarray] = None,
                 model_id: str = "", experiences: Optional[Sequence[Experience]] = None,
                 failure_rate: Optional[np.ndarray] = None) -> None:
        n = len(category_of_row)
        for name, arr in (("type", type_of_row), ("material", material_of_row),
                          ("fragility", fragility), ("region", region_of_row),
                          ("success", success)):
            if len(arr) != n:
                raise ValidationError(f"index column {name} has {len(arr)} rows, expected {n}")
        if vectors is not None and (vectors.ndim != 2 or vectors.shape[0] != n):
            raise ValidationError(f"vectors must have shape ({n}, dim), got {vectors.shape}")
        self.taxonomy = taxonomy
        self.categories = [normalise_word(c) for c in categories]
        self.category_id = {c: i for i, c in enumerate(self.categories)}
        self.superclasses = sorted({taxonomy.superclass_of[c] for c in self.categories})
        self.superclass_id = {s: i for i, s in enumerate(self.superclasses)}
        sup_of_cat = np.array([self.superclass_id[taxonomy.superclass_of[c]]
                               for c in self.categories], dtype=np.int32)
        cat = np.asarray(category_of_row, dtype=np.int32)
        sup = sup_of_cat[cat] if n else np.zeros(0, dtype=np.int32)
        order = np.lexsort((np.arange(n), cat, sup)).astype(np.int64)
        self.kb_row = order.astype(np.int32)
        self.category_of_row = cat[order]
        self.type_of_row = np.asarray(type_of_row, dtype=np.int8)[order]
        self.materials = [normalise_word(m) for m in materials]
        self.material_of_row = np.asarray(material_of_row, dtype=np.int16)[order]
        self.fragility = np.asarray(fragility, dtype=np.float64)[order]
        self.regions = [normalise_word(r) for r in regions]
        self.region_of_row = np.asarray(region_of_row, dtype=np.int16)[order]
        self.success = np.asarray(success, dtype=bool)[order]
        # failures / attempts per entry (consolidated acquired entries carry counts); the
        # failure penalty scales with it, so 0/1 for an entry with a single outcome.
        rate = (~np.asarray(success, dtype=bool)).astype(np.float64) if failure_rate is None \
            else np.clip(np.asarray(failure_rate, dtype=np.float64), 0.0, 1.0)
        self.failure_rate = rate[order]
        self.vectors = (np.ascontiguousarray(np.asarray(vectors, dtype=np.float32)[order])
                        if vectors is not None else None)
        self.model_id = model_id
        self._experiences = experiences
        sup_sorted = sup[order]
        self.sup_start = np.searchsorted(sup_sorted, np.arange(len(self.superclasses)), "left")
        self.sup_end = np.searchsorted(sup_sorted, np.arange(len(self.superclasses)), "right")
        # Categories are sorted inside their superclass slice: locate each one there.
        self.cat_start = np.zeros(len(self.categories), dtype=np.int64)
        self.cat_end = np.zeros(len(self.categories), dtype=np.int64)
        for c in range(len(self.categories)):
            s = sup_of_cat[c]
            a, b = self.sup_start[s], self.sup_end[s]
            seg = self.category_of_row[a:b]
            self.cat_start[c] = a + np.searchsorted(seg, c, "left")
            self.cat_end[c] = a + np.searchsorted(seg, c, "right")

    @classmethod
    def from_knowledge_base(cls, kb: KnowledgeBase) -> "RetrievalIndex":
        exps = kb.experiences
        categories = sorted({e.category for e in exps})
        materials = sorted({normalise_word(e.affordance.material) for e in exps})
        regions = sorted({normalise_word(e.affordance.region) for e in exps})
        cat_id = {c: i for i, c in enumerate(categories)}
        mat_id = {m: i for i, m in enumerate(materials)}
        reg_id = {r: i for i, r in enumerate(regions)}
        return cls(
            kb.taxonomy, categories,
            np.array([cat_id[e.category] for e in exps], dtype=np.int32),
            np.array([_TYPE_INDEX[e.affordance.type] for e in exps], dtype=np.int8),
            materials,
            np.array([mat_id[normalise_word(e.affordance.material)] for e in exps], np.int16),
            np.array([e.affordance.fragility for e in exps], dtype=np.float64),
            regions,
            np.array([reg_id[normalise_word(e.affordance.region)] for e in exps], np.int16),
            np.array([e.success for e in exps], dtype=bool),
            kb.vectors, kb.embedding_model, exps,
            np.array([e.failure_rate for e in exps], dtype=np.float64))

    def __len__(self) -> int:
        return len(self.kb_row)

    @property
    def dim(self) -> int:
        return 0 if self.vectors is None else int(self.vectors.shape[1])

    def experience(self, position: int) -> Experience:
        """The experience at a sorted position (built on demand for synthetic indexes)."""
        row = int(self.kb_row[position])
        if self._experiences is not None:
            return self._experiences[row]
        return Experience(
            id=f"synthetic-{row}", category=self.categories[self.category_of_row[position]],
            affordance=AffordanceDescriptor(
                type=AFFORDANCE_TYPES[int(self.type_of_row[position])],
                material=self.materials[int(self.material_of_row[position])],
                fragility=float(self.fragility[position]),
                region=self.regions[int(self.region_of_row[position])]),
            grasp={}, success=bool(self.success[position]), provenance="synthetic: scale bench",
            render_spec={}, embedding=None if self.vectors is None else self.vectors[position],
            embedding_model=self.model_id)


def _top_k(scores: np.ndarray, k: int, secondary: np.ndarray) -> np.ndarray:
    """Positions of the k highest ``scores``, ordered by (-score, secondary); O(n + k log k)."""
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        part = np.argpartition(-scores, k - 1)[:k]
        kth = scores[part].min()
        above = np.flatnonzero(scores > kth)
        equal = np.flatnonzero(scores == kth)
        need = k - above.size
        if equal.size > need:
            equal = equal[np.argsort(secondary[equal], kind="stable")[:need]]
        idx = np.concatenate([above, equal])
    else:
        idx = np.arange(n)
    return idx[np.lexsort((secondary[idx], -scores[idx]))]
