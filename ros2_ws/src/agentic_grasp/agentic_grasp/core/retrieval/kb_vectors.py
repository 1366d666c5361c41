"""The knowledge base's visual vectors: each entry's render, its embedding, and the cache.

Knowledge-base vectors are computed from each entry's ``render_spec`` by rendering the object
alone on the table (:func:`agentic_grasp.core.render.views.render_object_crop`), drawn with
the parts of the catalogue model it is an instance of (:func:`visual_spec`) and cut in the
object-facing view a query crop is cut in, embedded by a :class:`.embedding.VisualEmbedder`
and cached on disk (:class:`EmbeddingCache`) keyed by model id and a hash of everything the
vector depends on (:func:`render_spec_key`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from agentic_grasp.core import paths
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.render import crops, hits, parts, raycast, views
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.render.parts import drawn_parts, model_key_for
from agentic_grasp.core.render.views import render_object_crop
from agentic_grasp.core.retrieval.embedding import VisualEmbedder
from agentic_grasp.core.types import ObjectInstance

_LOG = logging.getLogger(__name__)


# --------------------------------------------------------------------------- cache
class EmbeddingCache:
    """Vectors on disk, one ``<model>.npz`` per model, keyed by a content hash per entry.

    The default folder is ``kb_data/cache/`` (git-ignored by its own .gitignore, excluded from
    the colcon install) or, when that is not writable (an installed share/ folder),
    ``$XDG_CACHE_HOME/agentic_grasp/embeddings`` (``~/.cache/...``).
    """

    def __init__(self, directory: Union[str, Path, None] = None) -> None:
        self.directory = Path(directory) if directory else default_cache_dir()

    def _file(self, model_id: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", model_id)
        return self.directory / f"{safe}.npz"

    def get_many(self, model_id: str, keys: Iterable[str]) -> Dict[str, np.ndarray]:
        path = self._file(model_id)
        if not path.is_file():
            return {}
        try:
            with np.load(path, allow_pickle=False) as data:
                stored = dict(zip(data["keys"].tolist(), data["vectors"]))
        except (OSError, ValueError, KeyError) as exc:
            _LOG.warning("ignoring unreadable embedding cache %s: %s", path, exc)
            return {}
        return {k: stored[k] for k in keys if k in stored}

    def put_many(self, model_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Merge ``vectors`` into the model's file (atomic replace); failures only warn."""
        if not vectors:
            return
        path = self._file(model_id)
        try:
            merged: Dict[str, np.ndarray] = {}
            if path.is_file():
                try:
                    with np.load(path, allow_pickle=False) as data:
                        merged.update(zip(data["keys"].tolist(), data["vectors"]))
                except (OSError, ValueError, KeyError):
                    merged = {}
            merged.update(vectors)
            dims = {v.shape for v in merged.values()}
            if len(dims) != 1:  # a model changed dimension: keep only the new vectors
                merged = dict(vectors)
            self.directory.mkdir(parents=True, exist_ok=True)
            keys = sorted(merged)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".npz.tmp")
            with os.fdopen(fd, "wb") as handle:
                np.savez(handle, keys=np.array(keys),
                         vectors=np.stack([merged[k] for k in keys]).astype(np.float32))
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except OSError as exc:
            _LOG.warning("could not write the embedding cache %s: %s", path, exc)


def default_cache_dir() -> Path:
    """kb_data/cache when writable, else the user cache folder."""
    try:
        kb_cache = paths.kb_dir() / "cache"
        if kb_cache.is_dir() and os.access(kb_cache, os.W_OK):
            return kb_cache
        if not kb_cache.exists() and os.access(kb_cache.parent, os.W_OK):
            return kb_cache
    except ConfigError:
        pass
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentic_grasp" / "embeddings"


# --------------------------------------------------------------------------- KB renders
def render_spec_key(render_spec: Mapping[str, Any], embedder: VisualEmbedder,
                    crop_size: int) -> str:
    """Content hash of what a knowledge-base vector depends on: the spec (with the catalogue
    model it is drawn as, see :func:`visual_spec`), the solid parts actually drawn (an edited
    catalogue redraws the entry), the crop size, the embedder, the renderer's code and the
    camera it renders from."""
    payload = json.dumps({"render_spec": render_spec, "crop_size": int(crop_size),
                          "parts": _parts_digest(render_spec),
                          "embedder": embedder.fingerprint(), "renderer": _renderer_digest()},
                         sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


_RENDERER_DIGEST: Optional[str] = None


def _renderer_digest() -> str:
    """Hash of the renderer's modules (the ray caster, its partial renders and crops, what it
    draws of an object, its ray hits) and of the default camera it renders from: a changed
    renderer or camera must not reuse cached vectors."""
    global _RENDERER_DIGEST
    if _RENDERER_DIGEST is None:
        h = hashlib.sha256()
        for module in (raycast, views, crops, parts, hits):
            h.update(Path(module.__file__).read_bytes())
        cam = Camera()
        h.update(np.asarray([cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy],
                            dtype=float).tobytes())
        h.update(np.asarray(cam.T_world_cam, dtype=float).tobytes())
        _RENDERER_DIGEST = h.hexdigest()[:16]
    return _RENDERER_DIGEST


def _parts_digest(render_spec: Mapping[str, Any]) -> str:
    """Hash of the solid parts the renderer draws for ``render_spec``."""
    h = hashlib.sha256()
    for part in drawn_parts(object_from_render_spec(render_spec)):
        h.update(f"{part.name}:{part.shape}".encode())
        for arr in (part.R, part.c, part.half, (part.wall, part.floor)):
            h.update(np.round(np.asarray(arr, dtype=float), 9).tobytes())
    return h.hexdigest()[:16]


#: The largest anisotropy (largest over smallest per-axis scale factor) with which a
#: catalogue model is stretched to an entry's size. Scaling a model's parts per axis, as the
#: simulator scales a catalogue instance of another size (Catalogue.model_for), keeps their
#: arrangement when the object keeps the model's proportions; a bounding box in other
#: proportions (a phone standing in a stand is 1 cm deep and 15 cm tall, its model lies
#: 15 cm long and 1 cm high: factors 1/15 and 15) is the object in a pose the model does not
#: describe, whose parts a per-axis stretch would put in the wrong place. 2 admits every
#: object of a kind at another size and proportion within 2:1 (a squat camping mug drawn as
#: the catalogue's mug: 1.43) and refuses posed ones (factors of 10 and more).
MAX_MODEL_STRETCH = 2.0


def visual_spec(render_spec: Mapping[str, Any], category: Optional[str] = None,
                object_name: Optional[str] = None, catalogue: Any = None) -> Dict[str, Any]:
    """What an entry's visual embedding is rendered from: its ``render_spec`` plus, under
    ``"model"``, the key of the catalogue model (config/objects.yaml) whose solid parts it is
    drawn with; without a model the renderer draws the spec's bounding primitive.

    Why: a render spec records the bounding primitive (shape, size) of the object the grasp
    was made on, but the camera sees that object's parts: a bottle's neck above its body, a
    screwdriver's thin shaft above its grip, a cup's handle. The scene renderer draws every
    catalogue object with its parts, so a query crop showed them while the entries' renders
    showed plain cylinders, and s_vis compared a bottle with a neck to a neckless cylinder
    (a box-shaped shampoo bottle looked closer). The model is the catalogue object the entry
    names (its ``object_name``, as acquired entries record the perceived object's name), else
    the catalogue's model of the entry's category with the spec's shape and the nearest size
    (the largest per-axis log ratio), stretched to the spec's size no more than
    ``MAX_MODEL_STRETCH``. The spec's colour and material are kept. An object of a kind the
    catalogue does not model, or of another shape (a screwdriver recorded lying, as a box),
    keeps its bounding primitive.
    """
    spec = {k: v for k, v in render_spec.items() if k != "model"}
    model = model_key_for(spec, category, object_name, catalogue, MAX_MODEL_STRETCH)
    if model is not None:
        spec["model"] = model
    return spec


def render_crop(render_spec: Mapping[str, Any], crop_size: int = 64,
                name: str = "kb_entry") -> np.ndarray:
    """The object a render spec describes, alone on the table, as an RGB crop."""
    return render_object_crop(object_from_render_spec(render_spec, name), size=int(crop_size))


def object_from_render_spec(render_spec: Mapping[str, Any], name: str = "kb_entry"):
    """An ObjectInstance with the spec's shape, size, colour and material, on the table,
    drawn as the catalogue model named by the spec's ``"model"`` (see :func:`visual_spec`;
    its parts scaled to the spec's size) or, without one, as its bounding primitive."""
    size = [float(v) for v in render_spec["size"]]
    # The renderer finds an object's parts by its name, a model's key included
    # (render.parts.drawn_parts).
    model_name = str(render_spec["model"]) if render_spec.get("model") else None
    return ObjectInstance(id=name, category="kb", shape=render_spec["shape"],
                          position=[0.5, 0.0, size[2] / 2.0], size=size,
                          color=tuple(int(c) for c in render_spec["color"]),
                          material=str(render_spec.get("material", "plastic")),
                          name=model_name or "")


def embed_render_specs(specs: Sequence[Mapping[str, Any]], embedder: VisualEmbedder,
                       cache: Optional[EmbeddingCache] = None,
                       crop_size: int = 64) -> np.ndarray:
    """(len(specs), dim) float32 vectors, rendering and embedding only what is not cached."""
    keys = [render_spec_key(s, embedder, crop_size) for s in specs]
    found = cache.get_many(embedder.model_id, set(keys)) if cache else {}
    missing: Dict[str, Mapping[str, Any]] = {}
    for key, spec in zip(keys, specs):
        if key not in found and key not in missing:
            missing[key] = spec
    if missing:
        _LOG.info("rendering and embedding %d knowledge-base objects with %s",
                  len(missing), embedder.model_id)
        crops = [render_crop(spec, crop_size) for spec in missing.values()]
        fresh = dict(zip(missing.keys(), embedder.embed_many(crops)))
        found.update(fresh)
        if cache:
            cache.put_many(embedder.model_id, fresh)
    out = np.zeros((len(specs), embedder.dim), dtype=np.float32)
    for i, key in enumerate(keys):
        vec = np.asarray(found[key], dtype=np.float32)
        if vec.shape != (embedder.dim,):
            raise ConfigError(f"cached vector for {key[:12]} has shape {vec.shape}, expected "
                              f"({embedder.dim},): delete {cache.directory if cache else ''}")
        out[i] = vec
    return out
