"""The paper's tables from trial records, with confidence intervals over seeds, printed beside
the paper's numbers (docs/paper_facts.md; paper Sec. V, Tables II-V, OOD).

Aggregation, as the paper defines it:

- a task's success rate in one repetition (seed) is successes / trials (30 trials);
- a category's (SG / IT / LH) value is the mean over its tasks, and "overall" the mean over
  all 12 tasks (docs/paper_facts.md: "Overall is the mean over the 12 tasks"), not over trials;
- a number "over 5 seeds" is the mean of the 5 per-seed values with the two-sided interval
  mean +- t_{(1+c)/2, n-1} sd / sqrt(n), sd the sample standard deviation (ddof 1) of the
  per-seed values; for c = 0.95 and n = 5, t = 2.776.

Recovery rate (Table III): the share of trials whose first grasp attempt failed that still
succeeded. Constraint satisfaction (Table V): the share of trials with no constraint
violation, spill or contact with a fragile neighbour (episode.py's definition); because
the paper reports 0 % for both rows without constraint inference, a second column counts
only trials in which grasp-changing constraints were inferred and then kept.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from agentic_grasp.core.evaluation.records import TrialRecord
from agentic_grasp.core.evaluation.confidence import MeanCI, mean_ci


CATEGORIES = ("SG", "IT", "LH")

#: Row labels of the paper's tables.
LABELS: Dict[str, str] = {
    "full": "Full system",
    "no_recovery": "w/o Recovery",
    "no_episodic_memory": "w/o Episodic Memory",
    "no_scene_graph": "w/o Scene Graph",
    "heuristic": "Heuristic baseline",
    "heuristic_box": "Heuristic (box rule)",
    "no_haa_rag": "w/o HAA-RAG",
    "vlm_only": "VLM-only",
    "no_constraint_inference": "+ scene graph, no constraint inference",
}
TABLE_V_LABELS = {"no_scene_graph": "No scene graph",
                  "no_constraint_inference": "+ scene graph",
                  "full": "+ constraint inference"}

# ----------------------------------------------------------------- the paper's numbers
#: Table II, success % (one run of 30 trials per task).
PAPER_TABLE_II: Dict[str, Dict[str, float]] = {
    "full": {"SG": 91.7, "IT": 64.2, "LH": 66.7, "overall": 78.3},
    "no_recovery": {"SG": 63.3, "IT": 33.3, "LH": 23.3, "overall": 46.7},
    "no_episodic_memory": {"SG": 91.7, "IT": 64.2, "LH": 55.0, "overall": 76.4},
    "no_scene_graph": {"SG": 91.7, "IT": 25.0, "LH": 66.7, "overall": 65.3},
    "heuristic": {"SG": 100.0, "IT": 25.0, "LH": 98.3, "overall": 74.7},
    "no_haa_rag": {"SG": 50.0, "IT": 0.0, "LH": 0.0, "overall": 25.0},
    "vlm_only": {"SG": 50.0, "IT": 0.0, "LH": 0.0, "overall": 25.0},
}
#: Full system over 5 seeds: 78.7 +- 1.8 % (95 % CI 76.4 to 81.0).
PAPER_FULL_SEEDS = {"mean": 78.7, "half_width": 1.8, "lo": 76.4, "hi": 81.0}
#: Per-object SG success of the full system.
PAPER_SG_OBJECTS = {"sg_banana": 100.0, "sg_cube": 100.0, "sg_apple": 60.0, "sg_cup": 90.0}
#: Table III: (success %, mean time per trial s) per category.
PAPER_TABLE_III = {"no_recovery": {"SG": (63.3, 1.7), "IT": (33.3, 2.5), "LH": (23.3, 5.8)},
                   "full": {"SG": (91.7, 2.3), "IT": (64.2, 3.5), "LH": (66.7, 9.1)}}
PAPER_ATTEMPTS = 2.48
PAPER_RECOVERY_RATE = 53.3
#: Table V: (success %, constraint satisfaction %) on the interactive tasks.
PAPER_TABLE_V = {"no_scene_graph": (25.0, 0.0), "no_constraint_inference": (58.3, 0.0),
                 "full": (58.3, 75.0)}
#: OOD study (Sec. V-F): success % (near-OOD not reported).
PAPER_OOD = {"in_distribution": 84.4, "far_ood": 54.4}


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
    from agentic_grasp.core.retrieval import evaluate_retrieval, format_table

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


# ----------------------------------------------------------------- formatting
def _cell(ci: Optional[Mapping[str, Any]], paper: Optional[float], digits: int = 1,
          width: int = 21) -> str:
    if not ci:
        text = "-"
    else:
        n, half = ci["n"], ci["half_width"]
        text = f"{ci['mean']:.{digits}f}"
        if n >= 2 and half is not None and math.isfinite(half):
            text += f" ± {half:.{digits}f}"
    if paper is not None:
        text += f" ({paper:.{digits}f})"
    return text.ljust(width)


def format_table_ii(table: Mapping[str, Any], per_object: Optional[Mapping[str, Any]] = None
                    ) -> str:
    seeds = table["seeds"]
    lines = [f"Table II: success % per category, ours: mean ± {table['confidence']:.0%} CI "
             f"over {len(seeds)} seed(s) x {table['trials_per_task']} trials per task "
             "(paper's number in parentheses); Overall = mean over the "
             f"{len(table['tasks'])} tasks",
             f"{'Configuration':<22}" + "".join(f"{c:<21}" for c in CATEGORIES + ("Overall",))]
    for conf, row in table["rows"].items():
        paper = table["paper"].get(conf, {})
        cells = [_cell(row.get(c), paper.get(c)) for c in CATEGORIES]
        cells.append(_cell(row.get("overall"), paper.get("overall")))
        lines.append(f"{LABELS.get(conf, conf):<22}" + "".join(cells).rstrip())
    full = table["rows"].get("full", {}).get("overall")
    if full:
        p = table["paper_full_seeds"]
        lines.append(f"Full system over seeds: {full['mean']:.1f} ± {full['half_width']:.1f} % "
                     f"({table['confidence']:.0%} CI {full['lo']:.1f} to {full['hi']:.1f}); "
                     f"paper {p['mean']:.1f} ± {p['half_width']:.1f} % "
                     f"(CI {p['lo']:.1f} to {p['hi']:.1f})")
    if per_object:
        paper = per_object["paper"]
        parts = [f"{task.replace('sg_', '')} {_cell(ci, paper.get(task), width=0).strip()}"
                 for task, ci in per_object["rows"].items()]
        lines.append(f"SG per object ({LABELS.get(per_object['configuration'])}; paper quotes "
                     "banana, cube, apple, cup): " + "; ".join(parts))
    return "\n".join(lines)


def format_per_task(table: Mapping[str, Mapping[str, Any]]) -> str:
    confs = list(table)
    if not confs:
        return ""
    tasks = list(next(iter(table.values())))
    lines = ["Success % per task (mean over seeds):",
             f"{'task':<28}" + "".join(f"{c[:11]:>12}" for c in confs)]
    for task in tasks:
        lines.append(f"{task:<28}" + "".join(
            f"{table[c][task]['mean']:>12.1f}" if task in table[c] else f"{'-':>12}"
            for c in confs))
    return "\n".join(lines)


def format_table_iii(table: Mapping[str, Any]) -> str:
    lines = ["Table III: recovery; success % / mean time per trial (s) per category "
             "(paper in parentheses); time = simulated motion + the planner's compute-time "
             "model",
             f"{'':<16}" + "".join(f"{c:<34}" for c in CATEGORIES)]
    for conf, row in table["rows"].items():
        paper = table["paper"].get(conf, {})
        cells = []
        for cat in CATEGORIES:
            if cat not in row:
                cells.append(f"{'-':<34}")
                continue
            s, t = row[cat]["success"], row[cat]["time_s"]
            ps, pt = paper.get(cat, (None, None))
            text = f"{s['mean']:.1f} / {t['mean']:.2f}"
            if ps is not None:
                text += f" ({ps:.1f} / {pt:.1f})"
            cells.append(f"{text:<34}")
        label = "with Recovery" if conf == "full" else LABELS.get(conf, conf)
        lines.append(f"{label:<16}" + "".join(cells).rstrip())
    full = table["rows"].get("full")
    if full:
        a, rr = full["attempts_per_trial"], full["recovery_rate"]
        per_cat = ", ".join(f"{c} {full[c]['attempts']['mean']:.2f}" for c in CATEGORIES
                            if c in full)
        lines.append(f"Full system: {a['mean']:.2f} attempts per trial ({per_cat}; paper "
                     f"{table['paper_attempts']:.2f}); recovery rate {rr['mean']:.1f} ± "
                     f"{rr['half_width']:.1f} % = {full['recovered_after_first_failure']} of "
                     f"{full['first_attempt_failed']} trials whose first attempt failed "
                     f"(paper {table['paper_recovery_rate']:.1f} %)")
    vlm_rows = [(conf, row) for conf, row in table["rows"].items()
                if any(row.get(c, {}).get("vlm_calls", {}).get("mean") for c in CATEGORIES)]
    if vlm_rows:
        lines.append("VLM calls per trial / perception looks per trial / modelled VLM time per "
                     "trial (s, in the time above): the re-perception policy asks the VLM "
                     "only when the depth changed around the target")
        for conf, row in vlm_rows:
            label = "with Recovery" if conf == "full" else LABELS.get(conf, conf)
            cells = []
            for cat in CATEGORIES:
                if cat not in row:
                    cells.append(f"{'-':<34}")
                    continue
                text = (f"{row[cat]['vlm_calls']['mean']:.2f} / "
                        f"{row[cat]['perception_calls']['mean']:.2f} / "
                        f"{row[cat]['vlm_s']['mean']:.2f}")
                cells.append(f"{text:<34}")
            lines.append(f"{label:<16}" + "".join(cells).rstrip())
    return "\n".join(lines)


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


def format_perception_per_task(table: Mapping[str, Any]) -> str:
    name = table["perception"]
    lines = [f"Success % per task, {LABELS.get(table['configuration'], table['configuration'])}"
             f": {name} (the benchmark's perception) vs oracle (ground truth)",
             f"{'task':<28}{name:>12}{'oracle':>12}{'diff':>8}"]
    for task, row in table["rows"].items():
        d, o = row["default"], row["oracle"]
        if d is None or o is None:
            continue
        lines.append(f"{task:<28}{d['mean']:>12.1f}{o['mean']:>12.1f}"
                     f"{d['mean'] - o['mean']:>+8.1f}")
    d, o = table["overall"].get("default"), table["overall"].get("oracle")
    if d and o:
        lines.append(f"{'overall (mean of tasks)':<28}{d['mean']:>12.1f}{o['mean']:>12.1f}"
                     f"{d['mean'] - o['mean']:>+8.1f}")
    return "\n".join(lines)


def format_table_v(table: Mapping[str, Any], constraint_mode: str = "") -> str:
    mode = f", constraint_mode {constraint_mode}" if constraint_mode else ""
    lines = [f"Table V: scene graph on the {len(table['tasks'])} interactive tasks{mode} "
             "(paper in parentheses)",
             f"{'':<26}{'Success %':<21}{'Constraint sat. %':<21}{'inferred & kept %':<18}"]
    for conf, row in table["rows"].items():
        ps, pc = table["paper"].get(conf, (None, None))
        lines.append(f"{TABLE_V_LABELS.get(conf, conf):<26}"
                     + _cell(row["success"], ps) + _cell(row["constraint_satisfaction"], pc)
                     + _cell(row["inferred_and_kept"], None).rstrip())
    lines.append("Constraint sat.: trials with no violation / spill / fragile-neighbour "
                 "contact; inferred & kept: the same, counting only trials where "
                 "grasp-changing constraints were inferred (the paper's 0 % without "
                 "inference suggests this reading).")
    return "\n".join(lines)


def format_ood(table: Mapping[str, Any], labels: Optional[Mapping[str, str]] = None) -> str:
    labels = labels or {}
    lines = [f"OOD generalisation ({LABELS.get(table['configuration'])}), success %, mean ± "
             f"{table['confidence']:.0%} CI over seeds (paper in parentheses)"]
    for split, row in table["rows"].items():
        paper = table["paper"].get(split)
        lines.append(f"{labels.get(split, split):<18}" + _cell(row["success"], paper).rstrip())
        objs = ", ".join(f"{t.replace('ood_', '').replace('near_', '').replace('far_', '')}"
                         f" {ci['mean']:.0f}" for t, ci in row["objects"].items())
        lines.append(f"{'':<18}per object: {objs}")
    return "\n".join(lines)


def format_histograms(failures: Mapping[str, Mapping[str, int]],
                      levels: Mapping[str, Mapping[int, int]],
                      refusals: Optional[Mapping[str, Mapping[str, int]]] = None) -> str:
    lines = ["Failure types (failed attempts, all seeds):"]
    for conf, counts in failures.items():
        total = sum(counts.values())
        top = ", ".join(f"{k} {v}" for k, v in list(counts.items())[:6])
        lines.append(f"  {LABELS.get(conf, conf):<22} {total:>6}  {top}")
    if refusals:
        lines.append("Refused at planning, beyond the hand (trials, zero attempts):")
        for conf, counts in refusals.items():
            lines.append(f"  {LABELS.get(conf, conf):<22} {sum(counts.values()):>6}  "
                         + ", ".join(f"{k} {v}" for k, v in counts.items()))
    lines.append("Retry level of executed attempts, full system (0 = g0):")
    for cat, counts in levels.items():
        lines.append(f"  {cat}: " + ", ".join(f"L{k} {v}" for k, v in counts.items()))
    return "\n".join(lines)


__all__ = [
    "CATEGORIES", "failure_histogram", "format_histograms", "format_ood", "format_per_task",
    "format_table_ii", "format_table_iii", "format_table_v", "LABELS", "level_histogram",
    "ood_table", "PAPER_ATTEMPTS", "PAPER_FULL_SEEDS", "PAPER_OOD", "PAPER_RECOVERY_RATE",
    "PAPER_SG_OBJECTS", "PAPER_TABLE_II", "PAPER_TABLE_III", "PAPER_TABLE_V", "per_task",
    "RecordIndex", "refusal_table", "sg_objects", "table_ii", "table_iii", "table_iv", "table_v",
    "TABLE_V_LABELS",
]
