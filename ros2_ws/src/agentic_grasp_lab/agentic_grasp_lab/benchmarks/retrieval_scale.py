"""Does HAA-RAG scale past 116 entries? Latency and memory up to 10^6 experiences.

Synthetic knowledge bases: categories drawn from a taxonomy of a few hundred categories in a
few dozen superclasses with Zipf-distributed popularity (a few categories are very common,
as cups are in a kitchen), random affordance descriptors over the real material and region
vocabulary, and random unit vectors of the default descriptor's dimension. Generation is
vectorised (one numpy call per column).

For each size the same queries run through the indexed retriever (:class:`HAARAG`, which
touches only the query's superclass slice) and through a brute-force scan that scores every
entry; both must return the same strategies, which the bench checks. Peak memory is traced
with tracemalloc over generation, index build and a few queries; latencies are measured
without tracing. Targets (brief): p50 <= 1 ms at 116 entries, <= 10 ms at 10^6, peak memory
<= 4 GB at 10^6.
"""
from __future__ import annotations

import logging
import resource
import time
import tracemalloc
from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.retrieval.embedding import DescriptorEmbedder
from agentic_grasp.core.retrieval.index import AFFORDANCE_TYPES, RetrievalIndex, _TYPE_INDEX
from agentic_grasp.core.retrieval.haa_rag import HAARAG, _TAU_EPS
from agentic_grasp.core.retrieval.knowledge_base import KnowledgeBase
from agentic_grasp.core.retrieval.config import RetrievalConfig
from agentic_grasp.core.retrieval.taxonomy import Taxonomy
from agentic_grasp.core.stats import percentiles
from agentic_grasp.core.types import AffordanceDescriptor

_LOG = logging.getLogger(__name__)


def synthetic_taxonomy(n_categories: int, n_superclasses: int, rng: np.random.Generator,
                       base: Taxonomy) -> Tuple[Taxonomy, np.ndarray]:
    """A taxonomy of ``n_categories`` in ``n_superclasses`` (uneven sizes) + popularity."""
    sup_share = rng.dirichlet(np.full(n_superclasses, 2.0))
    sup_of_cat = rng.choice(n_superclasses, size=n_categories, p=sup_share)
    sup_of_cat[:n_superclasses] = np.arange(n_superclasses)   # no empty superclass
    superclass_of = {f"cat_{c:04d}": f"sup_{sup_of_cat[c]:03d}" for c in range(n_categories)}
    superclass_of.update({f"sup_{s:03d}": f"sup_{s:03d}" for s in range(n_superclasses)})
    popularity = 1.0 / np.arange(1, n_categories + 1)          # Zipf, exponent 1
    popularity = popularity[rng.permutation(n_categories)]
    popularity /= popularity.sum()
    tax = Taxonomy(superclass_of=superclass_of, materials=base.materials,
                   region_family=dict(base.region_family), source="synthetic")
    return tax, popularity


def synthetic_index(n: int, dim: int, rng: np.random.Generator, taxonomy: Taxonomy,
                    popularity: np.ndarray, model_id: str) -> RetrievalIndex:
    """An n-entry index with random columns (vectorised: seconds for 10^6 entries)."""
    categories = [f"cat_{c:04d}" for c in range(len(popularity))]
    materials = list(taxonomy.materials)
    regions = sorted(taxonomy.region_family)
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return RetrievalIndex(
        taxonomy, categories,
        rng.choice(len(categories), size=n, p=popularity).astype(np.int32),
        rng.integers(0, len(AFFORDANCE_TYPES), size=n, dtype=np.int8),
        materials, rng.integers(0, len(materials), size=n, dtype=np.int16),
        rng.random(n), regions, rng.integers(0, len(regions), size=n, dtype=np.int16),
        rng.random(n) < 0.75, vectors, model_id)


def brute_force_retrieve(rag: HAARAG, category: str, affordance: AffordanceDescriptor,
                         vector: Optional[np.ndarray], k: int, mode: str = "haa"
                         ) -> List[int]:
    """Reference scan: score EVERY entry, then apply the same three levels; kb rows, ranked."""
    cfg, ix, tax = rag.config, rag.index, rag.taxonomy
    canon = tax.canonical(category)
    if canon is None:
        return []
    c = ix.category_id.get(canon, -1)
    sup_names = np.array([tax.superclass_of[name] for name in ix.categories])
    same_sup = (sup_names == tax.superclass_of[canon])[ix.category_of_row]
    s_cat = np.where(ix.category_of_row == c, cfg.category_exact_score,
                     np.where(same_sup, cfg.category_superclass_score, 0.0))
    notes: List[str] = []
    mat_row = rag._material_row(affordance.material, notes)
    reg_row = rag._region_row(affordance.region, notes)
    s_aff = (cfg.w_type * (ix.type_of_row == _TYPE_INDEX[affordance.type])
             + cfg.w_material * mat_row[ix.material_of_row]
             + cfg.w_fragility * (1.0 - np.abs(ix.fragility - affordance.fragility))
             + cfg.w_region * reg_row[ix.region_of_row])
    s_vis = ix.vectors @ vector if vector is not None else np.zeros(len(ix))
    tie = s_aff if mode == "haa" else s_vis
    cand = np.flatnonzero(s_cat > 0)
    cand = cand[np.lexsort((ix.kb_row[cand], -tie[cand], -s_cat[cand]))][:cfg.k1]
    if mode == "haa":
        cand = cand[s_aff[cand] >= cfg.tau_aff - _TAU_EPS]
        fused = cfg.w_category * s_cat + cfg.w_affordance * s_aff + cfg.w_visual * s_vis
        penalise = True
    else:
        fused = cfg.w_category * s_cat + cfg.w_visual * s_vis
        penalise = cfg.clip_only_failure_penalty
    final = fused[cand] * np.where(ix.success[cand] | (not penalise), 1.0,
                                   1.0 - cfg.failure_penalty)
    order = np.lexsort((ix.kb_row[cand], -final))[:k]
    return [int(r) for r in ix.kb_row[cand[order]]]


def _random_queries(rng: np.random.Generator, n: int, categories: Sequence[str],
                    popularity: Optional[np.ndarray], taxonomy: Taxonomy, dim: int
                    ) -> List[Tuple[str, AffordanceDescriptor, np.ndarray]]:
    cats = rng.choice(len(categories), size=n, p=popularity)
    materials = list(taxonomy.materials)
    regions = sorted(taxonomy.region_family)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    out = []
    for i in range(n):
        aff = AffordanceDescriptor(type=AFFORDANCE_TYPES[int(rng.integers(len(AFFORDANCE_TYPES)))],
                                   material=materials[int(rng.integers(len(materials)))],
                                   fragility=float(rng.random()),
                                   region=regions[int(rng.integers(len(regions)))])
        out.append((categories[int(cats[i])], aff, vecs[i]))
    return out


def _time_queries(rag: HAARAG, queries, brute: bool, mode: str) -> Tuple[np.ndarray, list]:
    times, ranked = [], []
    for category, aff, vec in queries:
        t0 = time.perf_counter()
        if brute:
            rows = brute_force_retrieve(rag, category, aff, vec, rag.config.k, mode)
        else:
            res = rag.retrieve(category, aff, embedding=vec, mode=mode)
            rows = [int(s.experience.id.rsplit("-", 1)[1]) if s.experience.id.startswith(
                "synthetic-") else s.experience.id for s in res.strategies]
        times.append(time.perf_counter() - t0)
        ranked.append(rows)
    return np.array(times) * 1e3, ranked


def _kb_rows(rag: HAARAG, ranked: list) -> list:
    """Map experience ids of a real knowledge base to kb rows (to compare with brute force)."""
    if rag.kb is None:
        return ranked
    pos = {e.id: i for i, e in enumerate(rag.kb.experiences)}
    return [[pos[r] if isinstance(r, str) else r for r in rows] for rows in ranked]


def run_scale_bench(sizes: Sequence[int] = (10 ** 3, 10 ** 5, 10 ** 6), queries: int = 200,
                    seed: int = 0, n_categories: int = 300, n_superclasses: int = 40,
                    include_kb: bool = True, brute_queries: Optional[int] = None,
                    mode: str = "haa", config: Optional[RetrievalConfig] = None
                    ) -> List[Dict[str, Any]]:
    """Latency p50/p99 (indexed and brute force) and peak memory per knowledge-base size.

    ``include_kb`` adds a first row for the shipped knowledge base (descriptor embeddings).
    ``brute_queries`` limits the brute-force queries (default: all).
    """
    config = config if config is not None else RetrievalConfig.from_config()
    brute_queries = queries if brute_queries is None else brute_queries
    rows: List[Dict[str, Any]] = []
    base = Taxonomy.load()
    dim = DescriptorEmbedder.dim
    if include_kb:
        kb = KnowledgeBase.load(embedder=DescriptorEmbedder())
        rag = HAARAG(kb, config, DescriptorEmbedder())
        rng = np.random.default_rng(seed)
        qs = _random_queries(rng, queries, sorted(kb.category_counts()), None, kb.taxonomy,
                             dim)
        rows.append(_measure(rag, qs, brute_queries, mode, "shipped KB", len(kb), 0.0, None))
    for n in sizes:
        rng = np.random.default_rng(seed + n)
        tracemalloc.start()
        t0 = time.perf_counter()
        tax, popularity = synthetic_taxonomy(n_categories, n_superclasses, rng, base)
        index = synthetic_index(int(n), dim, rng, tax, popularity, DescriptorEmbedder.model_id)
        gen_s = time.perf_counter() - t0
        rag = HAARAG(None, replace(config), None, index=index)
        categories = [f"cat_{c:04d}" for c in range(n_categories)]
        qs = _random_queries(rng, queries, categories, popularity, tax, dim)
        for category, aff, vec in qs[:5]:
            rag.retrieve(category, aff, embedding=vec, mode=mode)
            brute_force_retrieve(rag, category, aff, vec, config.k, mode)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rows.append(_measure(rag, qs, brute_queries, mode, "synthetic", int(n), gen_s, peak))
        del rag, index
    return rows


def _measure(rag: HAARAG, qs, brute_queries: int, mode: str, kind: str, n: int,
             gen_s: float, peak: Optional[int]) -> Dict[str, Any]:
    for category, aff, vec in qs[:5]:                       # warm caches
        rag.retrieve(category, aff, embedding=vec, mode=mode)
    t_idx, r_idx = _time_queries(rag, qs, False, mode)
    t_bf, r_bf = _time_queries(rag, qs[:brute_queries], True, mode)
    r_idx = _kb_rows(rag, r_idx)
    p_idx = percentiles(t_idx, (50, 99))
    p_bf = percentiles(t_bf, (50, 99)) if len(t_bf) else [float("nan"), float("nan")]
    agree = float(np.mean([a == b for a, b in zip(r_idx, r_bf)])) if r_bf else float("nan")
    sizes = []
    for category, _, _ in qs:
        canon = rag.taxonomy.canonical(category)
        s = rag.index.superclass_id.get(rag.taxonomy.superclass_of[canon]) if canon else None
        sizes.append(0 if s is None else int(rag.index.sup_end[s] - rag.index.sup_start[s]))
    return {
        "kind": kind, "n": n, "queries": len(qs), "brute_queries": len(r_bf),
        "generate_s": round(gen_s, 3),
        "p50_ms": p_idx[0], "p99_ms": p_idx[1],
        "brute_p50_ms": p_bf[0], "brute_p99_ms": p_bf[1],
        "peak_traced_mb": None if peak is None else peak / 2 ** 20,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "mean_candidates": float(np.mean(sizes)), "agree_with_brute_force": agree,
    }


def format_scale_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line per knowledge-base size."""
    lines = ["HAA-RAG scale bench (indexed vs brute-force scan, same queries)",
             f"{'KB':<12}{'entries':>9}{'gen s':>8}{'cand.':>9}{'p50 ms':>9}{'p99 ms':>9}"
             f"{'brute p50':>11}{'brute p99':>11}{'peak MB':>9}{'agree':>7}"]
    for r in rows:
        peak = "-" if r["peak_traced_mb"] is None else f"{r['peak_traced_mb']:.0f}"
        lines.append(f"{r['kind']:<12}{r['n']:>9}{r['generate_s']:>8.2f}"
                     f"{r['mean_candidates']:>9.0f}{r['p50_ms']:>9.3f}{r['p99_ms']:>9.3f}"
                     f"{r['brute_p50_ms']:>11.3f}{r['brute_p99_ms']:>11.3f}{peak:>9}"
                     f"{r['agree_with_brute_force']:>7.2f}")
    lines.append(f"(process max RSS {max(r['max_rss_mb'] for r in rows):.0f} MB)")
    return "\n".join(lines)
