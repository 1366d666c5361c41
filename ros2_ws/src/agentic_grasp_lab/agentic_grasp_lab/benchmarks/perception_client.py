"""Client-side cost of one VLM perception call, without the model's time.

What a 640x480 frame costs the robot's side before and after the GPU works: image
encoding, request building (messages, payload, JSON serialisation), and turning the answer
into objects (envelope parsing, JSON + schema + semantic checks, depth geometry). Two
measurements, both reported:

- ``client_total_ms``: the sum of the parts, timed directly (pure client CPU);
- ``e2e_minus_rtt_ms``: a full :meth:`VlmBackend.perceive` against the local fake server
  answering at once, minus the bare HTTP round trip to the same server measured in the same
  run. It also includes moving the ~40 KiB body over loopback and the fake server parsing
  it, so it is an upper bound.

The target is <= 15 ms per call; the run also checks that a valid answer costs exactly one
HTTP request. ``python -m agentic_grasp_lab.benchmarks.perception_client`` prints the
numbers as JSON.
"""
from __future__ import annotations

import json
import time
import urllib.request
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.perception.vlm.client import ChatTransport, VlmBackend
from agentic_grasp.core.perception.vlm.config import VlmConfig
from agentic_grasp.core.perception.vlm.answer import encode_image
from agentic_grasp.core.stats import percentiles
from agentic_grasp_lab.testing.fake_vlm_server import FakeVlmServer, ScriptedReply

TARGET_MS = 15.0

#: (centre, size) of axis-aligned boxes standing on the table, and their labels.
BENCH_SCENE = (
    ((0.50, 0.10, 0.045), (0.08, 0.08, 0.09), "cup_1", "cup", 0.3),
    ((0.55, -0.12, 0.075), (0.08, 0.08, 0.15), "vase_1", "vase", 0.8),
    ((0.40, 0.25, 0.04), (0.08, 0.08, 0.08), "apple_1", "apple", 0.1),
    ((0.65, -0.25, 0.025), (0.05, 0.05, 0.05), "cube_1", "cube", 0.0),
)


def synthetic_frame(camera: Camera, seed: int = 0) -> Tuple[np.ndarray, np.ndarray, Dict]:
    """(rgb, depth, canned answer) of a table with four boxes, ray-cast with ``camera``.

    The answer points at each box's projected centre and tight box in Qwen3-VL's 0..1000
    coordinates, as a well-behaved model would.
    """
    rays = camera.pixel_rays().reshape(-1, 3)
    origin = camera.position
    t = np.full(rays.shape[0], np.inf)
    ids = np.full(rays.shape[0], -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_table = -origin[2] / rays[:, 2]
        hit = origin + t_table[:, None] * rays
        on = (t_table > 0) & (np.abs(hit[:, 0] - 0.5) <= 0.3) & (np.abs(hit[:, 1]) <= 0.4)
        t[on] = t_table[on]
        for k, (centre, size, *_rest) in enumerate(BENCH_SCENE):
            lo = (np.asarray(centre) - np.asarray(size) / 2.0 - origin) / rays
            hi = (np.asarray(centre) + np.asarray(size) / 2.0 - origin) / rays
            near = np.max(np.minimum(lo, hi), axis=1)
            far = np.min(np.maximum(lo, hi), axis=1)
            sel = (far >= near) & (near > 0) & (near < t)
            t[sel], ids[sel] = near[sel], k
    depth = (t * (rays @ camera.T_world_cam[:3, 2])).reshape(camera.height, camera.width)
    depth[~np.isfinite(depth)] = 0.0
    ids = ids.reshape(camera.height, camera.width)
    rng = np.random.default_rng(seed)
    palette = np.array([[200, 60, 40], [90, 160, 210], [210, 40, 60], [190, 150, 90]])
    rgb = np.full((camera.height, camera.width, 3), 120, dtype=float)
    rgb[ids < 0] = (150, 130, 110)
    for k in range(len(BENCH_SCENE)):
        rgb[ids == k] = palette[k]
    rgb = np.clip(rgb + rng.normal(0.0, 4.0, rgb.shape), 0, 255).astype(np.uint8)
    objects = []
    for k, (centre, _size, oid, category, fragility) in enumerate(BENCH_SCENE):
        uv, _ = camera.project(np.asarray(centre)[None, :])
        vs, us = np.nonzero(ids == k)
        sx, sy = 1000.0 / camera.width, 1000.0 / camera.height
        objects.append({
            "id": oid, "category": category,
            "point_2d": [round(uv[0, 0] * sx), round(uv[0, 1] * sy)],
            "bbox_2d": [round(us.min() * sx), round(vs.min() * sy),
                        round(us.max() * sx), round(vs.max() * sy)],
            "state": "empty", "fragility": fragility})
    answer = {"target_found": True, "reason": "", "target_id": "cup_1",
              "target_affordance": {"type": "Graspable_Handle", "material": "ceramic",
                                    "region": "handle"},
              "objects": objects}
    return rgb, depth.astype(np.float32), answer


def _stats(samples: List[float]) -> Dict[str, float]:
    arr = np.asarray(samples) * 1e3
    return {"median": round(float(np.median(arr)), 3),
            "p95": round(percentiles(arr, (95,))[0], 3),
            "mean": round(float(arr.mean()), 3)}


def _timed(fn: Callable[[], Any]) -> Tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def run_client_bench(n: int = 200, seed: int = 0) -> Dict[str, Any]:
    """Time the client side of ``n`` perceptions of a 640x480 frame (see module docstring)."""
    camera = Camera()
    rgb, depth, answer = synthetic_frame(camera, seed)
    content = json.dumps(answer)
    envelope = ScriptedReply.answer(content).payload("bench")
    instruction = "pick up the ceramic cup"

    backend = VlmBackend(VlmConfig(url="http://127.0.0.1:9/v1"))
    parts: Dict[str, List[float]] = {"encode": [], "build": [], "parse_validate": [],
                                     "geometry": [], "total": []}
    payload_bytes = 0
    for _ in range(n):
        image, t_enc = _timed(lambda: backend.encode(rgb))
        body, t_build = _timed(lambda: json.dumps(backend.build_payload(
            backend.build_messages(image, instruction)), separators=(",", ":")).encode())
        payload_bytes = len(body)

        def parse() -> Any:
            reply = ChatTransport.parse_reply(envelope)        # envelope -> content, usage
            return backend.check(reply.content, reply.finish_reason, rgb.shape[1],
                                 rgb.shape[0], image)

        (interp, problem), t_parse = _timed(parse)
        if problem:
            raise RuntimeError(f"bench answer rejected: {problem}")
        _, t_geom = _timed(lambda: backend.locate(interp, depth, camera, rgb.shape[:2]))
        for key, value in (("encode", t_enc), ("build", t_build), ("parse_validate", t_parse),
                           ("geometry", t_geom), ("total", t_enc + t_build + t_parse + t_geom)):
            parts[key].append(value)

    png = [_timed(lambda: encode_image(rgb, 640, "png"))[1] for _ in range(max(3, n // 20))]
    png_kib = len(encode_image(rgb, 640, "png").data_url) / 1024.0

    e2e: List[float] = []
    rtt: List[float] = []
    with FakeVlmServer(default=ScriptedReply.answer(content)) as server:
        live = VlmBackend(VlmConfig(url=server.url, max_attempts=1, timeout_s=10.0))
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        found = 0
        for _ in range(n):
            result = live.perceive(rgb, depth, camera, instruction)
            e2e.append(result.latency_s)
            found += int(result.ok and result.target_found)
            _, t_rtt = _timed(lambda: opener.open(f"{server.url}/models", timeout=5).read())
            rtt.append(t_rtt)
        requests = len(server.chat_requests)

    client = _stats(parts["total"])
    e2e_stats, rtt_stats = _stats(e2e), _stats(rtt)
    return {
        "n": n,
        "image": f"{rgb.shape[1]}x{rgb.shape[0]} {backend.config.image_format} "
                 f"q{backend.config.jpeg_quality}",
        "payload_kib": round(payload_bytes / 1024.0, 1),      # whole request body
        "encode_ms": _stats(parts["encode"]),
        "png_encode_ms": _stats(png),
        "png_data_url_kib": round(png_kib, 1),
        "build_ms": _stats(parts["build"]),
        "parse_validate_ms": _stats(parts["parse_validate"]),
        "geometry_ms": _stats(parts["geometry"]),
        "client_total_ms": client,
        "e2e_ms": e2e_stats,
        "bare_rtt_ms": rtt_stats,
        "e2e_minus_rtt_ms": round(e2e_stats["median"] - rtt_stats["median"], 3),
        "valid_perceptions": found,
        "requests_per_perception": requests / float(n),
        "target_ms": TARGET_MS,
        "meets_target": client["median"] <= TARGET_MS,
    }


if __name__ == "__main__":
    print(json.dumps(run_client_bench(), indent=2))
