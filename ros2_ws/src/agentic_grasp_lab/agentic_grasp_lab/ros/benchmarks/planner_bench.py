"""One single-grasp trial through the whole graph beside the bare rclpy action round trip.

A trial is one GraspObject goal "pick up the banana" on sg_banana (oracle perception,
simulator arm, phases without wall-clock delay): perceive, infer_constraints (the task graph
and the sub-goal's constraints in one call), retrieve, one ExecuteGrasp (one sim/arm ATTEMPT
call by default) and the feedback in between, goal sent to result received. The scene is
reloaded (untimed, until perception has taken it) before every trial, and the planner runs
with ``memory_lifetime: goal`` so every trial plans from retrieval as the first one does.
Beside it, in the same run: a do-nothing action round trip
(``bare_action_server.py`` beside this module, the floor any action pays here), one ExecuteGrasp
goal sent straight to the graph's executor (the banana reloaded first, untimed), and the
same trial in process (core.planner.run_trial), which is the planner's own cost without ROS,
and the same trial sent straight to the planner's ``planner/grasp_object`` (the scene
reloaded first, untimed), which shows what the front (``grasp_object``, ros/front/node.py,
one forwarding hop) costs.
The trial's feedback is timed from the client too: when each stage was first reported
(perceive, retrieve, reason, plan, execute, reflect, done), which shows where the hops go.
Each measurement runs in its own phase with its own action client (the trials and the bare
round trips interleaved, then ExecuteGrasp, then the direct trials): a client idling beside
another measurement still receives all of its action's feedback and status.

CPU is counted too, since wall times on a shared 2-core machine are mostly waiting for a
core: the CPU time every graph process and the client spent during each timed trial (and
each bare round trip: its server and the client), from the kernel's per-thread accounting
(``/proc/PID/task/*/schedstat``, ns), idle work of the nodes in that window included.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterable, Optional

from agentic_grasp.ros.common.dependencies import OrderedActionClient
from agentic_grasp_lab.benchmarks.timing import line, summarize
from agentic_grasp.ros.client.graph_client import GraphClient
from agentic_grasp.ros.client.planner import load_scene, wait_until_perceived
from agentic_grasp.ros.graph.launcher import Launcher
from agentic_grasp_interfaces.action import ExecuteGrasp, GraspObject
from agentic_grasp_interfaces.srv import Perceive
from agentic_grasp.core.grasping.heuristic import heuristic_grasp
from agentic_grasp.core.planner import run_trial
from agentic_grasp.ros.conversions.grasp import grasp_to_msg

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


def _cpu_ns(pids: Dict[str, int]) -> Dict[str, int]:
    """CPU time so far (ns) of each named process, all its threads (0 where unreadable:
    the process ended, or no /proc)."""
    out = {}
    for name, pid in pids.items():
        total = 0
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        out[name] = total
    return out


class _CpuMeter:
    """CPU spent by ``pids`` between :meth:`start` and :meth:`stop`, summed per name."""

    def __init__(self, pids: Dict[str, int]) -> None:
        self._pids = pids
        self._at: Dict[str, int] = {}
        self.spent: Dict[str, list] = {name: [] for name in pids}

    def start(self) -> None:
        self._at = _cpu_ns(self._pids)

    def stop(self, keep: bool = True) -> None:
        now = _cpu_ns(self._pids)
        if keep:
            for name in self._pids:
                self.spent[name].append(max(0, now[name] - self._at.get(name, 0)))

    def summary(self, names: Optional[Iterable[str]] = None) -> Dict[str, float]:
        """Mean ms per measurement of each name and their ``total``."""
        chosen = list(names) if names is not None else list(self._pids)
        per = {name: sum(self.spent[name]) / max(1, len(self.spent[name])) / 1e6
               for name in chosen}
        return {**per, "total": sum(per.values())}


def _inprocess(n: int) -> Dict[str, float]:
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
                             "agentic_grasp_lab.ros.benchmarks.bare_action_server"],
                            start_new_session=True)
    out: Dict[str, Any] = {}
    try:
        with GraphClient("bench_planner") as graph:
            perceive = graph.node.create_client(Perceive, "perceive")
            goal = GraspObject.Goal(instruction=INSTRUCTION)
            samples: Dict[str, list] = {"trial": [], "bare": [], "execute": [], "direct": []}
            stage_samples: Dict[str, list] = {}
            successes = 0
            failures = []

            def ready(task: str, seed: int) -> Any:
                """Untimed: the banana back on the table, taken by perception."""
                loaded = load_scene(graph, task, seed)
                wait_until_perceived(graph, perceive, loaded.object_ids)
                time.sleep(settle_s)                 # let the sim finish its render
                return loaded

            # One measurement at a time, each client made for its own phase: an action
            # client receives every feedback and status message of its action, so a client
            # of planner/grasp_object or execute_grasp that idled beside the front's trials
            # would take CPU from the very goals it measures (2 cores, 8 processes).
            planner = _client(graph, GraspObject, "grasp_object")
            bare_client = _client(graph, ExecuteGrasp, "bare_execute_grasp")
            pids = {name: proc.pid for name, proc in launcher.procs.items()}
            pids.update(client=os.getpid(), bare_server=bare.pid)
            trial_cpu = _CpuMeter({k: v for k, v in pids.items() if k != "bare_server"})
            bare_cpu = _CpuMeter({"client": os.getpid(), "bare_server": bare.pid})
            for i in range(n + warmup):
                ready(TASK, i % 5)
                stages: Dict[str, float] = {}
                trial_cpu.start()
                t_trial, response = _round_trip(planner, goal, stages=stages)
                trial_cpu.stop(keep=i >= warmup)
                time.sleep(settle_s)
                bare_cpu.start()
                t_bare, _ = _round_trip(bare_client, ExecuteGrasp.Goal())
                bare_cpu.stop(keep=i >= warmup)
                if i >= warmup:
                    samples["trial"].append(t_trial)
                    samples["bare"].append(t_bare)
                    for stage, at in stages.items():
                        stage_samples.setdefault(stage, []).append(at)
                    ok = response is not None and response.result.success
                    successes += int(ok)
                    if not ok:
                        failures.append(f"seed {i % 5}: " + (response.result.message
                                                            if response else "rejected"))
            execute = _client(graph, ExecuteGrasp, "execute_grasp")
            for i in range(n + warmup):
                loaded = load_scene(graph, TASK, i % 5)          # untimed
                time.sleep(settle_s)
                t_exec, _ = _round_trip(execute, _execute_goal(graph, loaded.target_ids[0]))
                if i >= warmup:
                    samples["execute"].append(t_exec)
            execute.destroy()
            direct = _client(graph, GraspObject, "planner/grasp_object")
            for i in range(n + warmup):
                ready(TASK, i % 5)
                t_direct, _ = _round_trip(direct, goal)
                if i >= warmup:
                    samples["direct"].append(t_direct)
            out["planner_trial_ros"] = summarize(samples["trial"])
            out["bare_action_round_trip"] = summarize(samples["bare"])
            out["execute_grasp_ros"] = summarize(samples["execute"])
            out["planner_trial_direct"] = summarize(samples["direct"])
            out["stages_first_seen"] = {k: summarize(v) for k, v in stage_samples.items()}
            out["trial_cpu_ms"] = trial_cpu.summary()
            out["bare_cpu_ms"] = bare_cpu.summary()
            out["trial_success_rate"] = successes / max(1, n)
            out["failures"] = failures
            for client in (planner, bare_client, direct):
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
    out["cpu_ratio"] = out["trial_cpu_ms"]["total"] / max(1e-9, out["bare_cpu_ms"]["total"])
    return out


def _client(graph: GraphClient, action_type: Any, name: str) -> OrderedActionClient:
    """An action client of ``name`` whose server is up (RuntimeError after 60 s)."""
    client = OrderedActionClient(graph.node, action_type, name)
    if not client.wait_for_server(timeout_sec=60.0):
        raise RuntimeError(f"action server {name} did not come up")
    return client


def _execute_goal(graph: GraphClient, target_id: str) -> ExecuteGrasp.Goal:
    """The heuristic grasp of the target, from the simulator's ground truth (the
    benchmark's shortcut: no perception in this measurement)."""
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
        + _cpu_lines(result)
        + [f"  failed trial: {text}" for text in result.get("failures", [])])


def _cpu_lines(result: Dict[str, Any]) -> list:
    trial, bare = result.get("trial_cpu_ms"), result.get("bare_cpu_ms")
    if not trial or not bare:
        return []
    nodes = ", ".join(f"{k} {v:.1f}" for k, v in sorted(trial.items(), key=lambda kv: -kv[1])
                      if k != "total")
    return [f"CPU per trial, all processes (mean ms): {trial['total']:.1f} ({nodes}); per "
            f"bare round trip: {bare['total']:.1f} (client {bare['client']:.1f}, server "
            f"{bare['bare_server']:.1f}); ratio {result['cpu_ratio']:.1f}"]


def main() -> None:
    print(report(run()))


if __name__ == "__main__":
    main()
