"""Visual embeddings: the built-in descriptor, the on-disk cache and the open_clip backend."""
import json

import numpy as np
import pytest

from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.render.crops import crop_object
from agentic_grasp.core.render.raycast import render_scene
from agentic_grasp.core.retrieval.embedding import (DescriptorEmbedder, OpenClipEmbedder,
                                                    make_embedder)
from agentic_grasp.core.retrieval.kb_vectors import EmbeddingCache, embed_render_specs, render_crop
from agentic_grasp.core.retrieval.knowledge_base import KnowledgeBase
from agentic_grasp.core.types import ObjectInstance


def scene_crop(shape, size, color, x=0.55, y=0.12):
    obj = ObjectInstance(id="q", category="q", shape=shape, position=[x, y, size[2] / 2],
                         size=size, color=tuple(color))
    return crop_object(render_scene([obj]), 0, size=64)


@pytest.fixture(scope="module")
def kb():
    return KnowledgeBase.load()


def test_descriptor_is_deterministic_unit_norm(kb):
    crop = render_crop(kb.get("cup-001").render_spec)
    a = DescriptorEmbedder().embed(crop)
    b = DescriptorEmbedder().embed(crop.copy())
    assert a.dtype == np.float32 and a.shape == (DescriptorEmbedder.dim,)
    assert np.array_equal(a, b)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    big = np.repeat(np.repeat(crop, 2, axis=0), 2, axis=1)     # any crop size is accepted
    assert float(DescriptorEmbedder().embed(big) @ a) > 0.99


@pytest.mark.parametrize("bad", [np.zeros((64, 64, 3), np.float32), np.zeros((64, 64), np.uint8),
                                 np.zeros((4, 4, 3), np.uint8), [[1, 2, 3]]])
def test_descriptor_rejects_bad_crops(bad):
    with pytest.raises(ValidationError):
        DescriptorEmbedder().embed(bad)


@pytest.mark.parametrize("query, own, different", [
    (("sphere", [0.08, 0.08, 0.08], [200, 35, 30]), ["apple-001", "apple-005"],
     ["smartphone-001", "screwdriver-001", "wine_glass-001"]),
    (("sphere", [0.065, 0.065, 0.065], [210, 230, 60]), ["tennis_ball-001"],
     ["wine_glass-001", "bowl-001", "smartphone-001"]),
    (("cylinder", [0.12, 0.12, 0.06], [225, 225, 235]), ["bowl-001", "bowl-010"],
     ["banana-001", "screwdriver-001", "apple-001"]),
    (("box", [0.05, 0.05, 0.05], [190, 140, 90]), ["cube-001", "cube-002"],
     ["wine_glass-001", "tennis_ball-001", "smartphone-001"]),
])
def test_query_crop_is_closer_to_its_own_category(kb, query, own, different):
    """A scene crop (other pose, perspective) of an object resembles renders of its own kind
    more than renders of a very different object."""
    emb = DescriptorEmbedder()
    q = emb.embed(scene_crop(*query))
    sims = {i: float(emb.embed(render_crop(kb.get(i).render_spec)) @ q) for i in own + different}
    assert min(sims[i] for i in own) > max(sims[i] for i in different), sims


class CountingEmbedder(DescriptorEmbedder):
    def __init__(self):
        self.crops = 0

    def embed_many(self, crops):
        self.crops += len(crops)
        return super().embed_many(crops)


def test_cache_avoids_re_rendering(tmp_path, kb):
    specs = [e.render_spec for e in kb.experiences[:12]]
    unique = len({json.dumps(s, sort_keys=True) for s in specs})
    cache = EmbeddingCache(tmp_path / "cache")
    first = CountingEmbedder()
    v1 = embed_render_specs(specs, first, cache)
    assert first.crops == unique
    assert list((tmp_path / "cache").glob("*.npz"))
    second = CountingEmbedder()
    v2 = embed_render_specs(specs, second, cache)
    assert second.crops == 0 and np.array_equal(v1, v2)
    changed = [dict(s) for s in specs]
    changed[0]["color"] = [1, 2, 3]
    third = CountingEmbedder()
    v3 = embed_render_specs(changed, third, cache)
    assert third.crops == 1 and not np.array_equal(v3[0], v1[0])


def test_kb_vectors_are_one_contiguous_matrix(kb):
    kb2 = KnowledgeBase.load(embedder=DescriptorEmbedder())
    assert kb2.vectors.flags["C_CONTIGUOUS"] and kb2.vectors.dtype == np.float32
    assert kb2.vectors.shape == (len(kb2), DescriptorEmbedder.dim)
    assert kb2.embedding_model == "builtin-descriptor-v1"
    assert all(e.embedding_model == kb2.embedding_model for e in kb2)
    assert np.shares_memory(kb2.experiences[5].embedding, kb2.vectors)


def test_open_clip_needs_a_local_weights_file(tmp_path):
    with pytest.raises(ConfigError, match="nothing is ever downloaded"):
        OpenClipEmbedder("ViT-L-14", pretrained=tmp_path / "missing.pt")
    with pytest.raises(ConfigError):
        OpenClipEmbedder("ViT-L-14", pretrained=None)
    with pytest.raises(ConfigError, match="does not exist"):
        make_embedder({"backend": "open_clip", "open_clip": {"pretrained_path": "/nope.pt"}})
    with pytest.raises(ConfigError, match="backend"):
        make_embedder({"backend": "resnet"})
    assert make_embedder({"backend": "descriptor"}).model_id == "builtin-descriptor-v1"


TINY_CLIP = {"embed_dim": 32,
             "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "head_width": 32,
                            "patch_size": 16},
             "text_cfg": {"context_length": 16, "vocab_size": 1000, "width": 32, "heads": 2,
                          "layers": 1}}


_TORCHVISION_OPS = []


def _import_open_clip():
    """(open_clip, torch), or a skip; a failure where scripts/test.sh requires open_clip."""
    import os
    import subprocess
    import sys

    probe = subprocess.run([sys.executable, "-c", "import torchvision"], capture_output=True,
                           text=True, check=False)
    if probe.returncode != 0 and "torchvision::nms" in probe.stderr and not _TORCHVISION_OPS:
        # PyPI's torchvision 0.28.0 is a CUDA build: beside the CPU torch its C ops do not
        # load, and its Python side then fails registering fake kernels for them. open_clip
        # uses only torchvision's transforms, so declaring the two op schemas lets it import.
        import torch

        lib = torch.library.Library("torchvision", "FRAGMENT")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _TORCHVISION_OPS.append(lib)
    try:
        import open_clip
        import torch
    except Exception as exc:  # noqa: BLE001 - absent, or a build that does not import
        if os.environ.get("AGENTIC_GRASP_REQUIRE_OPEN_CLIP"):
            pytest.fail(f"open_clip is required here (scripts/test.sh) but does not import: "
                        f"{exc}")
        pytest.skip(f"open_clip not usable here: {exc}")
    return open_clip, torch


def test_open_clip_backend_with_a_tiny_random_model(tmp_path, kb):
    """The real open_clip path: a tiny random ViT saved to disk and loaded from the file."""
    open_clip, torch = _import_open_clip()
    from PIL import Image

    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "agentic-tiny-vit.json").write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(tmp_path / "cfg")
    torch.manual_seed(0)
    model, _, preprocess = open_clip.create_model_and_transforms("agentic-tiny-vit",
                                                                 pretrained=None)
    weights = tmp_path / "tiny_weights.pt"
    torch.save(model.state_dict(), weights)

    emb = OpenClipEmbedder("agentic-tiny-vit", pretrained=weights)
    assert emb.dim == 32 and emb.model_id == "open_clip/agentic-tiny-vit/tiny_weights.pt"
    crop = render_crop(kb.get("apple-001").render_spec)
    vec = emb.embed(crop)
    assert vec.dtype == np.float32 and np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-5)
    model.eval()
    with torch.no_grad():
        ref = model.encode_image(preprocess(Image.fromarray(crop)).unsqueeze(0))[0].numpy()
    assert np.allclose(vec, ref / np.linalg.norm(ref), atol=1e-5)   # the saved weights
    assert np.array_equal(emb.embed(crop), vec)

    from agentic_grasp.core.retrieval.haa_rag import HAARAG, EmbeddingModelMismatch
    small = KnowledgeBase.load()
    small.embed(emb, cache=EmbeddingCache(tmp_path / "cache"))
    rag = HAARAG(small, None, emb)
    res = rag.retrieve("apple", {"type": "Wrappable", "material": "organic",
                                 "fragility": 0.1, "region": "body"}, crop=crop)
    assert res.strategies and res.embedding_model == emb.model_id
    with pytest.raises(EmbeddingModelMismatch):
        rag.retrieve("apple", {"type": "Wrappable", "material": "organic", "fragility": 0.1,
                               "region": "body"}, embedding=np.ones(DescriptorEmbedder.dim),
                     embedding_model="builtin-descriptor-v1")
