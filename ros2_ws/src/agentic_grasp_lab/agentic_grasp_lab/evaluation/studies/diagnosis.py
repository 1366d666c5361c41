"""How well the planner's diagnosis, read from the arm's observation, names the simulator's
true failure mechanism: accuracy over failed attempts and the confusion matrix.

Each trial record carries, per executed attempt, ``"true>diagnosed"`` (``TrialRecord.
diagnoses``): the simulator's first failure event (its truth, kept for evaluation only) and
the failure type the planner diagnosed from what the sensors reported ("none" for an attempt
held to the top of the lift). Accuracy counts the attempts that truly failed.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, Iterable, Optional

from agentic_grasp_lab.evaluation.figures import _pyplot, _save


def diagnosis_summary(records: Iterable[Any], configuration: Optional[str] = None
                      ) -> Dict[str, Any]:
    """{"accuracy": % of truly failed attempts diagnosed as their true type, "failed": n,
    "confusion": {true: {diagnosed: n}}, "missed_success": successes diagnosed as failures,
    "false_success": failures read as held}; ``configuration`` limits it to one."""
    confusion: Dict[str, Dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for record in records:
        if configuration is not None and record.configuration != configuration:
            continue
        for pair in record.diagnoses:
            true, _, diagnosed = str(pair).partition(">")
            confusion[true][diagnosed or "unknown"] += 1
    failed = sum(n for true, row in confusion.items() if true != "none"
                 for n in row.values())
    right = sum(row.get(true, 0) for true, row in confusion.items() if true != "none")
    return {"accuracy": round(100.0 * right / failed, 2) if failed else None,
            "failed": failed, "correct": right,
            "false_success": sum(row.get("none", 0) for true, row in confusion.items()
                                 if true != "none"),
            "missed_success": sum(n for d, n in confusion.get("none", {}).items()
                                  if d != "none"),
            "confusion": {t: dict(sorted(r.items())) for t, r in sorted(confusion.items())}}


def format_diagnosis(summary: Dict[str, Any]) -> str:
    """A few lines for report.txt: accuracy and the confusion matrix."""
    acc = summary.get("accuracy")
    lines = [f"Failure diagnosis from the arm's observation: "
             f"{'n/a' if acc is None else f'{acc:.1f} %'} of {summary['failed']} failed "
             f"attempts named their true mechanism; {summary['false_success']} failures read "
             f"as held, {summary['missed_success']} held attempts read as failures",
             "  true -> diagnosed: count"]
    for true, row in summary["confusion"].items():
        lines.append(f"  {true:22s} " + ", ".join(f"{d} {n}" for d, n in row.items()))
    return "\n".join(lines)


def plot_confusion(summary: Dict[str, Any], path) -> Optional[str]:
    """The confusion matrix as a PNG (rows: true mechanism, columns: diagnosis)."""
    plt = _pyplot()
    conf = summary["confusion"]
    if not conf:
        return None
    rows = sorted(conf)
    cols = sorted({d for r in conf.values() for d in r} | set(rows))
    data = [[conf.get(t, {}).get(d, 0) for d in cols] for t in rows]
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(cols), 1.2 + 0.5 * len(rows)))
    peak = max(max(r) for r in data) or 1
    ax.imshow([[v / peak for v in r] for r in data], cmap="Blues", vmin=0, vmax=1,
              aspect="auto")
    for i, r in enumerate(data):
        for j, v in enumerate(r):
            if v:
                ax.text(j, i, str(v), ha="center", va="center", fontsize=8,
                        color="white" if v > peak / 2 else "black")
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_xlabel("diagnosed from the arm's observation")
    ax.set_ylabel("simulator's true mechanism")
    acc = summary.get("accuracy")
    ax.set_title(f"Failure diagnosis: {'n/a' if acc is None else f'{acc:.1f} %'} of "
                 f"{summary['failed']} failed attempts", fontsize=10)
    fig.tight_layout()
    return str(_save(fig, path))


__all__ = ["diagnosis_summary", "format_diagnosis", "plot_confusion"]
