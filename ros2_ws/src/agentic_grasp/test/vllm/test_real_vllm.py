"""The perception client against real vLLM: a tiny random Qwen3-VL on the CPU.

The server (test/conftest.py ``vllm_server``) is started once per session with
docker/vllm/serve.sh's flags minus ``--kv-cache-dtype`` and ``--quantization``. Its weights
are random, so answers are nonsense: these tests check what does not depend on the content
(the request is accepted, guided decoding yields schema-valid JSON that terminates, the
client's errors are clear) and record latency and token usage.
"""
from __future__ import annotations

import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.perception.vlm import schema
from agentic_grasp_lab.benchmarks.perception_client import synthetic_frame
from agentic_grasp.core.perception.vlm.client import CallStats, ChatTransport, VlmBackend
from agentic_grasp.core.perception.vlm.config import VlmConfig

pytestmark = pytest.mark.vllm

INSTRUCTIONS = ("pick up the ceramic cup", "grasp the vase", "pick up the apple",
                "hand me the wood cube", "clear the table")
#: Client settings for a CPU server: one slow request must not be cut by the 30 s default.
CPU_TIMEOUT_S = 240.0


def client(server, **overrides) -> VlmBackend:
    cfg = dict(url=server.url, model=server.served_model, timeout_s=CPU_TIMEOUT_S,
               max_attempts=1)
    cfg.update(overrides)
    return VlmBackend(VlmConfig(**cfg))


def _strings(answer):
    """Every (path, string) in an answer, for the bound checks."""
    out = [("reason", answer["reason"])]
    if answer["target_id"] is not None:
        out.append(("target_id", answer["target_id"]))
    if answer["target_affordance"] is not None:
        out.append(("region", answer["target_affordance"]["region"]))
    for k, obj in enumerate(answer["objects"]):
        out += [(f"objects/{k}/id", obj["id"]), (f"objects/{k}/category", obj["category"])]
    return out


PATTERNS = {"reason": schema.REASON_PATTERN, "target_id": schema.ID_PATTERN,
            "region": schema.WORDS_PATTERN, "id": schema.ID_PATTERN,
            "category": schema.WORDS_PATTERN}


def assert_within_bounds(answer) -> None:
    """What guided decoding must guarantee beyond JSON validity: the bounds themselves."""
    for path, text in _strings(answer):
        pattern = PATTERNS[path.rsplit("/", 1)[-1]]
        assert re.fullmatch(pattern.strip("^$"), text), (path, text)
    for obj in answer["objects"]:
        assert all(0 <= v <= schema.COORD_MAX for v in obj["point_2d"] + obj["bbox_2d"])
        assert 0.0 <= obj["fragility"] <= 1.0
    assert len(answer["objects"]) <= schema.MAX_OBJECTS


def test_the_clients_exact_request_is_accepted_and_its_answer_validates(vllm_server,
                                                                         record_property):
    camera = Camera()
    rgb, depth, _ = synthetic_frame(camera, seed=0)
    backend = client(vllm_server)
    result = backend.perceive(rgb, depth, camera, INSTRUCTIONS[0])
    # Accepted: no HTTP error, no transport failure; the server's usage came back.
    assert not result.error.startswith(("perception request rejected",
                                        "perception unavailable")), result.error
    assert result.requests in (1, 2) and result.prompt_tokens > 0
    assert result.completion_tokens > 0 and result.latency_s > 0.0
    # The last answer is schema-valid JSON within every bound (guided decoding).
    answer, problem = schema.parse_answer(result.raw)
    assert problem == "", (problem, result.raw[:500])
    assert_within_bounds(answer)
    # Nonsense content ends in a clear outcome, never an exception: a result, a
    # "target not found" warning, or a named semantic error.
    assert result.ok or result.error.startswith(("invalid VLM answer after one repair",
                                                 "no valid depth at the target"))
    for key, value in (("latency_s", round(result.latency_s, 3)),
                       ("requests", result.requests), ("prompt_tokens", result.prompt_tokens),
                       ("completion_tokens", result.completion_tokens)):
        record_property(key, value)
    print(f"\n[vllm] perceive: {result.latency_s:.2f} s, {result.requests} request(s), "
          f"{result.prompt_tokens} prompt + {result.completion_tokens} completion tokens, "
          f"error={result.error!r}")


def test_guided_decoding_terminates_with_valid_json_19_of_20(vllm_server, record_property):
    """20 of the client's own payloads (varied frames and instructions), 4 at a time (the
    server's max_num_seqs): at least 19 schema-valid answers, none cut at max_tokens."""
    camera = Camera()
    backend = client(vllm_server)
    payloads = []
    for k in range(20):
        rgb, _, _ = synthetic_frame(camera, seed=k)
        image = backend.encode(rgb)
        payloads.append(backend.build_payload(backend.build_messages(
            image, INSTRUCTIONS[k % len(INSTRUCTIONS)])))
    transport = ChatTransport(backend.config)

    def send(payload):
        stats = CallStats()
        return transport.post(payload, stats), stats

    with ThreadPoolExecutor(max_workers=4) as pool:
        replies = list(pool.map(send, payloads))
    valid, problems, lengths = 0, [], []
    for reply, _ in replies:
        answer, problem = schema.parse_answer(reply.content)
        lengths.append(reply.completion_tokens)
        if problem:
            problems.append(f"{reply.finish_reason}: {problem[:200]}")
            continue
        assert_within_bounds(answer)
        valid += 1
    record_property("valid_of_20", valid)
    record_property("completion_tokens", lengths)
    print(f"\n[vllm] guided decoding: {valid}/20 valid; completion tokens "
          f"min {min(lengths)} max {max(lengths)}; problems: {problems}")
    assert valid >= 19, problems


def test_the_backend_enforces_pattern_and_numeric_bounds(vllm_server):
    """The bound itself, on a schema where the only way to stop is the pattern's limit."""
    fmt = {"type": "json_schema", "json_schema": {"name": "bounds", "strict": True, "schema": {
        "type": "object", "additionalProperties": False, "required": ["s", "n", "k"],
        "properties": {"s": {"type": "string", "pattern": "^[a-z]{1,3}$"},
                       "n": {"type": "number", "minimum": 0, "maximum": 1},
                       "k": {"type": "integer", "minimum": 0, "maximum": 1000}}}}}
    payload = {"model": vllm_server.served_model, "max_tokens": 64, "temperature": 0.0,
               "messages": [{"role": "user", "content": "write a long word and a number"}],
               "response_format": fmt}
    reply = ChatTransport(VlmConfig(url=vllm_server.url, timeout_s=CPU_TIMEOUT_S,
                                    max_attempts=1)).post(payload)
    value = json.loads(reply.content)
    assert reply.finish_reason == "stop", reply
    assert re.fullmatch(r"[a-z]{1,3}", value["s"]) and 0 <= value["n"] <= 1
    assert isinstance(value["k"], int) and 0 <= value["k"] <= 1000


def test_a_request_the_server_cannot_serve_is_a_clear_rejection(vllm_server):
    """A wrong model name: HTTP 404 from real vLLM, reported without retries."""
    camera = Camera()
    rgb, depth, _ = synthetic_frame(camera, seed=1)
    result = client(vllm_server, model="no-such-model", max_attempts=3).perceive(
        rgb, depth, camera, INSTRUCTIONS[0])
    assert result.error.startswith("perception request rejected: HTTP 404"), result.error
    assert result.requests == 1 and result.target is None


_PARSE = r"""
import contextlib, io, json, sys
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser(prog="vllm")
sub = parser.add_subparsers(dest="subcommand")
ServeSubcommand().subparser_init(sub)
out = {}
for name, args in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(["serve", *args])
        out[name] = {"ok": True, "args": {k: str(v) for k, v in vars(ns).items()}}
    except SystemExit:
        out[name] = {"ok": False, "stderr": err.getvalue()[-2000:]}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def parsed_serve_sh(vllm_python):
    """serve.sh's arguments for both INT4 paths (and a bad flag), parsed by the installed
    vLLM's own ``vllm serve`` parser in one interpreter (importing vLLM takes ~20 s)."""
    from agentic_grasp_lab.testing.vllm_server import serve_sh_args

    cases = {}
    for quant in ("awq", "bitsandbytes"):
        cases[quant] = serve_sh_args("/models/Qwen3-VL-8B", {"QUANT": quant,
                                                             "VLLM_API_KEY": "k"})
    cases["bad"] = cases["awq"] + ["--guided-decoding-backend", "x"]
    proc = subprocess.run([str(vllm_python), "-c", _PARSE, json.dumps(cases)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return cases, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("quant", ["awq", "bitsandbytes"])
def test_serve_sh_flags_parse_with_the_installed_vllm(parsed_serve_sh, quant):
    """Every flag serve.sh passes to ``vllm serve`` exists in the installed vLLM and its
    value validates (JSON configs included), for both INT4 paths."""
    cases, parsed = parsed_serve_sh
    assert ("--quantization" in cases[quant]) == (quant == "bitsandbytes")
    assert parsed[quant]["ok"], parsed[quant].get("stderr")
    ns = parsed[quant]["args"]
    assert ns["model_tag"] == "/models/Qwen3-VL-8B"
    assert ns["kv_cache_dtype"] == "fp8" and ns["api_key"] == "['k']"
    assert "disable_any_whitespace=True" in ns["structured_outputs_config"]
    assert ns["quantization"] == ("bitsandbytes" if quant == "bitsandbytes" else "None")


def test_the_flag_check_can_fail(parsed_serve_sh):
    """A flag vLLM does not know (this one was removed in vLLM 0.12) is refused."""
    _, parsed = parsed_serve_sh
    assert not parsed["bad"]["ok"]
    assert "unrecognized arguments" in parsed["bad"]["stderr"]
