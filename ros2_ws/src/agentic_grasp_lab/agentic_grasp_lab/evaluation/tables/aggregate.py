"""The tables from trial records (aggregation and confidence intervals over seeds; the
package docstring says how): Tables II-V, the OOD table, the per-task oracle comparison and
the failure, refusal and recovery-level histograms."""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from agentic_grasp_lab.evaluation.confidence import MeanCI, mean_ci
from agentic_grasp_lab.evaluation.records import TrialRecord
from agentic_grasp_lab.evaluation.tables.paper import (CATEGORIES, PAPER_ATTEMPTS,
                                                       PAPER_FULL_SEEDS, PAPER_OOD,
                                                       PAPER_RECOVERY_RATE, PAPER_SG_OBJECTS,
                                                       PAPER_TABLE_II, PAPER_TABLE_III,
                                                       PAPER_TABLE_V)
from agentic_grasp.core.retrieval import evaluate_retrieval, format_table

# ----------------------------------------------------------------- grouping
class RecordIndex:
    """Records grouped by (configuration, seed, task), with task categories."""

    def __init__(self, records: Iterable[TrialRecord]) -> None:
        self.records = list(records)
        self.groups: Dict[Tuple[str, int, str], List[TrialRecord]] = defaultdict(list)
        self.category: Dict[str, str] = {}
        self.split: Dict[str, str] = {}
        for r in self.records:
            self.groups[(r.configuration, r.seed, r.task_id)].append(r)
            self.category[r.task_id] = r.category
            self.split[r.task_id] = r.split
        self.configurations = list(dict.fromkeys(r.configuration for r in self.records))
        self.seeds = sorted({r.seed for r in self.records})
        self.tasks = sorted(self.category)

    def tasks_of(self, category: Optional[str] = None, split: Optional[str] = None
                 ) -> List[str]:
        return [t for t in self.tasks
                if (category is None or self.category[t] == category)
                and (split is None or self.split[t] == split)]

    def trials(self, configuration: str, seed: Optional[int] = None,
               tasks: Optional[Sequence[str]] = None) -> List[TrialRecord]:
        seeds = self.seeds if seed is None else [seed]
        tasks = self.tasks if tasks is None else tasks
        return [r for s in seeds for t in tasks
                for r in self.groups.get((configuration, s, t), [])]

    def rate(self, configuration: str, seed: int, task: str) -> Optional[float]:
        """Success % of one task in one repetition (None when it was not run)."""
        group = self.groups.get((configuration, seed, task))
        if not group:
            return None
        return 100.0 * sum(r.success for r in group) / len(group)

    def task_mean(self, configuration: str, seed: int, tasks: Sequence[str]
                  ) -> Optional[float]:
        """Mean over ``tasks`` of their success % in one repetition."""
        rates = [self.rate(configuration, seed, t) for t in tasks]
        rates = [v for v in rates if v is not None]
        return sum(rates) / len(rates) if rates else None

    def over_seeds(self, configuration: str, tasks: Sequence[str],
                   confidence: float = 0.95) -> Optional[MeanCI]:
        values = [self.task_mean(configuration, s, tasks) for s in self.seeds]
        values = [v for v in values if v is not None]
        return mean_ci(values, confidence) if values else None


# ----------------------------------------------------------------- Table II
def table_ii(index: RecordIndex, configurations: Optional[Sequence[str]] = None,
             confidence: float = 0.95) -> Dict[str, Any]:
    """Success % per category and overall (mean over tasks), CI over seeds, per config."""
    rows = {}
    for conf in configurations or index.configurations:
        if conf not in index.configurations:
            continue
        row = {}
        for cat in CATEGORIES:
            ci = index.over_seeds(conf, index.tasks_of(cat), confidence)
            if ci is not None:
                row[cat] = ci.to_dict()
        ci = index.over_seeds(conf, index.tasks, confidence)
        if ci is not None:
            row["overall"] = ci.to_dict()
        rows[conf] = row
    return {"rows": rows, "seeds": index.seeds, "confidence": confidence,
            "trials_per_task": _trials_per_task(index), "tasks": index.tasks,
            "paper": PAPER_TABLE_II, "paper_full_seeds": PAPER_FULL_SEEDS}


def success_rules(index: RecordIndex, configurations: Optional[Sequence[str]] = None,
                  confidence: float = 0.95) -> Dict[str, Any]:
    """Each task's success under the strict rule (``success``: nothing but the targets taken,
    evaluation/taken.py) and the paper's (``paper_success``: every target grasped, whatever
    else was taken), with the trials that took a wrong object and those that moved a sturdy
    neighbour aside; Table II's rows under the paper's rule, so the change is visible."""
    paper_index = RecordIndex(replace(r, success=r.paper_success) for r in index.records)
    rows: Dict[str, Dict[str, Any]] = {}
    for conf in configurations or index.configurations:
        if conf not in index.configurations:
            continue
        rows[conf] = {}
        for task in index.tasks:
            trials = index.trials(conf, tasks=[task])
            strict = index.over_seeds(conf, [task], confidence)
            paper = paper_index.over_seeds(conf, [task], confidence)
            rows[conf][task] = {
                "strict": round(strict.mean, 2) if strict else None,
                "paper_rule": round(paper.mean, 2) if paper else None,
                "trials": len(trials),
                "wrongly_taken_trials": sum(1 for r in trials if r.wrongly_taken),
                "wrongly_taken": dict(Counter(o for r in trials for o in r.wrongly_taken)),
                "moved_aside_trials": sum(1 for r in trials if r.moved_aside)}
    return {"rows": rows, "table_ii_paper_rule": table_ii(paper_index, configurations,
                                                          confidence)}


def per_task(index: RecordIndex, configurations: Optional[Sequence[str]] = None,
             confidence: float = 0.95) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """Success % per task (CI over seeds) per configuration."""
    out: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for conf in configurations or index.configurations:
        if conf not in index.configurations:
            continue
        out[conf] = {}
        for task in index.tasks:
            ci = index.over_seeds(conf, [task], confidence)
            if ci is not None:
                out[conf][task] = ci.to_dict()
    return out


def sg_objects(index: RecordIndex, configuration: str = "full",
               confidence: float = 0.95) -> Dict[str, Any]:
    """The per-object SG numbers (every SG task; the paper quotes banana, cube, apple, cup)."""
    rows = {}
    for task in index.tasks_of("SG"):
        ci = index.over_seeds(configuration, [task], confidence)
        if ci is not None:
            rows[task] = ci.to_dict()
    return {"configuration": configuration, "rows": rows, "paper": PAPER_SG_OBJECTS}


def _trials_per_task(index: RecordIndex) -> int:
    sizes = {len(g) for g in index.groups.values()}
    return max(sizes) if sizes else 0


# ----------------------------------------------------------------- Table III
def table_iii(index: RecordIndex, configurations: Sequence[str] = ("no_recovery", "full"),
              confidence: float = 0.95) -> Dict[str, Any]:
    """With and without recovery: success and mean time per trial per category; attempts per
    trial; recovery rate."""
    rows: Dict[str, Any] = {}
    for conf in configurations:
        if conf not in index.configurations:
            continue
        row: Dict[str, Any] = {}
        for cat in CATEGORIES:
            tasks = index.tasks_of(cat)
            success = index.over_seeds(conf, tasks, confidence)
            if success is None:
                continue
            times = [_mean([r.sim_time_s for r in index.trials(conf, s, tasks)])
                     for s in index.seeds]
            attempts = [_mean([r.n_attempts for r in index.trials(conf, s, tasks)])
                        for s in index.seeds]
            vlm_calls = [_mean([r.vlm_calls for r in index.trials(conf, s, tasks)])
                         for s in index.seeds]
            looks = [_mean([r.perception_calls for r in index.trials(conf, s, tasks)])
                     for s in index.seeds]
            vlm_s = [_mean([r.vlm_s for r in index.trials(conf, s, tasks)])
                     for s in index.seeds]
            row[cat] = {"success": success.to_dict(),
                        "vlm_calls": mean_ci([v for v in vlm_calls if v is not None],
                                             confidence).to_dict(),
                        "perception_calls": mean_ci([v for v in looks if v is not None],
                                                    confidence).to_dict(),
                        "vlm_s": mean_ci([v for v in vlm_s if v is not None],
                                         confidence).to_dict(),
                        "time_s": mean_ci([t for t in times if t is not None],
                                          confidence).to_dict(),
                        "attempts": mean_ci([a for a in attempts if a is not None],
                                            confidence).to_dict()}
        all_trials = index.trials(conf)
        per_seed_attempts = [_mean([r.n_attempts for r in index.trials(conf, s)])
                             for s in index.seeds]
        per_seed_recovery = [_recovery_rate(index.trials(conf, s)) for s in index.seeds]
        row["attempts_per_trial"] = mean_ci([a for a in per_seed_attempts if a is not None],
                                            confidence).to_dict()
        row["recovery_rate"] = mean_ci([v for v in per_seed_recovery if v is not None],
                                       confidence).to_dict()
        failed_first = [r for r in all_trials if r.first_attempt_failed]
        row["first_attempt_failed"] = len(failed_first)
        row["recovered_after_first_failure"] = sum(r.success for r in failed_first)
        row["trials"] = len(all_trials)
        rows[conf] = row
    return {"rows": rows, "paper": PAPER_TABLE_III, "paper_attempts": PAPER_ATTEMPTS,
            "paper_recovery_rate": PAPER_RECOVERY_RATE, "confidence": confidence}


def _recovery_rate(trials: Sequence[TrialRecord]) -> Optional[float]:
    failed_first = [r for r in trials if r.first_attempt_failed]
    if not failed_first:
        return None
    return 100.0 * sum(r.success for r in failed_first) / len(failed_first)


def _mean(values: Sequence[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


# ----------------------------------------------------------------- Table IV
def table_iv() -> Tuple[Dict[str, Any], str]:
    """Table IV through core/retrieval (evaluate_retrieval + format_table)."""
    results = evaluate_retrieval()
    return results, format_table(results, per_query=False)


# ----------------------------------------------------------------- Table V
def table_v(index: RecordIndex, configurations: Sequence[str] = ("no_scene_graph",
                                                                 "no_constraint_inference",
                                                                 "full"),
            confidence: float = 0.95) -> Dict[str, Any]:
    """Interactive tasks: success and constraint satisfaction per row (module docstring)."""
    tasks = index.tasks_of("IT")
    rows = {}
    for conf in configurations:
        if conf not in index.configurations:
            continue
        success = index.over_seeds(conf, tasks, confidence)
        satisfied, kept = [], []
        for s in index.seeds:
            trials = index.trials(conf, s, tasks)
            if trials:
                satisfied.append(100.0 * sum(r.constraint_satisfied for r in trials)
                                 / len(trials))
                kept.append(100.0 * sum(r.constraint_satisfied and r.n_constraints > 0
                                         for r in trials) / len(trials))
        rows[conf] = {"success": success.to_dict() if success else None,
                      "constraint_satisfaction": mean_ci(satisfied, confidence).to_dict(),
                      "inferred_and_kept": mean_ci(kept, confidence).to_dict(),
                      "trials": len(index.trials(conf, None, tasks))}
    return {"rows": rows, "tasks": tasks, "paper": PAPER_TABLE_V, "confidence": confidence}


# ----------------------------------------------------------------- OOD
def ood_table(index: RecordIndex, splits: Sequence[str], configuration: str = "full",
              confidence: float = 0.95) -> Dict[str, Any]:
    """Success % per split (mean over its objects per seed, CI over seeds) and per object."""
    rows = {}
    for split in splits:
        tasks = index.tasks_of(split=split)
        if not tasks:
            continue
        ci = index.over_seeds(configuration, tasks, confidence)
        rows[split] = {"success": ci.to_dict() if ci else None,
                       "objects": {t: index.over_seeds(configuration, [t], confidence)
                                   .to_dict() for t in tasks}}
    return {"configuration": configuration, "rows": rows, "paper": PAPER_OOD,
            "confidence": confidence}


# ----------------------------------------------------------------- histograms
def failure_histogram(index: RecordIndex) -> Dict[str, Dict[str, int]]:
    """Failure type -> count of failed attempts, per configuration (all seeds)."""
    out = {}
    for conf in index.configurations:
        counter = Counter(ft for r in index.trials(conf) for ft in r.failure_types)
        out[conf] = dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


def refusal_table(index: RecordIndex) -> Dict[str, Dict[str, int]]:
    """Trials refused at planning as beyond the hand, per configuration and task (all seeds;
    counted apart from successes and from failed attempts)."""
    out = {}
    for conf in index.configurations:
        counter = Counter(r.task_id for r in index.trials(conf) if r.n_refused)
        if counter:
            out[conf] = dict(sorted(counter.items()))
    return out


def level_histogram(index: RecordIndex, configuration: str = "full"
                    ) -> Dict[str, Dict[int, int]]:
    """Retry level of each executed attempt (0 = g0) per category, for one configuration."""
    out = {}
    for cat in CATEGORIES:
        counter = Counter(level for r in index.trials(configuration, None,
                                                      index.tasks_of(cat))
                          for level in r.retry_levels)
        if counter:
            out[cat] = {int(k): int(v) for k, v in sorted(counter.items())}
    return out


def perception_per_task(default: RecordIndex, oracle: RecordIndex,
                        configuration: str = "full", confidence: float = 0.95
                        ) -> Dict[str, Any]:
    """Success % per task of one configuration with the default perception and the oracle."""
    rows: Dict[str, Any] = {}
    for task in list(dict.fromkeys(default.tasks + oracle.tasks)):
        d = default.over_seeds(configuration, [task], confidence)
        o = oracle.over_seeds(configuration, [task], confidence)
        rows[task] = {"default": d.to_dict() if d is not None else None,
                      "oracle": o.to_dict() if o is not None else None}
    perception = (default.records[0].perception if default.records else "default")
    overall = {}
    for name, index in (("default", default), ("oracle", oracle)):
        per_seed = []
        for seed in index.seeds:
            rates = [index.rate(configuration, seed, t) for t in index.tasks]
            rates = [r for r in rates if r is not None]
            if rates:
                per_seed.append(sum(rates) / len(rates))
        overall[name] = mean_ci(per_seed, confidence).to_dict() if per_seed else None
    return {"configuration": configuration, "perception": perception, "rows": rows,
            "overall": overall, "confidence": confidence}



__all__ = ["RecordIndex", "failure_histogram", "level_histogram", "ood_table", "per_task",
           "perception_per_task", "refusal_table", "sg_objects", "table_ii", "table_iii",
           "table_iv", "table_v"]
