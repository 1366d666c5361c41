"""Figures of the evaluation (matplotlib, Agg backend, PNG files).

- ``success_per_task.png``: success % per task and configuration, error bars = the CI over
  seeds (tables.per_task);
- ``failure_types.png``: failed attempts per failure type and configuration;
- ``recovery_levels.png``: how often each retry level ran (0 = the initial grasp g0) per
  category, for the full system;
- ``ood.png``: success per OOD split (when the OOD study ran);
- ``perception_per_task.png``: success % per task of the full system with the benchmark's
  perception (vlm_sim) beside the oracle's (tables.perception_per_task).

matplotlib is imported inside the functions with the Agg backend, so importing this module
costs nothing and never needs a display.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from agentic_grasp_lab.evaluation.tables import LABELS

_LOG = logging.getLogger(__name__)


def _pyplot():
    # matplotlib on use: the Agg backend is chosen before pyplot loads, and only figures need it
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # once the backend is chosen

    return plt


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    _LOG.info("wrote %s", path)
    return path


def success_per_task(per_task: Mapping[str, Mapping[str, Mapping[str, Any]]],
                     path: Union[str, Path]) -> Path:
    """Grouped bars: tasks on x, one bar per configuration, CI error bars."""
    plt = _pyplot()
    confs = list(per_task)
    tasks: List[str] = []
    for rows in per_task.values():
        tasks.extend(t for t in rows if t not in tasks)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.9 * len(tasks) + 2), 4.8))
    width = 0.8 / max(len(confs), 1)
    for k, conf in enumerate(confs):
        xs, means, errs = [], [], []
        for i, task in enumerate(tasks):
            ci = per_task[conf].get(task)
            if ci is None:
                continue
            xs.append(i - 0.4 + width * (k + 0.5))
            means.append(ci["mean"])
            half = ci.get("half_width")
            errs.append(half if half is not None and math.isfinite(half) else 0.0)
        ax.bar(xs, means, width, yerr=errs, capsize=2, label=LABELS.get(conf, conf))
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels(tasks, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("success %")
    ax.set_ylim(0, 128)                   # headroom above 100 % for the legend
    ax.set_yticks(range(0, 101, 20))
    ax.set_title("Success per task and configuration (error bars: CI over seeds)")
    ax.legend(fontsize=7, ncol=4, loc="upper center")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, Path(path))


def failure_types(histogram: Mapping[str, Mapping[str, int]], path: Union[str, Path]
                  ) -> Path:
    """Horizontal grouped bars: failure type -> failed attempts, per configuration."""
    plt = _pyplot()
    confs = [c for c in histogram if histogram[c]]
    types: List[str] = []
    for counts in histogram.values():
        types.extend(t for t in counts if t not in types)
    totals = {t: sum(histogram[c].get(t, 0) for c in confs) for t in types}
    types.sort(key=lambda t: totals[t])
    fig, ax = plt.subplots(figsize=(8.0, max(3.0, 0.45 * len(types) + 1.5)))
    height = 0.8 / max(len(confs), 1)
    for k, conf in enumerate(confs):
        ys = [i - 0.4 + height * (k + 0.5) for i in range(len(types))]
        ax.barh(ys, [histogram[conf].get(t, 0) for t in types], height,
                label=LABELS.get(conf, conf))
    ax.set_yticks(range(len(types)))
    ax.set_yticklabels(types, fontsize=8)
    ax.set_xlabel("failed attempts (all seeds)")
    ax.set_title("Failure types by configuration")
    if confs:
        ax.legend(fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, Path(path))


def recovery_levels(levels: Mapping[str, Mapping[int, int]], path: Union[str, Path],
                    configuration: str = "full") -> Path:
    """Bars per category: executed attempts at retry level 0 (g0), 1, 2, 3."""
    plt = _pyplot()
    cats = list(levels)
    all_levels = sorted({int(k) for counts in levels.values() for k in counts}) or [0]
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    width = 0.8 / max(len(all_levels), 1)
    for k, level in enumerate(all_levels):
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(cats))]
        ax.bar(xs, [levels[c].get(level, 0) for c in cats], width,
               label="g0" if level == 0 else f"level {level}")
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels(cats)
    ax.set_ylabel("executed attempts (all seeds)")
    ax.set_title(f"Retry levels used ({LABELS.get(configuration, configuration)})")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, Path(path))


def ood_success(table: Mapping[str, Any], path: Union[str, Path],
                labels: Optional[Mapping[str, str]] = None) -> Path:
    """Bars per OOD split with CI error bars; the paper's numbers as markers."""
    plt = _pyplot()
    labels = labels or {}
    splits = [s for s, row in table["rows"].items() if row.get("success")]
    means = [table["rows"][s]["success"]["mean"] for s in splits]
    errs = []
    for s in splits:
        half = table["rows"][s]["success"].get("half_width")
        errs.append(half if half is not None and math.isfinite(half) else 0.0)
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    ax.bar(range(len(splits)), means, 0.6, yerr=errs, capsize=4, label="ours")
    paper = [(i, table["paper"][s]) for i, s in enumerate(splits) if s in table["paper"]]
    if paper:
        ax.scatter([p[0] for p in paper], [p[1] for p in paper], marker="D", color="black",
                   zorder=3, label="paper")
    ax.set_xticks(range(len(splits)))
    ax.set_xticklabels([labels.get(s, s) for s in splits])
    ax.set_ylim(0, 105)
    ax.set_ylabel("success %")
    ax.set_title("Out-of-distribution generalisation (full system)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, Path(path))


def write_figures(out_dir: Union[str, Path], per_task: Mapping[str, Any],
                  failures: Mapping[str, Mapping[str, int]],
                  levels: Mapping[str, Mapping[int, int]],
                  ood: Optional[Mapping[str, Any]] = None,
                  ood_labels: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """All figures into ``out_dir``; returns name -> path."""
    out = Path(out_dir)
    written = {
        "success_per_task": success_per_task(per_task, out / "success_per_task.png"),
        "failure_types": failure_types(failures, out / "failure_types.png"),
        "recovery_levels": recovery_levels(levels, out / "recovery_levels.png"),
    }
    if ood and ood.get("rows"):
        written["ood"] = ood_success(ood, out / "ood.png", ood_labels)
    return {k: str(v) for k, v in written.items()}


__all__ = ["failure_types", "ood_success", "recovery_levels", "success_per_task",
           "write_figures"]


def perception_per_task(table: Mapping[str, Any], path: Union[str, Path]) -> Path:
    """Paired bars per task: the default perception and the oracle, CI error bars."""
    plt = _pyplot()
    tasks = [t for t, row in table["rows"].items()
             if row["default"] is not None and row["oracle"] is not None]
    fig, ax = plt.subplots(figsize=(max(8.0, 0.8 * len(tasks) + 2), 4.8))
    for k, (key, label) in enumerate((("default", table["perception"]),
                                      ("oracle", "oracle"))):
        xs = [i - 0.2 + 0.4 * k for i in range(len(tasks))]
        means = [table["rows"][t][key]["mean"] for t in tasks]
        errs = [table["rows"][t][key].get("half_width", 0.0) or 0.0 for t in tasks]
        errs = [0.0 if not math.isfinite(e) else e for e in errs]
        ax.bar(xs, means, width=0.4, yerr=errs, capsize=2, label=label)
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels(tasks, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("success %")
    ax.set_ylim(0, 105)
    ax.set_title(f"Success per task: {table['perception']} vs oracle "
                 f"({LABELS.get(table['configuration'], table['configuration'])})")
    ax.legend(fontsize=8)
    return _save(fig, Path(path))
