"""Hierarchical Affordance-Aware RAG (paper Sec. III-A, Eq. 1, Fig. 2).

Three coarse-to-fine levels over the knowledge base:

1. category match: s_cat = 1.0 for the query's category, 0.5 for another category of the same
   superclass ("mug" -> "cup"), everything else discarded; keep the top k1 = 30 (ties at the
   cut broken by the next level's score, then by knowledge-base order);
2. affordance score (Eq. 1)
       s_aff = 0.5 1[type_q = type_i] + 0.2 s_mat + 0.15 (1 - |frag_q - frag_i|) + 0.15 s_reg
   where s_mat is 1 for the same material and the configured similarity of the pair otherwise
   (config/retrieval.yaml ``material_similarity``; the paper's strict indicator with an empty
   table) and s_reg is 1 for the same region, 0.5 for two regions of one family
   (kb_data/taxonomy.yaml ``regions``), else 0; candidates with s_aff < tau_aff = 0.3 are
   discarded;
3. visual re-rank: s_vis = cos(v_q, v_i);
       s_final = 0.2 s_cat + 0.4 s_aff + 0.4 s_vis, times (1 - 0.3) for failed experiences;
   the top k = 3 are returned, each with its score breakdown and a one-line explanation.

``mode="clip_only"`` is the Table IV baseline: level 1, then s_final = 0.2 s_cat + 0.4 s_vis
(affordance skipped; the failure penalty still applies unless configured off).

Cost: the index keeps the knowledge base as columns sorted by (superclass, category), so the
candidates of a query are two contiguous slices (its superclass and, inside it, its category):
a query touches only its candidate rows, never the whole knowledge base, and cosines are one
matrix-vector product over the <= k1 survivors. Every constant comes from
config/retrieval.yaml.
"""
from __future__ import annotations

import logging
import math
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.retrieval.kb_vectors import EmbeddingCache
from agentic_grasp.core.retrieval.embedding import (VisualEmbedder, DescriptorEmbedder, check_crop,
                                                    make_embedder, unit)
from agentic_grasp.core.retrieval.knowledge_base import (GROUND_TRUTH_BACKEND, Experience,
                                                         KnowledgeBase, is_ground_truth)
from agentic_grasp.core.retrieval.taxonomy import normalise_word
from agentic_grasp.core.types import AffordanceDescriptor, AffordanceType
from agentic_grasp.core.retrieval.config import MODES, RetrievalConfig
from agentic_grasp.core.retrieval.index import RetrievalIndex, _TYPE_INDEX, _top_k
from agentic_grasp.core.retrieval.results import RetrievalResult, ScoredStrategy


_LOG = logging.getLogger(__name__)


#: Slack on the tau_aff comparison so that a score equal to tau on paper is kept.
_TAU_EPS = 1e-9


class EmbeddingModelMismatch(ValidationError):
    """A query vector was made by another model than the knowledge-base vectors."""


# --------------------------------------------------------------------------- retriever
@dataclass
class _Query:
    category: str
    superclass: str
    affordance: AffordanceDescriptor
    vector: Optional[np.ndarray]
    notes: List[str]
    hidden: Optional[np.ndarray] = None     # sorted positions that are not candidates


class HAARAG:
    """The three-level retriever over one knowledge base and one embedding model."""

    def __init__(self, kb: Optional[KnowledgeBase], config: Optional[RetrievalConfig] = None,
                 embedder: Optional[VisualEmbedder] = None, *,
                 index: Optional[RetrievalIndex] = None,
                 cache: Union[EmbeddingCache, None, bool] = None) -> None:
        self.config = config if config is not None else RetrievalConfig.from_config()
        self.kb = kb
        if index is None:
            if kb is None:
                raise ValidationError("HAARAG needs a knowledge base or an index")
            if not kb.embedding_model:
                embedder = embedder or make_embedder(self.config.embedding)
                kb.embed(embedder, cache=cache,
                         crop_size=int(self.config.embedding.get("crop_size_px", 64)))
            elif embedder is None and kb.embedding_model == DescriptorEmbedder.model_id:
                embedder = DescriptorEmbedder()
            index = RetrievalIndex.from_knowledge_base(kb)
        if embedder is not None and index.model_id and embedder.model_id != index.model_id:
            raise EmbeddingModelMismatch(
                f"embedder {embedder.model_id!r} cannot query knowledge-base vectors made by "
                f"{index.model_id!r}; re-embed the knowledge base with it")
        self.embedder = embedder
        self.index = index
        self.taxonomy = index.taxonomy
        #: query vectors of recent crops (_query_vector): the configurations of a sweep
        #: crop the same pixels from the same first frame of a trial
        self._crop_vectors: "OrderedDict[tuple, np.ndarray]" = OrderedDict()

    @classmethod
    def from_config(cls, path: Union[str, Path, None] = None,
                    embedder: Optional[VisualEmbedder] = None) -> "HAARAG":
        """Knowledge base, embedder and constants as config/retrieval.yaml says."""
        return build_retriever(RetrievalConfig.from_config(path), embedder)

    # ------------------------------------------------------------------ public
    def retrieve(self, category: str, affordance: Union[AffordanceDescriptor, Mapping[str, Any]],
                 embedding: Optional[np.ndarray] = None, crop: Optional[np.ndarray] = None,
                 embedding_model: Optional[str] = None, k: Optional[int] = None,
                 mode: Optional[str] = None,
                 size: Optional[Sequence[float]] = None,
                 perception_backend: Optional[str] = None) -> RetrievalResult:
        """Top-k strategies for an object of ``category`` with ``affordance``.

        ``perception_backend`` names what perceived the query object: experiences acquired
        under oracle perception (ground truth, :func:`is_ground_truth`) are candidates only
        for an ``"oracle"`` query, never for a run that perceives from pixels (or does not
        say), so ground truth cannot leak into a vlm / vlm_sim run through the knowledge base.

        The visual query is ``embedding`` (a vector made by ``embedding_model``, which must be
        the knowledge base's model) or ``crop`` (an RGB uint8 image embedded here); with
        neither, s_vis = 0 for every candidate. ``mode``: "haa" or "clip_only" (default: the
        configured mode). An unknown category gives an empty result with a reason; malformed
        affordances, crops or vectors raise ValidationError.
        """
        mode = self.config.mode if mode is None else str(mode)
        if mode not in MODES:
            raise ValidationError(f"mode must be one of {MODES}, got {mode!r}")
        k = self.config.k if k is None else k
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValidationError(f"k must be a positive integer, got {k!r}")
        aff = check_affordance(affordance)
        vector, notes = self._query_vector(embedding, crop, embedding_model)
        hidden = None if perception_backend == GROUND_TRUTH_BACKEND \
            else self._ground_truth_rows()
        empty = RetrievalResult([], "", 0, 0, mode=mode, embedding_model=self.index.model_id)
        if not isinstance(category, str) or not category.strip():
            empty.reason = f"no category given ({category!r})"
            return empty
        canon = self.taxonomy.canonical(category)
        if canon is None:
            empty.reason = (f"unknown category {category!r}: not in the taxonomy "
                            f"({self.taxonomy.source or 'kb_data/taxonomy.yaml'})")
            return self._fallback(aff, vector, size, int(k), mode, empty, notes, hidden)
        sup = self.taxonomy.superclass_of[canon]
        empty.category, empty.superclass = canon, sup
        if sup not in self.index.superclass_id:
            empty.reason = (f"no experience of category '{canon}' or of its superclass "
                            f"'{sup}' in the knowledge base")
            return self._fallback(aff, vector, size, int(k), mode, empty, notes, hidden)
        query = _Query(canon, sup, aff, vector, notes, hidden)
        return self._retrieve(query, int(k), mode)

    def _ground_truth_rows(self) -> Optional[np.ndarray]:
        """Sorted positions acquired under oracle perception (True), or None when there are
        none (the usual case: no mask, the slices of the fast path)."""
        if getattr(self, "_gt_rows", None) is None:
            try:
                flags = [is_ground_truth(self.index.experience(i))
                         for i in range(len(self.index))]
            except (ValidationError, TypeError, IndexError, AttributeError):
                flags = []
            self._gt_rows = np.array(flags, dtype=bool) if any(flags) else np.zeros(0, bool)
        return self._gt_rows if self._gt_rows.size else None

    # ------------------------------------------------------------------ fallback
    def _row_sizes(self) -> Optional[np.ndarray]:
        """Sorted extents (3,) of every index row from its render_spec (None: no entries)."""
        if getattr(self, "_sizes", None) is None:
            try:
                rows = [self.index.experience(i) for i in range(len(self.index))]
            except (ValidationError, TypeError, IndexError, AttributeError):
                return None
            self._sizes = np.array([sorted(float(v) for v in e.render_spec.get("size", (0, 0, 0)))
                                    for e in rows], dtype=np.float64)
        return self._sizes

    def _fallback(self, aff: AffordanceDescriptor, vector: Optional[np.ndarray],
                  size: Optional[Sequence[float]], k: int, mode: str,
                  empty: RetrievalResult, notes: List[str],
                  hidden: Optional[np.ndarray] = None) -> RetrievalResult:
        """Level 1 is empty: the whole KB ranked by affordance, size and appearance."""
        cfg, ix = self.config, self.index
        if not cfg.fallback_enabled or mode != "haa" or len(ix) == 0:
            return empty
        notes = list(notes)
        pos = np.arange(len(ix))
        s_aff, terms = self._affordance(pos, aff, self._material_row(aff.material, notes),
                                        self._region_row(aff.region, notes))
        s_size = np.zeros(len(ix))
        sizes = self._row_sizes() if size is not None else None
        if sizes is not None:
            q = np.sort(np.asarray(size, dtype=np.float64).reshape(-1)[:3])
            if q.size == 3 and np.all(np.isfinite(q)) and np.all(q > 0):
                ratio = np.minimum(sizes, q) / np.maximum(np.maximum(sizes, q), 1e-9)
                s_size = np.prod(ratio, axis=1) ** (1.0 / 3.0)   # geometric-mean extent ratio
        else:
            notes.append("no perceived size: fallback without the size term")
        s_vis = self._visual(pos, vector)
        penalty = cfg.failure_penalty * ix.failure_rate
        fused = (cfg.w_affordance * s_aff + cfg.fallback_size_weight * s_size
                 + cfg.w_visual * s_vis) * (1.0 - penalty)
        keep = np.flatnonzero(s_aff >= cfg.tau_aff - _TAU_EPS)
        if hidden is not None:                  # ground truth: not for this run
            keep = keep[~hidden[keep]]
        if keep.size == 0:
            empty.reason += f"; fallback: no experience reaches tau_aff = {cfg.tau_aff:g}"
            return empty
        order = keep[_top_k(fused[keep], min(k, keep.size), ix.kb_row[keep])]
        strategies = []
        for rank, i in enumerate(order, start=1):
            exp = ix.experience(int(i))
            term = {name: float(t[i]) for name, t in terms.items()}
            term["size"] = float(s_size[i])
            strategies.append(ScoredStrategy(
                experience=exp, s_cat=0.0, s_aff=float(s_aff[i]), s_aff_terms=term,
                s_vis=float(s_vis[i]), penalty=float(penalty[i]), s_final=float(fused[i]),
                rank=rank, mode=mode,
                explanation=(f"#{rank} {exp.id} ({exp.category}) FALLBACK (level 1 empty): "
                             f"aff {s_aff[i]:.2f} ({exp.affordance.type.value}, "
                             f"{exp.affordance.material}), size {s_size[i]:.2f}, vis "
                             f"{s_vis[i]:.2f}; final {fused[i]:.3f}")))
        reason = (f"fallback: {empty.reason}; {len(strategies)} of {keep.size} experiences "
                  f"passing tau_aff = {cfg.tau_aff:g}, ranked by {cfg.w_affordance:g} s_aff + "
                  f"{cfg.fallback_size_weight:g} s_size + {cfg.w_visual:g} s_vis")
        if notes:
            reason += "; " + "; ".join(notes)
        return RetrievalResult(strategies, reason, 0, int(keep.size), 0, empty.category,
                               empty.superclass, mode, ix.model_id, fallback=True)

    # ------------------------------------------------------------------ levels
    def _retrieve(self, q: _Query, k: int, mode: str) -> RetrievalResult:
        cfg, ix = self.config, self.index
        s = ix.superclass_id[q.superclass]
        a, b = int(ix.sup_start[s]), int(ix.sup_end[s])
        c = ix.category_id.get(q.category, -1)
        ca, cb = (int(ix.cat_start[c]), int(ix.cat_end[c])) if c >= 0 else (a, a)
        n_candidates = b - a
        mat_row = self._material_row(q.affordance.material, q.notes)
        reg_row = self._region_row(q.affordance.region, q.notes)

        # Level 1: exact matches first, then same-superclass ones, top k1 by (s_cat, tie).
        # The candidates are slices of the sorted index: score views, gather nothing.
        def tie_scores(rows: slice) -> np.ndarray:
            if mode == "haa":
                return self._affordance(rows, q.affordance, mat_row, reg_row)[0]
            return self._visual(rows, q.vector)

        exact = np.arange(ca, cb)
        others = np.concatenate([np.arange(a, ca), np.arange(cb, b)])
        hidden = q.hidden
        if hidden is not None:          # ground-truth experiences are not candidates here
            exact, others = exact[~hidden[exact]], others[~hidden[others]]
            n_candidates = int(exact.size + others.size)
        if exact.size >= cfg.k1:
            tie = tie_scores(slice(ca, cb)) if hidden is None else tie_scores(exact)
            chosen = exact[_top_k(tie, cfg.k1, ix.kb_row[exact])]
        else:
            rest = cfg.k1 - exact.size
            if others.size > rest:
                tie = (np.concatenate([tie_scores(slice(a, ca)), tie_scores(slice(cb, b))])
                       if hidden is None else tie_scores(others))
                others = others[_top_k(tie, rest, ix.kb_row[others])]
            chosen = np.concatenate([exact, others])
        n1 = int(chosen.size)
        s_cat = np.where(ix.category_of_row[chosen] == c, cfg.category_exact_score,
                         cfg.category_superclass_score)

        # Level 2 (haa): Eq. 1 and the tau_aff threshold.
        s_aff, terms = self._affordance(chosen, q.affordance, mat_row, reg_row)
        if mode == "haa":
            keep = s_aff >= cfg.tau_aff - _TAU_EPS
            chosen, s_cat, s_aff = chosen[keep], s_cat[keep], s_aff[keep]
            terms = {name: t[keep] for name, t in terms.items()}
            n2 = int(chosen.size)
            if n2 == 0:
                return RetrievalResult(
                    [], f"all {n1} category matches scored s_aff below tau_aff = "
                    f"{cfg.tau_aff:g}", n1, 0, n_candidates, q.category, q.superclass, mode,
                    ix.model_id)
        else:
            n2 = n1

        # Level 3: visual re-rank, fusion, failure penalty.
        s_vis = self._visual(chosen, q.vector)
        if mode == "haa":
            fused = cfg.w_category * s_cat + cfg.w_affordance * s_aff + cfg.w_visual * s_vis
            penalise = True
        else:
            fused = cfg.w_category * s_cat + cfg.w_visual * s_vis
            penalise = cfg.clip_only_failure_penalty
        penalty = cfg.failure_penalty * ix.failure_rate[chosen] if penalise \
            else np.zeros(chosen.size)
        s_final = fused * (1.0 - penalty)
        order = _top_k(s_final, min(k, chosen.size), ix.kb_row[chosen])

        strategies = []
        for rank, i in enumerate(order, start=1):
            exp = ix.experience(int(chosen[i]))
            term = {name: float(t[i]) for name, t in terms.items()}
            strategies.append(ScoredStrategy(
                experience=exp, s_cat=float(s_cat[i]), s_aff=float(s_aff[i]), s_aff_terms=term,
                s_vis=float(s_vis[i]), penalty=float(penalty[i]), s_final=float(s_final[i]),
                rank=rank, mode=mode,
                explanation=self._explain(exp, q, float(s_cat[i]), float(s_aff[i]), term,
                                          float(s_vis[i]), float(penalty[i]),
                                          float(s_final[i]), rank, mode)))
        level2 = (f"{n2} passed tau_aff = {cfg.tau_aff:g}" if mode == "haa"
                  else "affordance level skipped (clip_only)")
        reason = (f"{len(strategies)} of {n2} strategies for '{q.category}': level 1 kept "
                  f"{n1} of {n_candidates} category/superclass matches (k1 = {cfg.k1}), "
                  f"{level2}")
        if q.notes:
            reason += "; " + "; ".join(q.notes)
        return RetrievalResult(strategies, reason, n1, n2, n_candidates, q.category,
                               q.superclass, mode, ix.model_id)

    def _affordance(self, pos: Union[np.ndarray, slice], aff: AffordanceDescriptor,
                    mat_row: np.ndarray, reg_row: np.ndarray
                    ) -> Tuple[np.ndarray, Dict[str, np.ndarray]]:
        """Eq. 1 for the sorted positions (or slice) ``pos``: (s_aff, raw terms)."""
        cfg, ix = self.config, self.index
        t_frag = 1.0 - np.abs(ix.fragility[pos] - aff.fragility)
        t_type = (ix.type_of_row[pos] == _TYPE_INDEX[aff.type]).astype(np.float64)
        t_mat = mat_row[ix.material_of_row[pos]] if mat_row.size else np.zeros(t_frag.size)
        t_reg = reg_row[ix.region_of_row[pos]] if reg_row.size else np.zeros(t_frag.size)
        s_aff = (cfg.w_type * t_type + cfg.w_material * t_mat + cfg.w_fragility * t_frag
                 + cfg.w_region * t_reg)
        return s_aff, {"type": t_type, "material": t_mat, "fragility": t_frag, "region": t_reg}

    def _visual(self, pos: Union[np.ndarray, slice], vector: Optional[np.ndarray]
                ) -> np.ndarray:
        """s_vis = cos(v_q, v_i): one matrix-vector product (rows are unit norm)."""
        n = len(self.index.fragility[pos])
        if vector is None or n == 0:
            return np.zeros(n)
        return (self.index.vectors[pos] @ vector).astype(np.float64)

    def _material_row(self, material: str, notes: List[str]) -> np.ndarray:
        """s_mat of the query material against every material of the index."""
        if not self.taxonomy.is_material(material):
            notes.append(f"material '{material}' is not in the taxonomy")
        return np.array([self.config.material_score(material, m) for m in self.index.materials],
                        dtype=np.float64)

    def _region_row(self, region: str, notes: List[str]) -> np.ndarray:
        """s_reg: 1 same region, region_family_score same family, else 0."""
        q = normalise_word(region)
        family = self.taxonomy.family(q)
        if family is None:
            notes.append(f"region '{region}' is not in the taxonomy")
        out = np.zeros(len(self.index.regions), dtype=np.float64)
        for i, r in enumerate(self.index.regions):
            if r == q:
                out[i] = 1.0
            elif family is not None and self.taxonomy.family(r) == family:
                out[i] = self.config.region_family_score
        return out

    def _crop_vector(self, crop: np.ndarray) -> np.ndarray:
        """The unit query vector of ``crop``, memoised on its exact pixels and the embedder
        (embedding is a function of the pixels only; a copy is returned)."""
        key = (id(self.embedder), self.embedder.model_id, crop.shape, crop.tobytes())
        vec = self._crop_vectors.get(key)
        if vec is None:
            vec = self._crop_vectors[key] = unit(self.embedder.embed(crop), "query embedding")
            if len(self._crop_vectors) > 64:
                self._crop_vectors.popitem(last=False)
        else:
            self._crop_vectors.move_to_end(key)
        return vec.copy()

    def _query_vector(self, embedding: Optional[np.ndarray], crop: Optional[np.ndarray],
                      embedding_model: Optional[str]) -> Tuple[Optional[np.ndarray], List[str]]:
        ix = self.index
        if embedding is not None and crop is not None:
            raise ValidationError("give either an embedding or a crop, not both")
        if embedding is None and crop is None:
            return None, ["no visual query: s_vis = 0"]
        if ix.vectors is None:
            raise ValidationError("the knowledge base has no visual embeddings")
        if crop is not None:
            if self.embedder is None:
                raise ValidationError(f"no embedder for {ix.model_id!r} to embed the crop")
            return self._crop_vector(check_crop(crop)), []
        model = embedding_model or ix.model_id
        if model != ix.model_id:
            raise EmbeddingModelMismatch(
                f"query embedding made by {model!r} but the knowledge-base vectors were made "
                f"by {ix.model_id!r}; cosines across models are meaningless")
        vec = unit(embedding, "query embedding")
        if vec.shape[0] != ix.dim:
            raise EmbeddingModelMismatch(
                f"query embedding has {vec.shape[0]} dimensions, the knowledge base's model "
                f"{ix.model_id!r} has {ix.dim}")
        return vec, []

    def _explain(self, exp: Experience, q: _Query, s_cat: float, s_aff: float,
                 terms: Mapping[str, float], s_vis: float, penalty: float, s_final: float,
                 rank: int, mode: str) -> str:
        a = exp.affordance
        cat = ("exact category" if exp.category == q.category
               else f"same superclass '{q.superclass}'")
        outcome = "succeeded" if exp.success else f"FAILED ({exp.failure_mode})"
        if mode == "haa":
            aff = (f"aff {s_aff:.2f} = type {'match' if terms['type'] else 'mismatch'} "
                   f"({a.type.value}), material {a.material} {terms['material']:.2f}, "
                   f"fragility {a.fragility:g} {terms['fragility']:.2f}, region {a.region} "
                   f"{terms['region']:.2f}")
        else:
            aff = "affordance not used (clip_only)"
        pen = f", x{1 - penalty:.3g} failure penalty" if penalty else ""
        return (f"#{rank} {exp.id} ({exp.category}, {outcome}): cat {s_cat:.2f} ({cat}); "
                f"{aff}; vis {s_vis:.2f}; final {s_final:.3f}{pen}")


def check_affordance(affordance: Union[AffordanceDescriptor, Mapping[str, Any]]
                     ) -> AffordanceDescriptor:
    """Validate a query affordance (a descriptor or a mapping with its four fields)."""
    if isinstance(affordance, Mapping):
        missing = [f for f in ("type", "material", "fragility", "region") if f not in affordance]
        if missing:
            raise ValidationError(f"affordance is missing {', '.join(missing)}")
        affordance = AffordanceDescriptor(type=AffordanceType.parse(str(affordance["type"])),
                                          material=str(affordance["material"]),
                                          fragility=_number(affordance["fragility"]),
                                          region=str(affordance["region"]))
    if not isinstance(affordance, AffordanceDescriptor):
        raise ValidationError(f"affordance must be an AffordanceDescriptor, got "
                              f"{type(affordance).__name__}")
    if not isinstance(affordance.type, AffordanceType):
        AffordanceType.parse(str(affordance.type))
    frag = affordance.fragility
    if not isinstance(frag, (int, float)) or not math.isfinite(frag) or not 0.0 <= frag <= 1.0:
        raise ValidationError(f"affordance fragility must be a number in [0, 1], got {frag!r}")
    if not str(affordance.material).strip() or not str(affordance.region).strip():
        raise ValidationError("affordance material and region must be non-empty")
    return affordance


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValidationError(f"affordance fragility must be a number, got {value!r}") from None


def build_retriever(config: Optional[RetrievalConfig] = None,
                    embedder: Optional[VisualEmbedder] = None) -> HAARAG:
    """HAA-RAG over the configured knowledge base (+ acquired experiences) and embedder."""
    config = config if config is not None else RetrievalConfig.from_config()
    kb_path = config.knowledge_base_path or None
    extra = [config.acquired_experiences_path] if config.acquired_experiences_path else []
    embedder = embedder or make_embedder(config.embedding)
    cache_dir = config.embedding.get("cache_dir") or None
    kb = KnowledgeBase.load(kb_path, embedder, extra_paths=extra,
                            cache=EmbeddingCache(cache_dir),
                            crop_size=int(config.embedding.get("crop_size_px", 64)))
    return HAARAG(kb, config, embedder)
