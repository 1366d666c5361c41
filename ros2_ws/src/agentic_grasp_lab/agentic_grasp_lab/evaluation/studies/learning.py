"""Learning-curve benchmark: does the robot get better from its own attempts?

``agentic-grasp bench learning``. For every task of the series (the far-OOD and near-OOD
scenes of config/ood/splits.yaml and the unseen-placement scenes of config/scenes/learning/),
in order:

1. **Series with acquisition.** ``goals`` trials on seeds ``trial_seed(seed, task, i)``, one
   after another, starting from the authored knowledge base; every attempt is appended to a
   fresh acquired-experiences file and the LiveRetriever serves it from the next trial on.
2. **Paired series without acquisition.** The same seeds with the authored knowledge base
   only, so every block compares the same scenes (jitter, noise) side by side.
3. **Evaluation on held-out seeds.** ``eval_trials`` trials on seeds the series never used
   (``trial_seed(seed + EVAL_OFFSET, ...)``), with the final acquired file frozen (nothing
   appended) against the authored knowledge base alone.

Then the 12 benchmark tasks are run on held-out seeds with the acquired knowledge of the
whole run against the authored one ("no loss on the 12 tasks"). Success per block of
``block`` goals is printed with Wilson 95 % intervals; the plot is a PNG (matplotlib).

One acquired file is shared across tasks, so what was learned on one object is available to
the next (a thermos' experiences may help the kettle): this is the deployed setting.
"""
from __future__ import annotations

import json
import logging
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from agentic_grasp.core import paths
from agentic_grasp.core.retrieval.acquired.consolidation import wilson_interval
from agentic_grasp.core.sim.scenes import BENCHMARK_TASKS
from agentic_grasp.core.planner.episode import retriever_for, run_trial
from agentic_grasp.core.retrieval.acquired.acquisition import Acquirer, AcquisitionContext
from agentic_grasp.core.retrieval.acquired.live import LiveRetriever
from agentic_grasp_lab.evaluation.studies.ood import load_splits
from agentic_grasp_lab.evaluation.sweep import trial_seed

_LOG = logging.getLogger(__name__)

#: Held-out evaluation seeds start here (the series uses trial indices 0 .. goals-1).
EVAL_OFFSET = 100003


def learning_tasks() -> Dict[str, List[str]]:
    """Series tasks by group: far_ood, near_ood (config/ood/splits.yaml), placements."""
    splits = load_splits()
    out = {"far_ood": [str(p) for p in splits.splits["far_ood"].paths],
           "near_ood": [str(p) for p in splits.splits["near_ood"].paths]}
    own = sorted((paths.scenes_dir() / "learning").glob("*.yaml"))
    out["placements"] = [str(p) for p in own]
    return out


def _task_path(task: str) -> str:
    p = Path(task)
    if p.suffix == ".yaml" and p.is_file():
        return str(p)
    candidate = paths.scenes_dir() / f"{task}.yaml"
    return str(candidate) if candidate.is_file() else task


@dataclass
class Series:
    task: str
    group: str
    learned: List[bool] = field(default_factory=list)
    baseline: List[bool] = field(default_factory=list)
    eval_learned: List[bool] = field(default_factory=list)
    eval_baseline: List[bool] = field(default_factory=list)


@dataclass
class LearningResult:
    series: List[Series]
    block: int
    check_learned: Dict[str, List[bool]] = field(default_factory=dict)
    check_baseline: Dict[str, List[bool]] = field(default_factory=dict)
    acquired_file: str = ""
    acquired_records: int = 0
    served_entries: int = 0
    wall_s: float = 0.0

    def blocks(self, group: Optional[str] = None, learned: bool = True) -> List[Dict[str, Any]]:
        """Success per block of ``block`` goals, pooled over the group's series."""
        chosen = [s for s in self.series if group is None or s.group == group]
        if not chosen:
            return []
        n = min(len(s.learned) for s in chosen)
        out = []
        for b in range(0, n, self.block):
            hits = [x for s in chosen
                    for x in (s.learned if learned else s.baseline)[b:b + self.block]]
            k, m = sum(hits), len(hits)
            lo, hi = wilson_interval(k, m)
            out.append({"block": b // self.block + 1, "successes": k, "n": m,
                        "rate": k / m if m else 0.0, "ci": (lo, hi)})
        return out

    def to_dict(self) -> Dict[str, Any]:
        groups = sorted({s.group for s in self.series})
        return {"block": self.block, "wall_s": round(self.wall_s, 1),
                "acquired_file": self.acquired_file, "acquired_records": self.acquired_records,
                "served_entries": self.served_entries,
                "curves": {g: {"acquisition": self.blocks(g, True),
                               "no_acquisition": self.blocks(g, False)} for g in groups},
                "series": [{"task": Path(s.task).stem, "group": s.group,
                            "learned": s.learned, "baseline": s.baseline,
                            "eval_learned": s.eval_learned, "eval_baseline": s.eval_baseline}
                           for s in self.series],
                "check": {t: {"acquisition": self.check_learned.get(t, []),
                              "no_acquisition": self.check_baseline.get(t, [])}
                          for t in self.check_learned}}


def run_learning(groups: Sequence[str] = ("far_ood",), goals: int = 100, block: int = 10,
                 eval_trials: int = 20, check_trials: int = 5, seed: int = 0,
                 perception: str = "vlm_sim", workdir: Optional[Path] = None,
                 tasks: Optional[Sequence[str]] = None,
                 progress: bool = True) -> LearningResult:
    """Run the benchmark (module docstring). ``tasks`` overrides the groups' task lists
    (then the group is 'custom'); ``check_trials`` = 0 skips the 12-task check."""
    started = time.perf_counter()
    workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="learn-"))
    workdir.mkdir(parents=True, exist_ok=True)
    acquired = workdir / "acquired_experiences.jsonl"
    if acquired.exists():
        acquired.unlink()
    authored = retriever_for(None)
    live = LiveRetriever(authored, acquired, cache=False)
    acquirer = Acquirer(acquired, context=AcquisitionContext(perception_backend=perception,
                                                             configuration="full"),
                        fsync=False)
    plan: List[tuple] = []
    if tasks:
        plan = [("custom", _task_path(t)) for t in tasks]
    else:
        by_group = learning_tasks()
        plan = [(g, t) for g in groups for t in by_group.get(g, [])]
    result = LearningResult([], int(block), acquired_file=str(acquired))

    def trial(task: str, s: int, retriever, sink) -> bool:
        return bool(run_trial(task, "full", seed=s, perception=perception,
                              retriever=retriever, attempt_sink=sink).success)

    for group, task in plan:
        series = Series(task, group)
        name = Path(task).stem
        for i in range(int(goals)):
            s = trial_seed(seed, name, i)
            acquirer.context.goal_id = f"{name}-{i}"
            series.learned.append(trial(task, s, live, acquirer))
            series.baseline.append(trial(task, s, authored, None))
        live.refresh()
        for j in range(int(eval_trials)):
            s = trial_seed(seed + EVAL_OFFSET, name, j)
            series.eval_learned.append(trial(task, s, live, None))
            series.eval_baseline.append(trial(task, s, authored, None))
        result.series.append(series)
        if progress:
            print(f"[learning] {group} {name}: series {sum(series.learned)}/{goals} with "
                  f"acquisition, {sum(series.baseline)}/{goals} without; held-out "
                  f"{sum(series.eval_learned)}/{eval_trials} vs "
                  f"{sum(series.eval_baseline)}/{eval_trials}", flush=True)
    for task in (BENCHMARK_TASKS if check_trials > 0 else ()):
        path = _task_path(task)
        result.check_learned[task] = [trial(path, trial_seed(seed + EVAL_OFFSET, task, j), live,
                                            None) for j in range(int(check_trials))]
        result.check_baseline[task] = [trial(path, trial_seed(seed + EVAL_OFFSET, task, j),
                                             authored, None) for j in range(int(check_trials))]
    live.refresh()
    st = live.stats()
    result.acquired_records = st["acquired_records"]
    result.served_entries = st["served"]
    result.wall_s = time.perf_counter() - started
    return result


def _fmt_block(b: Dict[str, Any]) -> str:
    return f"{100 * b['rate']:5.1f} [{100 * b['ci'][0]:4.0f},{100 * b['ci'][1]:4.0f}]"


def format_learning(result: LearningResult) -> str:
    """Blocks per group (with / without acquisition), held-out evaluation, 12-task check."""
    lines = []
    for group in sorted({s.group for s in result.series}):
        with_acq, without = result.blocks(group, True), result.blocks(group, False)
        lines.append(f"{group}: success per block of {result.block} goals, % [Wilson 95 % CI]")
        lines.append(f"  {'block':>5}  {'acquisition':>18}  {'no acquisition':>18}")
        for a, b in zip(with_acq, without):
            lines.append(f"  {a['block']:>5}  {_fmt_block(a):>18}  {_fmt_block(b):>18}")
        if with_acq:
            gain = 100 * (with_acq[-1]["rate"] - with_acq[0]["rate"])
            lines.append(f"  first -> last block with acquisition: {gain:+.1f} points")
        chosen = [s for s in result.series if s.group == group]
        el = [x for s in chosen for x in s.eval_learned]
        eb = [x for s in chosen for x in s.eval_baseline]
        if el:
            lines.append(f"  held-out seeds: {100 * sum(el) / len(el):.1f} % with the acquired "
                         f"KB vs {100 * sum(eb) / len(eb):.1f} % authored only (n = {len(el)})")
    if result.check_learned:
        lines.append("12 tasks, held-out seeds: acquired KB vs authored KB")
        tot_l = tot_b = n = 0
        for task, vals in result.check_learned.items():
            base = result.check_baseline.get(task, [])
            tot_l, tot_b, n = tot_l + sum(vals), tot_b + sum(base), n + len(vals)
            lines.append(f"  {task:<28} {sum(vals)}/{len(vals)}  vs  {sum(base)}/{len(base)}")
        lines.append(f"  overall {100 * tot_l / max(n, 1):.1f} % vs "
                     f"{100 * tot_b / max(n, 1):.1f} %")
    lines.append(f"acquired {result.acquired_records} records -> {result.served_entries} "
                 f"consolidated entries served; {result.wall_s:.0f} s")
    return "\n".join(lines)


def plot_learning(result: LearningResult, out: Path) -> Optional[Path]:
    """PNG of the learning curves with CI bands (None when matplotlib is missing)."""
    try:    # matplotlib is optional here: without it, no plot
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # once the backend is chosen
    except ImportError:
        _LOG.warning("matplotlib is not installed: no plot")
        return None
    groups = sorted({s.group for s in result.series})
    fig, axes = plt.subplots(1, max(1, len(groups)), figsize=(5 * max(1, len(groups)), 3.6),
                             squeeze=False)
    for ax, group in zip(axes[0], groups):
        for learned, label, colour in ((True, "acquisition", "tab:blue"),
                                       (False, "no acquisition", "tab:grey")):
            blocks = result.blocks(group, learned)
            x = [b["block"] for b in blocks]
            ax.plot(x, [100 * b["rate"] for b in blocks], marker="o", color=colour, label=label)
            ax.fill_between(x, [100 * b["ci"][0] for b in blocks],
                            [100 * b["ci"][1] for b in blocks], color=colour, alpha=0.15)
        ax.set_title(group)
        ax.set_xlabel(f"block of {result.block} goals")
        ax.set_ylabel("success (%)")
        ax.set_ylim(0, 100)
        ax.legend(loc="lower right")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def save_learning(result: LearningResult, out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result.to_dict(), indent=1), encoding="utf-8")
    return out


__all__ = ["BENCHMARK_TASKS", "EVAL_OFFSET", "LearningResult", "Series", "format_learning",
           "learning_tasks", "plot_learning", "run_learning", "save_learning"]
