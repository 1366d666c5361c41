"""The sweep's worker (:mod:`.sweep`): a :class:`TrialRunner` builds the simulator, the planner
constants and the knowledge base with its HAA-RAG index once per process, in the pool
initialiser or a Ray worker's first task, and runs trials with them; a trial only reloads its
scene. ``run_group`` runs the units of one task and seed under every configuration trial by
trial, so trial k of every configuration sees the same jittered scene."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from agentic_grasp.core.sim.scenes import trial_seed
from agentic_grasp_lab.evaluation.records import TrialRecord
from agentic_grasp_lab.evaluation.taken import judge_taken
from agentic_grasp.core.planner.configurations import PlannerConfig, get_configuration
from agentic_grasp.core.planner.episode import retriever_for, run_trial
from agentic_grasp.core.planner.memory import EpisodicMemory
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.sim import Simulator


@dataclass(frozen=True)
class WorkUnit:
    """The trials of one (configuration, task, seed); ``task`` is an id or a scene path."""

    configuration: str
    task: str
    seed: int
    trials: Tuple[int, ...]
    split: str = ""
    memory_scope: str = "trial"
    perception: str = "oracle"
    visual_query: str = "none"
    constraint_mode: str = ""            # "" = planner.yaml's grasp_synthesis.constraint_mode


class TrialRunner:
    """Runs trials with resources built once: simulator, planner constants, HAA-RAG."""

    def __init__(self) -> None:
        # The sweep hands every trial its memory itself (run_unit): run_trial's process-wide
        # session memory would depend on which worker ran which trials before.
        self.planner_config = replace(PlannerConfig.from_config(), memory_scope="trial")
        self.simulator = Simulator.from_config()
        retriever_for(None)              # knowledge base + index, built once per process
        #: what counts as fragile when judging what a trial took (evaluation/taken.py)
        self.fragile_threshold = SceneGraphConfig.from_config().fragile_threshold

    def run(self, configuration: str, task: str, seed: int, trial: int,
            split: str = "", memory: Any = None, perception: str = "oracle",
            visual_query: str = "none", constraint_mode: str = "") -> TrialRecord:
        """One trial; ``memory`` None = a fresh episodic memory (trial scope)."""
        tseed = trial_seed(seed, task, trial)
        planner_config = self.planner_config
        if constraint_mode and constraint_mode != planner_config.grasp_synthesis.constraint_mode:
            planner_config = replace(planner_config, grasp_synthesis=replace(
                planner_config.grasp_synthesis, constraint_mode=constraint_mode))
        result = run_trial(task, configuration, tseed, simulator=self.simulator,
                           planner_config=planner_config, memory=memory,
                           perception=perception, visual_query=visual_query)
        # the simulator's truth after the trial: what is in the bin (run_trial puts the
        # last object held there too) and every object as the scene had it
        binned = self.simulator.binned()
        truth = {o.id: o for o in binned + self.simulator.objects()}
        taken = judge_taken(self.simulator.task.instruction, result.targets,
                            [o.id for o in binned], truth,
                            self.fragile_threshold)
        return TrialRecord.from_result(result, seed, trial, tseed, split, taken)

    @staticmethod
    def _memory(unit: WorkUnit) -> Any:
        """None (a fresh memory per trial), or the one memory of a "series" unit."""
        if unit.memory_scope != "series":
            return None

        return EpisodicMemory(enabled=get_configuration(unit.configuration).memory)

    def _run(self, unit: WorkUnit, trial: int, memory: Any) -> TrialRecord:
        return self.run(unit.configuration, unit.task, unit.seed, trial, unit.split, memory,
                        unit.perception, unit.visual_query, unit.constraint_mode)

    def run_unit(self, unit: WorkUnit) -> List[TrialRecord]:
        """The unit's trials in order; with "series" memory one memory for all of them."""
        memory = self._memory(unit)
        return [self._run(unit, k, memory) for k in sorted(unit.trials)]

    def run_group(self, units: Sequence[WorkUnit]) -> List[List[TrialRecord]]:
        """The records of each of ``units`` (a :func:`group_units` group: the same trials
        under several configurations), trial by trial across the configurations: trial k
        of every configuration sees the same jittered scene, so its first frame is
        rendered and located once (render_view's frame cache, estimate_geometry's memo)
        and found there by the others. Each unit's trials still run in order with its own
        memory, so every record is run_unit's (caches give the values they were given)."""
        memories = [self._memory(u) for u in units]
        out: List[List[TrialRecord]] = [[] for _ in units]
        for k in sorted(units[0].trials):
            for i, unit in enumerate(units):
                out[i].append(self._run(unit, k, memories[i]))
        return out


_RUNNER: Optional[TrialRunner] = None


def _init_worker() -> None:
    global _RUNNER
    if _RUNNER is None:
        _RUNNER = TrialRunner()


def _run_group(units: List[WorkUnit]) -> List[List[Dict[str, Any]]]:
    _init_worker()
    return [[r.to_dict() for r in rows] for rows in _RUNNER.run_group(units)]


__all__ = ["TrialRunner"]
