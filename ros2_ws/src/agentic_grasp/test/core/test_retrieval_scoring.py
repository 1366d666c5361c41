"""HAA-RAG scoring (paper Sec. III-A, Eq. 1): every level and constant on tiny hand-built KBs.

Expected scores are computed by hand in the comments from the constants of
config/retrieval.yaml, which the first test pins to the paper's values.
"""
from dataclasses import replace

import numpy as np
import pytest

from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.retrieval.haa_rag import HAARAG, EmbeddingModelMismatch
from agentic_grasp.core.retrieval.config import RetrievalConfig
from agentic_grasp.core.retrieval.knowledge_base import Experience, KnowledgeBase
from agentic_grasp_lab.benchmarks.retrieval_scale import (brute_force_retrieve, synthetic_index,
                                                          synthetic_taxonomy)
from agentic_grasp.core.retrieval.taxonomy import Taxonomy
from agentic_grasp.core.retrieval.embedding import DescriptorEmbedder
from agentic_grasp.core.types import AffordanceDescriptor, AffordanceType

TAXONOMY = Taxonomy.from_dict({
    "superclasses": {"cup": ["cup", "mug"], "dish": ["bowl"]},
    "aliases": {"coffee_mug": "mug"},
    "materials": ["ceramic", "glass", "plastic"],
    "regions": {"handle": "handle", "grip": "handle", "body": "body", "rim": "edge"},
})
MODEL = "test-model"
QUERY = AffordanceDescriptor(AffordanceType.GRASPABLE_HANDLE, "ceramic", 0.3, "handle")
Q_VEC = np.array([1.0, 0.0, 0.0], dtype=np.float32)


def exp(eid, category, type_, material, fragility, region, success=True):
    return Experience(
        id=eid, category=category,
        affordance=AffordanceDescriptor(type_, material, fragility, region),
        grasp={"position": [0.0, 0.0, 0.0], "approach": [0.0, 0.0, -1.0], "width": 0.03,
               "force": 15.0, "grasp_type": "pinch"},
        success=success, provenance="authored: test",
        render_spec={"shape": "cylinder", "size": [0.08, 0.08, 0.09], "color": [200, 200, 200],
                     "material": material},
        failure_mode=None if success else "slip")


def make_kb(entries, vectors):
    kb = KnowledgeBase(entries, TAXONOMY)
    kb.set_vectors(np.asarray(vectors, dtype=np.float32), MODEL)
    return kb


@pytest.fixture(scope="module")
def cfg():
    return RetrievalConfig.from_config()


@pytest.fixture
def small(cfg):
    """e1 exact, e2 superclass, e3 below tau, e4 failed, e5 other superclass."""
    entries = [
        exp("e1", "cup", "Graspable_Handle", "ceramic", 0.3, "handle"),
        exp("e2", "mug", "Graspable_Handle", "glass", 0.6, "grip"),
        exp("e3", "cup", "Graspable_Body", "plastic", 0.1, "body", success=False),
        exp("e4", "cup", "Graspable_Edge", "ceramic", 0.3, "rim", success=False),
        exp("e5", "bowl", "Graspable_Handle", "ceramic", 0.3, "handle"),
    ]
    vectors = [[0.6, 0.8, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.8, 0.6, 0.0],
               [1.0, 0.0, 0.0]]
    return HAARAG(make_kb(entries, vectors), cfg)


def test_config_holds_the_papers_constants(cfg):
    assert (cfg.k1, cfg.k, cfg.tau_aff) == (30, 3, 0.3)
    assert (cfg.category_exact_score, cfg.category_superclass_score) == (1.0, 0.5)
    assert (cfg.w_type, cfg.w_material, cfg.w_fragility, cfg.w_region) == (0.5, 0.2, 0.15, 0.15)
    assert (cfg.w_category, cfg.w_affordance, cfg.w_visual) == (0.2, 0.4, 0.4)
    assert cfg.failure_penalty == 0.3
    assert cfg.region_family_score == 0.5
    assert cfg.material_score("ceramic", "glass") == cfg.material_score("glass", "ceramic") == 0.6
    assert cfg.material_score("Ceramic", "ceramic") == 1.0
    assert cfg.material_score("ceramic", "plastic") == 0.0


def test_three_levels_hand_computed(small):
    res = small.retrieve("cup", QUERY, embedding=Q_VEC, embedding_model=MODEL)
    # Level 1: e1..e4 (cup superclass), e5 (dish) discarded.
    assert res.n_candidates == 4 and res.n_level1 == 4
    # Level 2: e3: 0 + 0.2*0 + 0.15*(1-0.2) + 0 = 0.12 < 0.3 -> discarded.
    assert res.n_level2 == 3
    by_id = {s.experience.id: s for s in res.strategies}
    assert [s.experience.id for s in res.strategies] == ["e1", "e2", "e4"]
    e1, e2, e4 = by_id["e1"], by_id["e2"], by_id["e4"]
    # e1: s_aff = 0.5 + 0.2 + 0.15 + 0.15 = 1.0; s_final = 0.2 + 0.4 + 0.4*0.6 = 0.84
    assert e1.s_cat == 1.0 and e1.s_aff == pytest.approx(1.0)
    assert e1.s_vis == pytest.approx(0.6) and e1.s_final == pytest.approx(0.84)
    # e2 (mug: superclass 0.5): s_aff = 0.5 + 0.2*0.6 + 0.15*0.7 + 0.15*0.5 = 0.8
    # s_final = 0.2*0.5 + 0.4*0.8 + 0.4*1.0 = 0.82
    assert e2.s_cat == 0.5
    assert e2.s_aff_terms == pytest.approx({"type": 1.0, "material": 0.6, "fragility": 0.7,
                                            "region": 0.5})
    assert e2.s_aff == pytest.approx(0.8) and e2.s_final == pytest.approx(0.82)
    # e4 (failed): s_aff = 0 + 0.2 + 0.15 + 0 = 0.35; (0.2 + 0.14 + 0.32) * 0.7 = 0.462
    assert e4.s_aff == pytest.approx(0.35) and e4.penalty == pytest.approx(0.3)
    assert e4.s_final == pytest.approx(0.462)
    assert [s.rank for s in res.strategies] == [1, 2, 3]
    assert "e4" in e4.explanation and "failure penalty" in e4.explanation
    assert "FAILED" in e4.explanation and "same superclass" in e2.explanation


def test_clip_only_skips_the_affordance_level(small):
    res = small.retrieve("cup", QUERY, embedding=Q_VEC, mode="clip_only", k=10)
    # s_final = 0.2 s_cat + 0.4 s_vis, failed x 0.7:
    # e2 0.1 + 0.4 = 0.5; e1 0.2 + 0.24 = 0.44; e4 (0.2 + 0.32) 0.7 = 0.364; e3 0.2*0.7 = 0.14
    assert [s.experience.id for s in res.strategies] == ["e2", "e1", "e4", "e3"]
    assert [s.s_final for s in res.strategies] == pytest.approx([0.5, 0.44, 0.364, 0.14])
    assert res.n_level2 == res.n_level1 == 4
    assert "clip_only" in res.strategies[0].explanation


def test_clip_only_penalty_switch(small):
    rag = HAARAG(small.kb, replace(small.config, clip_only_failure_penalty=False))
    res = rag.retrieve("cup", QUERY, embedding=Q_VEC, mode="clip_only", k=10)
    e4 = next(s for s in res.strategies if s.experience.id == "e4")
    assert e4.penalty == 0.0 and e4.s_final == pytest.approx(0.52)


def test_constants_come_from_the_config(small):
    # tau_aff 0.9 keeps only e1 (1.0); e2 scores 0.8.
    rag = HAARAG(small.kb, replace(small.config, tau_aff=0.9))
    res = rag.retrieve("cup", QUERY, embedding=Q_VEC)
    assert [s.experience.id for s in res.strategies] == ["e1"]
    # A 50 % penalty: e4 = 0.66 * 0.5 = 0.33.
    rag = HAARAG(small.kb, replace(small.config, failure_penalty=0.5))
    e4 = rag.retrieve("cup", QUERY, embedding=Q_VEC).strategies[2]
    assert e4.s_final == pytest.approx(0.33)
    # An empty material table is the paper's strict indicator: e2's s_mat becomes 0.
    rag = HAARAG(small.kb, replace(small.config, material_similarity={}))
    e2 = next(s for s in rag.retrieve("cup", QUERY, embedding=Q_VEC).strategies
              if s.experience.id == "e2")
    assert e2.s_aff_terms["material"] == 0.0 and e2.s_aff == pytest.approx(0.68)


def test_threshold_keeps_a_score_equal_to_tau(cfg):
    # s_aff = 0 (type) + 0 (material) + 0.15 (fragility) + 0.15 (region) = 0.30 = tau
    entries = [exp("t1", "cup", "Pinchable", "plastic", 0.3, "handle")]
    rag = HAARAG(make_kb(entries, [[1.0, 0.0, 0.0]]), cfg)
    res = rag.retrieve("cup", QUERY)
    assert [s.experience.id for s in res.strategies] == ["t1"]
    assert res.strategies[0].s_aff == pytest.approx(0.3)
    below = HAARAG(make_kb([exp("t2", "cup", "Pinchable", "plastic", 0.4, "handle")],
                           [[1.0, 0.0, 0.0]]), cfg)
    res = below.retrieve("cup", QUERY)      # 0.15 * 0.9 + 0.15 = 0.285 < 0.3
    assert res.strategies == [] and res.n_level1 == 1 and res.n_level2 == 0
    assert "tau_aff" in res.reason


def test_superclass_and_aliases(small):
    res = small.retrieve("Coffee Mug", QUERY, embedding=Q_VEC, k=10)
    assert res.category == "mug" and res.superclass == "cup"
    cats = {s.experience.id: s.s_cat for s in res.strategies}
    assert cats["e2"] == 1.0 and cats["e1"] == 0.5 and cats["e4"] == 0.5


def test_k1_truncation_keeps_exact_matches_by_affordance(cfg):
    # 40 exact cups with fragility 0.00..0.39 (s_aff falls with |0.3 - f|) and 5 mugs.
    entries = [exp(f"c{i:02d}", "cup", "Graspable_Handle", "ceramic", i / 100, "handle")
               for i in range(40)]
    entries += [exp(f"m{i}", "mug", "Graspable_Handle", "ceramic", 0.3, "handle")
                for i in range(5)]
    vectors = np.tile([1.0, 0.0, 0.0], (45, 1))
    rag = HAARAG(make_kb(entries, vectors), cfg)
    res = rag.retrieve("cup", QUERY, embedding=Q_VEC, k=100)
    assert res.n_candidates == 45 and res.n_level1 == 30
    kept = {s.experience.id for s in res.strategies}
    closest = sorted(range(40), key=lambda i: (abs(0.3 - i / 100), i))[:30]
    assert kept == {f"c{i:02d}" for i in closest}
    # With k1 = 42 all 40 cups stay and the 2 first mugs (equal scores: KB order) join.
    rag = HAARAG(rag.kb, replace(cfg, k1=42))
    res = rag.retrieve("cup", QUERY, embedding=Q_VEC, k=100)
    kept = {s.experience.id for s in res.strategies}
    assert res.n_level1 == 42 and {"m0", "m1"} <= kept and "m2" not in kept
    assert rag.retrieve("cup", QUERY, embedding=Q_VEC, k=2).strategies[0].experience.id == "c30"


def test_unknown_and_empty_categories_return_a_reason(small):
    from dataclasses import replace
    strict = HAARAG(small.kb, replace(small.config, fallback_enabled=False))
    res = strict.retrieve("spaceship", QUERY, embedding=Q_VEC)
    assert res.strategies == [] and "unknown category" in res.reason and not res.fallback
    kb = make_kb([exp("e1", "cup", "Graspable_Handle", "ceramic", 0.3, "handle")],
                 [[1.0, 0.0, 0.0]])
    res = HAARAG(kb, strict.config).retrieve("bowl", QUERY)
    assert res.strategies == [] and "no experience" in res.reason
    assert small.retrieve("", QUERY).strategies == []
    # with the affordance fallback (config default) level 1 being empty ranks the whole KB
    res = small.retrieve("spaceship", QUERY, embedding=Q_VEC)
    assert res.fallback and res.strategies and "unknown category" in res.reason
    res = HAARAG(kb, small.config).retrieve("bowl", QUERY)
    assert res.fallback and [s.experience.id for s in res.strategies] == ["e1"]


@pytest.mark.parametrize("bad", [
    {"type": "Graspable_Handle", "material": "ceramic", "fragility": float("nan"),
     "region": "handle"},
    {"type": "Graspable_Handle", "material": "ceramic", "fragility": 1.5, "region": "handle"},
    {"type": "Graspable_Handle", "material": "ceramic", "fragility": -0.1, "region": "handle"},
    {"type": "Graspable_Handle", "material": "ceramic", "fragility": "high", "region": "handle"},
    {"type": "Graspable_Foot", "material": "ceramic", "fragility": 0.3, "region": "handle"},
    {"type": "Graspable_Handle", "material": "ceramic", "fragility": 0.3},
])
def test_bad_affordances_raise(small, bad):
    with pytest.raises(ValidationError):
        small.retrieve("cup", bad)


def test_bad_queries_raise(small):
    with pytest.raises(ValidationError):
        AffordanceDescriptor("Graspable_Handle", "ceramic", float("nan"), "handle")
    for kwargs in ({"k": 0}, {"k": 2.5}, {"mode": "clip"},
                   {"embedding": np.zeros(3)}, {"embedding": np.array([np.nan, 1.0, 0.0])},
                   {"embedding": Q_VEC, "crop": np.zeros((64, 64, 3), np.uint8)}):
        with pytest.raises(ValidationError):
            small.retrieve("cup", QUERY, **kwargs)
    with pytest.raises(ValidationError):       # no embedder for model "test-model"
        small.retrieve("cup", QUERY, crop=np.zeros((64, 64, 3), np.uint8))


def test_model_id_mismatch_is_an_error(small):
    with pytest.raises(EmbeddingModelMismatch, match="test-model"):
        small.retrieve("cup", QUERY, embedding=Q_VEC, embedding_model="open_clip/ViT-L-14/x")
    with pytest.raises(EmbeddingModelMismatch, match="dimensions"):
        small.retrieve("cup", QUERY, embedding=np.ones(4), embedding_model=MODEL)
    with pytest.raises(EmbeddingModelMismatch):
        HAARAG(small.kb, small.config, DescriptorEmbedder())


def test_no_visual_query_scores_zero(small):
    res = small.retrieve("cup", QUERY)
    assert all(s.s_vis == 0.0 for s in res.strategies)
    assert "s_vis = 0" in res.reason


def test_config_errors_name_the_key(tmp_path):
    text = "retrieval:\n  ros__parameters:\n    k1: 30\n    k: 3\n"
    path = tmp_path / "retrieval.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="tau_aff"):
        RetrievalConfig.from_config(path)
    good = RetrievalConfig.from_config()
    with pytest.raises(ConfigError, match="failure_penalty"):
        replace(good, failure_penalty=1.0)
    with pytest.raises(ConfigError, match="mode"):
        replace(good, mode="clip")
    flat = {"k1": 30, "k": 3, "tau_aff": 0.3, "category_exact_score": 1.0,
            "category_superclass_score": 0.5, "affordance_weights.type": 0.5,
            "affordance_weights.material": 0.2, "affordance_weights.fragility": 0.15,
            "affordance_weights.region": 0.15, "region_family_score": 0.5,
            "material_similarity.ceramic.glass": 0.6, "final_weights.category": 0.2,
            "final_weights.affordance": 0.4, "final_weights.visual": 0.4,
            "failure_penalty": 0.3, "clip_only_failure_penalty": True, "mode": "haa"}
    dotted = RetrievalConfig.from_params(flat)          # ROS-style dotted parameter names
    assert dotted.material_score("glass", "ceramic") == 0.6 and dotted.w_region == 0.15


@pytest.mark.parametrize("mode", ["haa", "clip_only"])
def test_index_agrees_with_a_brute_force_scan(cfg, mode):
    rng = np.random.default_rng(7)
    base = Taxonomy.load()
    tax, pop = synthetic_taxonomy(60, 8, rng, base)
    index = synthetic_index(4000, 16, rng, tax, pop, MODEL)
    rag = HAARAG(None, replace(cfg, k=5), index=index)
    materials, regions = list(tax.materials), sorted(tax.region_family)
    for i in range(40):
        cat = f"cat_{int(rng.integers(60)):04d}"
        aff = AffordanceDescriptor(list(AffordanceType)[int(rng.integers(8))],
                                   materials[int(rng.integers(len(materials)))],
                                   float(rng.random()), regions[int(rng.integers(len(regions)))])
        vec = rng.standard_normal(16).astype(np.float32)
        vec /= np.linalg.norm(vec)
        got = [int(s.experience.id.split("-")[1])
               for s in rag.retrieve(cat, aff, embedding=vec, mode=mode).strategies]
        assert got == brute_force_retrieve(rag, cat, aff, vec, 5, mode)
