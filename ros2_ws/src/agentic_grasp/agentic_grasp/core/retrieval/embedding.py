"""Visual embeddings v_i for level 3 of HAA-RAG (paper Sec. III-A: CLIP ViT-L/14).

One small interface, :class:`VisualEmbedder`, with two backends:

- :class:`DescriptorEmbedder` ("builtin-descriptor-v1"): the embedded default. A hand-made
  descriptor of the object crop (colour histograms, gradient-orientation histograms, silhouette
  shape), CPU only, numpy and cv2. It is NOT CLIP: it sees colour and silhouette, no semantics.
- :class:`OpenClipEmbedder`: CLIP through open_clip_torch with weights read from a local file
  (never downloaded). open_clip and torch are imported only when it is constructed.

Every vector records the model that made it (``model_id``); the retriever refuses to compare
vectors of different models instead of returning meaningless cosines.

Knowledge-base vectors (each entry rendered, embedded and cached on disk): :mod:`.kb_vectors`.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import cv2
import numpy as np

from agentic_grasp.core.errors import ConfigError, ValidationError

_LOG = logging.getLogger(__name__)


class VisualEmbedder(ABC):
    """Maps an RGB uint8 crop of one object to a unit-norm float32 vector."""

    model_id: str = ""
    dim: int = 0

    @abstractmethod
    def embed(self, crop_rgb_uint8: np.ndarray) -> np.ndarray:
        """Unit-norm float32 vector of shape (dim,)."""

    def embed_many(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """(len(crops), dim) float32; backends with batching override this."""
        out = np.zeros((len(crops), self.dim), dtype=np.float32)
        for i, crop in enumerate(crops):
            out[i] = self.embed(crop)
        return out

    def fingerprint(self) -> str:
        """Everything besides the crop that changes the vectors (for the cache key)."""
        return self.model_id


def check_crop(crop: np.ndarray) -> np.ndarray:
    """Validate an RGB uint8 image of shape (H, W, 3) with H, W >= 8."""
    if not isinstance(crop, np.ndarray):
        raise ValidationError(f"crop must be a numpy array, got {type(crop).__name__}")
    if crop.dtype != np.uint8 or crop.ndim != 3 or crop.shape[2] != 3:
        raise ValidationError(
            f"crop must be an RGB uint8 array of shape (H, W, 3), got {crop.dtype} {crop.shape}")
    if crop.shape[0] < 8 or crop.shape[1] < 8:
        raise ValidationError(f"crop must be at least 8 x 8 pixels, got {crop.shape[:2]}")
    return crop


def unit(vector: np.ndarray, what: str = "embedding") -> np.ndarray:
    """``vector`` as float32 with unit L2 norm; ValidationError if it is zero or not finite."""
    vec = np.asarray(vector, dtype=np.float64).reshape(-1)
    if vec.size == 0 or not np.all(np.isfinite(vec)):
        raise ValidationError(f"{what} must be a non-empty finite vector")
    norm = float(np.linalg.norm(vec))
    if norm < 1e-12:
        raise ValidationError(f"{what} must not be the zero vector")
    return (vec / norm).astype(np.float32)


# --------------------------------------------------------------------------- descriptor
@functools.lru_cache(maxsize=1)
def _descriptor_source_hash() -> str:
    src = inspect.getsource(DescriptorEmbedder).encode()
    return hashlib.sha256(src).hexdigest()[:16]


class DescriptorEmbedder(VisualEmbedder):
    """Hand-crafted appearance descriptor of an object crop ("builtin-descriptor-v1").

    Why hand-crafted: the project must run retrieval on a CPU-only machine with no model
    weights. The blocks below capture what distinguishes the rendered objects (colour,
    silhouette, edge structure); each block is L2-normalised and weighted so no block
    dominates by its length, then the whole vector is L2-normalised:

    - colour (weight 1.0): hue histogram (12 bins, saturation-weighted, linear interpolation
      between neighbouring bins), saturation (4 bins) and value (5 bins) histograms of the
      object's pixels;
    - mean colour (0.5): mean RGB of the object's pixels;
    - gradients (0.7): unsigned gradient-orientation histograms (8 bins) in 2 x 2 cells of the
      object's bounding box, magnitude-weighted (HOG-like);
    - shape (0.7): silhouette aspect ratio, fill ratio of its box, circularity, the first two
      Hu moments (log-scaled) and the share of the crop it covers.

    The object's pixels are those whose colour differs from the median border colour (the
    crops are made with a margin of background around the object). The bin counts and weights
    define the model: changing them is a new model_id.
    """

    model_id = "builtin-descriptor-v1"
    SIZE = 64
    HUE_BINS, SAT_BINS, VAL_BINS, ORI_BINS, CELLS = 12, 4, 5, 8, 2
    N_SHAPE = 6
    WEIGHTS = {"colour": 1.0, "mean": 0.5, "gradient": 0.7, "shape": 0.7}
    FOREGROUND_DELTA = 24          # max channel difference from the background colour
    dim = HUE_BINS + SAT_BINS + VAL_BINS + 3 + CELLS * CELLS * ORI_BINS + N_SHAPE

    def embed(self, crop_rgb_uint8: np.ndarray) -> np.ndarray:
        crop = check_crop(crop_rgb_uint8)
        if crop.shape[:2] != (self.SIZE, self.SIZE):
            interp = cv2.INTER_AREA if min(crop.shape[:2]) >= self.SIZE else cv2.INTER_LINEAR
            crop = cv2.resize(crop, (self.SIZE, self.SIZE), interpolation=interp)
        mask = self._foreground(crop)
        blocks = [
            (self._colour(crop, mask), self.WEIGHTS["colour"]),
            (crop[mask].astype(np.float64).mean(axis=0) / 255.0, self.WEIGHTS["mean"]),
            (self._gradients(crop, mask), self.WEIGHTS["gradient"]),
            (self._shape(mask), self.WEIGHTS["shape"]),
        ]
        parts = []
        for block, weight in blocks:
            norm = float(np.linalg.norm(block))
            parts.append(block * (weight / norm) if norm > 1e-12 else block)
        return unit(np.concatenate(parts), "descriptor")

    def fingerprint(self) -> str:
        # The class source is part of the definition: an edited descriptor must not reuse
        # vectors cached by the old one. Read once per process: inspect.getsource costs
        # ~130 ms, which was paid for every embedded entry (400 s at 10^6 fleet records).
        return f"{self.model_id}:{_descriptor_source_hash()}"

    # ----------------------------------------------------------------- blocks
    def _foreground(self, crop: np.ndarray) -> np.ndarray:
        border = np.concatenate([crop[0], crop[-1], crop[:, 0], crop[:, -1]]).astype(np.int16)
        background = np.median(border, axis=0)
        diff = np.abs(crop.astype(np.int16) - background).max(axis=2)
        mask = diff > self.FOREGROUND_DELTA
        share = mask.mean()
        if share < 0.01 or share > 0.98:   # nothing separable: describe the whole crop
            mask = np.ones(mask.shape, dtype=bool)
        return mask

    def _colour(self, crop: np.ndarray, mask: np.ndarray) -> np.ndarray:
        hsv = cv2.cvtColor(crop, cv2.COLOR_RGB2HSV)[mask].astype(np.float64)
        hue = hsv[:, 0] / 180.0 * self.HUE_BINS          # OpenCV hue is 0..179
        sat = hsv[:, 1] / 255.0
        val = hsv[:, 2] / 255.0
        # Circular hue histogram with linear interpolation, weighted by saturation so grey
        # and white pixels (undefined hue) do not vote.
        pos = hue - 0.5
        lo = np.floor(pos).astype(int)
        frac = pos - lo
        hue_hist = np.zeros(self.HUE_BINS)
        np.add.at(hue_hist, lo % self.HUE_BINS, sat * (1.0 - frac))
        np.add.at(hue_hist, (lo + 1) % self.HUE_BINS, sat * frac)
        hue_hist /= max(len(hsv), 1)
        sat_hist = np.histogram(sat, bins=self.SAT_BINS, range=(0.0, 1.0))[0] / max(len(hsv), 1)
        val_hist = np.histogram(val, bins=self.VAL_BINS, range=(0.0, 1.0))[0] / max(len(hsv), 1)
        return np.concatenate([hue_hist, sat_hist, val_hist])

    def _gradients(self, crop: np.ndarray, mask: np.ndarray) -> np.ndarray:
        grey = cv2.cvtColor(crop, cv2.COLOR_RGB2GRAY).astype(np.float32)
        gx = cv2.Sobel(grey, cv2.CV_32F, 1, 0, ksize=3)
        gy = cv2.Sobel(grey, cv2.CV_32F, 0, 1, ksize=3)
        mag = np.hypot(gx, gy)
        ori = np.mod(np.arctan2(gy, gx), np.pi)            # unsigned, 0..pi
        rows, cols = np.nonzero(mask)
        r0, r1, c0, c1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
        # Grow the box by 2 px so the silhouette edge itself is counted.
        r0, c0 = max(0, r0 - 2), max(0, c0 - 2)
        r1, c1 = min(self.SIZE, r1 + 2), min(self.SIZE, c1 + 2)
        out = []
        r_edges = np.linspace(r0, r1, self.CELLS + 1).astype(int)
        c_edges = np.linspace(c0, c1, self.CELLS + 1).astype(int)
        for i in range(self.CELLS):
            for j in range(self.CELLS):
                m = mag[r_edges[i]:r_edges[i + 1], c_edges[j]:c_edges[j + 1]].ravel()
                o = ori[r_edges[i]:r_edges[i + 1], c_edges[j]:c_edges[j + 1]].ravel()
                hist = np.histogram(o, bins=self.ORI_BINS, range=(0.0, np.pi), weights=m)[0]
                out.append(hist / (np.linalg.norm(hist) + 1e-6))
        return np.concatenate(out)

    def _shape(self, mask: np.ndarray) -> np.ndarray:
        m8 = mask.astype(np.uint8)
        rows, cols = np.nonzero(mask)
        h = rows.max() - rows.min() + 1
        w = cols.max() - cols.min() + 1
        area = float(mask.sum())
        contours, _ = cv2.findContours(m8, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
        perimeter = max(sum(cv2.arcLength(c, True) for c in contours), 1.0)
        hu = cv2.HuMoments(cv2.moments(m8, binaryImage=True)).ravel()
        hu_log = -np.sign(hu[:2]) * np.log10(np.abs(hu[:2]) + 1e-12)
        return np.array([
            np.tanh(np.log(h / w)),                     # tall (+) or wide (-)
            area / float(h * w),                        # box 1, cylinder ~0.9, sphere ~0.79
            min(1.0, 4.0 * np.pi * area / perimeter ** 2),
            hu_log[0] / 4.0,
            hu_log[1] / 8.0,
            area / float(mask.size),
        ])


# --------------------------------------------------------------------------- open_clip
class OpenClipEmbedder(VisualEmbedder):
    """CLIP image tower through open_clip_torch, weights from a local file only.

    ``pretrained`` must be an existing file (a state dict or an open_clip checkpoint); it is
    passed to ``open_clip.create_model_and_transforms`` as an absolute path, which open_clip
    loads from disk: no tag lookup, no hub download. ``model_id`` defaults to
    ``open_clip/<model_name>/<weights file name>``.
    """

    def __init__(self, model_name: str = "ViT-L-14", pretrained: Union[str, Path, None] = None,
                 device: str = "cpu", model_id: Optional[str] = None) -> None:
        if not pretrained:
            raise ConfigError("OpenClipEmbedder needs `pretrained`: a local weights file "
                              "(retrieval.embedding.open_clip.pretrained_path); nothing is "
                              "ever downloaded")
        weights = Path(pretrained).expanduser().resolve()
        if not weights.is_file():
            raise ConfigError(f"open_clip weights file {weights} does not exist "
                              "(retrieval.embedding.open_clip.pretrained_path); nothing is "
                              "ever downloaded")
        try:
            # open_clip_torch and torch: optional heavy dependencies (requirements-clip.txt),
            # imported on use so the builtin embedder needs neither
            import open_clip
            import torch
        except Exception as exc:  # ImportError, or a broken torch/torchvision pairing
            raise ConfigError(f"the open_clip backend needs open_clip_torch and torch: {exc}"
                              ) from exc
        self._torch = torch
        self.model_name = model_name
        self.weights = weights
        self.device = device
        model, _, preprocess = open_clip.create_model_and_transforms(
            model_name, pretrained=str(weights), device=device)
        model.eval()
        self._model = model
        self._preprocess = preprocess
        self.dim = int(getattr(model.visual, "output_dim", 0)) or self._probe_dim()
        self.model_id = model_id or f"open_clip/{model_name}/{weights.name}"

    def _probe_dim(self) -> int:
        return int(self.embed(np.zeros((64, 64, 3), dtype=np.uint8)).shape[0])

    def embed(self, crop_rgb_uint8: np.ndarray) -> np.ndarray:
        return self.embed_many([crop_rgb_uint8])[0]

    def embed_many(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        from PIL import Image  # comes with open_clip, optional like it

        torch = self._torch
        batch = torch.stack([self._preprocess(Image.fromarray(check_crop(c))) for c in crops])
        with torch.no_grad():
            features = self._model.encode_image(batch.to(self.device)).float().cpu().numpy()
        return np.stack([unit(f, "open_clip embedding") for f in features])

    def fingerprint(self) -> str:
        stat = self.weights.stat()
        return f"{self.model_id}:{stat.st_size}:{int(stat.st_mtime)}"


def make_embedder(params: Optional[Mapping[str, Any]] = None) -> VisualEmbedder:
    """The backend named by the ``embedding`` section of config/retrieval.yaml."""
    params = dict(params or {})
    backend = str(params.get("backend", "descriptor")).lower()
    if backend == "descriptor":
        return DescriptorEmbedder()
    if backend == "open_clip":
        oc = dict(params.get("open_clip") or {})
        return OpenClipEmbedder(model_name=str(oc.get("model_name", "ViT-L-14")),
                                pretrained=oc.get("pretrained_path") or None,
                                device=str(oc.get("device", "cpu")))
    raise ConfigError(f"retrieval.embedding.backend must be 'descriptor' or 'open_clip', "
                      f"got {backend!r}")
