"""Qwen3-VL perception through an OpenAI-compatible ``/v1/chat/completions`` (vLLM).

Standard library HTTP only (``urllib.request``), so the core needs no client package. One
:meth:`VlmBackend.perceive` call:

1. encodes the RGB frame as a JPEG data URL (see :func:`encode_image` for why JPEG);
2. sends it with the instruction and ``response_format`` = the JSON schema of
   :mod:`.schema` (vLLM structured outputs; ``guided_json`` was removed in vLLM 0.12);
3. validates the answer (JSON, schema, then semantic checks); an invalid answer gets ONE
   repair request that quotes the problem, then the call fails with a clear error;
4. turns each pointed-at object into a 3-D centre and size from depth (:mod:`.depth`).

Transport failures (timeouts, refused connections, HTTP 429 and 5xx) are retried with
exponential backoff (``backoff_base_s * 2**k`` capped at ``backoff_max_s``, optional seeded
jitter, ``Retry-After`` honoured up to the cap) for ``max_attempts`` tries, then the result
says ``perception unavailable: ...``. Other 4xx answers are not retried. ``perceive`` never
raises. Worst-case wall time of one exchange is about ``max_attempts * timeout_s`` plus the
backoff delays; a repair doubles it.

Semantic checks and what they do (the answer is from a model: trust nothing):

- target not found: ``target_found`` false with the model's reason in ``warnings``;
- ``target_id`` that names no reported object (an invented id), or a found target without
  an affordance, or a target located outside the image: fatal, so the one repair;
- duplicated object ids: later ones are renamed ``<id>_2``... with a warning (both are real
  detections); a target id that was duplicated resolves to the first, with a warning;
- fragility outside [0, 1] or not finite: the field is rejected with a warning and the
  category prior of the config is used. Not clamped: 1.7 says the model used another scale,
  and clamping would turn it into "maximally fragile" and slow every grasp near it;
- a point outside the image: the box centre is used when the box overlaps the image,
  otherwise the object is dropped with a warning (fatal for the target);
- no valid depth at an object: position None with a warning; for the target this is the
  result's ``error`` (it cannot be grasped without a position).
"""
from __future__ import annotations

import base64
import http.client
import json
import logging
import math
import os
import random
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import cv2
import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.config import reject_unknown
from agentic_grasp.core.perception import schema
from agentic_grasp.core.perception.backend import (PerceivedObject, PerceptionBackend,
                                                   PerceptionResult)
from agentic_grasp.core.perception.depth import DepthConfig, estimate_geometry
from agentic_grasp.core.perception.geometry import object_frame
from agentic_grasp.core.types import AffordanceDescriptor, AffordanceType, ObjectState

LOGGER = logging.getLogger(__name__)

BACKEND_NAME = "vlm"

#: Fragility of Table I objects by category word; the prior when the model's value is unusable.
DEFAULT_FRAGILITY_PRIORS: Dict[str, float] = {
    "cup": 0.3, "mug": 0.3, "apple": 0.1, "bottle": 0.1, "banana": 0.2, "bowl": 0.3,
    "cube": 0.0, "block": 0.0, "vase": 0.8, "wine glass": 0.9, "glass": 0.9,
    "screwdriver": 0.0, "smartphone": 0.5, "phone": 0.5, "ball": 0.0,
}


class VlmUnavailable(Exception):
    """The server could not be reached or kept failing after all retries."""


class VlmRequestError(Exception):
    """The server refused the request (4xx other than 429) or answered garbage."""


@dataclass
class VlmConfig:
    """Client settings (``vlm.*`` in config/perception.yaml); validated on construction."""

    url: str = field(default="http://127.0.0.1:8000/v1", metadata={
        "description": "Base URL of the OpenAI-compatible server (vLLM), ending in /v1"})
    model: str = field(default="qwen3-vl-8b-instruct-awq", metadata={
        "description": "Served model name; must equal --served-model-name of "
                       "docker/vllm/serve.sh"})
    api_key_env: str = field(default="VLLM_API_KEY", metadata={
        "description": "Environment variable holding the API key ('EMPTY' is sent when unset)"})
    timeout_s: float = field(default=30.0, metadata={
        "description": "Timeout of each HTTP request (s)"})
    max_attempts: int = field(default=3, metadata={
        "description": "Tries per request on timeouts, connection errors, HTTP 429 and 5xx"})
    backoff_base_s: float = field(default=0.5, metadata={
        "description": "Delay before retry k (k = 1, 2, ...) is backoff_base_s * 2^(k-1) (s)"})
    backoff_max_s: float = field(default=4.0, metadata={
        "description": "Cap on any retry delay, Retry-After included (s)"})
    backoff_jitter: float = field(default=0.0, metadata={
        "description": "Fraction of each retry delay drawn from a seeded RNG, in [0, 1)"})
    seed: int = field(default=0, metadata={
        "description": "Seed of the retry-jitter RNG"})
    max_tokens: int = field(default=1024, metadata={
        "description": "Maximum length of the model's answer (tokens)"})
    temperature: float = field(default=0.0, metadata={
        "description": "Sampling temperature (0 = greedy)"})
    image_max_side: int = field(default=640, metadata={
        "description": "Longer side of the image sent to the model (px)"})
    image_format: str = field(default="jpeg", metadata={
        "description": "Encoding of the image sent: jpeg (fast, small) or png"})
    jpeg_quality: int = field(default=90, metadata={
        "description": "JPEG quality of the image sent, 1..100"})
    coordinates: str = field(default="norm1000", metadata={
        "description": "Coordinates the model answers in: norm1000 (Qwen3-VL) or pixel"})
    use_env_proxy: bool = field(default=False, metadata={
        "description": "Honour http_proxy for the server (false: the server is local)"})
    default_fragility: float = field(default=0.5, metadata={
        "description": "Fragility used when the model's value is outside [0, 1] and no "
                       "category prior matches"})
    fragility_priors: Dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_FRAGILITY_PRIORS))
    depth: DepthConfig = field(default_factory=DepthConfig)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"vlm.url must be an http(s) URL, got {self.url!r}")
        self.url = self.url.rstrip("/")
        if not self.model:
            raise ConfigError("vlm.model must name the served model")
        if self.timeout_s <= 0 or self.max_attempts < 1:
            raise ConfigError("vlm.timeout_s must be > 0 and vlm.max_attempts >= 1")
        if self.backoff_base_s < 0 or self.backoff_max_s < self.backoff_base_s:
            raise ConfigError("vlm: need 0 <= backoff_base_s <= backoff_max_s")
        if not 0.0 <= self.backoff_jitter < 1.0:
            raise ConfigError("vlm.backoff_jitter must be in [0, 1)")
        if self.max_tokens < 64 or self.temperature < 0:
            raise ConfigError("vlm: max_tokens must be >= 64 and temperature >= 0")
        if self.image_max_side < 32:
            raise ConfigError("vlm.image_max_side must be >= 32")
        if self.image_format not in ("jpeg", "png"):
            raise ConfigError("vlm.image_format must be 'jpeg' or 'png'")
        if not 1 <= self.jpeg_quality <= 100:
            raise ConfigError("vlm.jpeg_quality must be in 1..100")
        if self.coordinates not in ("norm1000", "pixel"):
            raise ConfigError("vlm.coordinates must be 'norm1000' or 'pixel'")
        if self.coordinates == "pixel" and self.image_max_side > schema.COORD_MAX + 1:
            # The schema bounds every coordinate to 0..COORD_MAX for guided decoding.
            raise ConfigError(f"vlm.image_max_side must be <= {schema.COORD_MAX + 1} with "
                              "coordinates 'pixel' (the schema bounds coordinates to "
                              f"0..{schema.COORD_MAX})")
        if not 0.0 <= self.default_fragility <= 1.0:
            raise ConfigError("vlm.default_fragility must be in [0, 1]")
        priors = {}
        for key, value in dict(self.fragility_priors).items():
            value = float(value)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"vlm.fragility_priors.{key} must be in [0, 1]")
            priors[str(key).replace("_", " ").lower()] = value
        self.fragility_priors = priors
        if isinstance(self.depth, Mapping):
            self.depth = DepthConfig.from_params(self.depth)

    def retry_delay_s(self, retry: int) -> float:
        """Delay before retry ``retry + 1`` (0-based), before jitter and Retry-After (s)."""
        return min(self.backoff_max_s, self.backoff_base_s * (2.0 ** retry))

    def call_budget_s(self) -> float:
        """Worst-case wall time of one VLM perception (both exchanges of a repair), jitter
        included; what a client of the perception service should wait at least.

        Each exchange is ``max_attempts`` requests of at most ``timeout_s`` with the backoff
        delays between them (ChatTransport); an invalid first answer adds one more exchange.
        """
        delays = sum(self.retry_delay_s(k) for k in range(self.max_attempts - 1))
        exchange = self.max_attempts * self.timeout_s + delays * (1.0 + self.backoff_jitter)
        return 2.0 * exchange

    @classmethod
    def from_params(cls, params: Optional[Mapping[str, Any]],
                    depth: Optional[Mapping[str, Any]] = None) -> "VlmConfig":
        """Build from the ``vlm:`` mapping (and the ``depth:`` one); typos are errors."""
        params = dict(params or {})
        reject_unknown("vlm", params, {f.name for f in fields(cls)} - {"depth"})
        kwargs: Dict[str, Any] = {}
        casts = {"timeout_s": float, "max_attempts": int, "backoff_base_s": float,
                 "backoff_max_s": float, "backoff_jitter": float, "seed": int,
                 "max_tokens": int, "temperature": float, "image_max_side": int,
                 "jpeg_quality": int, "use_env_proxy": _to_bool, "default_fragility": float}
        for key, value in params.items():
            kwargs[key] = casts[key](value) if key in casts else value
        if "fragility_priors" in kwargs:
            kwargs["fragility_priors"] = dict(kwargs["fragility_priors"] or {})
        kwargs["depth"] = DepthConfig.from_params(depth)
        return cls(**kwargs)

    def fragility_prior(self, category: str) -> Tuple[float, str]:
        """(value, source): the prior for a category, by exact name then by word."""
        cat = category.lower().strip()
        if cat in self.fragility_priors:
            return self.fragility_priors[cat], f"prior for '{cat}'"
        for key in sorted(self.fragility_priors, key=len, reverse=True):
            if key in cat:
                return self.fragility_priors[key], f"prior for '{key}'"
        return self.default_fragility, "default prior"


# --------------------------------------------------------------------------- transport


@dataclass
class ChatReply:
    """The useful part of one chat-completions answer."""

    content: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class CallStats:
    """What one perception call cost: HTTP requests (retries included) and server tokens."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatTransport:
    """POSTs chat-completions payloads with bounded, backed-off retries.

    Holds no per-call state (costs go into the caller's :class:`CallStats`), so one
    transport can serve concurrent perception calls. ``sleep`` is injectable so tests see
    the backoff delays without waiting for them.
    """

    def __init__(self, config: VlmConfig, *, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        self._sleep = sleep
        self._rng = random.Random(config.seed)
        self._lock = threading.Lock()
        handlers = [] if config.use_env_proxy else [urllib.request.ProxyHandler({})]
        self._opener = urllib.request.build_opener(*handlers)

    @property
    def endpoint(self) -> str:
        return f"{self.config.url}/chat/completions"

    def _headers(self) -> Dict[str, str]:
        # Read per request so a rotated key is picked up; vLLM accepts any key when it was
        # started without --api-key, hence "EMPTY" (the OpenAI client's convention).
        key = os.environ.get(self.config.api_key_env) or "EMPTY"
        return {"Content-Type": "application/json", "Accept": "application/json",
                "Authorization": f"Bearer {key}"}

    def _backoff(self, attempt: int, retry_after: Optional[float]) -> float:
        cfg = self.config
        delay = cfg.retry_delay_s(attempt)
        if cfg.backoff_jitter > 0.0:
            with self._lock:
                delay *= 1.0 + cfg.backoff_jitter * self._rng.uniform(-1.0, 1.0)
        if retry_after is not None:
            delay = max(delay, min(cfg.backoff_max_s, retry_after))
        return max(0.0, delay)

    def post(self, payload: Mapping[str, Any], stats: Optional[CallStats] = None) -> ChatReply:
        """One chat completion; raises VlmUnavailable or VlmRequestError when it fails.

        Every request made and the server's token usage are added to ``stats``.
        """
        stats = stats if stats is not None else CallStats()
        body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
        last = "no attempt made"
        retry_after: Optional[float] = None
        for attempt in range(self.config.max_attempts):
            if attempt > 0:
                self._sleep(self._backoff(attempt - 1, retry_after))
            retry_after = None
            stats.requests += 1
            request = urllib.request.Request(self.endpoint, data=body, method="POST",
                                             headers=self._headers())
            try:
                with self._opener.open(request, timeout=self.config.timeout_s) as response:
                    raw = response.read()
                reply = self.parse_reply(raw)
                stats.prompt_tokens += reply.prompt_tokens
                stats.completion_tokens += reply.completion_tokens
                return reply
            except urllib.error.HTTPError as exc:
                detail = _error_message(exc)
                if exc.code == 429 or 500 <= exc.code <= 599:
                    last = f"HTTP {exc.code}: {detail}"
                    retry_after = _retry_after(exc.headers.get("Retry-After")
                                               if exc.headers else None)
                    LOGGER.warning("VLM attempt %d/%d failed: %s", attempt + 1,
                                   self.config.max_attempts, last)
                    continue
                raise VlmRequestError(f"HTTP {exc.code}: {detail}") from None
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"{type(reason).__name__}: {reason}"
                if isinstance(reason, TimeoutError) or isinstance(exc, TimeoutError):
                    last = f"timed out after {self.config.timeout_s:g} s"
                LOGGER.warning("VLM attempt %d/%d failed: %s", attempt + 1,
                               self.config.max_attempts, last)
                continue
        raise VlmUnavailable(f"{self.endpoint} failed {self.config.max_attempts} time(s); "
                             f"last: {last}")

    @staticmethod
    def parse_reply(raw: bytes) -> ChatReply:
        """The assistant content and usage of a chat-completions body (VlmRequestError)."""
        try:
            envelope = json.loads(raw.decode("utf-8"))
            choice = envelope["choices"][0]
            content = choice["message"]["content"]
            finish = str(choice.get("finish_reason") or "")
        except (ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError) as exc:
            raise VlmRequestError(f"invalid server response ({type(exc).__name__}: "
                                  f"{str(exc)[:80]})") from None
        usage = envelope.get("usage") or {}
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        return ChatReply(content=content if isinstance(content, str) else "",
                         finish_reason=finish, prompt_tokens=prompt,
                         completion_tokens=completion)


def _to_bool(value: Any) -> bool:
    """A boolean parameter that may arrive as a string ("false" must not become True)."""
    if isinstance(value, str):
        if value.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if value.strip().lower() in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"not a boolean: {value!r}")
    return bool(value)


def _error_message(exc: urllib.error.HTTPError) -> str:
    """The server's error message (vLLM: ``message`` or ``error.message``), shortened."""
    try:
        data = json.loads(exc.read().decode("utf-8", "replace"))
        msg = data.get("message") or (data.get("error") or {}).get("message") or ""
    except (ValueError, AttributeError, OSError):
        msg = ""
    return (str(msg) or str(exc.reason or "error"))[:300]


def _retry_after(value: Optional[str]) -> Optional[float]:
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


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


# --------------------------------------------------------------------------- backend


class VlmBackend(PerceptionBackend):
    """Perception by Qwen3-VL served with vLLM (see the module docstring)."""

    name = BACKEND_NAME

    def __init__(self, config: Optional[VlmConfig] = None, *,
                 transport: Optional[ChatTransport] = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.config = config or VlmConfig()
        self.transport = transport or ChatTransport(self.config)
        self._clock = clock
        self._response_format = schema.response_format()

    # The steps of perceive() are public so bench.py can time them separately.

    def encode(self, rgb: np.ndarray) -> EncodedImage:
        cfg = self.config
        return encode_image(rgb, cfg.image_max_side, cfg.image_format, cfg.jpeg_quality)

    def build_messages(self, image: EncodedImage, instruction: str) -> List[Dict[str, Any]]:
        text = schema.user_prompt(instruction, image.width, image.height,
                                  self.config.coordinates)
        return [
            {"role": "system", "content": schema.SYSTEM_PROMPT},
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": image.data_url}},
                {"type": "text", "text": text},
            ]},
        ]

    def build_payload(self, messages: List[Dict[str, Any]]) -> Dict[str, Any]:
        cfg = self.config
        return {"model": cfg.model, "messages": messages, "max_tokens": cfg.max_tokens,
                "temperature": cfg.temperature, "response_format": self._response_format}

    def check(self, content: str, finish_reason: str, width: int, height: int,
              image: EncodedImage) -> Tuple[Optional[Interpretation], str]:
        """(interpretation, problem): parse, schema-check and semantic-check one answer."""
        answer, problem = schema.parse_answer(content)
        if problem:
            if finish_reason == "length":
                problem += (f" (the answer was cut at max_tokens={self.config.max_tokens}; "
                            "be more concise)")
            return None, problem
        interp = interpret_answer(answer, width, height, image, self.config)
        if interp.fatal:
            return interp, interp.fatal
        return interp, ""

    def locate(self, interp: Interpretation, depth: np.ndarray, camera: Camera,
               rgb_shape: Tuple[int, int]) -> Tuple[List[PerceivedObject],
                                                    Optional[PerceivedObject], List[str], str]:
        """3-D geometry for every located object: (objects, target, warnings, error).

        Each object's geometry comes from depth only (:func:`estimate_geometry`); a problem
        with one object (no depth in its box, a point off it, several objects in its box,
        NaN depth, a box outside the image) is a warning on that object and in the result,
        and the other objects are still located. Used by the real VLM and by vlm_sim.
        """
        warnings: List[str] = []
        error = ""
        sx = camera.width / float(rgb_shape[1])
        sy = camera.height / float(rgb_shape[0])
        perceived: List[PerceivedObject] = []
        target: Optional[PerceivedObject] = None
        for index, loc in enumerate(interp.objects):
            pixel_d = (loc.pixel[0] * sx, loc.pixel[1] * sy)
            bbox_d = (None if loc.bbox is None else
                      (loc.bbox[0] * sx, loc.bbox[1] * sy, loc.bbox[2] * sx, loc.bbox[3] * sy))
            geom = estimate_geometry(depth, camera, pixel_d, bbox_d, self.config.depth)
            position = size = None
            confidence = 0.0
            extra: Dict[str, Any] = {}
            own: List[str] = []
            if geom is None:
                msg = (f"no valid depth at '{loc.id}' (pixel {loc.pixel[0]:.0f}, "
                       f"{loc.pixel[1]:.0f}) nor in its box")
                warnings.append(msg)
                own.append(msg)
                if index == interp.target_index:
                    error = msg.replace(f"'{loc.id}'", f"the target '{loc.id}'")
            else:
                position, confidence = geom.position, geom.support
                size, yaw = object_frame(geom)
                extra = dict(shape=geom.shape, yaw=yaw, upright=geom.upright,
                             yaw_known=geom.yaw_defined or geom.handle_yaw is not None
                             or not geom.upright,
                             handle_yaw=geom.handle_yaw, rim_z=geom.rim_z,
                             interior_depth=geom.interior_depth)
                own.extend(geom.notes)
                warnings.extend(f"'{loc.id}': {note}" for note in geom.notes)
            affordance = None
            if index == interp.target_index and interp.affordance is not None:
                affordance = AffordanceDescriptor(
                    type=AffordanceType.parse(interp.affordance["type"]),
                    material=interp.affordance["material"], fragility=loc.fragility,
                    region=str(interp.affordance["region"]).strip().lower() or "body")
            obj = PerceivedObject(id=loc.id, category=loc.category, pixel=loc.pixel,
                                  bbox=loc.bbox, position=position, size=size,
                                  state=loc.state, fragility=loc.fragility,
                                  affordance=affordance, confidence=confidence,
                                  warnings=own, **extra)
            perceived.append(obj)
            if index == interp.target_index:
                target = obj
        return perceived, target, warnings, error

    def perceive(self, rgb: np.ndarray, depth: np.ndarray, camera: Camera,
                 instruction: str) -> PerceptionResult:
        start = self._clock()
        stats = CallStats()
        raw = ""
        try:
            problem = _check_inputs(rgb, depth, camera)
            if problem:
                return PerceptionResult.failure(BACKEND_NAME, problem,
                                                latency_s=self._clock() - start)
            height, width = rgb.shape[:2]
            image = self.encode(rgb)
            messages = self.build_messages(image, instruction)
            reply = self.transport.post(self.build_payload(messages), stats)
            raw = reply.content
            interp, problem = self.check(reply.content, reply.finish_reason, width, height,
                                         image)
            if problem:
                LOGGER.warning("VLM answer invalid (%s); sending one repair request", problem)
                messages = messages + [
                    {"role": "assistant", "content": reply.content},
                    {"role": "user", "content": schema.repair_prompt(problem)},
                ]
                reply = self.transport.post(self.build_payload(messages), stats)
                raw = reply.content
                interp, problem = self.check(reply.content, reply.finish_reason, width,
                                             height, image)
                if problem:
                    return self._fail(f"invalid VLM answer after one repair: {problem}",
                                      start, raw, stats)
            assert interp is not None
            objects, target, geo_warnings, error = self.locate(interp, depth, camera,
                                                               (height, width))
            return PerceptionResult(
                backend=BACKEND_NAME, target_found=interp.target_found, target=target,
                objects=objects, warnings=interp.warnings + geo_warnings, error=error,
                latency_s=self._clock() - start, prompt_tokens=stats.prompt_tokens,
                completion_tokens=stats.completion_tokens, requests=stats.requests, raw=raw)
        except VlmUnavailable as exc:
            return self._fail(f"perception unavailable: {exc}", start, raw, stats)
        except VlmRequestError as exc:
            return self._fail(f"perception request rejected: {exc}", start, raw, stats)
        except Exception as exc:  # noqa: BLE001 - perceive() must never raise (contract)
            LOGGER.exception("VLM perception failed unexpectedly")
            return self._fail(f"perception failed: {type(exc).__name__}: {exc}", start, raw,
                              stats)

    def _fail(self, error: str, start: float, raw: str, stats: CallStats) -> PerceptionResult:
        LOGGER.error("%s", error)
        return PerceptionResult.failure(
            BACKEND_NAME, error, latency_s=self._clock() - start, requests=stats.requests,
            prompt_tokens=stats.prompt_tokens, completion_tokens=stats.completion_tokens,
            raw=raw)


def _check_inputs(rgb: np.ndarray, depth: np.ndarray, camera: Camera) -> str:
    if not isinstance(rgb, np.ndarray) or rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.size == 0:
        return f"bad input: rgb must be a non-empty HxWx3 array, got {getattr(rgb, 'shape', None)}"
    if not isinstance(depth, np.ndarray) or depth.ndim != 2:
        return f"bad input: depth must be an HxW array, got {getattr(depth, 'shape', None)}"
    if depth.shape != (camera.height, camera.width):
        return (f"bad input: depth is {depth.shape[1]}x{depth.shape[0]} but the camera is "
                f"{camera.width}x{camera.height}")
    return ""
