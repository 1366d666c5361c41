"""Paired comparisons of two Table II rows: what memory buys per task, and how far
the full system stands above a baseline per category.

Both use the protocol's paired seeds: repetition s of task t runs the same trial seeds under
every configuration, so the difference of two rows in one repetition is a paired sample and
the interval is the t interval over the repetitions of those differences (tables.mean_ci).
A difference counts as *beyond noise* when its interval excludes 0.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from agentic_grasp_lab.evaluation.tables import CATEGORIES, LABELS, RecordIndex
from agentic_grasp_lab.evaluation.confidence import mean_ci


def _paired(index: RecordIndex, a: str, b: str, tasks: Sequence[str],
            confidence: float) -> Optional[Dict[str, Any]]:
    diffs: List[float] = []
    for seed in index.seeds:
        va, vb = index.task_mean(a, seed, tasks), index.task_mean(b, seed, tasks)
        if va is not None and vb is not None:
            diffs.append(va - vb)
    if not diffs:
        return None
    ci = mean_ci(diffs, confidence).to_dict()
    lo, hi = ci.get("lo"), ci.get("hi")
    ci["beyond_noise"] = (None if lo is None or hi is None or len(diffs) < 2
                          else bool(lo > 0.0 or hi < 0.0))
    return ci


def paired_difference(index: RecordIndex, a: str, b: str, confidence: float = 0.95
                      ) -> Dict[str, Any]:
    """Success % of ``a`` minus ``b`` per task, per category and overall (paired seeds)."""
    out: Dict[str, Any] = {"a": a, "b": b, "tasks": {}, "categories": {},
                           "confidence": confidence}
    if a not in index.configurations or b not in index.configurations:
        return out
    for task in index.tasks:
        ci = _paired(index, a, b, [task], confidence)
        if ci is not None:
            out["tasks"][task] = ci
    for cat in CATEGORIES:
        tasks = index.tasks_of(cat)
        ci = _paired(index, a, b, tasks, confidence) if tasks else None
        if ci is not None:
            out["categories"][cat] = ci
    ci = _paired(index, a, b, index.tasks, confidence)
    if ci is not None:
        out["categories"]["overall"] = ci
    return out


def _fmt(ci: Mapping[str, Any]) -> str:
    text = f"{ci['mean']:+.1f}"
    half = ci.get("half_width")
    if half is not None and ci.get("n", 0) >= 2:
        text += f" ± {half:.1f}"
    if ci.get("beyond_noise"):
        text += " *"
    return text


def format_paired(table: Mapping[str, Any], title: str = "") -> str:
    """The paired differences as text (``*``: the interval excludes 0)."""
    if not table.get("tasks"):
        return ""
    a, b = table["a"], table["b"]
    lines = [title or (f"Paired difference, {LABELS.get(a, a)} minus {LABELS.get(b, b)}, "
                       f"success points (mean ± {table['confidence']:.0%} CI over paired "
                       "seeds; * = beyond noise)")]
    cats = table["categories"]
    lines.append("  " + ", ".join(f"{c} {_fmt(cats[c])}" for c in list(CATEGORIES)
                                  + ["overall"] if c in cats))
    for task, ci in table["tasks"].items():
        lines.append(f"  {task:<34} {_fmt(ci)}")
    return "\n".join(lines)


def comparisons(index: RecordIndex, confidence: float = 0.95) -> Dict[str, Dict[str, Any]]:
    """Every comparison the rows present allow: memory (full vs no_episodic_memory) and the
    full system above each heuristic baseline."""
    out: Dict[str, Dict[str, Any]] = {}
    pairs = (("memory", "full", "no_episodic_memory"), ("above_heuristic", "full", "heuristic"),
             ("above_heuristic_box", "full", "heuristic_box"))
    for name, a, b in pairs:
        if a in index.configurations and b in index.configurations:
            out[name] = paired_difference(index, a, b, confidence)
    return out


def format_comparisons(tables: Mapping[str, Mapping[str, Any]]) -> str:
    return "\n\n".join(t for t in (format_paired(v) for v in tables.values()) if t)


__all__ = ["comparisons", "format_comparisons", "format_paired", "paired_difference"]
