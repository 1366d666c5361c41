"""One flat record per benchmark trial, and its JSONL / CSV files.

A :class:`TrialRecord` is what the tables and figures are computed from, so a sweep written
to disk can be re-tabulated later (``agentic-grasp bench paper --from-records FILE``) without
running a trial again. It flattens :class:`agentic_grasp.core.planner.episode.TrialResult`
and adds the sweep coordinates (base seed, trial index, derived trial seed, split).

JSONL keeps lists as lists; CSV joins them with ``;`` (failure types, retry levels) so the
file opens in a spreadsheet. Both round-trip to the same records.
"""
from __future__ import annotations

import csv
import json
import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Union

_LOG = logging.getLogger(__name__)

FORMATS = ("jsonl", "csv")
_LIST_SEP = ";"


@dataclass
class TrialRecord:
    """The score of one trial at its place in the sweep (module docstring).

    ``seed`` is the repetition's base seed (the paper's 5 seeds), ``trial`` the index within
    the task (0..29) and ``trial_seed`` the seed the trial ran with, derived from
    (seed, task, trial) and equal for every configuration (paired comparison).
    ``first_attempt_failed``: the trial's very first grasp attempt failed (the denominator
    of the recovery rate). ``n_constraints``: grasp-changing constraints inferred over the
    trial's sub-goals (support dependencies not counted).
    """

    task_id: str
    category: str
    configuration: str
    seed: int
    trial: int
    trial_seed: int
    success: bool
    n_attempts: int
    n_subgoals: int
    n_targets: int
    n_grasped: int
    order_ok: bool
    failure_types: List[str] = field(default_factory=list)
    retry_levels: List[int] = field(default_factory=list)
    recovered: bool = False
    first_attempt_failed: bool = False
    constraint_satisfied: bool = True
    n_violations: int = 0
    n_constraints: int = 0
    initial_sources: List[str] = field(default_factory=list)
    #: per sub-goal, the episodic-memory level its plan used (0 none, 1 category, 2 similar
    #: object, 3 learned corrections; core/planner/memory.py)
    memory_levels: List[int] = field(default_factory=list)
    motion_s: float = 0.0
    compute_s: float = 0.0
    sim_time_s: float = 0.0
    wall_s: float = 0.0
    split: str = ""
    perception: str = "oracle"
    perception_calls: int = 0
    vlm_calls: int = 0
    vlm_s: float = 0.0
    #: sub-goals refused at planning as beyond the hand (zero attempts; not a success)
    n_refused: int = 0
    #: the object ids grasped, in order, and those refused at planning (procedural scenes
    #: score feasible and infeasible targets apart: evaluation/studies/procedural.py)
    grasped: List[str] = field(default_factory=list)
    refused: List[str] = field(default_factory=list)
    #: per executed attempt "true>diagnosed": the simulator's mechanism beside the planner's
    #: diagnosis from the arm's observation ("none" = success); evaluation only
    diagnoses: List[str] = field(default_factory=list)
    #: the paper's rule: every target grasped (in order for sorting), whatever else was
    #: taken. ``success`` is the strict rule (evaluation/taken.py): that, and nothing taken
    #: but the targets, a sturdy neighbour moved aside excepted
    paper_success: bool = False
    #: objects taken off the table that were not targets and fail the trial: a fragile
    #: object, or one the instruction names (a landmark, the object "everything but" keeps,
    #: the other of two mugs); from the simulator's truth of what ended up in the bin
    wrongly_taken: List[str] = field(default_factory=list)
    #: sturdy, unnamed neighbours taken out of the way: allowed, counted apart
    moved_aside: List[str] = field(default_factory=list)

    @classmethod
    def from_result(cls, result: Any, seed: int, trial: int, trial_seed: int,
                    split: str = "", taken: Any = None) -> "TrialRecord":
        """Flatten a :class:`TrialResult` (with its task trace) into a record.

        ``taken``: the :class:`.taken.Taken` judgement of what the trial took off the table
        (None: nothing but what the planner grasped is known, judged as targets only)."""
        task = result.task
        attempts = task.attempts if task is not None else []
        goals = task.goals if task is not None else []
        n_constraints = 0
        for goal in goals:
            if goal.constraints is not None:
                n_constraints += sum(1 for c in goal.constraints.constraints
                                     if c.type.value != "support_dependency")
        return cls(
            task_id=result.task_id, category=result.category,
            configuration=result.configuration, seed=int(seed), trial=int(trial),
            trial_seed=int(trial_seed),
            success=bool(result.success) and not (taken is not None and taken.wrong),
            paper_success=bool(result.success),
            wrongly_taken=list(taken.wrong) if taken is not None else [],
            moved_aside=list(taken.moved_aside) if taken is not None else [],
            n_attempts=int(result.n_attempts), n_subgoals=len(goals),
            n_targets=len(result.targets), n_grasped=len(result.grasped),
            order_ok=bool(result.order_ok), failure_types=list(result.failure_types),
            retry_levels=[int(v) for v in result.retry_levels],
            recovered=bool(result.recovered) and not (taken is not None and taken.wrong),
            first_attempt_failed=bool(attempts) and not attempts[0].success,
            constraint_satisfied=bool(result.constraint_satisfied),
            n_violations=len(result.violations), n_constraints=n_constraints,
            initial_sources=[g.initial_source for g in goals],
            memory_levels=[int(getattr(g, "memory_level", 0)) for g in goals],
            motion_s=round(float(result.motion_s), 4),
            compute_s=round(float(result.compute_s), 4),
            sim_time_s=round(float(result.sim_time_s), 4),
            wall_s=round(float(result.wall_s), 6), split=split,
            perception=str(getattr(result, "perception", "oracle")),
            perception_calls=int(getattr(result, "perception_calls", 0)),
            vlm_calls=int(getattr(result, "vlm_calls", 0)),
            vlm_s=round(float(getattr(result, "vlm_s", 0.0)), 4),
            n_refused=len(getattr(result, "refusals", []) or []),
            grasped=[str(g) for g in result.grasped],
            refused=[str(r).split(":", 1)[0] for r in getattr(result, "refusals", []) or []],
            diagnoses=[f"{t}>{d}" for t, d in getattr(result, "diagnoses", []) or []])

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def key(self) -> tuple:
        """Identity of the trial in a sweep (what pairs configurations)."""
        return (self.split, self.task_id, self.seed, self.trial)

    def comparable(self) -> Dict[str, Any]:
        """Everything but the wall time, which is the only field a rerun may change."""
        out = self.to_dict()
        out.pop("wall_s")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrialRecord":
        """From :meth:`to_dict` output or a CSV row (strings are converted by field type)."""
        kwargs: Dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            kwargs[f.name] = _convert(f.name, f.type, data[f.name])
        if "paper_success" not in data and "success" in kwargs:
            # written before the strict rule: nothing else taken is known, both rules agree
            kwargs["paper_success"] = kwargs["success"]
        return cls(**kwargs)


_INT_FIELDS = {"seed", "trial", "trial_seed", "n_attempts", "n_subgoals", "n_targets",
               "n_grasped", "n_violations", "n_constraints", "perception_calls",
               "vlm_calls", "n_refused"}
_BOOL_FIELDS = {"success", "paper_success", "order_ok", "recovered", "first_attempt_failed",
                "constraint_satisfied"}
_FLOAT_FIELDS = {"motion_s", "compute_s", "sim_time_s", "wall_s", "vlm_s"}
_LIST_FIELDS = {"failure_types", "retry_levels", "initial_sources", "memory_levels", "grasped",
                "refused", "diagnoses", "wrongly_taken", "moved_aside"}


def _convert(name: str, _type: Any, value: Any) -> Any:
    if name in _LIST_FIELDS:
        if isinstance(value, str):
            items = [v for v in value.split(_LIST_SEP) if v != ""]
        else:
            items = list(value or [])
        return ([int(v) for v in items] if name in ("retry_levels", "memory_levels")
                else [str(v) for v in items])
    if name in _BOOL_FIELDS:
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes")
        return bool(value)
    if name in _INT_FIELDS:
        return int(value)
    if name in _FLOAT_FIELDS:
        return float(value)
    return str(value)


def _format_for(path: Path, fmt: str = "") -> str:
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in FORMATS:
        raise ValueError(f"{path}: record format must be one of {FORMATS}, got {fmt!r}")
    return fmt


def write_records(records: Iterable[TrialRecord], path: Union[str, Path],
                  fmt: str = "") -> Path:
    """Write records as JSONL (one object a line) or CSV; format from ``fmt`` or the suffix."""
    path = Path(path)
    fmt = _format_for(path, fmt)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [r.to_dict() for r in records]
    with path.open("w", encoding="utf-8", newline="") as handle:
        if fmt == "jsonl":
            for row in rows:
                handle.write(json.dumps(row, sort_keys=False) + "\n")
        else:
            names = [f.name for f in fields(TrialRecord)]
            writer = csv.DictWriter(handle, fieldnames=names)
            writer.writeheader()
            for row in rows:
                writer.writerow({k: (_LIST_SEP.join(str(v) for v in row[k])
                                     if k in _LIST_FIELDS else row[k]) for k in names})
    _LOG.info("wrote %d trial records to %s", len(rows), path)
    return path


def read_records(path: Union[str, Path], fmt: str = "") -> List[TrialRecord]:
    """Records written by :func:`write_records`."""
    path = Path(path)
    fmt = _format_for(path, fmt)
    with path.open("r", encoding="utf-8", newline="") as handle:
        if fmt == "jsonl":
            return [TrialRecord.from_dict(json.loads(line)) for line in handle if line.strip()]
        return [TrialRecord.from_dict(row) for row in csv.DictReader(handle)]


def write_json(data: Any, path: Union[str, Path]) -> Path:
    """Write ``data`` (tables, totals) as indented JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def sort_records(records: Sequence[TrialRecord], configurations: Sequence[str] = ()
                 ) -> List[TrialRecord]:
    """Deterministic order: configuration (given order, then name), split, task, seed, trial."""
    order = {name: i for i, name in enumerate(configurations)}
    return sorted(records, key=lambda r: (order.get(r.configuration, len(order)),
                                          r.configuration, r.split, r.task_id, r.seed,
                                          r.trial))


__all__ = ["FORMATS", "TrialRecord", "read_records", "sort_records", "write_json",
           "write_records"]
