"""From the frame to the VLM and back (paper Sec. III-A, perception):
the image as the request carries it (scaled, JPEG, base64) and the model's JSON answer
interpreted against the frame: pixels back to full resolution, objects located in 3-D from
the depth image, every bad field named.
"""
from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import cv2
import numpy as np

from agentic_grasp.core.types import ObjectState
from agentic_grasp.core.perception.vlm.config import VlmConfig


# --------------------------------------------------------------------------- image


@dataclass
class EncodedImage:
    """The frame as sent: data URL and size, plus the factor back to the input image."""

    data_url: str
    width: int
    height: int
    scale: float           # input pixels per sent pixel (>= 1)


def encode_image(rgb: np.ndarray, max_side: int = 640, image_format: str = "jpeg",
                 jpeg_quality: int = 90) -> EncodedImage:
    """Downscale so the longer side is at most ``max_side`` and encode as a data URL.

    JPEG at quality 90 by default: on a 640x480 frame cv2 encodes it in about 1.5 ms into
    40-60 KiB of base64, while PNG (even at compression level 1) takes 30-60 ms and several
    hundred KiB (bench.py; lossless compression of sensor noise is slow and ineffective).
    Qwen3-VL sees this frame as 16x16-pixel patches; quality-90 artefacts are far below
    that scale, and the smaller body also travels and decodes faster on the server.
    """
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"rgb must be HxWx3, got shape {rgb.shape}")
    if rgb.dtype != np.uint8:
        rgb = np.clip(rgb, 0, 255).astype(np.uint8)
    height, width = rgb.shape[:2]
    scale = max(1.0, max(width, height) / float(max_side))
    if scale > 1.0:
        size = (max(1, int(round(width / scale))), max(1, int(round(height / scale))))
        rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    if image_format == "png":
        ok, buf = cv2.imencode(".png", bgr, [cv2.IMWRITE_PNG_COMPRESSION, 1])
        mime = "image/png"
    else:
        ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(jpeg_quality)])
        mime = "image/jpeg"
    if not ok:
        raise ValueError("image encoding failed")
    data = base64.b64encode(buf.tobytes()).decode("ascii")
    return EncodedImage(data_url=f"data:{mime};base64,{data}", width=bgr.shape[1],
                        height=bgr.shape[0], scale=scale)


# --------------------------------------------------------------------------- answer


@dataclass
class _Located:
    id: str
    category: str
    pixel: Tuple[float, float]
    bbox: Optional[Tuple[int, int, int, int]]
    state: ObjectState
    fragility: float


@dataclass
class Interpretation:
    """An answer after the semantic checks, in pixels of the input image."""

    target_found: bool
    objects: List[_Located]
    target_index: Optional[int]
    affordance: Optional[Dict[str, str]]
    warnings: List[str]
    fatal: str = ""


def _to_pixels(xs: Sequence[float], axis_sizes: Sequence[int], coordinates: str,
               sent: EncodedImage) -> List[float]:
    out = []
    for value, size in zip(xs, axis_sizes):
        value = float(value)
        if coordinates == "norm1000":
            out.append(value / 1000.0 * size)
        else:
            out.append(value * sent.scale)
    return out


def interpret_answer(answer: Mapping[str, Any], width: int, height: int, sent: EncodedImage,
                     config: VlmConfig) -> Interpretation:
    """Semantic checks of a schema-valid answer (see the module docstring for the rules).

    ``width`` x ``height`` is the size of the input image; coordinates come back in it.
    """
    warnings: List[str] = []
    coords = config.coordinates
    tol_u, tol_v = 0.01 * width, 0.01 * height
    objects: List[_Located] = []
    id_map: Dict[str, int] = {}        # model id -> index of its first object (-1: dropped)
    counts: Dict[str, int] = {}
    used: set = set()
    for item in answer["objects"]:
        raw_id = "_".join(str(item["id"]).strip().split()) or "object"
        category = " ".join(str(item["category"]).strip().lower().split())
        counts[raw_id] = counts.get(raw_id, 0) + 1
        oid = raw_id
        if oid in used:
            k = 2
            while f"{raw_id}_{k}" in used:
                k += 1
            oid = f"{raw_id}_{k}"
            warnings.append(f"duplicate object id '{raw_id}' renamed to '{oid}'")
        used.add(oid)

        x1, y1, x2, y2 = _to_pixels(item["bbox_2d"], (width, height, width, height),
                                    coords, sent)
        x1, x2 = sorted((x1, x2))
        y1, y2 = sorted((y1, y2))
        bbox: Optional[Tuple[int, int, int, int]] = None
        if all(math.isfinite(c) for c in (x1, y1, x2, y2)) and x2 > 0 and y2 > 0 \
                and x1 < width - 1 and y1 < height - 1 and x2 - x1 >= 1 and y2 - y1 >= 1:
            bbox = (int(max(0, math.floor(x1))), int(max(0, math.floor(y1))),
                    int(min(width - 1, math.ceil(x2))), int(min(height - 1, math.ceil(y2))))
        else:
            warnings.append(f"'{oid}': box {list(item['bbox_2d'])} is outside the image or "
                            "empty; ignored")
        u, v = _to_pixels(item["point_2d"], (width, height), coords, sent)
        inside = (math.isfinite(u) and math.isfinite(v) and -tol_u <= u <= width - 1 + tol_u
                  and -tol_v <= v <= height - 1 + tol_v)
        if inside:
            u, v = min(max(u, 0.0), width - 1.0), min(max(v, 0.0), height - 1.0)
        elif bbox is not None:
            warnings.append(f"'{oid}': point {list(item['point_2d'])} is outside the image; "
                            "using its box centre")
            u, v = (bbox[0] + bbox[2]) / 2.0, (bbox[1] + bbox[3]) / 2.0
        else:
            warnings.append(f"'{oid}': point {list(item['point_2d'])} is outside the "
                            f"{width}x{height} image and it has no usable box; dropped")
            id_map.setdefault(raw_id, -1)
            continue

        fragility = float(item["fragility"])
        if not (math.isfinite(fragility) and 0.0 <= fragility <= 1.0):
            prior, source = config.fragility_prior(category)
            warnings.append(f"'{oid}': fragility {item['fragility']} is outside [0, 1]; "
                            f"rejected, using the {source} ({prior:g})")
            fragility = prior
        objects.append(_Located(id=oid, category=category, pixel=(u, v), bbox=bbox,
                                state=ObjectState.parse(item["state"]), fragility=fragility))
        id_map.setdefault(raw_id, len(objects) - 1)

    found = bool(answer["target_found"])
    reason = str(answer.get("reason") or "").strip()
    if not found:
        warnings.append("target not found: " + (reason or "no reason given"))
        return Interpretation(False, objects, None, None, warnings)
    tid = answer.get("target_id")
    tid = "_".join(str(tid).strip().split()) if tid is not None else ""
    if not tid or tid not in id_map:
        listed = ", ".join(sorted(k for k in id_map)) or "none"
        return Interpretation(True, objects, None, None, warnings,
                              fatal=f"target_id {tid or None!r} is not one of the reported "
                                    f"object ids ({listed})")
    if id_map[tid] < 0:
        return Interpretation(True, objects, None, None, warnings,
                              fatal=f"the target '{tid}' is located outside the image")
    if counts.get(tid, 1) > 1:
        warnings.append(f"target_id '{tid}' was given to several objects; using the first")
    if answer.get("target_affordance") is None:
        return Interpretation(True, objects, None, None, warnings,
                              fatal="target_found is true but target_affordance is null")
    return Interpretation(True, objects, id_map[tid], dict(answer["target_affordance"]),
                          warnings)
