#!/usr/bin/env python3
"""What the MCP server adds to a grasp: the same goal through ``agentic-grasp grasp``'s client
and through ``agentic-grasp mcp`` (the SDK's stdio client), interleaved, N goals each.

    source scripts/env.sh && python scripts/bench_mcp.py [--goals 20] [--cli]

Starts the whole graph (oracle perception, acquisition off), then for each round: load the
scene, time PlannerClient.grasp (the call ``agentic-grasp grasp`` makes, in this process:
no interpreter start-up), load the scene again, time ``call_tool("grasp")`` on an MCP
server started once beside the graph. ``--cli`` also times the whole ``agentic-grasp grasp
--json`` command (a new process per goal: interpreter, rclpy and discovery included).
Prints p50/p90 of each and the p50 difference; the goal (scene, instruction,
configuration, seed) is the same for both paths.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def percentile(values, q):
    from agentic_grasp.core.stats import percentiles

    return percentiles(values, [q])[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=20)
    parser.add_argument("--task", default="sg_cup")
    parser.add_argument("--instruction", default="pick up the ceramic cup")
    parser.add_argument("--configuration", default="no_episodic_memory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cli", action="store_true",
                        help="also time the whole `agentic-grasp grasp` command per goal")
    args = parser.parse_args()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

    import anyio
    from mcp import Client, StdioServerParameters

    from agentic_grasp.ros.client.graph_client import GraphClient
    from agentic_grasp.ros.graph.launcher import Launcher
    from agentic_grasp.ros.client.planner import PlannerClient, _wait_for_oracle, load_scene

    launcher = Launcher({"perception": "oracle", "acquired": "none"})
    launcher.start()
    graph = GraphClient("bench_mcp")
    planner = PlannerClient(graph)
    direct, via_mcp, cli = [], [], []

    def load() -> None:
        loaded = load_scene(graph, args.task, args.seed, 30.0, settle_s=0.5)
        _wait_for_oracle(graph, loaded.object_ids, 30.0)

    def grasp_direct() -> float:
        start = time.perf_counter()
        result = planner.grasp(args.instruction, args.configuration, lambda fb: None,
                               timeout_s=120.0, server_timeout_s=30.0, seed=args.seed)
        elapsed = time.perf_counter() - start
        assert result.success, result.message
        return elapsed

    def grasp_cli() -> float:
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "agentic_grasp.cli", "grasp",
                              args.instruction, "--configuration", args.configuration,
                              "--task", args.task, "--seed", str(args.seed), "--json"],
                             capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        return time.perf_counter() - start

    async def run_mcp() -> None:
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "agentic_grasp.cli", "mcp",
                                             "--allow-motion"], env=dict(os.environ))
        async with Client(params, read_timeout_seconds=180.0) as client:
            progress = []

            async def on_progress(value, total, message):
                progress.append(message)

            async def grasp_mcp() -> float:
                start = time.perf_counter()
                result = await client.call_tool(
                    "grasp", {"instruction": args.instruction,
                              "configuration": args.configuration, "seed": args.seed},
                    progress_callback=on_progress)
                elapsed = time.perf_counter() - start
                assert not result.is_error and result.structured_content["success"], \
                    result.content[0].text
                return elapsed

            for warm in range(2):           # both paths once, untimed: discovery, caches
                await anyio.to_thread.run_sync(load)
                await anyio.to_thread.run_sync(grasp_direct)
                await anyio.to_thread.run_sync(load)
                await grasp_mcp()
            for k in range(args.goals):
                await anyio.to_thread.run_sync(load)
                direct.append(await anyio.to_thread.run_sync(grasp_direct))
                await anyio.to_thread.run_sync(load)
                via_mcp.append(await grasp_mcp())
                if args.cli:
                    cli.append(await anyio.to_thread.run_sync(grasp_cli))
                print(f"goal {k + 1}/{args.goals}: client {direct[-1] * 1e3:.1f} ms, mcp "
                      f"{via_mcp[-1] * 1e3:.1f} ms"
                      + (f", command {cli[-1] * 1e3:.0f} ms" if cli else ""), flush=True)

    try:
        anyio.run(run_mcp)
    finally:
        planner.close()
        graph.close()
        launcher.stop()

    def line(name, values):
        return (f"{name:<36} n={len(values)} p50 {percentile(values, 50) * 1e3:8.1f} ms  "
                f"p90 {percentile(values, 90) * 1e3:8.1f} ms  mean "
                f"{statistics.mean(values) * 1e3:8.1f} ms")

    print(line("agentic-grasp grasp's client", direct))
    print(line("agentic-grasp mcp (stdio)", via_mcp))
    if cli:
        print(line("agentic-grasp grasp (whole command)", cli))
    diffs = [m - d for m, d in zip(via_mcp, direct)]
    print(f"MCP overhead: p50(mcp) - p50(client) = "
          f"{(percentile(via_mcp, 50) - percentile(direct, 50)) * 1e3:+.1f} ms; p50 of the "
          f"per-round differences {percentile(diffs, 50) * 1e3:+.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
