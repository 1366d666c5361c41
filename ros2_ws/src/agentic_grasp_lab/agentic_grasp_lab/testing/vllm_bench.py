"""Benchmark of real vLLM on this CPU with the tiny random Qwen3-VL (printed, not asserted).

    python -m agentic_grasp_lab.testing.vllm_bench [--requests 20] [--tight-cap 102400]

Needs ``.venv-vllm`` (``scripts/setup.sh --with-vllm``). Prints JSON with, per server
configuration, the server start-up time and the prompt tokens of one 640x480 frame as the
perception client sends it (total, and the image's share: the same request without the
image subtracted); for serve.sh's own flags also the per-request latency (p50/p99) of
``--requests`` sequential perception requests and how many answers were schema-valid.

Configurations: serve.sh as deployed (its ``--mm-processor-kwargs`` image cap, MAX_PIXELS
409600), without the cap (the flag dropped: the processor's own 16777216 px bound), and
serve.sh with ``MAX_PIXELS`` = ``--tight-cap`` (its knob). A 640x480 frame is 307200 px,
below serve.sh's default cap, so only the tight cap changes its token count.

The model is ~0.5 M random parameters: the latencies measure vLLM's serving and guided
decoding overhead on this CPU, not Qwen3-VL-8B's speed.
"""
from __future__ import annotations

import argparse
import copy
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.perception.vlm import schema
from agentic_grasp.core.stats import percentiles
from agentic_grasp_lab.benchmarks.perception_client import synthetic_frame
from agentic_grasp.core.perception.vlm.client import ChatTransport, VlmBackend
from agentic_grasp.core.perception.vlm.config import VlmConfig
from agentic_grasp_lab.testing.vllm_server import VllmServer

INSTRUCTION = "pick up the ceramic cup"


def _percentiles(values: List[float]) -> Dict[str, float]:
    p50, p99, top = percentiles(values, (50, 99, 100), scale=1000.0)
    return {"p50_ms": round(p50, 1), "p99_ms": round(p99, 1), "max_ms": round(top, 1)}


def _image_tokens(server: VllmServer) -> Dict[str, int]:
    backend = VlmBackend(VlmConfig(url=server.url, model=server.served_model, timeout_s=300,
                                   max_attempts=1, max_tokens=64))
    rgb, _, _ = synthetic_frame(Camera(), seed=0)
    image = backend.encode(rgb)
    messages = backend.build_messages(image, INSTRUCTION)
    text_only = copy.deepcopy(messages)
    text_only[1]["content"] = [p for p in text_only[1]["content"] if p["type"] == "text"]
    transport = ChatTransport(backend.config)
    with_image = transport.post(backend.build_payload(messages)).prompt_tokens
    without = transport.post(backend.build_payload(text_only)).prompt_tokens
    return {"image": f"{image.width}x{image.height}", "prompt_tokens": with_image,
            "prompt_tokens_without_image": without,
            # minus <|vision_start|> and <|vision_end|>
            "image_tokens": with_image - without - 2}


def _latency(server: VllmServer, n: int) -> Dict[str, Any]:
    backend = VlmBackend(VlmConfig(url=server.url, model=server.served_model, timeout_s=300,
                                   max_attempts=1))
    transport = ChatTransport(backend.config)
    camera = Camera()
    times, valid, completion = [], 0, []
    for k in range(n):
        rgb, _, _ = synthetic_frame(camera, seed=k)
        payload = backend.build_payload(backend.build_messages(backend.encode(rgb),
                                                               INSTRUCTION))
        start = time.perf_counter()
        reply = transport.post(payload)
        times.append(time.perf_counter() - start)
        completion.append(reply.completion_tokens)
        valid += int(schema.parse_answer(reply.content)[1] == "")
    return {"requests": n, **_percentiles(times), "valid_answers": valid,
            "completion_tokens_median": int(np.median(completion))}


def run(n: int = 20, tight_cap: int = 102400) -> Dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="agentic-grasp-vllm-bench-"))
    configs = [("serve.sh (MAX_PIXELS 409600 cap)", {}, ()),
               ("no cap (--mm-processor-kwargs dropped)", {}, ("--mm-processor-kwargs",)),
               (f"serve.sh with MAX_PIXELS={tight_cap}", {"MAX_PIXELS": str(tight_cap)}, ())]
    out: Dict[str, Any] = {"configurations": []}
    try:
        for k, (name, env, drop) in enumerate(configs):
            with VllmServer(work_dir=work, serve_env=env, drop_flags=drop,
                            log_path=work / f"server-{k}.log") as server:
                entry: Dict[str, Any] = {"name": name,
                                         "startup_s": round(server.startup_s, 1),
                                         "prompt_640x480": _image_tokens(server)}
                if k == 0:
                    out["model"] = server.model
                    entry["latency"] = _latency(server, n)
                out["configurations"].append(entry)
                print(json.dumps(entry), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--tight-cap", type=int, default=102400,
                        help="MAX_PIXELS of the third server (default 102400 = 100 tokens)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.requests, args.tight_cap), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
