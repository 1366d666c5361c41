"""Soak: many goals over all 12 scenes through the whole graph; memory per node and latency.

Goal i runs task ``TASKS[i % 12]`` with trial seed ``i // 12`` (the scene's own instruction,
LoadScene's answer), full configuration, the planner with ``memory_lifetime: goal`` so goal
1000 plans like goal 1. The scene load and the wait until perception has taken it are
untimed; a goal is timed from sending it to its result. Every ``every`` goals the resident
set (VmRSS) of each node process is sampled. A goal with no result within ``goal_timeout_s``
counts as hung (the soak test asserts there are none); the run goes on with the next goal.

Every goal's time is kept (``timed``) with the feedback stages as they arrived (ms after the
goal was sent), so a slow goal shows where its time went. Reported: RSS per node at each
checkpoint, its growth after the first checkpoint scaled to
MB per 1,000 goals, latency p50/p99 of all goals and of the single-grasp (sg_*) goals with
their p99/p50 ratio (also over the single-grasp goals of one attempt: a goal that retries
runs perception and the arm again, which is work, not jitter), and success counts per task
family. ``perception`` is the graph's backend (oracle, as the soak always ran, or vlm_sim).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from agentic_grasp_lab.benchmarks.timing import line, summarize
from agentic_grasp.core import paths
from agentic_grasp.ros.client.graph_client import GraphClient, GraphError
from agentic_grasp.ros.client.planner import PlannerClient, load_scene, wait_until_perceived
from agentic_grasp.ros.graph.launcher import Launcher
from agentic_grasp_interfaces.srv import Perceive

#: The 12 benchmark scenes in a fixed order (config/scenes/*.yaml, Sec. V-A).
TASKS: List[str] = sorted(p.stem for p in (paths.config_dir() / "scenes").glob("*.yaml"))


def rss_mb(pid: int) -> Optional[float]:
    """Resident set of a process (MB), None when it is gone."""
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def growth_per_1000(checkpoints: List[Dict[str, Any]], node: str) -> Optional[float]:
    """RSS growth of ``node`` from the first checkpoint to the last, per 1,000 goals (MB)."""
    if len(checkpoints) < 2:
        return None
    first, last = checkpoints[0], checkpoints[-1]
    a, b = first["rss_mb"].get(node), last["rss_mb"].get(node)
    goals = last["goals"] - first["goals"]
    if a is None or b is None or goals <= 0:
        return None
    return (b - a) * 1000.0 / goals


def run(n: int = 1000, every: int = 100, goal_timeout_s: float = 60.0,
        on_checkpoint=None, perception: str = "oracle", on_goal=None) -> Dict[str, Any]:
    launcher = Launcher({"acquired": "none", "perception": perception},
                        extra_params={"planner": {"memory_lifetime": "goal"}})
    launcher.start()
    launcher.supervise()
    samples: Dict[str, List[float]] = {"all": [], "single_grasp": [],
                                       "single_grasp_one_attempt": []}
    outcomes: Dict[str, Dict[str, int]] = {}
    hung: List[str] = []
    errors: List[str] = []
    checkpoints: List[Dict[str, Any]] = []
    timed: List[Dict[str, Any]] = []        # every goal's time, to read the tail by
    try:
        with GraphClient("bench_soak") as graph:
            planner = PlannerClient(graph)
            perceive = graph.node.create_client(Perceive, "perceive")
            if not planner.wait_for_server(60.0):
                raise RuntimeError("the planner did not come up")
            for i in range(n):
                task, seed = TASKS[i % len(TASKS)], i // len(TASKS)
                family = task.split("_")[0]
                tally = outcomes.setdefault(family, {"goals": 0, "succeeded": 0})
                tally["goals"] += 1
                try:
                    loaded = load_scene(graph, task, seed)
                    if perception == "oracle":      # vlm_sim may miss an object
                        wait_until_perceived(graph, perceive, loaded.object_ids, 30.0)
                    stages: List[Any] = []          # (stage, ms after sending), the tail's
                    started = time.perf_counter()

                    def on_feedback(fb: Any, t0: float = started, into=stages) -> None:
                        into.append((fb.stage, round((time.perf_counter() - t0) * 1e3, 1)))
                    result = planner.grasp(loaded.instruction, on_feedback=on_feedback,
                                           timeout_s=goal_timeout_s, server_timeout_s=30.0)
                    elapsed = time.perf_counter() - started
                    samples["all"].append(elapsed)
                    if family == "sg":
                        samples["single_grasp"].append(elapsed)
                        if len(result.attempts) == 1:
                            samples["single_grasp_one_attempt"].append(elapsed)
                    tally["succeeded"] += int(result.success)
                    timed.append({"goal": i, "task": task, "seed": seed,
                                  "ms": round(elapsed * 1e3, 1),
                                  "attempts": len(result.attempts),
                                  "success": bool(result.success), "stages": stages})
                    if on_goal is not None:
                        on_goal(timed[-1])
                except GraphError as exc:
                    (hung if "no result within" in str(exc) else errors).append(
                        f"goal {i} ({task} seed {seed}): {exc}")
                if (i + 1) % every == 0 or i + 1 == n:
                    point = {"goals": i + 1,
                             "rss_mb": {name: rss_mb(proc.pid)
                                        for name, proc in launcher.procs.items()}}
                    checkpoints.append(point)
                    if on_checkpoint is not None:
                        on_checkpoint(point)
            planner.close()
    finally:
        launcher.stop()
    latency = {k: summarize(v) for k, v in samples.items() if v}
    sg = latency.get("single_grasp")
    one = latency.get("single_grasp_one_attempt")
    return {"goals": n, "perception": perception, "hung": hung, "errors": errors,
            "outcomes": outcomes,
            "checkpoints": checkpoints, "latency": latency,
            "single_grasp_p99_over_p50": sg["p99_ms"] / sg["p50_ms"] if sg else None,
            "one_attempt_p99_over_p50": one["p99_ms"] / one["p50_ms"] if one else None,
            "rss_growth_mb_per_1000": {name: growth_per_1000(checkpoints, name)
                                       for name in (checkpoints[0]["rss_mb"]
                                                    if checkpoints else {})},
            "restarts": launcher.restarts(), "timed": timed}


def format_checkpoint(point: Dict[str, Any]) -> str:
    rss = "  ".join(f"{name} {mb:6.1f}" if mb is not None else f"{name} gone"
                    for name, mb in point["rss_mb"].items())
    return f"after {point['goals']:5d} goals, RSS MB: {rss}"


def report(result: Dict[str, Any]) -> str:
    rows = [format_checkpoint(p) for p in result["checkpoints"]]
    growth = ", ".join(f"{name} {value:+.1f}" for name, value in
                       result["rss_growth_mb_per_1000"].items() if value is not None)
    rows.append(f"RSS growth after the first checkpoint, MB per 1,000 goals: {growth or 'n/a'}")
    for key, label in (("all", "goal to result, all scenes"),
                       ("single_grasp", "goal to result, single-grasp scenes"),
                       ("single_grasp_one_attempt", "  of them, goals of one attempt")):
        if key in result["latency"]:
            rows.append(line(label, result["latency"][key]))
    if result["single_grasp_p99_over_p50"] is not None:
        rows.append(f"single-grasp p99 / p50: {result['single_grasp_p99_over_p50']:.2f}"
                    + (f" (goals of one attempt: {result['one_attempt_p99_over_p50']:.2f}; "
                       "a retried goal does its work again)"
                       if result["one_attempt_p99_over_p50"] is not None else ""))
    rows.append("succeeded: " + ", ".join(f"{family} {t['succeeded']}/{t['goals']}"
                                          for family, t in result["outcomes"].items()))
    rows.append(f"hung goals: {len(result['hung'])}; other errors: {len(result['errors'])}; "
                f"restarts: {result['restarts']}")
    rows += [f"  {text}" for text in result["hung"] + result["errors"]]
    return "\n".join(rows)
