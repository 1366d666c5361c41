"""One single-grasp trial through the whole graph beside the bare rclpy action round trip.

A trial is one GraspObject goal "pick up the banana" on sg_banana (oracle perception,
simulator arm, phases without wall-clock delay): perceive, retrieve, infer_constraints, one
ExecuteGrasp of three simulator phases and the feedback in between, goal sent to result
received. The scene is reloaded (untimed, until perception has taken it) before every
trial, and the planner runs with ``memory_lifetime: goal`` so every trial plans from
retrieval as the first one does. Beside it, in the same run: a do-nothing action round
trip (benchmarks/bare_action_server.py, the floor any action pays here) and the same trial
in process (core.planner.run_trial), which is the planner's own cost without ROS.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any, Dict

from agentic_grasp.backends.dependencies import OrderedActionClient
from agentic_grasp.benchmarks.timing import line, summarize
from agentic_grasp.client import GraphClient
from agentic_grasp.planner_client import load_scene, wait_until_perceived
from agentic_grasp.launcher import Launcher
from agentic_grasp_interfaces.action import ExecuteGrasp, GraspObject
from agentic_grasp_interfaces.srv import Perceive

TASK = "sg_banana"
INSTRUCTION = "pick up the banana"


def _round_trip(client: OrderedActionClient, goal: Any, timeout_s: float = 30.0) -> tuple:
    """(seconds from sending the goal to receiving its result, the result response)."""
    done = threading.Event()
    box: Dict[str, Any] = {}

    def on_result(future: Any) -> None:
        box["response"] = future.result()
        done.set()

    def on_goal(future: Any) -> None:
        handle = future.result()
        if not handle.accepted:
            box["response"] = None
            done.set()
            return
        handle.get_result_async().add_done_callback(on_result)

    start = time.perf_counter()
    client.send_goal_async(goal).add_done_callback(on_goal)
    if not done.wait(timeout_s):
        raise RuntimeError("action round trip timed out")
    return time.perf_counter() - start, box["response"]


def _inprocess(n: int) -> Dict[str, float]:
    from agentic_grasp.core.planner import run_trial

    run_trial(TASK, "full", 0)                      # builds the shared resources once
    return summarize([run_trial(TASK, "full", i % 5).wall_s for i in range(n)])


def run(n: int = 50, warmup: int = 5, settle_s: float = 0.15) -> Dict[str, Any]:
    """p50/p90/p99 of the whole-graph trial, the bare action round trip and the in-process
    trial; also the trial success rate (every trial should succeed on sg_banana)."""
    launcher = Launcher({"acquired": "none", "perception": "oracle"}, log_prefix=True,
                        extra_params={"planner": {"memory_lifetime": "goal"}})
    launcher.start()
    bare = subprocess.Popen([sys.executable, "-m",
                             "agentic_grasp.benchmarks.bare_action_server"],
                            start_new_session=True)
    out: Dict[str, Any] = {}
    try:
        with GraphClient("bench_planner") as graph:
            planner = OrderedActionClient(graph.node, GraspObject, "grasp_object")
            bare_client = OrderedActionClient(graph.node, ExecuteGrasp, "bare_execute_grasp")
            perceive = graph.node.create_client(Perceive, "perceive")
            for client in (planner, bare_client):
                if not client.wait_for_server(timeout_sec=60.0):
                    raise RuntimeError("action server did not come up")
            goal = GraspObject.Goal(instruction=INSTRUCTION)
            samples: Dict[str, list] = {"trial": [], "bare": []}
            successes = 0
            failures = []
            for i in range(n + warmup):
                # Untimed: put the banana back and wait until perception has taken it.
                loaded = load_scene(graph, TASK, i % 5)
                wait_until_perceived(graph, perceive, loaded.object_ids)
                time.sleep(settle_s)                 # let the sim finish its render
                t_trial, response = _round_trip(planner, goal)
                time.sleep(settle_s)
                t_bare, _ = _round_trip(bare_client, ExecuteGrasp.Goal())
                if i >= warmup:
                    samples["trial"].append(t_trial)
                    samples["bare"].append(t_bare)
                    ok = response is not None and response.result.success
                    successes += int(ok)
                    if not ok:
                        failures.append(f"seed {i % 5}: " + (response.result.message
                                                            if response else "rejected"))
            out["planner_trial_ros"] = summarize(samples["trial"])
            out["bare_action_round_trip"] = summarize(samples["bare"])
            out["trial_success_rate"] = successes / max(1, n)
            out["failures"] = failures
            planner.destroy()
            bare_client.destroy()
    finally:
        bare.send_signal(2)
        bare.wait(timeout=10)
        launcher.stop()
    out["planner_trial_inprocess"] = _inprocess(n)
    out["ratio_p50"] = (out["planner_trial_ros"]["p50_ms"]
                        / out["bare_action_round_trip"]["p50_ms"])
    return out


def report(result: Dict[str, Any]) -> str:
    """The printed form: one line per measurement, then the ratio."""
    return "\n".join([
        line("GraspObject trial through the graph", result["planner_trial_ros"]),
        line("bare rclpy action round trip", result["bare_action_round_trip"]),
        line("same trial in process (run_trial)", result["planner_trial_inprocess"]),
        f"trial / bare action p50 ratio: {result['ratio_p50']:.1f}; trials succeeded: "
        f"{result['trial_success_rate']:.0%}"]
        + [f"  failed trial: {text}" for text in result.get("failures", [])])


def main() -> None:
    print(report(run()))


if __name__ == "__main__":
    main()
