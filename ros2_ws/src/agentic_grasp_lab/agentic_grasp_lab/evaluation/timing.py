"""Where a benchmark trial's time goes: a cProfile of a few hundred trials, in stages.

Stages (cumulative time of the functions named, which never call one another, so the
stages add up; "planner bookkeeping" is the rest of run_trial: the ReAct loop, thoughts,
grasp clamping and frame changes, episodic memory, trial scoring):

- scene loading: ``Simulator.load_task`` (scene file, jitter, collision bodies);
- perception: ``OracleBackend.perceive`` (ground truth + seeded noise, target resolution);
- retrieval: ``HAARAG.retrieve``;
- scene graph: ``build_scene_graph`` + ``infer_constraints``;
- physics: ``Simulator.begin_attempt`` + ``advance`` (kinematics, contact, Eq. 2 quality);
- reflection: ``assess`` (the diagnosis) + ``get_correction``.

cProfile slows small Python calls more than numpy-heavy ones, so the shares are indicative;
the unprofiled CPU time per trial is reported beside them.
"""
from __future__ import annotations

import cProfile
import pstats
import time
from typing import Any, Dict, List, Sequence, Tuple

from agentic_grasp_lab.evaluation.sweep import TrialRunner

#: stage -> (path suffix of the module, function name) pairs.
STAGES: Dict[str, Tuple[Tuple[str, str], ...]] = {
    "scene loading": (("core/sim/simulator.py", "load_task"),),
    "perception": (("core/perception/oracle.py", "perceive"),),
    "retrieval": (("core/retrieval/haa_rag.py", "retrieve"),),
    "scene graph": (("core/scene_graph/graph.py", "build_scene_graph"),
                    ("core/scene_graph/constraints.py", "infer_constraints")),
    "physics": (("core/sim/simulator.py", "begin_attempt"),
                ("core/sim/simulator.py", "advance")),
    "reflection": (("core/planner/recovery/diagnosis.py", "assess"),
                   ("core/planner/recovery/correction.py", "get_correction")),
}
_TRIAL = ("core/planner/episode.py", "run_trial")


def _cumtime(stats: pstats.Stats, suffix: str, name: str) -> float:
    total = 0.0
    for (filename, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():
        if func == name and filename.replace("\\", "/").endswith(suffix):
            total += ct
    return total


def profile_trials(configurations: Sequence[str], tasks: Sequence[str], trials: int,
                   seed: int = 0) -> Dict[str, Any]:
    """Profile configurations x tasks x trials (one seed); stage times in ms per trial.

    Runs every trial twice: once plainly (CPU time per trial, no profiler overhead) and
    once under cProfile (stage shares).
    """
    runner = TrialRunner()
    plan: List[Tuple[str, str, int]] = [(c, t, k) for c in configurations for t in tasks
                                        for k in range(trials)]
    runner.run(plan[0][0], plan[0][1], seed, 0)          # imports, first-call caches
    cpu0, wall0 = time.process_time(), time.perf_counter()
    per_config: Dict[str, float] = {}
    for conf, task, k in plan:
        c0 = time.process_time()
        runner.run(conf, task, seed, k)
        per_config[conf] = per_config.get(conf, 0.0) + time.process_time() - c0
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    profiler = cProfile.Profile()
    profiler.enable()
    for conf, task, k in plan:
        runner.run(conf, task, seed, k)
    profiler.disable()
    stats = pstats.Stats(profiler)
    n = len(plan)
    total = _cumtime(stats, *_TRIAL)
    stages = {stage: sum(_cumtime(stats, s, f) for s, f in funcs)
              for stage, funcs in STAGES.items()}
    stages["planner bookkeeping"] = max(0.0, total - sum(stages.values()))
    per_trial = {k: 1e3 * v / n for k, v in stages.items()}
    share = {k: 100.0 * v / total if total > 0 else 0.0 for k, v in stages.items()}
    counts = {
        "configurations": len(configurations), "tasks": len(tasks), "trials": n}
    return {**counts, "cpu_ms_per_trial": 1e3 * cpu / n, "wall_ms_per_trial": 1e3 * wall / n,
            "cpu_ms_per_trial_by_configuration": {c: 1e3 * v / (n / len(configurations))
                                                  for c, v in per_config.items()},
            "profiled_ms_per_trial": 1e3 * total / n, "stages_ms_per_trial": per_trial,
            "stages_share_percent": share}


def format_profile(profile: Dict[str, Any]) -> str:
    lines = [f"Profile of {profile['trials']} trials ({profile['configurations']} "
             f"configurations x {profile['tasks']} tasks): {profile['cpu_ms_per_trial']:.2f} ms "
             f"CPU per trial unprofiled ({profile['wall_ms_per_trial']:.2f} ms wall); "
             f"{profile['profiled_ms_per_trial']:.2f} ms under cProfile, split as:"]
    for stage, ms in sorted(profile["stages_ms_per_trial"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  {stage:<22} {ms:7.2f} ms  {profile['stages_share_percent'][stage]:5.1f} %")
    lines.append("  CPU ms per trial by configuration: " + ", ".join(
        f"{c} {v:.1f}" for c, v in profile["cpu_ms_per_trial_by_configuration"].items()))
    return "\n".join(lines)


__all__ = ["STAGES", "format_profile", "profile_trials"]
