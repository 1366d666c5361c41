"""The paper benchmark end to end through the ROS graph (``agentic-grasp bench paper --ros``).

Each trial loads its scene into the sim node with the same paired trial seed as the
in-process sweep, waits until perception has taken the new scene, sends the task's
instruction through GraspObject with the configuration, and scores the result like the
in-process episode runner: every target grasped (in order for sorting), and no constraint
violation (a spill, or a fragile neighbour hit) among the attempts' events.
Slow by design (whole graph, one trial at a time): use --tasks/--trials/--seeds to size it.

The graph runs with the sweep's perception (``oracle``, ``vlm_sim``, or ``vlm_sim_perfect``:
the perception node's vlm_sim with every error rate 0, as the in-process runner zeroes
them), visual query (``camera``: the perception node's crop; ``none``) and a memory per goal
(the in-process ``trial`` scope). What the graph cannot do is refused by
:func:`check_ros_options` with the reason, never silently replaced: the ``render`` visual
query (the planner node has no renderer) and the ``series`` memory scope (the planner node's
memory is kept per configuration for its session, with nothing to reset it per series).
"""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Sequence

from agentic_grasp_lab.evaluation.records import TrialRecord
from agentic_grasp_lab.evaluation.sweep import trial_seed
from agentic_grasp_lab.evaluation.taken import judge_taken
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.sim import load_task
from agentic_grasp.ros.client.graph_client import GraphClient
from agentic_grasp.ros.client.planner import PlannerClient, load_scene, wait_until_perceived
from agentic_grasp.ros.graph.launcher import Launcher
from agentic_grasp.ros.conversions.records import is_view_record
from agentic_grasp_interfaces.srv import InferConstraints, Perceive, RetrieveStrategies

# The same events the in-process episode runner counts (core/planner/episode.py).
_VIOLATION_KINDS = ("constraint_violation", "spill")
_FRAGILE_KINDS = ("collision", "knocked_over", "damaged")
#: Perception modes of the in-process runner the graph runs too (its perception node backend).
ROS_PERCEPTION = {"oracle": "oracle", "vlm_sim": "vlm_sim", "vlm_sim_perfect": "vlm_sim"}
#: The vlm_sim error rates VlmSimConfig.zero_noise sets to 0 (vlm_sim_perfect).
_ZERO_NOISE = ("point_std", "box_std", "category_confusion_prob", "affordance_confusion_prob",
               "state_error_prob", "fragility_std", "miss_prob_small")
#: How long the perception node is given to take a newly loaded scene's camera frame: the
#: sim renders and publishes it before LoadScene answers, but perception takes its sensor
#: messages one at a time and, on a loaded machine, was seen to perceive (vlm_sim) or crop
#: (the visual query, both backends) the previous scene's frame in the first trial after a
#: change of task. A stand-in until Perceive can ask for a capture after the load ("not
#: before"); the oracle's ground truth is still checked exactly.
FRAME_SETTLE_S = 0.5


def check_ros_options(perception: str, visual_query: str, memory_scope: str) -> str:
    """"" when the graph can run these sweep options as the in-process runner does, else
    why not (the benchmark refuses them rather than run something else)."""
    if perception not in ROS_PERCEPTION:
        return (f"--ros cannot run perception {perception!r}: the graph runs "
                f"{', '.join(ROS_PERCEPTION)}")
    if visual_query not in ("camera", "none"):
        return (f"--ros cannot run visual query {visual_query!r}: the planner node sends the "
                "perception node's camera crop (camera) or nothing (none); it has no renderer")
    if memory_scope != "trial":
        return (f"--ros cannot run memory scope {memory_scope!r}: the planner node keeps one "
                "memory per configuration for its session and cannot reset it per series; "
                "use --memory-scope trial")
    return ""


def graph_params(perception: str, visual_query: str) -> Dict[str, Dict[str, object]]:
    """Per-node parameters that make the graph run the in-process sweep's settings."""
    params: Dict[str, Dict[str, object]] = {
        "planner": {"memory_lifetime": "goal", "visual_query": visual_query}}
    if perception == "vlm_sim_perfect":
        params["perception"] = {f"vlm_sim.{name}": 0.0 for name in _ZERO_NOISE}
    return params


def _record(spec, configuration: str, seed: int, trial: int, tseed: int, result,
            fragile: dict, threshold: float, wall_s: float, perception: str) -> TrialRecord:
    # the wrist-camera views are recorded like attempts but grasp nothing: as in process
    # (TaskOutcome.attempts), they are not counted as attempts
    attempts = [a for a in result.attempts if not is_view_record(a)]
    grasped = list(result.grasped_ids)
    targets = list(spec.targets)
    order_ok = [g for g in grasped if g in targets] == [t for t in targets if t in grasped]
    sorting = "sort" in spec.instruction.lower()
    success = all(t in grasped for t in targets) and (order_ok or not sorting)
    # every object the graph lifted is put away: its grasped ids are what it took
    taken = judge_taken(spec.instruction, targets, grasped,
                        {o.id: o for o in spec.nominal()}, threshold)
    violations = 0
    for attempt in attempts:
        for event in attempt.outcome.events:
            parts = event.split(":")
            kind, other = parts[0], (parts[2] if len(parts) > 2 else "")
            if kind in _VIOLATION_KINDS or (
                    kind in _FRAGILE_KINDS and other and other != attempt.target_id
                    and fragile.get(other, 0.0) >= threshold):
                violations += 1
    failures = [a.diagnosis.failure_type for a in attempts
                if a.diagnosis.failure_type not in ("", "none")]
    return TrialRecord(
        task_id=spec.task_id, category=spec.category, configuration=configuration,
        seed=int(seed), trial=int(trial), trial_seed=int(tseed),
        success=bool(success) and not taken.wrong, paper_success=bool(success),
        wrongly_taken=taken.wrong, moved_aside=taken.moved_aside,
        n_attempts=len(attempts), n_subgoals=len({a.subgoal_index for a in attempts}),
        n_targets=len(targets), n_grasped=len(grasped), order_ok=bool(order_ok),
        failure_types=failures, retry_levels=[int(a.retry_level) for a in attempts],
        recovered=bool(success and not taken.wrong and failures),
        first_attempt_failed=bool(attempts) and not attempts[0].outcome.success,
        constraint_satisfied=violations == 0, n_violations=violations,
        motion_s=round(sum(a.outcome.duration_s for a in attempts), 4),
        sim_time_s=round(sum(a.outcome.duration_s for a in attempts), 4),
        wall_s=round(wall_s, 6), perception=perception, grasped=grasped)


def _wait_for_peers(graph, perceive, timeout_s: float = 180.0) -> None:
    """Every service the planner calls is up before the first trial: the retrieval node
    embeds its knowledge base at start (seconds, more on a loaded machine), and a first goal
    sent before would end in a dependency timeout that the in-process run never sees."""
    clients = [perceive, graph.node.create_client(RetrieveStrategies, "retrieve_strategies"),
               graph.node.create_client(InferConstraints, "infer_constraints")]
    for client in clients:
        if not client.wait_for_service(timeout_sec=timeout_s):
            raise RuntimeError(f"service {client.srv_name} did not come up within "
                               f"{timeout_s:.0f} s")


def run_ros_sweep(configurations: Sequence[str], tasks: Sequence[str], trials: int,
                  seeds: Sequence[int], progress: Optional[Callable[[int, int], None]] = None,
                  goal_timeout_s: float = 120.0, perception: str = "oracle",
                  visual_query: str = "camera", memory_scope: str = "trial",
                  env: Optional[Dict[str, str]] = None) -> List[TrialRecord]:
    """Every (configuration, task, seed, trial) through the whole graph, in order.

    ValueError (with :func:`check_ros_options`' reason) for options the graph cannot run.
    """
    why = check_ros_options(perception, visual_query, memory_scope)
    if why:
        raise ValueError(why)

    threshold = SceneGraphConfig.from_config().fragile_threshold
    # One memory per goal, like the in-process sweep's trial scope.
    launcher = Launcher({"arm": "sim", "perception": ROS_PERCEPTION[perception],
                         "acquired": "none"}, env=env,
                        extra_params=graph_params(perception, visual_query))
    launcher.start()
    records: List[TrialRecord] = []
    total = len(configurations) * len(tasks) * trials * len(seeds)
    try:
        with GraphClient("bench_ros_sweep") as graph:
            planner = PlannerClient(graph)
            perceive = graph.node.create_client(Perceive, "perceive")
            if not planner.wait_for_server(60.0):
                raise RuntimeError("grasp_object action server did not come up")
            _wait_for_peers(graph, perceive)
            for configuration in configurations:
                for seed in seeds:
                    for task in tasks:
                        spec = load_task(task)
                        for trial in range(trials):
                            tseed = trial_seed(seed, task, trial)
                            loaded = load_scene(graph, task, tseed, settle_s=FRAME_SETTLE_S)
                            truth = {o.id: o.fragility for o in graph.ground_truth()}
                            if perception == "oracle":      # exact: the answer lists them
                                wait_until_perceived(graph, perceive, loaded.object_ids)
                            start = time.perf_counter()
                            result = planner.grasp(spec.instruction, configuration,
                                                   timeout_s=goal_timeout_s, seed=tseed)
                            records.append(_record(spec, configuration, seed, trial, tseed,
                                                   result, truth, threshold,
                                                   time.perf_counter() - start, perception))
                            if progress:
                                progress(len(records), total)
            planner.close()
    finally:
        launcher.stop()
    return records
