"""Qwen3-VL perception through an OpenAI-compatible ``/v1/chat/completions`` (vLLM).

Standard library HTTP only (``urllib.request``), so the core needs no client package. One
:meth:`VlmBackend.perceive` call:

1. encodes the RGB frame as a JPEG data URL (see :func:`encode_image` for why JPEG);
2. sends it with the instruction and ``response_format`` = the JSON schema of
   :mod:`.schema` (vLLM structured outputs; ``guided_json`` was removed in vLLM 0.12);
3. validates the answer (JSON, schema, then semantic checks); an invalid answer gets ONE
   repair request that quotes the problem, then the call fails with a clear error;
4. turns each pointed-at object into a 3-D centre and size from depth (:mod:`..depth`).

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
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.perception.vlm import schema
from agentic_grasp.core.perception.backend import (PerceivedObject, PerceptionBackend,
                                                   PerceptionResult)
from agentic_grasp.core.perception.depth import estimate_geometry
from agentic_grasp.core.perception.geometry import object_frame
from agentic_grasp.core.types import AffordanceDescriptor, AffordanceType
from agentic_grasp.core.perception.vlm.answer import (EncodedImage, Interpretation, encode_image,
                                                      interpret_answer)
from agentic_grasp.core.perception.vlm.config import VlmConfig


LOGGER = logging.getLogger(__name__)

BACKEND_NAME = "vlm"


class VlmUnavailable(Exception):
    """The server could not be reached or kept failing after all retries."""


class VlmRequestError(Exception):
    """The server refused the request (4xx other than 429) or answered garbage."""


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
        self._built: Optional[urllib.request.OpenerDirector] = None

    @property
    def _opener(self) -> urllib.request.OpenerDirector:
        # Built on the first request: vlm_sim makes a client per benchmark trial and never
        # posts (build_opener's ten handlers were 2 % of a vlm_sim trial's CPU).
        if self._built is None:
            handlers = [] if self.config.use_env_proxy else [urllib.request.ProxyHandler({})]
            self._built = urllib.request.build_opener(*handlers)
        return self._built

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
        self._response_format: Optional[Dict[str, Any]] = None    # built_payload's, lazily

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
        if self._response_format is None:       # a deep copy of the schema: only if sent
            self._response_format = schema.response_format()
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
