"""Retrieval quality (paper Table IV): HAA-RAG against the CLIP-only baseline.

One query per Table I object (12): its category, its Table I affordance descriptor and a
crop rendered from its scene appearance. Relevance labels come from
``kb_data/relevance/table_iv_qrels.yaml``, written apart from the entries (see its header).

Metrics, over the 12 queries:
- P@1: share of queries whose top strategy is relevant;
- P@3: mean over queries of (relevant strategies among the top 3) / 3;
- MRR: mean of 1 / rank of the first relevant strategy in the full ranking of the
  candidates that reach level 3 (0 when none is relevant);
- affordance match: share of the returned top-3 strategies whose affordance type equals the
  query's type (the paper does not define it further; this is our reading);
- hit@3 (extra, not in the paper): share of queries with a relevant strategy in the top 3.
P@3 is capped below 100 % when a query has fewer than 3 relevant experiences in the
knowledge base (the cap is reported as ``p_at_3_max``).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.render.crops import crop_object
from agentic_grasp.core.render.raycast import render_scene
from agentic_grasp.core.retrieval.config import RetrievalConfig
from agentic_grasp.core.retrieval.embedding import VisualEmbedder, make_embedder
from agentic_grasp.core.retrieval.haa_rag import HAARAG
from agentic_grasp.core.retrieval.kb_vectors import EmbeddingCache
from agentic_grasp.core.retrieval.knowledge_base import KnowledgeBase
# The relevance files (Table IV queries and labels) are read by the knowledge base's checks
# too; they live in .relevance so that knowledge_base need not import this module.
from agentic_grasp.core.retrieval.relevance import TableIVQuery, load_table_iv

_LOG = logging.getLogger(__name__)

#: The paper's Table IV (percentages and MRR), printed beside ours for comparison.
PAPER_TABLE_IV = {
    "haa": {"p_at_1": 91.7, "p_at_3": 91.7, "mrr": 0.917, "affordance_match": 91.7},
    "clip_only": {"p_at_1": 66.7, "p_at_3": 66.7, "mrr": 0.729, "affordance_match": 63.3},
}
_LABELS = {"haa": "HAA-RAG", "clip_only": "CLIP-only"}
#: Ranks deeper than this are not scored for MRR (the whole candidate list is far shorter).
_FULL_RANKING = 10_000


def query_crop(query: TableIVQuery, pose: Mapping[str, float], size: int = 64) -> np.ndarray:
    """The query object's crop from a render of it alone on the table, default camera.

    Cut in the object-facing view (:func:`agentic_grasp.core.render.crops.crop_box` with the
    camera), the view the knowledge-base renders are cut in: the query stands off the
    camera's middle column, where the camera sees it leaning; the entries stand on it.
    """
    camera = Camera()
    crop = crop_object(render_scene([query.instance(pose)], camera), 0, size=size,
                       camera=camera)
    if crop is None:
        raise ConfigError(f"query object {query.object} is not visible at {dict(pose)}")
    return crop


def evaluate_retrieval(kb: Any = None, modes: Sequence[str] = ("haa", "clip_only"),
                       config: Any = None, embedder: Optional[VisualEmbedder] = None,
                       qrels: Union[str, Path, None] = None) -> Dict[str, Any]:
    """Table IV: P@1, P@3, MRR and affordance match for each mode, with per-query detail.

    ``kb`` defaults to the shipped knowledge base, ``config`` to config/retrieval.yaml,
    ``embedder`` to the configured one. Returns {"modes": {mode: metrics}, "n_queries",
    "kb_size", "embedding_model"}; metrics in percent except MRR.
    """
    config = config if config is not None else RetrievalConfig.from_config()
    embedder = embedder or make_embedder(config.embedding)
    crop_size = int(config.embedding.get("crop_size_px", 64))
    if kb is None:
        kb = KnowledgeBase.load(config.knowledge_base_path or None, embedder,
                                cache=EmbeddingCache(config.embedding.get("cache_dir") or None),
                                crop_size=crop_size)
    retriever = HAARAG(kb, config, embedder)
    table = load_table_iv(qrels)
    queries: List[TableIVQuery] = table["queries"]
    crops = [query_crop(q, table["render_pose"], crop_size) for q in queries]
    out: Dict[str, Any] = {"n_queries": len(queries), "kb_size": len(kb),
                           "embedding_model": retriever.index.model_id, "modes": {}}
    for mode in modes:
        per_query = []
        for q, crop in zip(queries, crops):
            ranking = retriever.retrieve(q.category, q.affordance, crop=crop, mode=mode,
                                         k=_FULL_RANKING).strategies
            ids = [s.experience.id for s in ranking]
            top = ranking[:3]
            first = next((i + 1 for i, e in enumerate(ids) if e in q.relevant), 0)
            per_query.append({
                "object": q.object, "top3": ids[:3],
                "top3_relevant": [e in q.relevant for e in ids[:3]],
                "top1_relevant": bool(ids) and ids[0] in q.relevant,
                "relevant_in_top3": sum(e in q.relevant for e in ids[:3]),
                "first_relevant_rank": first,
                "affordance_matches": sum(s.experience.affordance.type == q.affordance.type
                                          for s in top),
                "n_returned": len(top),
                "explanation": top[0].explanation if top else "no strategy",
            })
        n = len(per_query)
        slots = 3 * n
        out["modes"][mode] = {
            "p_at_1": 100.0 * sum(p["top1_relevant"] for p in per_query) / n,
            "p_at_3": 100.0 * sum(p["relevant_in_top3"] for p in per_query) / slots,
            "mrr": sum(1.0 / p["first_relevant_rank"] for p in per_query
                       if p["first_relevant_rank"]) / n,
            "affordance_match": 100.0 * sum(p["affordance_matches"] for p in per_query) / slots,
            "hit_at_3": 100.0 * sum(p["relevant_in_top3"] > 0 for p in per_query) / n,
            "p_at_3_max": 100.0 * sum(min(3, len(q.relevant)) for q in queries) / slots,
            "per_query": per_query,
        }
    return out


def format_table(results: Mapping[str, Any], per_query: bool = True) -> str:
    """Our Table IV beside the paper's, then (optionally) each query's top strategies."""
    lines = [f"Table IV: retrieval quality, {results['n_queries']} queries, "
             f"{results['kb_size']}-entry knowledge base, visual model "
             f"{results['embedding_model']}",
             "ours (paper)    P@1              P@3              MRR              "
             "Affordance match"]
    for mode, metrics in results["modes"].items():
        paper = PAPER_TABLE_IV.get(mode, {})
        cells = []
        for key in ("p_at_1", "p_at_3", "mrr", "affordance_match"):
            fmt = "{:.3f}" if key == "mrr" else "{:.1f} %"
            ours = fmt.format(metrics[key])
            ref = fmt.format(paper[key]) if key in paper else "-"
            cells.append(f"{ours} ({ref})".ljust(17))
        lines.append(f"{_LABELS.get(mode, mode):<16}" + "".join(cells).rstrip())
    for mode, metrics in results["modes"].items():
        lines.append(f"{_LABELS.get(mode, mode)}: hit@3 {metrics['hit_at_3']:.1f} % (not in "
                     f"the paper); P@3 cannot exceed {metrics['p_at_3_max']:.1f} % with these "
                     "labels (queries with < 3 relevant experiences)")
    if per_query:
        for mode, metrics in results["modes"].items():
            lines.append(f"{_LABELS.get(mode, mode)} per query (top 3; * = relevant; "
                         "first relevant rank):")
            for p in metrics["per_query"]:
                marked = [e + ("*" if rel else "")
                          for e, rel in zip(p["top3"], p["top3_relevant"])]
                lines.append(f"  {p['object']:<15} {', '.join(marked) or '-':<56} "
                             f"first relevant @{p['first_relevant_rank'] or '-'}")
    return "\n".join(lines)
