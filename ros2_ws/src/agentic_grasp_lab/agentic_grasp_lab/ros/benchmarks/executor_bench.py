"""ExecuteGrasp through ROS (sim + executor processes) beside the bare action round trip."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Dict

from agentic_grasp.ros.common.dependencies import OrderedActionClient as ActionClient

from agentic_grasp_lab.benchmarks.timing import summarize
from agentic_grasp.ros.client.graph_client import GraphClient
from agentic_grasp.ros.conversions.grasp import grasp_to_msg
from agentic_grasp.core.grasping.heuristic import heuristic_grasp
from agentic_grasp.ros.graph.launcher import Launcher
from agentic_grasp_interfaces.action import ExecuteGrasp


def _round_trip(client: ActionClient, goal) -> float:
    """Goal sent to result received; the client's node spins in GraphClient's thread."""
    done = threading.Event()
    start = time.perf_counter()
    send = client.send_goal_async(goal)
    send.add_done_callback(
        lambda f: f.result().get_result_async().add_done_callback(lambda _r: done.set()))
    if not done.wait(10.0):
        raise RuntimeError("action round trip timed out")
    return time.perf_counter() - start


def run(n: int = 100, warmup: int = 10, settle_s: float = 0.15) -> Dict[str, Dict[str, float]]:
    """p50/p90/p99 of ExecuteGrasp (banana, full attempt) and of a do-nothing action server."""
    # Only the two nodes under test: the rest of the graph would compete for the 2 cores.
    launcher = Launcher({"arm": "sim", "acquired": "none"}, log_prefix=True,
                        only=("sim", "executor"))
    launcher.start()
    bare = subprocess.Popen(
        [sys.executable, "-m", "agentic_grasp_lab.ros.benchmarks.bare_action_server"],
        start_new_session=True)
    results: Dict[str, Dict[str, float]] = {}
    try:
        with GraphClient("bench_executor") as graph:
            loaded = graph.load_scene("sg_banana", 0, timeout_s=30.0)
            target = loaded.target_ids[0]
            banana = {o.id: o for o in graph.ground_truth()}[target]
            goal = ExecuteGrasp.Goal(target_id=target,
                                     grasp=grasp_to_msg(heuristic_grasp(banana)))
            execute = ActionClient(graph.node, ExecuteGrasp, "execute_grasp")
            bare_client = ActionClient(graph.node, ExecuteGrasp, "bare_execute_grasp")
            for client in (execute, bare_client):
                if not client.wait_for_server(timeout_sec=30.0):
                    raise RuntimeError("action server did not come up")
            samples = {"execute": [], "bare": []}
            for i in range(n + warmup):
                graph.load_scene("sg_banana", i % 5)        # untimed: puts the banana back
                # Let the sim node finish re-rendering the camera frame (tens of ms of CPU
                # on this 2-core machine) so neither measurement competes with it.
                time.sleep(settle_s)
                t_exec = _round_trip(execute, goal)
                time.sleep(settle_s)
                t_bare = _round_trip(bare_client, ExecuteGrasp.Goal())
                if i >= warmup:
                    samples["execute"].append(t_exec)
                    samples["bare"].append(t_bare)
            results["execute_grasp_ros"] = summarize(samples["execute"])
            results["bare_action_round_trip"] = summarize(samples["bare"])
            execute.destroy()
            bare_client.destroy()
    finally:
        bare.send_signal(2)
        bare.wait(timeout=10)
        launcher.stop()
    return results
