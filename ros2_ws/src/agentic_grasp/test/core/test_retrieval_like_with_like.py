"""Retrieval compares like with like: a query crop and the knowledge-base renders are drawn
with the same object model (catalogue parts), cut in the same view (object-facing) and stand
on the same kind of background (table top), and Table IV holds the paper's HAA-RAG P@1.

Table IV runs here with the embedder ``agentic-grasp eval retrieval`` uses (the configured
one: config/retrieval.yaml, the built-in descriptor), from a fresh cache, in a few seconds.
"""
import numpy as np
import pytest

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.render.views import CANONICAL_XY, render_object_crop
from agentic_grasp.core.render.raycast import TableSpec, render_scene
from agentic_grasp.core.render.crops import crop_object
from agentic_grasp.core.retrieval.config import RetrievalConfig
from agentic_grasp.core.retrieval.kb_vectors import (EmbeddingCache, render_crop, render_spec_key,
                                                     visual_spec)
from agentic_grasp.core.retrieval.embedding import make_embedder
from agentic_grasp.core.retrieval.evaluation import PAPER_TABLE_IV, evaluate_retrieval, query_crop
from agentic_grasp.core.retrieval.relevance import load_table_iv
from agentic_grasp.core.retrieval.knowledge_base import KnowledgeBase
from agentic_grasp.core.types import ObjectInstance


@pytest.fixture(scope="module")
def config():
    return RetrievalConfig.from_config()


@pytest.fixture(scope="module")
def embedder(config):
    return make_embedder(config.embedding)


@pytest.fixture(scope="module")
def kb(tmp_path_factory, config, embedder):
    """The shipped knowledge base, every vector rendered and embedded afresh."""
    cache = EmbeddingCache(tmp_path_factory.mktemp("embeddings"))
    return KnowledgeBase.load(None, embedder, cache=cache,
                              crop_size=int(config.embedding.get("crop_size_px", 64)))


@pytest.fixture(scope="module")
def table_iv(kb, config, embedder):
    return evaluate_retrieval(kb, config=config, embedder=embedder)


def _misses(metrics):
    return [f"{p['object']} -> {p['top3'][0] if p['top3'] else '-'}"
            for p in metrics["per_query"] if not p["top1_relevant"]]


def test_table_iv_haa_rag_holds_the_papers_p_at_1_and_beats_clip_only(table_iv):
    haa, clip = table_iv["modes"]["haa"], table_iv["modes"]["clip_only"]
    floor = PAPER_TABLE_IV["haa"]["p_at_1"]
    assert haa["p_at_1"] >= floor - 1e-9, (
        f"Table IV HAA-RAG P@1 {haa['p_at_1']:.1f} % is below the paper's {floor} % "
        f"({table_iv['embedding_model']}); top-1 misses: {_misses(haa)}")
    # Above the visual-only baseline: never below it on P@1, P@3 or MRR, and above it on at
    # least one (with a faithful visual match both can reach P@1 = 100 %).
    keys = ("p_at_1", "p_at_3", "mrr")
    assert all(haa[k] >= clip[k] - 1e-9 for k in keys), \
        {k: (haa[k], clip[k]) for k in keys}
    assert any(haa[k] > clip[k] + 1e-9 for k in keys), \
        {k: (haa[k], clip[k]) for k in keys}


@pytest.mark.parametrize("query, own, other", [
    # other: a bottle of another build (a box-shaped shampoo bottle) and a screwdriver lying
    # down, whose relevance notes say they do not fit these objects
    ("plastic bottle", "bottle-001", "bottle-006"),
    ("screwdriver", "screwdriver-001", "screwdriver-005"),
])
def test_s_vis_prefers_the_entry_of_the_querys_own_build(kb, embedder, query, own, other):
    table = load_table_iv()
    q = next(q for q in table["queries"] if q.object == query)
    vec = embedder.embed(query_crop(q, table["render_pose"]))
    s_own, s_other = (float(kb.get(i).embedding @ vec) for i in (own, other))
    assert s_own > s_other, (query, s_own, s_other)


def test_entries_are_drawn_as_the_catalogue_model_they_are_an_instance_of(kb):
    assert kb.get("bottle-001").visual_spec()["model"] == "plastic_bottle"   # by category
    assert kb.get("screwdriver-001").visual_spec()["model"] == "screwdriver"  # by name
    assert kb.get("cup-001").visual_spec()["model"] == "ceramic_cup"
    # no model of that shape (a screwdriver recorded lying, as a box) or a pose the model
    # does not describe (a phone standing in a stand: stretched 15:1 and 1:15)
    assert "model" not in kb.get("screwdriver-005").visual_spec()
    assert "model" not in kb.get("smartphone-006").visual_spec()
    assert "model" not in visual_spec({"shape": "cylinder", "size": [0.07, 0.07, 0.22],
                                       "color": [1, 2, 3]}, "unknown_kind", "mystery")
    # the parts are what is drawn: a bottle with a neck is not its bounding cylinder, and
    # the cache keys tell them apart
    spec = kb.get("bottle-001").render_spec
    with_parts, primitive = render_crop(kb.get("bottle-001").visual_spec()), render_crop(spec)
    assert not np.array_equal(with_parts, primitive)
    emb = make_embedder({"backend": "descriptor"})
    assert render_spec_key(kb.get("bottle-001").visual_spec(), emb, 64) != \
        render_spec_key(spec, emb, 64)


def _columns(crop, rows):
    """Mean column of the object's pixels (red, far from the brown table) in ``rows``."""
    rgb = crop.astype(int)
    mask = (rgb[..., 0] > 120) & (rgb[..., 1] < 60) & (rgb[..., 2] < 60)
    cols = [np.flatnonzero(mask[r]).mean() for r in rows if mask[r].any()]
    return np.array(cols)


def test_the_object_facing_view_stands_an_off_centre_object_upright():
    """A 20 cm red cylinder 12 cm beside the camera's middle column leans in the camera's
    image (its vertical edges run to the vanishing point below the middle column); in the
    object-facing view it stands upright, as one on the middle column does."""
    camera = Camera()
    obj = ObjectInstance(id="post", category="post", shape="cylinder",
                         position=[0.55, 0.12, 0.1], size=[0.04, 0.04, 0.2],
                         color=(220, 30, 30))
    frame = render_scene([obj], camera)
    raw = crop_object(frame, 0, size=64)
    facing = crop_object(frame, 0, size=64, camera=camera)
    rows = range(16, 56)                       # the body, below its top face
    lean_raw = np.ptp(_columns(raw, rows))
    lean_facing = np.ptp(_columns(facing, rows))
    assert lean_raw > 4.0, lean_raw
    assert lean_facing <= 1.5, lean_facing
    # on the middle column there is nothing to turn: the same crop
    centred = obj.copy()
    centred.position = np.array([CANONICAL_XY[0], CANONICAL_XY[1], 0.1])
    frame = render_scene([centred], camera)
    diff = np.abs(crop_object(frame, 0, camera=camera).astype(int)
                  - crop_object(frame, 0).astype(int))
    assert np.percentile(diff, 95) <= 8


def test_entry_renders_show_table_behind_a_tall_object():
    """The padded crop over a 25 cm object at the table's centre reaches past the table's far
    edge: a scene render shows the grey floor there, an entry's render shows table top."""
    obj = ObjectInstance(id="tall", category="tall", shape="cylinder",
                         position=[CANONICAL_XY[0], CANONICAL_XY[1], 0.125],
                         size=[0.07, 0.07, 0.25], color=(220, 30, 30))

    def grey_share(crop):
        rgb = crop.astype(int)
        return float(np.mean(rgb.max(axis=2) - rgb.min(axis=2) < 15))

    scene = crop_object(render_scene([obj], Camera(), TableSpec()), 0, camera=Camera())
    assert grey_share(scene) > 0.02
    assert grey_share(render_object_crop(obj)) == 0.0
