"""VLM client against the local OpenAI-compatible fake server (no GPU, no network)."""
import base64
import copy
import json
import socket
import threading

import cv2
import numpy as np
import pytest

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.perception.vlm import schema
from agentic_grasp_lab.benchmarks.perception_client import BENCH_SCENE, synthetic_frame
from agentic_grasp.core.perception.vlm.client import ChatTransport, VlmBackend
from agentic_grasp.core.perception.vlm.config import VlmConfig
from agentic_grasp.core.perception.vlm.answer import encode_image
from agentic_grasp.core.types import AffordanceType
from agentic_grasp_lab.testing.fake_vlm_server import FakeVlmServer, ScriptedReply

INSTRUCTION = "pick up the ceramic cup"
CUP_CENTRE = np.array(BENCH_SCENE[0][0])


@pytest.fixture(scope="module")
def frame():
    camera = Camera()
    rgb, depth, answer = synthetic_frame(camera, seed=3)
    return camera, rgb, depth, answer


def make_backend(server, sleeps=None, **overrides):
    cfg = dict(url=server.url, timeout_s=2.0, max_attempts=3, backoff_base_s=0.01,
               backoff_max_s=0.05)
    cfg.update(overrides)
    config = VlmConfig(**cfg)
    sleeper = (lambda s: sleeps.append(s)) if sleeps is not None else (lambda s: None)
    return VlmBackend(config, transport=ChatTransport(config, sleep=sleeper))


def run(frame, script, sleeps=None, **overrides):
    camera, rgb, depth, _ = frame
    with FakeVlmServer(script) as server:
        backend = make_backend(server, sleeps, **overrides)
        result = backend.perceive(rgb, depth, camera, INSTRUCTION)
        requests = list(server.chat_requests)
    return result, requests, backend


def variant(answer, **changes):
    out = copy.deepcopy(answer)
    out.update(changes)
    return out


def test_valid_answer_uses_exactly_one_request(frame):
    answer = frame[3]
    result, requests, _ = run(frame, [ScriptedReply.answer(answer, completion_tokens=210)])
    assert result.ok and result.target_found
    assert len(requests) == 1 and result.requests == 1
    assert result.backend == "vlm"
    assert result.prompt_tokens == 350 and result.completion_tokens == 210
    assert result.raw == json.dumps(answer)
    assert result.latency_s > 0.0
    target = result.target
    assert target.id == "cup_1" and target.category == "cup"
    assert target.affordance.type is AffordanceType.GRASPABLE_HANDLE
    assert target.affordance.material == "ceramic"
    assert target.affordance.fragility == pytest.approx(0.3)
    # Geometry comes from depth: the cup centre within 1.5 cm of the truth.
    assert np.linalg.norm(target.position - CUP_CENTRE) < 0.015
    assert {o.id for o in result.objects} == {"cup_1", "vase_1", "apple_1", "cube_1"}
    instances = result.to_object_instances()
    assert [i.id for i in instances][0] == "cup_1" and len(instances) == 4
    assert result.warnings == []


def test_request_body_carries_schema_image_and_key(frame, monkeypatch):
    monkeypatch.setenv("TEST_VLM_KEY", "secret-123")
    result, requests, backend = run(frame, [ScriptedReply.answer(frame[3])],
                                    api_key_env="TEST_VLM_KEY")
    assert result.ok
    req = requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer secret-123"
    body = req.json
    assert body["model"] == backend.config.model
    assert body["temperature"] == 0.0 and body["max_tokens"] == backend.config.max_tokens
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == schema.SCHEMA_NAME
    assert fmt["json_schema"]["schema"] == schema.PERCEPTION_SCHEMA
    assert "guided_json" not in body
    content = body["messages"][1]["content"]
    url = next(part["image_url"]["url"] for part in content if part["type"] == "image_url")
    assert url.startswith("data:image/jpeg;base64,")
    decoded = cv2.imdecode(np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8),
                           cv2.IMREAD_COLOR)
    assert decoded.shape == (480, 640, 3)
    text = next(part["text"] for part in content if part["type"] == "text")
    assert INSTRUCTION in text and "0 to 1000" in text


def test_api_key_defaults_to_empty(frame, monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    _, requests, _ = run(frame, [ScriptedReply.answer(frame[3])])
    assert requests[0].headers["authorization"] == "Bearer EMPTY"


def test_malformed_json_then_valid_is_repaired_with_two_requests(frame):
    result, requests, _ = run(frame, [ScriptedReply.answer('{"target_found": tru'),
                                      ScriptedReply.answer(frame[3])])
    assert result.ok and result.target.id == "cup_1"
    assert len(requests) == 2 and result.requests == 2
    assert result.prompt_tokens == 700
    repair = requests[1].json["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"target_found": tru'}
    assert repair[-1]["role"] == "user" and "invalid JSON" in repair[-1]["content"]
    assert requests[1].json["response_format"]["type"] == "json_schema"


def test_malformed_twice_is_a_clear_failure(frame):
    result, requests, _ = run(frame, [ScriptedReply.answer("sure! here it is"),
                                      ScriptedReply.answer("```json\n{}\n```")])
    assert not result.ok and not result.target_found and result.target is None
    assert result.error.startswith("invalid VLM answer after one repair: schema violation")
    assert len(requests) == 2 and result.requests == 2
    assert result.raw == "```json\n{}\n```"


def test_slow_server_is_retried_then_unavailable(frame):
    sleeps = []
    slow = [ScriptedReply.answer(frame[3], delay_s=5.0) for _ in range(3)]
    result, requests, backend = run(frame, slow, sleeps, timeout_s=0.1, backoff_base_s=0.02,
                                    backoff_max_s=0.03)
    assert result.error.startswith("perception unavailable:")
    assert "timed out" in result.error
    assert len(requests) == 3 and result.requests == 3
    assert sleeps == pytest.approx([0.02, 0.03])          # base, then 2*base capped
    assert result.target is None and not result.target_found


def test_http_500_then_ok_is_retried(frame):
    sleeps = []
    result, requests, _ = run(frame, [ScriptedReply.error(500, "CUDA hiccup"),
                                      ScriptedReply.answer(frame[3])], sleeps)
    assert result.ok and len(requests) == 2 and result.requests == 2
    assert sleeps == pytest.approx([0.01])


def test_http_429_honours_retry_after_up_to_the_cap(frame):
    sleeps = []
    result, requests, _ = run(
        frame, [ScriptedReply.error(429, "busy", headers={"Retry-After": "0.04"}),
                ScriptedReply.error(503, "busy", headers={"Retry-After": "60"}),
                ScriptedReply.answer(frame[3])], sleeps)
    assert result.ok and len(requests) == 3
    assert sleeps == pytest.approx([0.04, 0.05])


def test_http_400_is_not_retried(frame):
    sleeps = []
    result, requests, _ = run(frame, [ScriptedReply.error(400, "max_tokens too large"),
                                      ScriptedReply.answer(frame[3])], sleeps)
    assert result.error == "perception request rejected: HTTP 400: max_tokens too large"
    assert len(requests) == 1 and sleeps == []


def test_connection_refused_ends_unavailable(frame):
    camera, rgb, depth, _ = frame
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps = []
    config = VlmConfig(url=f"http://127.0.0.1:{port}/v1", max_attempts=2, timeout_s=1.0,
                       backoff_base_s=0.01, backoff_max_s=0.01)
    backend = VlmBackend(config, transport=ChatTransport(config, sleep=sleeps.append))
    result = backend.perceive(rgb, depth, camera, INSTRUCTION)
    assert result.error.startswith("perception unavailable:") and result.requests == 2
    assert len(sleeps) == 1


def test_invalid_envelope_is_rejected_without_retry(frame):
    result, requests, _ = run(frame, [ScriptedReply.raw("<html>gateway</html>")])
    assert result.error.startswith("perception request rejected: invalid server response")
    assert len(requests) == 1


def test_target_not_found_reports_the_reason(frame):
    answer = variant(frame[3], target_found=False, target_id=None, target_affordance=None,
                     reason="no ceramic cup on the table")
    result, requests, _ = run(frame, [ScriptedReply.answer(answer)])
    assert result.ok and not result.target_found and result.target is None
    assert "target not found: no ceramic cup on the table" in result.warnings
    assert len(result.objects) == 4 and len(requests) == 1


def test_unknown_affordance_type_gets_one_repair(frame):
    bad = variant(frame[3], target_affordance={"type": "Squeezable", "material": "ceramic",
                                               "region": "handle"})
    result, requests, _ = run(frame, [ScriptedReply.answer(bad),
                                      ScriptedReply.answer(frame[3])])
    assert result.ok and len(requests) == 2
    assert "Squeezable" in requests[1].json["messages"][-1]["content"]
    result, requests, _ = run(frame, [ScriptedReply.answer(bad), ScriptedReply.answer(bad)])
    assert "schema violation" in result.error and "Squeezable" in result.error
    assert result.target is None and len(requests) == 2


def test_fragility_out_of_range_falls_back_to_the_category_prior(frame):
    answer = copy.deepcopy(frame[3])
    answer["objects"][0]["fragility"] = 1.7
    result, requests, _ = run(frame, [ScriptedReply.answer(answer)])
    assert result.ok and len(requests) == 1
    assert result.target.fragility == pytest.approx(0.3)          # Table I cup
    assert result.target.affordance.fragility == pytest.approx(0.3)
    assert any("1.7" in w and "prior for 'cup'" in w for w in result.warnings)


def test_invented_target_id_is_repaired_or_fails(frame):
    bad = variant(frame[3], target_id="mug_9")
    result, requests, _ = run(frame, [ScriptedReply.answer(bad),
                                      ScriptedReply.answer(frame[3])])
    assert result.ok and result.target.id == "cup_1" and len(requests) == 2
    result, _, _ = run(frame, [ScriptedReply.answer(bad), ScriptedReply.answer(bad)])
    assert "mug_9" in result.error and "not one of the reported object ids" in result.error


def test_duplicate_ids_are_renamed_and_target_is_the_first(frame):
    answer = copy.deepcopy(frame[3])
    answer["objects"][1]["id"] = "cup_1"                 # the vase reuses the cup's id
    result, requests, _ = run(frame, [ScriptedReply.answer(answer)])
    assert result.ok and len(requests) == 1
    ids = [o.id for o in result.objects]
    assert ids == ["cup_1", "cup_1_2", "apple_1", "cube_1"]
    assert result.target.id == "cup_1" and result.target.category == "cup"
    assert any("renamed to 'cup_1_2'" in w for w in result.warnings)
    assert any("several objects" in w for w in result.warnings)


def test_pixels_outside_the_image(frame):
    answer = copy.deepcopy(frame[3])
    answer["objects"][1]["point_2d"] = [1500, 300]                   # box still valid
    answer["objects"][2]["point_2d"] = [2000, 2000]                  # nothing valid
    answer["objects"][2]["bbox_2d"] = [1200, 1200, 1400, 1300]
    result, requests, _ = run(frame, [ScriptedReply.answer(answer)])
    assert result.ok and len(requests) == 1
    vase = next(o for o in result.objects if o.id == "vase_1")
    x1, y1, x2, y2 = vase.bbox
    assert vase.pixel == pytest.approx(((x1 + x2) / 2, (y1 + y2) / 2))
    assert "apple_1" not in [o.id for o in result.objects]
    assert any("'vase_1'" in w and "box centre" in w for w in result.warnings)
    assert any("'apple_1'" in w and "dropped" in w for w in result.warnings)

    bad = copy.deepcopy(frame[3])
    bad["objects"][0]["point_2d"] = [-400, 50]
    bad["objects"][0]["bbox_2d"] = [-500, -50, -300, -10]
    result, requests, _ = run(frame, [ScriptedReply.answer(bad), ScriptedReply.answer(bad)])
    assert "located outside the image" in result.error and len(requests) == 2


def test_missing_depth_at_the_target(frame):
    camera, rgb, depth, answer = frame
    holed = depth.copy()
    holed[150:300, 330:430] = np.nan                      # the whole cup region
    with FakeVlmServer([ScriptedReply.answer(answer)]) as server:
        result = make_backend(server).perceive(rgb, holed, camera, INSTRUCTION)
    assert result.target_found and result.target.position is None
    assert result.error.startswith("no valid depth at the target 'cup_1'")
    assert all(o.position is not None for o in result.objects if o.id != "cup_1")
    assert [i.id for i in result.to_object_instances()] == ["vase_1", "apple_1", "cube_1"]


def test_bad_inputs_never_reach_the_server(frame):
    camera, rgb, depth, answer = frame
    with FakeVlmServer([ScriptedReply.answer(answer)]) as server:
        backend = make_backend(server)
        small = backend.perceive(rgb, depth[:100], camera, INSTRUCTION)
        gray = backend.perceive(rgb[..., 0], depth, camera, INSTRUCTION)
        assert server.chat_requests == []
    assert small.error.startswith("bad input: depth is 640x100")
    assert gray.error.startswith("bad input: rgb")


def test_truncated_answer_asks_for_a_shorter_one(frame):
    cut = json.dumps(frame[3])[:120]
    result, requests, _ = run(frame, [ScriptedReply.answer(cut, finish_reason="length"),
                                      ScriptedReply.answer(frame[3])])
    assert result.ok and len(requests) == 2
    assert "max_tokens" in requests[1].json["messages"][-1]["content"]


def test_pixel_coordinates_and_downscaled_image(frame):
    camera, rgb, depth, answer = frame
    # The model answers in pixels of the 320x240 image it was sent.
    answer = copy.deepcopy(answer)
    for obj in answer["objects"]:
        obj["point_2d"] = [obj["point_2d"][0] * 0.32, obj["point_2d"][1] * 0.24]
        x1, y1, x2, y2 = obj["bbox_2d"]
        obj["bbox_2d"] = [x1 * 0.32, y1 * 0.24, x2 * 0.32, y2 * 0.24]
    with FakeVlmServer([ScriptedReply.answer(answer)]) as server:
        backend = make_backend(server, coordinates="pixel", image_max_side=320)
        result = backend.perceive(rgb, depth, camera, INSTRUCTION)
        body = server.chat_requests[0].json
    url = body["messages"][1]["content"][0]["image_url"]["url"]
    img = cv2.imdecode(np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8), 1)
    assert img.shape[:2] == (240, 320)
    assert "pixels of this 320x240 image" in body["messages"][1]["content"][1]["text"]
    assert result.ok and np.linalg.norm(result.target.position - CUP_CENTRE) < 0.015


def test_encode_image_jpeg_is_smaller_than_png():
    rgb = synthetic_frame(Camera())[0]
    jpeg = encode_image(rgb, 640, "jpeg", 90)
    png = encode_image(rgb, 640, "png")
    assert jpeg.data_url.startswith("data:image/jpeg;base64,")
    assert png.data_url.startswith("data:image/png;base64,")
    assert len(jpeg.data_url) < len(png.data_url) / 4
    assert (jpeg.width, jpeg.height, jpeg.scale) == (640, 480, 1.0)


def test_backoff_is_exponential_capped_and_jitter_is_seeded():
    cfg = VlmConfig(backoff_base_s=0.5, backoff_max_s=3.0)
    transport = ChatTransport(cfg)
    assert [transport._backoff(k, None) for k in range(4)] == [0.5, 1.0, 2.0, 3.0]
    jittery = dict(backoff_base_s=0.5, backoff_max_s=3.0, backoff_jitter=0.2, seed=7)
    t1, t2 = ChatTransport(VlmConfig(**jittery)), ChatTransport(VlmConfig(**jittery))
    seq1 = [t1._backoff(k, None) for k in range(5)]
    seq2 = [t2._backoff(k, None) for k in range(5)]
    assert seq1 == seq2
    for k, delay in enumerate(seq1):
        nominal = min(3.0, 0.5 * 2 ** k)
        assert 0.8 * nominal <= delay <= 1.2 * nominal
    assert len(set(seq1)) == 5


def test_config_validation_and_params():
    with pytest.raises(ConfigError):
        VlmConfig(url="ftp://host")
    with pytest.raises(ConfigError):
        VlmConfig(coordinates="percent")
    with pytest.raises(ConfigError):
        VlmConfig(fragility_priors={"cup": 3.0})
    with pytest.raises(ConfigError, match="unknown parameter"):
        VlmConfig.from_params({"urll": "http://x"})
    cfg = VlmConfig.from_params({"url": "http://h:1/v1/", "timeout_s": "5",
                                 "fragility_priors": {"wine_glass": 0.9}},
                                depth={"window_radius_px": 2})
    assert cfg.url == "http://h:1/v1" and cfg.timeout_s == 5.0
    assert cfg.fragility_prior("Wine Glass") == (0.9, "prior for 'wine glass'")
    assert cfg.fragility_prior("teapot") == (0.5, "default prior")
    assert cfg.depth.window_radius_px == 2
    assert VlmConfig.from_params({"use_env_proxy": "false"}).use_env_proxy is False
    assert VlmConfig.from_params({"use_env_proxy": True}).use_env_proxy is True
    with pytest.raises(ConfigError, match="boolean"):
        VlmConfig.from_params({"use_env_proxy": "maybe"})


def test_concurrent_calls_count_their_own_requests(frame):
    camera, rgb, depth, answer = frame
    results = [None] * 4
    with FakeVlmServer([ScriptedReply.error(503, "warming up")],
                       default=ScriptedReply.answer(answer)) as server:
        backend = make_backend(server)

        def work(k):
            results[k] = backend.perceive(rgb, depth, camera, INSTRUCTION)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10.0)
        total = len(server.chat_requests)
    assert all(r is not None and r.ok for r in results)
    assert sorted(r.requests for r in results) == [1, 1, 1, 2]     # one call met the 503
    assert total == 5
