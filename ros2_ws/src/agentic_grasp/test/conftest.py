"""Fixtures shared by the test folders: real vLLM (test/vllm, test/ros/test_vllm_graph.py).

The server is started once per test session, on first use, and always torn down. It needs
``.venv-vllm`` (``scripts/setup.sh --with-vllm``, ~3.5 GB). ``AGENTIC_GRASP_SKIP_VLLM=1``
skips these tests on a machine without the disk; the skip is printed in a banner at the end
of the run and is never a pass. ``AGENTIC_GRASP_REQUIRE_VLLM=1`` (set by scripts/test.sh
unless skipping) turns a missing or broken vLLM venv into a failure instead of a skip.
"""
from __future__ import annotations

import os

import pytest

SKIP_ENV = "AGENTIC_GRASP_SKIP_VLLM"
REQUIRE_ENV = "AGENTIC_GRASP_REQUIRE_VLLM"
STARTUP_TIMEOUT_S = 600.0      # 42-100 s seen on an idle 2-core machine; shared CI is slower

_SKIPPED = []


def pytest_configure(config):
    config.addinivalue_line("markers", "vllm: needs real vLLM (.venv-vllm); see test/conftest.py")


def _unavailable(request, reason: str):
    if os.environ.get(REQUIRE_ENV) == "1" and os.environ.get(SKIP_ENV) != "1":
        pytest.fail(f"real vLLM is required here ({REQUIRE_ENV}=1) but: {reason}")
    _SKIPPED.append(reason)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and len(_SKIPPED) == 1:
        reporter.write_line(f"\n*** REAL-VLLM TESTS SKIPPED: {reason} ***", red=True, bold=True)
    pytest.skip(f"REAL-VLLM TEST SKIPPED (not a pass): {reason}")


def pytest_terminal_summary(terminalreporter):
    if _SKIPPED:
        skipped = [r for r in terminalreporter.stats.get("skipped", [])
                   if "REAL-VLLM TEST SKIPPED" in str(getattr(r, "longrepr", ""))]
        terminalreporter.write_sep("!", "REAL-VLLM TESTS SKIPPED - NOT A PASS", red=True,
                                   bold=True)
        terminalreporter.write_line(f"reason: {_SKIPPED[0]}; {len(skipped)} test(s) did not "
                                    "run against real vLLM", red=True, bold=True)


@pytest.fixture(scope="session")
def vllm_python(request):
    """The vLLM venv's interpreter, or a loud skip (a failure under REQUIRE_ENV)."""
    if os.environ.get(SKIP_ENV) == "1":
        _unavailable(request, f"{SKIP_ENV}=1")
    from agentic_grasp_lab.testing.vllm_server import VllmUnavailableHere, vllm_python as find

    try:
        return find()
    except VllmUnavailableHere as exc:
        _unavailable(request, str(exc))


@pytest.fixture(scope="session")
def vllm_server(request, vllm_python):
    """The tiny random Qwen3-VL served by real vLLM with serve.sh's flags (see
    agentic_grasp_lab/testing/vllm_server.py: --kv-cache-dtype and --quantization dropped)."""
    from agentic_grasp_lab.testing.vllm_server import VllmServer

    with VllmServer(startup_timeout_s=STARTUP_TIMEOUT_S) as server:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"\n[vllm] tiny Qwen3-VL ({server.model.get('parameters')} "
                                f"parameters) served at {server.url}, start-up "
                                f"{server.startup_s:.1f} s")
        yield server


# ---- PostgreSQL (the fleet store's tests: test/core/test_fleet_store.py, test/ros/...) -------
@pytest.fixture(scope="session")
def pg_server():
    """One throw-away PostgreSQL 15 for the session (agentic_grasp_lab/testing/pg_server.py).

    Never a skip: missing binaries fail the test with the fix (scripts/setup.sh
    --with-postgres installs them; scripts/test.sh does)."""
    from agentic_grasp_lab.testing.pg_server import PgServer

    try:
        server = PgServer()
    except (FileNotFoundError, RuntimeError, OSError) as exc:
        pytest.fail(f"the fleet-store tests need a PostgreSQL 15 server: {exc}")
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def pg_dsn(pg_server, request):
    """A DSN of a fresh, empty database on the session's server (one per test)."""
    import re
    import uuid

    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:40] + "_" + \
        uuid.uuid4().hex[:6]
    return pg_server.create_database(name)
