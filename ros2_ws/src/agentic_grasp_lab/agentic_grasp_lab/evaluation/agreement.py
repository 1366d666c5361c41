"""Graph vs in-process agreement: the same trials, run both ways, compared trial by trial.

The node graph and the in-process benchmark are one planner on the same inputs,
so a trial with the same (configuration, task, base seed, trial index) must end the same
way in both. Two levels are compared:

- **outcome**: the trial's success;
- **attempt sequence**: what the robot did, attempt by attempt: the number of attempts,
  objects grasped, each failed attempt's failure type and each attempt's retry level
  (:func:`attempt_sequence`). Wall times and the modelled compute time are not part of it
  (the graph's peers take real time), nor the sub-goal count: the graph's result lists
  attempts only, so a sub-goal that made none (blocked by a support dependency) is not in it.

:func:`agreement` pairs two record lists by :meth:`TrialRecord.key` plus configuration and
counts both levels per task; :func:`format_agreement` prints the table the benchmark report
shows when both paths ran; :func:`disagreements` lists the trials that differ, for the
report and for a test that must fail on them.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

from agentic_grasp_lab.evaluation.records import TrialRecord


def attempt_sequence(record: TrialRecord) -> Tuple[Any, ...]:
    """What the robot did in the trial, attempt by attempt (module docstring)."""
    return (int(record.n_attempts), int(record.n_grasped), tuple(record.failure_types),
            tuple(int(v) for v in record.retry_levels))


def _key(record: TrialRecord) -> Tuple[Any, ...]:
    return (record.configuration,) + tuple(record.key())


def _pairs(graph: Sequence[TrialRecord], inprocess: Sequence[TrialRecord]
           ) -> List[Tuple[TrialRecord, TrialRecord]]:
    other = {_key(r): r for r in inprocess}
    return [(g, other[_key(g)]) for g in graph if _key(g) in other]


def agreement(graph: Sequence[TrialRecord], inprocess: Sequence[TrialRecord]
              ) -> Dict[str, Any]:
    """Per task and in total: paired trials, outcomes and attempt sequences that agree, and
    each side's successes. Trials present on one side only are counted as ``unpaired``."""
    pairs = _pairs(graph, inprocess)
    per_task: Dict[str, Dict[str, int]] = {}
    for g, p in pairs:
        row = per_task.setdefault(g.task_id, {"trials": 0, "outcomes": 0, "sequences": 0,
                                              "graph_success": 0, "inprocess_success": 0})
        row["trials"] += 1
        row["outcomes"] += int(g.success == p.success)
        row["sequences"] += int(attempt_sequence(g) == attempt_sequence(p))
        row["graph_success"] += int(g.success)
        row["inprocess_success"] += int(p.success)
    total = {name: sum(row[name] for row in per_task.values())
             for name in ("trials", "outcomes", "sequences", "graph_success",
                          "inprocess_success")}
    total["unpaired"] = len(graph) + len(inprocess) - 2 * len(pairs)
    return {"per_task": dict(sorted(per_task.items())), "total": total}


def disagreements(graph: Sequence[TrialRecord], inprocess: Sequence[TrialRecord],
                  level: str = "outcome") -> List[str]:
    """One line per paired trial that differs at ``level`` ("outcome" or "sequence")."""
    if level not in ("outcome", "sequence"):
        raise ValueError(f"level must be outcome or sequence, got {level!r}")
    lines = []
    for g, p in _pairs(graph, inprocess):
        differs = (g.success != p.success if level == "outcome"
                   else attempt_sequence(g) != attempt_sequence(p))
        if differs:
            lines.append(f"{g.configuration} {g.task_id} seed {g.seed} trial {g.trial}: graph "
                         f"{'success' if g.success else 'failure'} "
                         f"{list(g.failure_types)} levels {g.retry_levels}, in process "
                         f"{'success' if p.success else 'failure'} "
                         f"{list(p.failure_types)} levels {p.retry_levels}")
    return lines


def format_agreement(table: Mapping[str, Any], perception: str = "") -> str:
    """The per-task agreement table of :func:`agreement`."""
    head = "Graph vs in-process agreement (same trials and seeds"
    head += f", {perception} perception)" if perception else ")"
    lines = [head, f"{'task':<32} {'trials':>6} {'outcomes':>9} {'sequences':>10} "
                   f"{'graph ok':>9} {'in-proc ok':>10}"]
    for task, row in table["per_task"].items():
        lines.append(f"{task:<32} {row['trials']:>6} {row['outcomes']:>9} "
                     f"{row['sequences']:>10} {row['graph_success']:>9} "
                     f"{row['inprocess_success']:>10}")
    t = table["total"]
    lines.append(f"{'all':<32} {t['trials']:>6} {t['outcomes']:>9} {t['sequences']:>10} "
                 f"{t['graph_success']:>9} {t['inprocess_success']:>10}")
    if t.get("unpaired"):
        lines.append(f"({t['unpaired']} trial(s) ran on one side only)")
    return "\n".join(lines)


__all__ = ["agreement", "attempt_sequence", "disagreements", "format_agreement"]
