"""A recorded session of paper tasks: bringup with the recorder, one goal per (task, seed).

``agentic-grasp bag record DIR --tasks ... --seeds 0-4`` (commands/bag.py) starts the graph
as ``agentic-grasp bringup --record DIR`` does, waits until the recorder has subscribed to
the planner's topics, and for each task and seed loads the task's scene into the simulator
and sends its instruction with that seed as a GraspObject goal (as ``agentic-grasp grasp
--task T --seed S`` does), then stops the graph with SIGINT so the bag is closed. The bag is
what replay evaluates (docs/recording-replay.md).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from agentic_grasp.core.sim.scenes import load_task
from agentic_grasp.ros.graph.launcher import Launcher

#: Topics the recorder must have subscribed to before the first goal.
WATCHED = ("/planner/decision_inputs", "/planner/attempts", "/planner/goal_log")


def parse_seeds(text: str) -> List[int]:
    """"0-4" or "0,2,5" or "3" -> the seeds."""
    seeds: List[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            seeds.extend(range(int(lo), int(hi) + 1))
        elif part:
            seeds.append(int(part))
    return seeds


def record_session(bag: str, goals: Sequence[Tuple[str, int]], bringup: Dict[str, str],
                   timeout_s: float = 300.0, server_timeout_s: float = 120.0,
                   say: Callable[[str], None] = print) -> List[Dict[str, Any]]:
    """Record ``goals`` ((task, seed) pairs) to ``bag``; each goal's summary."""
    # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
    from agentic_grasp.ros.client.graph_client import GraphClient, GraphError
    from agentic_grasp.ros.client.planner import PlannerClient, _wait_for_oracle, load_scene

    if Path(bag).exists():
        raise FileExistsError(f"{bag} exists: record to a new folder")
    launcher = Launcher({**bringup, "record": str(bag)}, log_prefix=False)
    launcher.start()
    out: List[Dict[str, Any]] = []
    try:
        with GraphClient("agentic_grasp_bag_record") as graph:
            planner = PlannerClient(graph)
            try:
                deadline = time.monotonic() + server_timeout_s
                while any(graph.node.count_subscribers(t) < 1 for t in WATCHED):
                    if time.monotonic() > deadline:
                        raise GraphError("the recorder did not subscribe in time")
                    time.sleep(0.2)
                for i, (task, seed) in enumerate(goals):
                    instruction = load_task(task).instruction
                    started = time.monotonic()
                    loaded = load_scene(graph, task, seed, server_timeout_s, settle_s=0.5)
                    _wait_for_oracle(graph, loaded.object_ids, server_timeout_s)
                    result = planner.grasp(instruction, "", None, timeout_s=timeout_s,
                                           server_timeout_s=server_timeout_s, seed=seed)
                    summary = {"task": task, "seed": seed, "success": bool(result.success),
                               "error_code": int(result.error_code),
                               "grasped_ids": list(result.grasped_ids),
                               "attempts": len(result.attempts),
                               "wall_s": round(time.monotonic() - started, 1)}
                    out.append(summary)
                    say(f"[{i + 1}/{len(goals)}] {task} seed {seed}: "
                        f"{'success' if summary['success'] else 'failure'}, "
                        f"{summary['attempts']} record(s), {summary['wall_s']} s")
                time.sleep(1.0)              # the last goal's messages reach the recorder
            finally:
                planner.close()
    finally:
        launcher.stop()
    return out


def task_goals(tasks: Sequence[str], seeds: Sequence[int],
               all_tasks: Optional[Sequence[str]] = None) -> List[Tuple[str, int]]:
    """(task, seed) pairs, seeds outermost (each seed's round covers every task); a task
    written ``task:seed`` is recorded once, at that seed, in the first round."""
    if list(tasks) == ["all"]:
        tasks = list(all_tasks or ())
    out: List[Tuple[str, int]] = []
    for i, seed in enumerate(seeds):
        for task in tasks:
            name, _, fixed = task.partition(":")
            if not fixed:
                out.append((name, seed))
            elif i == 0:
                out.append((name, int(fixed)))
    return out


__all__ = ["parse_seeds", "record_session", "task_goals"]
