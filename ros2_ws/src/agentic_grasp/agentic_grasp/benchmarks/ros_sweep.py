"""The paper benchmark end to end through the ROS graph (``agentic-grasp bench --ros``).

Each trial loads its scene into the sim node with the same paired trial seed as the
in-process sweep, waits until perception has taken the new scene, sends the task's
instruction through GraspObject with the configuration, and scores the result like the
in-process episode runner: every target grasped (in order for sorting), and no constraint
violation (a spill, or a fragile neighbour hit) among the attempts' events.
Slow by design (whole graph, one trial at a time): use --tasks/--trials/--seeds to size it.
"""
from __future__ import annotations

import time
from typing import Callable, List, Optional, Sequence

from agentic_grasp.core.evaluation.records import TrialRecord
from agentic_grasp.core.evaluation.sweep import trial_seed

# The same events the in-process episode runner counts (core/planner/episode.py).
_VIOLATION_KINDS = ("constraint_violation", "spill")
_FRAGILE_KINDS = ("collision", "knocked_over", "damaged")


def _record(spec, configuration: str, seed: int, trial: int, tseed: int, result,
            fragile: dict, threshold: float, wall_s: float) -> TrialRecord:
    attempts = list(result.attempts)
    grasped = list(result.grasped_ids)
    targets = list(spec.targets)
    order_ok = [g for g in grasped if g in targets] == [t for t in targets if t in grasped]
    sorting = "sort" in spec.instruction.lower()
    success = all(t in grasped for t in targets) and (order_ok or not sorting)
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
        seed=int(seed), trial=int(trial), trial_seed=int(tseed), success=bool(success),
        n_attempts=len(attempts), n_subgoals=len({a.subgoal_index for a in attempts}),
        n_targets=len(targets), n_grasped=len(grasped), order_ok=bool(order_ok),
        failure_types=failures, retry_levels=[int(a.retry_level) for a in attempts],
        recovered=bool(success and failures),
        first_attempt_failed=bool(attempts) and not attempts[0].outcome.success,
        constraint_satisfied=violations == 0, n_violations=violations,
        motion_s=round(sum(a.outcome.duration_s for a in attempts), 4),
        sim_time_s=round(sum(a.outcome.duration_s for a in attempts), 4),
        wall_s=round(wall_s, 6))


def run_ros_sweep(configurations: Sequence[str], tasks: Sequence[str], trials: int,
                  seeds: Sequence[int], progress: Optional[Callable[[int, int], None]] = None,
                  goal_timeout_s: float = 120.0) -> List[TrialRecord]:
    """Every (configuration, task, seed, trial) through the whole graph, in order."""
    from agentic_grasp.client import GraphClient
    from agentic_grasp.planner_client import PlannerClient, load_scene, wait_until_perceived
    from agentic_grasp.core.scene_graph import SceneGraphConfig
    from agentic_grasp.core.sim import load_task
    from agentic_grasp.launcher import Launcher
    from agentic_grasp_interfaces.srv import Perceive

    threshold = SceneGraphConfig.from_config().fragile_threshold
    # One memory per goal, like the in-process sweep's trial scope.
    launcher = Launcher({"arm": "sim", "perception": "oracle", "acquired": "none"},
                        extra_params={"planner": {"memory_lifetime": "goal"}})
    launcher.start()
    records: List[TrialRecord] = []
    total = len(configurations) * len(tasks) * trials * len(seeds)
    try:
        with GraphClient("bench_ros_sweep") as graph:
            planner = PlannerClient(graph)
            perceive = graph.node.create_client(Perceive, "perceive")
            if not planner.wait_for_server(60.0):
                raise RuntimeError("grasp_object action server did not come up")
            for configuration in configurations:
                for seed in seeds:
                    for task in tasks:
                        spec = load_task(task)
                        for trial in range(trials):
                            tseed = trial_seed(seed, task, trial)
                            loaded = load_scene(graph, task, tseed)
                            truth = {o.id: o.fragility for o in graph.ground_truth()}
                            wait_until_perceived(graph, perceive, loaded.object_ids)
                            start = time.perf_counter()
                            result = planner.grasp(spec.instruction, configuration,
                                                   timeout_s=goal_timeout_s)
                            records.append(_record(spec, configuration, seed, trial, tseed,
                                                   result, truth, threshold,
                                                   time.perf_counter() - start))
                            if progress:
                                progress(len(records), total)
            planner.close()
    finally:
        launcher.stop()
    return records
