"""Does a service call get answered when the server or the client spins rclpy's
EventsExecutor? (README, "ROS overhead").

Nothing of the project's nodes is in it: a server process with one plain
``rcl_interfaces/GetParameters`` service that returns an empty response, and a client
process that calls it ``calls`` times, each spinning the executor named on its command
line. Every (server, client) pair of ``multi`` (MultiThreadedExecutor) and ``events``
(``rclpy.experimental.EventsExecutor``) is run in fresh processes, so a broken executor
cannot hang the probe: a call not answered within ``timeout_s`` ends that pair.

    python -m agentic_grasp_lab.ros.benchmarks.executor_probe [--calls N] [--timeout S]

prints one line per pair: the calls answered and their p50 latency, or the first call that
got no answer. Exit status 0 when the multi/multi pair answered every call (the probe
itself works), else 1. With the rclpy wheel pinned here (7.1.6) every pair with an events
side answers nothing. rclpy 7.1.11 (not on PyPI) changed the EventsExecutor's handling of
async service callbacks; this probe's callback is synchronous, so it is the measurement to
repeat on a newer rclpy.
"""
from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

import rclpy
from rcl_interfaces.srv import GetParameters
from rclpy.executors import ExternalShutdownException

from agentic_grasp.ros.common.runner import EXECUTOR_ENV, make_executor

KINDS = ("multi", "events")
SERVICE = "executor_probe"
MODULE = "agentic_grasp_lab.ros.benchmarks.executor_probe"
#: The domains the probe runs in: above the 5-94 that scripts/test.sh and the test fixtures
#: draw from, within the 0-101 that ROS 2 allows on Linux.
PROBE_DOMAINS = range(95, 101)
#: How long a server process may take to say "ready" (rclpy's import and init on a loaded
#: 2-core machine take seconds).
START_S = 60.0


def probe_domain() -> int:
    """This process's probe domain (one of PROBE_DOMAINS, by pid, so two probes run at once
    on one host seldom share one)."""
    return PROBE_DOMAINS[os.getpid() % len(PROBE_DOMAINS)]


def _executor(kind: str):
    """The nodes' own choice of executor (runner.make_executor); probe_pair clears its
    environment override in the children, so ``kind`` is what runs."""
    return make_executor(kind, num_threads=2)


def serve(kind: str) -> None:
    """The server process: answer until SIGINT/SIGTERM."""
    rclpy.init()
    node = rclpy.create_node("executor_probe_server")
    node.create_service(GetParameters, SERVICE, lambda _req, resp: resp)
    executor = _executor(kind)
    executor.add_node(node)
    print("ready", flush=True)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    os._exit(0)          # an executor stuck in its C++ spin would hold a normal exit


def call(kind: str, calls: int, timeout_s: float) -> None:
    """The client process: one line, "answered N p50 MS" or "unanswered I"."""
    rclpy.init()
    node = rclpy.create_node("executor_probe_client")
    client = node.create_client(GetParameters, SERVICE)
    executor = _executor(kind)
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    if not client.wait_for_service(timeout_sec=timeout_s):
        print("no-service", flush=True)
        os._exit(0)
    latencies: List[float] = []
    for i in range(calls):
        done = threading.Event()
        start = time.perf_counter()
        client.call_async(GetParameters.Request()).add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            print(f"unanswered {i}", flush=True)
            os._exit(0)
        latencies.append((time.perf_counter() - start) * 1000.0)
    latencies.sort()
    print(f"answered {len(latencies)} p50 {latencies[len(latencies) // 2]:.3f}", flush=True)
    os._exit(0)


def probe_pair(server: str, client: str, calls: int, timeout_s: float,
               domain: Optional[int] = None) -> Tuple[str, Optional[float]]:
    """(the client's line, its p50 in ms or None) for one pair, in fresh processes in ROS
    domain ``domain`` (None: :func:`probe_domain`)."""
    me = [sys.executable, "-m", MODULE]
    env = {k: v for k, v in os.environ.items() if k != EXECUTOR_ENV}
    env["ROS_DOMAIN_ID"] = str(probe_domain() if domain is None else int(domain))
    srv = subprocess.Popen(me + ["--serve", server], stdout=subprocess.PIPE, text=True,
                           env=env)
    try:
        # bounded: a server that neither starts nor dies must not hang the probe
        if not select.select([srv.stdout], [], [], START_S)[0]:
            return f"server did not start within {START_S:.0f} s", None
        ready = srv.stdout.readline().strip()
        if ready != "ready":
            return f"server did not start ({ready!r})", None
        wall = timeout_s * (calls + 2) + 20.0
        out = subprocess.run(me + ["--call", client, "--calls", str(calls), "--timeout",
                                   str(timeout_s)], capture_output=True, text=True,
                             timeout=wall, env=env)
        line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else \
            f"client exited {out.returncode}: {out.stderr.strip()[-200:]}"
        parts = line.split()
        p50 = float(parts[3]) if parts[:1] == ["answered"] and len(parts) == 4 else None
        return line, p50
    finally:
        srv.terminate()
        try:
            srv.wait(5.0)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


Pair = Tuple[str, str]


def run(calls: int = 20, timeout_s: float = 5.0, pairs: Optional[List[Pair]] = None
        ) -> Dict[Pair, Tuple[str, Optional[float]]]:
    """Every pair (server kind, client kind) -> probe_pair's answer."""
    pairs = pairs or [(s, c) for s in KINDS for c in KINDS]
    return {pair: probe_pair(pair[0], pair[1], calls, timeout_s) for pair in pairs}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--call", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per call")
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    if args.call:
        call(args.call, args.calls, args.timeout)
        return 0
    results = run(args.calls, args.timeout)
    for (server, client), (line, p50) in results.items():
        verdict = f"p50 {p50:.2f} ms" if p50 is not None else "NOT ANSWERED"
        print(f"server {server:6} client {client:6}  {verdict:14}  ({line})")
    return 0 if results[("multi", "multi")][1] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
