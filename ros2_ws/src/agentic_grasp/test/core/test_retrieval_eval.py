"""Table IV evaluation and the scale bench."""
import numpy as np
import pytest

from agentic_grasp.core.retrieval.embedding import DescriptorEmbedder
from agentic_grasp.core.retrieval.evaluation import (PAPER_TABLE_IV, evaluate_retrieval,
                                                     format_table)
from agentic_grasp.core.retrieval.relevance import load_table_iv, qrels_path, relevance_problems
from agentic_grasp.core.retrieval.haa_rag import HAARAG
from agentic_grasp.core.retrieval.config import RetrievalConfig
from agentic_grasp.core.retrieval.knowledge_base import KnowledgeBase
from agentic_grasp_lab.benchmarks.retrieval_scale import (format_scale_table, run_scale_bench,
                                                          synthetic_index, synthetic_taxonomy)
from agentic_grasp.core.retrieval.taxonomy import Taxonomy

TABLE_I = ["ceramic cup", "apple", "plastic bottle", "banana", "ceramic bowl", "wood cube",
           "glass vase", "wine glass", "screwdriver", "smartphone", "tennis ball", "toy block"]


@pytest.fixture(scope="module")
def kb():
    return KnowledgeBase.load(embedder=DescriptorEmbedder())


@pytest.fixture(scope="module")
def results(kb):
    return evaluate_retrieval(kb)


def test_qrels_cover_table_i_and_are_valid(kb):
    table = load_table_iv()
    assert [q.object for q in table["queries"]] == TABLE_I
    assert relevance_problems(qrels_path(), {e.id: e for e in kb}, kb.taxonomy) == []
    for q in table["queries"]:
        assert q.relevant
        assert all(kb.get(i).success for i in q.relevant)
        sup = kb.taxonomy.superclass(q.category)
        assert all(kb.taxonomy.superclass(kb.get(i).category) == sup for i in q.relevant)


def test_metrics_follow_from_the_rankings(results):
    assert results["n_queries"] == 12 and set(results["modes"]) == {"haa", "clip_only"}
    table = {q.object: q for q in load_table_iv()["queries"]}
    for mode, m in results["modes"].items():
        per = m["per_query"]
        assert len(per) == 12
        for p in per:
            q = table[p["object"]]
            assert p["top1_relevant"] == (bool(p["top3"]) and p["top3"][0] in q.relevant)
            assert p["relevant_in_top3"] == sum(i in q.relevant for i in p["top3"])
        assert m["p_at_1"] == pytest.approx(100 * np.mean([p["top1_relevant"] for p in per]))
        assert m["p_at_3"] == pytest.approx(100 * sum(p["relevant_in_top3"] for p in per) / 36)
        assert m["mrr"] == pytest.approx(np.mean([1 / p["first_relevant_rank"]
                                                  if p["first_relevant_rank"] else 0.0
                                                  for p in per]))
        assert 0.0 <= m["affordance_match"] <= 100.0
        assert m["p_at_3"] <= m["p_at_3_max"] + 1e-9


def test_haa_returns_affordance_compatible_strategies(kb, results):
    """The affordance level's purpose: HAA-RAG's strategies match the query's affordance type
    at least as often as the visual baseline's, and every one passed tau_aff."""
    haa, clip = results["modes"]["haa"], results["modes"]["clip_only"]
    assert haa["affordance_match"] >= clip["affordance_match"]
    rag = HAARAG(kb, RetrievalConfig.from_config(), DescriptorEmbedder())
    for q in load_table_iv()["queries"]:
        res = rag.retrieve(q.category, q.affordance)
        assert res.strategies and all(s.s_aff >= 0.3 - 1e-9 for s in res.strategies)


def test_format_table_shows_the_papers_figures(results):
    text = format_table(results)
    assert "HAA-RAG" in text and "CLIP-only" in text
    for mode in PAPER_TABLE_IV:
        assert f"({PAPER_TABLE_IV[mode]['mrr']:.3f})" in text
    assert all(obj in text for obj in TABLE_I)


def test_synthetic_generation_is_vectorised():
    rng = np.random.default_rng(0)
    tax, pop = synthetic_taxonomy(300, 40, rng, Taxonomy.load())
    assert len(tax.superclasses) == 40 and len(tax.categories) == 340
    index = synthetic_index(200_000, DescriptorEmbedder.dim, rng, tax, pop, "m")
    assert len(index) == 200_000 and index.vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(index.vectors[:100], axis=1), 1.0, atol=1e-5)
    # Every superclass slice holds exactly that superclass's rows, categories nested inside.
    for s in range(len(index.superclasses)):
        a, b = index.sup_start[s], index.sup_end[s]
        cats = {index.categories[c] for c in np.unique(index.category_of_row[a:b])}
        assert {tax.superclass_of[c] for c in cats} == {index.superclasses[s]}


def test_scale_bench_rows(kb):
    rows = run_scale_bench(sizes=(5000,), queries=25, include_kb=True)
    assert [r["kind"] for r in rows] == ["shipped KB", "synthetic"]
    assert rows[0]["n"] == len(kb) and rows[1]["n"] == 5000
    for r in rows:
        assert r["agree_with_brute_force"] == 1.0
        assert r["p50_ms"] > 0 and r["p99_ms"] >= r["p50_ms"]
    assert rows[1]["peak_traced_mb"] > 0
    assert "brute p50" in format_scale_table(rows)
