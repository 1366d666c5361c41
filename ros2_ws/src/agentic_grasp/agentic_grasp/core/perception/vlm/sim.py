"""A simulated Qwen3-VL: the answer a VLM would give, from what the camera sees.

``backend="vlm_sim"`` stands in for the real VLM in the benchmark and the node graph when
no GPU is at hand. It writes the same JSON answer (:mod:`.schema`) a real Qwen3-VL writes
and sends it through the same parsing, validation (:func:`.client.interpret_answer`)
and depth geometry (:meth:`.client.VlmBackend.locate`) as a real answer, so every
metre downstream comes from the depth image, exactly as with the real model.

What it sees (the "camera"): a per-pixel object-id mask of the frame (the renderer's
instance image, a fair stand-in for the segmentation a VLM performs implicitly) and, per
mask id, the labels a VLM would *name*: category, state, fragility and the affordance. It
never reads a pose, a size or a yaw. Per visible object:

- point_2d: the centroid of the object's visible pixels (snapped to the nearest visible
  pixel when the centroid falls off the object, e.g. inside a ring), plus Gaussian
  ``point_std`` on each axis, in Qwen3-VL's 0..1000 units;
- bbox_2d: the visible pixels' bounding box, each edge plus Gaussian ``box_std``;
- missed objects: an object whose visible area is below ``miss_full_area_px`` is left out
  with a probability rising linearly to ``miss_prob_small`` at ``miss_min_area_px`` and
  below (small objects and heavily occluded ones both show few pixels);
- category confusion (``category_confusion_prob``, partners in ``confusion_map``),
  affordance-type confusion (``affordance_confusion_prob``, uniform over the other 7
  types), a wrong state (``state_error_prob``) and fragility noise (``fragility_std``,
  clipped to [0, 1]).

The target is the object the instruction names (:func:`..oracle.resolve_targets` over the
labels of the objects reported): that is language understanding, which a VLM does.

Every draw comes from one numpy generator seeded from (seed, call index), so the k-th call
of a trial with a given seed gives the same answer in every configuration. The default
rates and where they come from are in config/perception.yaml (``vlm_sim:``).

Cost model (:class:`.config.VlmLatencyModel`): a real call costs ``prefill_s`` plus the answer's
completion tokens at ``decode_tok_per_s`` (the paper's 155.5 tok/s); the answer's tokens are
counted with :func:`count_tokens` (Qwen's tokenizer splits numbers into single digits).
"""
from __future__ import annotations

import copy
import json
import logging
import math
import re
import struct
import time
from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.perception.vlm import schema
from agentic_grasp.core.perception.backend import PerceptionBackend, PerceptionResult
from agentic_grasp.core.perception.params import load_params
from agentic_grasp.core.instructions import (ALL_WORDS, find, is_sort, resolve_targets,
                                             words)
from agentic_grasp.core.perception.vlm.answer import EncodedImage, Interpretation
from agentic_grasp.core.perception.vlm.client import VlmBackend, _check_inputs
from agentic_grasp.core.perception.vlm.config import VlmConfig, VlmSimConfig
from agentic_grasp.core.perception.vlm.schema import vlm_id, vlm_words
from agentic_grasp.core.render.views import render_view
from agentic_grasp.core.types import AffordanceType, ObjectInstance, ObjectState

LOGGER = logging.getLogger(__name__)

BACKEND_NAME = "vlm_sim"

#: What the simulated VLM is given per frame: the object-id mask (H x W int, -1 table,
#: -2 background, k >= 0 = labels[k]) and the labels. Only the labels' id, category, name,
#: state, fragility and affordance are read.
Segmentation = Tuple[np.ndarray, Sequence[ObjectInstance]]
SegmentationProvider = Callable[[Camera], Segmentation]

_REASON_RE = re.compile(r"[^A-Za-z0-9 .,'-]+")
#: Qwen2/Qwen3 tokenizers: every digit is its own token; a word or a punctuation mark
#: is about one token (an approximation for the answer's length, good to ~20 %).
_TOKEN_RE = re.compile(r"\d|[A-Za-z]+|[^\sA-Za-z\d]")


def count_tokens(text: str) -> int:
    """Approximate completion tokens of a JSON answer (see ``_TOKEN_RE``)."""
    return len(_TOKEN_RE.findall(text))


@dataclass
class _Seen:
    """One object as the camera shows it: its label and its visible pixels' statistics."""

    label: ObjectInstance
    area: int
    centre: Tuple[float, float]           # (u, v) on the object
    box: Tuple[float, float, float, float]


def visible_objects(instance: np.ndarray, labels: Sequence[ObjectInstance]) -> List[_Seen]:
    """Per labelled object with visible pixels: area, on-object centre point, pixel box."""
    vs, us = np.nonzero(instance >= 0)
    if vs.size == 0:
        return []
    ids = instance[vs, us]
    order = np.argsort(ids, kind="stable")
    ids, us, vs = ids[order], us[order], vs[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], ids.size]
    seen: List[_Seen] = []
    for a, b in zip(starts, ends):
        k = int(ids[a])
        if k >= len(labels):
            continue
        u, v = us[a:b].astype(float), vs[a:b].astype(float)
        cu, cv = float(u.mean()), float(v.mean())
        ru, rv = int(round(cu)), int(round(cv))
        if not (0 <= rv < instance.shape[0] and 0 <= ru < instance.shape[1]
                and instance[rv, ru] == k):
            j = int(np.argmin((u - cu) ** 2 + (v - cv) ** 2))   # nearest visible pixel
            cu, cv = float(u[j]), float(v[j])
        seen.append(_Seen(labels[k], int(b - a), (cu, cv),
                          (float(u.min()), float(v.min()), float(u.max()) + 1.0,
                           float(v.max()) + 1.0)))
    return seen


#: Recent perceive() results by everything they are computed from (VlmSimBackend._memo_key):
#: the configurations of a sweep see trial k's scene with the same seed, so its first call
#: is the same computation in each of them (319 calls of a 192-trial slice were 68
#: distinct). The answer's draws come from a generator seeded by (seed, call) alone, so a
#: kept result is exactly the one a new computation gives; each caller gets a copy.
#: About 2.5 MB a frame (the mask and depth bytes of the key).
_PERCEIVED: "OrderedDict[tuple, Tuple[Tuple[bytes, bytes], Tuple[PerceptionResult, Any]]]" \
    = OrderedDict()
_PERCEIVED_SIZE = 8


def _exact(value: Any) -> Any:
    """A hashable value equal for two inputs only when they are the same bits."""
    if isinstance(value, np.ndarray):
        return (value.shape, value.dtype.str, value.tobytes())
    if isinstance(value, float):
        return struct.pack("<d", value)            # -0.0 and 0.0 apart
    if isinstance(value, (tuple, list)):
        return (type(value).__name__,) + tuple(_exact(v) for v in value)
    return value


def _fields_key(obj: Any) -> tuple:
    """Every field of a dataclass instance, exactly (:func:`_exact`)."""
    return (type(obj).__name__,) + tuple(_exact(getattr(obj, f.name)) for f in fields(obj))


class VlmSimBackend(PerceptionBackend):
    """The simulated VLM (module docstring); ``segmentation(camera)`` gives mask + labels."""

    name = BACKEND_NAME

    def __init__(self, segmentation: SegmentationProvider,
                 config: Optional[VlmSimConfig] = None,
                 client_config: Optional[VlmConfig] = None, seed: Optional[int] = None):
        self.config = config or VlmSimConfig()
        self.client = VlmBackend(client_config or VlmConfig())
        self._segmentation = segmentation
        self.seed = self.config.seed if seed is None else int(seed)
        self.calls = 0
        #: The checked form of the last answer (the re-perception policy reuses it).
        self.last_interpretation: Optional[Interpretation] = None

    def reseed(self, seed: int) -> None:
        """Start a new trial: seed and call counter (benchmarks seed each trial)."""
        self.seed, self.calls = int(seed), 0

    # ---- the answer -------------------------------------------------------------------------
    def answer(self, instance: np.ndarray, labels: Sequence[ObjectInstance],
               instruction: str, rng: np.random.Generator) -> Dict[str, Any]:
        """The JSON answer (a dict in :data:`.schema.PERCEPTION_SCHEMA`) for one frame."""
        cfg = self.config
        height, width = instance.shape[:2]
        seen = visible_objects(instance, labels)
        reported: List[_Seen] = []
        for item in seen:
            if rng.random() >= self._miss_probability(item.area):
                reported.append(item)
        reported = reported[:schema.MAX_OBJECTS]
        ids: Dict[str, str] = {}
        objects = []
        sx, sy = 1000.0 / width, 1000.0 / height
        for item in reported:
            lab = item.label
            oid = vlm_id(lab.id)
            k = 2
            while oid in ids.values():
                oid = vlm_id(f"{vlm_id(lab.id)[:28]}_{k}")
                k += 1
            ids[lab.id] = oid
            pu = _norm(item.centre[0] * sx + rng.normal(0.0, cfg.point_std)
                       if cfg.point_std > 0 else item.centre[0] * sx)
            pv = _norm(item.centre[1] * sy + rng.normal(0.0, cfg.point_std)
                       if cfg.point_std > 0 else item.centre[1] * sy)
            edges = [item.box[0] * sx, item.box[1] * sy, item.box[2] * sx, item.box[3] * sy]
            if cfg.box_std > 0:
                edges = [e + float(rng.normal(0.0, cfg.box_std)) for e in edges]
            x1, x2 = sorted((_norm(edges[0]), _norm(edges[2])))
            y1, y2 = sorted((_norm(edges[1]), _norm(edges[3])))
            objects.append({"id": oid, "category": self._category(lab, rng),
                            "point_2d": [pu, pv], "bbox_2d": [x1, y1, x2, y2],
                            "state": self._state(lab.state, rng),
                            "fragility": self._fragility(lab.fragility, rng)})
        target_id, reason = self._referent(instruction, labels, reported)
        if target_id is None:
            return {"target_found": False, "reason": reason, "target_id": None,
                    "target_affordance": None, "objects": objects}
        target = next(r.label for r in reported if r.label.id == target_id)
        aff = target.affordance
        a_type = aff.type if aff is not None else AffordanceType.GRASPABLE_BODY
        if cfg.affordance_confusion_prob > 0 and rng.random() < cfg.affordance_confusion_prob:
            others = [t for t in AffordanceType if t != a_type]
            a_type = others[int(rng.integers(len(others)))]
        material = aff.material if aff is not None else "other"
        if material not in schema.MATERIALS:
            material = "other"
        region = vlm_words(aff.region if aff is not None else "body")
        return {"target_found": True, "reason": "", "target_id": ids[target.id],
                "target_affordance": {"type": a_type.value, "material": material,
                                      "region": region},
                "objects": objects}

    @staticmethod
    def _referent(instruction: str, labels: Sequence[ObjectInstance],
                  reported: Sequence[_Seen]) -> Tuple[Optional[str], str]:
        """(target id, reason when none): the object the instruction asks for, if reported.

        Reading the instruction is language understanding, so the referent is resolved over
        every label of the scene (hidden ones included): "the tennis ball behind the box"
        refers to the ball, and when the ball is hidden the answer is "not found", not the
        box. Whole-scene instructions ("clear the table", "sort by fragility") take the
        first object reported in the instruction's order.
        """
        shown = {r.label.id for r in reported}
        named = resolve_targets(instruction, list(labels))
        text = words(instruction)
        whole = any(find(p, text) >= 0 for p in ALL_WORDS) or is_sort(text)
        if whole:
            for oid in named:
                if oid in shown:
                    return oid, ""
            return None, "no object is visible on the table"
        if not named:
            return None, "no object in the image matches the instruction"
        if named[0] not in shown:
            return None, "the target is not visible, hidden or too small to make out"
        return named[0], ""

    def _miss_probability(self, area: int) -> float:
        cfg = self.config
        if cfg.miss_prob_small <= 0.0 or area >= cfg.miss_full_area_px:
            return 0.0
        if area <= cfg.miss_min_area_px or cfg.miss_full_area_px <= cfg.miss_min_area_px:
            return cfg.miss_prob_small
        frac = (cfg.miss_full_area_px - area) / (cfg.miss_full_area_px - cfg.miss_min_area_px)
        return cfg.miss_prob_small * frac

    def _category(self, label: ObjectInstance, rng: np.random.Generator) -> str:
        category = vlm_words(label.category.replace("_", " "))
        partners = self.config.confusion_map.get(category)
        if partners and self.config.category_confusion_prob > 0 \
                and rng.random() < self.config.category_confusion_prob:
            return partners[int(rng.integers(len(partners)))]
        return category

    def _state(self, state: ObjectState, rng: np.random.Generator) -> str:
        if self.config.state_error_prob > 0 and rng.random() < self.config.state_error_prob:
            others = [s for s in ObjectState if s != state]
            return others[int(rng.integers(len(others)))].value
        return state.value

    def _fragility(self, value: float, rng: np.random.Generator) -> float:
        if self.config.fragility_std > 0:
            value = value + float(rng.normal(0.0, self.config.fragility_std))
        return round(float(min(1.0, max(0.0, value))), 2)

    # ---- the call ---------------------------------------------------------------------------
    def prompt_tokens(self, width: int, height: int) -> int:
        """Image tokens of the frame as sent (longer side at most image_max_side) + text."""
        scale = max(1.0, max(width, height) / float(self.client.config.image_max_side))
        px = self.config.image_token_px
        return (math.ceil(width / scale / px) * math.ceil(height / scale / px)
                + self.config.prompt_text_tokens)

    def perceive(self, rgb: np.ndarray, depth: np.ndarray, camera: Camera,
                 instruction: str) -> PerceptionResult:
        start = time.perf_counter()
        try:
            problem = _check_inputs(rgb, depth, camera)
            if problem:
                return PerceptionResult.failure(BACKEND_NAME, problem,
                                                latency_s=time.perf_counter() - start)
            instance, labels = self._segmentation(camera)
            if instance.shape[:2] != rgb.shape[:2]:
                return PerceptionResult.failure(
                    BACKEND_NAME, f"segmentation is {instance.shape[1]}x{instance.shape[0]} "
                    f"but the image is {rgb.shape[1]}x{rgb.shape[0]}",
                    latency_s=time.perf_counter() - start)
            key = self._memo_key(instance, labels, instruction, rgb, depth, camera)
            rng = np.random.default_rng([self.seed, self.calls, 0x5653])
            self.calls += 1
            pixels = (instance.tobytes(), depth.tobytes()) if key is not None else None
            kept = _PERCEIVED.get(key) if key is not None else None
            if kept is not None and kept[0] == pixels:
                _PERCEIVED.move_to_end(key)
                result, self.last_interpretation = copy.deepcopy(kept[1])
                result.latency_s = time.perf_counter() - start
                return result
            answer = self.answer(instance, labels, instruction, rng)
            raw = json.dumps(answer, separators=(",", ":"))
            interp, problem = check_raw(self.client, raw, rgb.shape[:2])
            self.last_interpretation = interp
            if interp is None:
                result = PerceptionResult.failure(BACKEND_NAME,
                                                  f"invalid VLM answer: {problem}", raw=raw)
            else:
                result = locate_answer(self.client, BACKEND_NAME, interp, raw, rgb.shape[:2],
                                       depth, camera)
            result.latency_s = time.perf_counter() - start
            result.requests = 1
            result.prompt_tokens = self.prompt_tokens(rgb.shape[1], rgb.shape[0])
            result.completion_tokens = count_tokens(raw)
            if key is not None:
                _PERCEIVED[key] = (pixels, copy.deepcopy((result, interp)))
                if len(_PERCEIVED) > _PERCEIVED_SIZE:
                    _PERCEIVED.popitem(last=False)
            return result
        except Exception as exc:  # noqa: BLE001 - perceive() must never raise (contract)
            LOGGER.exception("vlm_sim perception failed")
            return PerceptionResult.failure(
                BACKEND_NAME, f"perception failed: {type(exc).__name__}: {exc}",
                latency_s=time.perf_counter() - start)

    def _memo_key(self, instance: np.ndarray, labels: Sequence[ObjectInstance],
                  instruction: str, rgb: np.ndarray, depth: np.ndarray, camera: Camera
                  ) -> Optional[tuple]:
        """With the mask's and the depth's bytes (compared, not hashed: a hash of 2.4 MB
        costs more than the comparison), everything perceive() reads, exactly (module
        _PERCEIVED): the seed and call number its draws come from, both configurations,
        every field of every label, the camera, the arrays' shapes and types and the
        image's shape (not its colours, which the simulated VLM does not look at). None
        when a field is unhashable."""
        try:
            key = (self.seed, self.calls, instruction, repr(self.config),
                   repr(self.client.config), rgb.shape, instance.shape, instance.dtype.str,
                   depth.shape, depth.dtype.str, _fields_key(camera),
                   tuple(_fields_key(o) for o in labels))
            hash(key)
        except TypeError:
            return None
        return key

    def interpret(self, raw: str, image_shape: Tuple[int, int], depth: np.ndarray,
                  camera: Camera) -> PerceptionResult:
        """A raw answer through the real client's checks and depth geometry (no tokens)."""
        return interpret_raw(self.client, BACKEND_NAME, raw, image_shape, depth, camera)


def interpret_raw(client: VlmBackend, backend: str, raw: str, image_shape: Tuple[int, int],
                  depth: np.ndarray, camera: Camera) -> PerceptionResult:
    """Parse, validate and locate one raw VLM answer with ``client`` (vlm or vlm_sim).

    Token counts and requests are left 0 (no model call is made here).
    """
    interp, problem = check_raw(client, raw, image_shape)
    if interp is None:
        return PerceptionResult.failure(backend, f"invalid VLM answer: {problem}", raw=raw)
    return locate_answer(client, backend, interp, raw, image_shape, depth, camera)


def check_raw(client: VlmBackend, raw: str, image_shape: Tuple[int, int]
              ) -> Tuple[Optional[Interpretation], str]:
    """(interpretation, problem) of a raw answer: the real client's parse and checks."""
    height, width = image_shape
    scale = max(1.0, max(width, height) / float(client.config.image_max_side))
    sent = EncodedImage(data_url="", width=int(round(width / scale)),
                        height=int(round(height / scale)), scale=scale)
    interp, problem = client.check(raw, "stop", width, height, sent)
    return (None, problem) if problem else (interp, "")


def locate_answer(client: VlmBackend, backend: str, interp: Interpretation, raw: str,
                  image_shape: Tuple[int, int], depth: np.ndarray, camera: Camera
                  ) -> PerceptionResult:
    """A checked answer located in ``depth`` by the real client's depth geometry.

    The re-perception policy calls this with a kept answer and a fresh depth image.
    """
    objects, target, warnings, error = client.locate(interp, depth, camera, image_shape)
    return PerceptionResult(backend=backend, target_found=interp.target_found, target=target,
                            objects=objects, warnings=list(interp.warnings) + warnings,
                            error=error, raw=raw)


def bench_calls(n: int = 20, perfect: bool = False) -> Dict[str, Any]:
    """Time vlm_sim on the first frame of every benchmark task (``bench vlm-sim``).

    Reports, per call: the answer (mask statistics, error draws, JSON) with the client's
    parse and checks (the simulated VLM's own cost, budget 10 ms), the depth geometry of
    every reported object (the same code a real answer runs), and rendering the frame.
    Times are CPU time of this process (``time.process_time``): on a shared machine wall
    time measures the other processes as much as this code.
    """
    # the simulator on use: this benchmark alone needs it, and perception never loads it
    from agentic_grasp.core.sim import Simulator, list_tasks

    sim = Simulator.from_config()
    camera = Camera()
    params = load_params()
    state: Dict[str, Any] = {}
    backend = VlmSimBackend(lambda _c: (state["frame"].instance, state["objects"]),
                            VlmSimConfig.from_params(params.get("vlm_sim")),
                            VlmConfig.from_params(params.get("vlm"), params.get("depth")))
    if perfect:
        backend.config = backend.config.zero_noise()
    answer_ms: List[float] = []
    geometry_ms: List[float] = []
    render_ms: List[float] = []
    tokens: List[int] = []
    for task in list_tasks():
        spec = sim.load_task(task, trial_seed=1)
        state["objects"] = sim.objects()
        for k in range(n):
            t0 = time.process_time()
            state["frame"] = frame = render_view(state["objects"], camera)
            t1 = time.process_time()
            rng = np.random.default_rng([k, 1])
            raw = json.dumps(backend.answer(frame.instance, state["objects"],
                                            spec.instruction, rng), separators=(",", ":"))
            interp, _ = check_raw(backend.client, raw, frame.rgb.shape[:2])
            t2 = time.process_time()
            if interp is not None:
                locate_answer(backend.client, BACKEND_NAME, interp, raw, frame.rgb.shape[:2],
                              frame.depth, camera)
            t3 = time.process_time()
            render_ms.append(1e3 * (t1 - t0))
            answer_ms.append(1e3 * (t2 - t1))
            geometry_ms.append(1e3 * (t3 - t2))
            tokens.append(count_tokens(raw))

    def stats(values: List[float]) -> Dict[str, float]:
        return {"p50_ms": round(float(np.percentile(values, 50)), 3),
                "p90_ms": round(float(np.percentile(values, 90)), 3)}

    latency = backend.config.latency
    return {"calls": len(answer_ms), "answer_and_checks": stats(answer_ms),
            "depth_geometry": stats(geometry_ms), "render_view": stats(render_ms),
            "completion_tokens_p50": int(np.percentile(tokens, 50)),
            "modelled_vlm_latency_s_p50": round(latency.seconds(
                int(np.percentile(tokens, 50))), 3)}


def _norm(value: float) -> int:
    """A coordinate in Qwen's 0..1000 range (the hardened schema bounds it)."""
    if not math.isfinite(value):
        return 0
    return int(min(1000, max(0, round(value))))


__all__ = ["BACKEND_NAME", "Segmentation", "SegmentationProvider", "VlmSimBackend",
           "check_raw", "count_tokens", "interpret_raw", "locate_answer", "visible_objects"]
