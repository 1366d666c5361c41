"""One single-grasp trial through the whole graph beside the bare rclpy action round trip.

A trial is one GraspObject goal "pick up the banana" on sg_banana (oracle perception,
simulator arm, phases without wall-clock delay): perceive, retrieve, infer_constraints, one
ExecuteGrasp of three simulator phases and the feedback in between, goal sent to result
received. The scene is reloaded (untimed, until perception has taken it) before every
trial, and the planner runs with ``memory_lifetime: goal`` so every trial plans from
retrieval as the first one does. Beside it, in the same run: a do-nothing action round
trip (ros/benchmarks/bare_action_server.py, the floor any action pays here), one ExecuteGrasp
goal sent straight to the graph's executor (the banana reloaded first, untimed), and the
same trial in process (core.planner.run_trial), which is the planner's own cost without ROS,
and the same trial sent straight to the planner's ``planner/grasp_object`` (the scene
reloaded first, untimed), which shows what the front (``grasp_object``, ros/nodes/front_node.py,
one forwarding hop) costs.
The trial's feedback is timed from the client too: when each stage was first reported
(perceive, retrieve, reason, plan, execute, reflect, done), which shows where the hops go.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any, Dict, Optional

from agentic_grasp.ros.backends.dependencies import OrderedActionClient
from agentic_grasp.core.benchmarks.timing import line, summarize
from agentic_grasp.ros.client import GraphClient
from agentic_grasp.ros.planner_client import load_scene, wait_until_perceived
from agentic_grasp.ros.launcher import Launcher
from agentic_grasp_interfaces.action import ExecuteGrasp, GraspObject
from agentic_grasp_interfaces.srv import Perceive

TASK = "sg_banana"
INSTRUCTION = "pick up the banana"


def _round_trip(client: OrderedActionClient, goal: Any, timeout_s: float = 30.0,
                stages: Optional[Dict[str, float]] = None) -> tuple:
    """(seconds from sending the goal to receiving its result, the result response);
    ``stages`` gets the seconds at which each feedback stage was first received."""
    done = threading.Event()
    box: Dict[str, Any] = {}
    start = 0.0

    def on_feedback(msg: Any) -> None:
        stage = getattr(msg.feedback, "stage", "")
        if stages is not None and stage and stage not in stages:
            stages[stage] = time.perf_counter() - start

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
    client.send_goal_async(goal, feedback_callback=on_feedback).add_done_callback(on_goal)
    if not done.wait(timeout_s):
        raise RuntimeError("action round trip timed out")
    return time.perf_counter() - start, box["response"]


def _inprocess(n: int) -> Dict[str, float]:
    from agentic_grasp.core.planner import run_trial

    run_trial(TASK, "full", 0)                      # builds the shared resources once
    return summarize([run_trial(TASK, "full", i % 5).wall_s for i in range(n)])


def run(n: int = 50, warmup: int = 5, settle_s: float = 0.15,
        extra_params: Optional[Dict[str, Dict[str, Any]]] = None) -> Dict[str, Any]:
    """p50/p90/p99 of the whole-graph trial, the bare action round trip and the in-process
    trial; also the trial success rate (every trial should succeed on sg_banana).
    ``extra_params``: node parameters to try, e.g. {"executor": {"sim.whole_attempt": True}}."""
    params: Dict[str, Dict[str, Any]] = {"planner": {"memory_lifetime": "goal"}}
    for node, values in (extra_params or {}).items():
        params[node] = {**params.get(node, {}), **values}
    launcher = Launcher({"acquired": "none", "perception": "oracle"}, log_prefix=True,
                        extra_params=params)
    launcher.start()
    bare = subprocess.Popen([sys.executable, "-m",
                             "agentic_grasp.ros.benchmarks.bare_action_server"],
                            start_new_session=True)
    out: Dict[str, Any] = {}
    try:
        with GraphClient("bench_planner") as graph:
            planner = OrderedActionClient(graph.node, GraspObject, "grasp_object")
            bare_client = OrderedActionClient(graph.node, ExecuteGrasp, "bare_execute_grasp")
            execute = OrderedActionClient(graph.node, ExecuteGrasp, "execute_grasp")
            direct = OrderedActionClient(graph.node, GraspObject, "planner/grasp_object")
            perceive = graph.node.create_client(Perceive, "perceive")
            for client in (planner, bare_client, execute, direct):
                if not client.wait_for_server(timeout_sec=60.0):
                    raise RuntimeError("action server did not come up")
            goal = GraspObject.Goal(instruction=INSTRUCTION)
            samples: Dict[str, list] = {"trial": [], "bare": [], "execute": [], "direct": []}
            stage_samples: Dict[str, list] = {}
            successes = 0
            failures = []
            for i in range(n + warmup):
                # Untimed: put the banana back and wait until perception has taken it.
                loaded = load_scene(graph, TASK, i % 5)
                wait_until_perceived(graph, perceive, loaded.object_ids)
                time.sleep(settle_s)                 # let the sim finish its render
                stages: Dict[str, float] = {}
                t_trial, response = _round_trip(planner, goal, stages=stages)
                time.sleep(settle_s)
                t_bare, _ = _round_trip(bare_client, ExecuteGrasp.Goal())
                graph.load_scene(TASK, i % 5)        # untimed: the banana back on the table
                time.sleep(settle_s)
                t_exec, _ = _round_trip(execute, _execute_goal(graph, loaded.target_ids[0]))
                loaded = load_scene(graph, TASK, i % 5)          # untimed, as the first
                wait_until_perceived(graph, perceive, loaded.object_ids)
                time.sleep(settle_s)
                t_direct, _ = _round_trip(direct, goal)
                if i >= warmup:
                    samples["trial"].append(t_trial)
                    samples["bare"].append(t_bare)
                    samples["execute"].append(t_exec)
                    samples["direct"].append(t_direct)
                    for stage, at in stages.items():
                        stage_samples.setdefault(stage, []).append(at)
                    ok = response is not None and response.result.success
                    successes += int(ok)
                    if not ok:
                        failures.append(f"seed {i % 5}: " + (response.result.message
                                                            if response else "rejected"))
            out["planner_trial_ros"] = summarize(samples["trial"])
            out["bare_action_round_trip"] = summarize(samples["bare"])
            out["execute_grasp_ros"] = summarize(samples["execute"])
            out["planner_trial_direct"] = summarize(samples["direct"])
            out["stages_first_seen"] = {k: summarize(v) for k, v in stage_samples.items()}
            out["trial_success_rate"] = successes / max(1, n)
            out["failures"] = failures
            for client in (planner, bare_client, execute, direct):
                client.destroy()
    finally:
        bare.send_signal(2)
        bare.wait(timeout=10)
        launcher.stop()
    out["planner_trial_inprocess"] = _inprocess(n)
    bare_p50 = out["bare_action_round_trip"]["p50_ms"]
    out["ratio_p50"] = out["planner_trial_ros"]["p50_ms"] / bare_p50
    out["execute_ratio_p50"] = out["execute_grasp_ros"]["p50_ms"] / bare_p50
    out["direct_ratio_p50"] = out["planner_trial_direct"]["p50_ms"] / bare_p50
    return out


def _execute_goal(graph: GraphClient, target_id: str) -> ExecuteGrasp.Goal:
    """The heuristic grasp of the target, from the simulator's ground truth (the
    benchmark's shortcut: no perception in this measurement)."""
    from agentic_grasp.ros.conversions.grasp import grasp_to_msg
    from agentic_grasp.core.heuristic import heuristic_grasp

    target = {o.id: o for o in graph.ground_truth()}[target_id]
    return ExecuteGrasp.Goal(target_id=target_id, grasp=grasp_to_msg(heuristic_grasp(target)))


def report(result: Dict[str, Any]) -> str:
    """The printed form: one line per measurement, then the ratio."""
    stages = result.get("stages_first_seen", {})
    return "\n".join([
        line("GraspObject trial through the graph", result["planner_trial_ros"]),
        line("bare rclpy action round trip", result["bare_action_round_trip"]),
        line("ExecuteGrasp through the graph's executor", result["execute_grasp_ros"]),
        line("same trial straight to planner/grasp_object", result["planner_trial_direct"]),
        line("same trial in process (run_trial)", result["planner_trial_inprocess"]),
        f"trial / bare action p50 ratio: {result['ratio_p50']:.1f}; ExecuteGrasp / bare: "
        f"{result['execute_ratio_p50']:.1f}; trials succeeded: "
        f"{result['trial_success_rate']:.0%}; straight to the planner / bare: "
        f"{result['direct_ratio_p50']:.1f} (the front's hop is the difference)",
        "feedback stage first seen (p50 ms after the goal was sent): "
        + ", ".join(f"{k} {v['p50_ms']:.1f}" for k, v in
                    sorted(stages.items(), key=lambda kv: kv[1]["p50_ms"]))]
        + [f"  failed trial: {text}" for text in result.get("failures", [])])


def main() -> None:
    print(report(run()))


if __name__ == "__main__":
    main()
