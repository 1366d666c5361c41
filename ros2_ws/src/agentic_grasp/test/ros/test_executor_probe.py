"""The executor probe (issue 27, item 3) measures what it says: a MultiThreadedExecutor pair
answers every call, and a client with no server reports that instead of hanging. The
EventsExecutor pairs are what the probe is for; their outcome depends on the rclpy release
(none answers with the pinned 7.1.6: README, "ROS overhead"), so they are run by hand, not
asserted here."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

pytest.importorskip("rclpy")

from agentic_grasp.ros.benchmarks import executor_probe  # noqa: E402


def test_a_multithreaded_pair_answers_every_call():
    line, p50 = executor_probe.probe_pair("multi", "multi", calls=5, timeout_s=10.0)
    assert line.startswith("answered 5 "), line
    assert p50 is not None and 0.0 < p50 < 10_000.0


def test_a_client_without_a_server_says_so_within_its_timeout():
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", executor_probe.MODULE, "--call", "multi",
                          "--calls", "1", "--timeout", "1.0"], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "no-service", (out.stdout, out.stderr)
    assert time.monotonic() - start < 30.0
