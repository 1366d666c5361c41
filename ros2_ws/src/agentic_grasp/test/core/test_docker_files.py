"""docker/: what can be checked without a Docker engine (none here).

The compose health check is run for real, as the command the container would run, against a
local HTTP server that behaves like vLLM with --api-key (401 on /v1/*, /health open).
"""
import http.server
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

# docker/ is not installed with the package (share/agentic_grasp holds config, kb_data and
# launch only), so it is found from this file: <repo>/ros2_ws/src/agentic_grasp/test/core/,
# the same layout the ROS image copies to /opt/agentic_grasp.
DOCKER = Path(__file__).resolve().parents[5] / "docker"


def _dockerfile_args():
    text = (DOCKER / "ros" / "Dockerfile").read_text()
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.M)), text


def test_franka_ros2_is_pinned_to_a_release_tag_with_its_dependency_versions():
    args, text = _dockerfile_args()
    # A tag every mirror has, not a bare commit (the one pinned before was in no public mirror).
    assert re.fullmatch(r"v\d+\.\d+\.\d+", args["FRANKA_ROS2_REF"]), args["FRANKA_ROS2_REF"]
    # franka_ros2 v3.4.0 dependency.repos: franka_description 2.8.0, libfranka 0.20.5.
    assert (args["FRANKA_ROS2_REF"], args["FRANKA_DESCRIPTION_REF"], args["LIBFRANKA_REF"]) == \
        ("v3.4.0", "2.8.0", "0.20.5")
    assert '--branch "${FRANKA_ROS2_REF}"' in text
    # The build compares both versions with the tag's dependency.repos before importing them.
    assert "'libfranka': '${LIBFRANKA_REF}'" in text
    assert "'franka_description': '${FRANKA_DESCRIPTION_REF}'" in text


def _healthcheck():
    compose = yaml.safe_load((DOCKER / "vllm" / "compose.yaml").read_text())
    return compose["services"]["vllm"]["healthcheck"]["test"]


class _FakeVllm(http.server.BaseHTTPRequestHandler):
    """vLLM with --api-key: AuthenticationMiddleware answers 401 on /v1/* without the
    Bearer token; /health is outside /v1 and answers the engine's state."""

    health_status = 200

    def do_GET(self):  # noqa: N802 - http.server naming
        if self.path.startswith("/v1"):
            ok = self.headers.get("Authorization") == "Bearer secret"
            self.send_response(200 if ok else 401)
        elif self.path == "/health":
            self.send_response(self.health_status)
        else:
            self.send_response(404)
        self.end_headers()

    def log_message(self, *_args):
        pass


@pytest.fixture
def fake_vllm():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeVllm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _run_healthcheck(port):
    test = _healthcheck()
    assert test[0] == "CMD"                         # exec form: no shell needed in the image
    argv = [a.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for a in test[1:]]
    assert argv[0] == "python3"                     # vLLM's own interpreter, not curl
    argv[0] = sys.executable
    return subprocess.run(argv, capture_output=True, timeout=30).returncode


def test_vllm_health_check_passes_with_an_api_key_set(fake_vllm):
    assert "/health" in " ".join(_healthcheck()) and "/v1" not in " ".join(_healthcheck())
    _FakeVllm.health_status = 200
    assert _run_healthcheck(fake_vllm.server_address[1]) == 0


def test_vllm_health_check_fails_while_the_engine_is_not_healthy(fake_vllm):
    _FakeVllm.health_status = 503
    try:
        assert _run_healthcheck(fake_vllm.server_address[1]) == 1
    finally:
        _FakeVllm.health_status = 200


def test_vllm_health_check_fails_when_nothing_listens():
    with http.server.HTTPServer(("127.0.0.1", 0), _FakeVllm) as probe:
        port = probe.server_address[1]              # closed again before the check runs
    assert _run_healthcheck(port) == 1


def test_graph_waits_for_a_healthy_vllm():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    assert compose["services"]["graph"]["depends_on"]["vllm"]["condition"] == "service_healthy"
