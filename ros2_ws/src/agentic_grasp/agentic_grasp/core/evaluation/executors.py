"""Where a sweep's work units run, and the records journal that makes a sweep resumable.

Executors (``bench --executor local|ray``):

- ``local``: today's ``multiprocessing`` pool on this machine (:func:`.sweep.run_units`).
- ``ray``: every work unit (configuration, task, seed with its trials) is one Ray task.
  Without an address Ray starts a cluster on this machine (one CPU per worker); with one
  (``--ray-address HOST:PORT`` or ``auto``) the driver joins a running cluster. ``ray`` is an
  optional extra (``scripts/setup.sh --with-ray``, requirements-ray.txt) and is imported
  only when this executor runs, so the core never needs it.

Faults: a unit's records come back only when the whole unit has run, as the return value
of its task. A worker node that dies mid-unit loses that task; Ray runs it again on a live
node (``max_retries``), so the unit is counted once. The driver still keys every record by
(configuration, split, task, seed, trial) and keeps the first of any duplicate, so no
trial is ever counted twice, and it checks at the end that every expected key arrived.

Journal: as each unit finishes its records are appended (and flushed) to the sweep's
records file. A sweep stopped by Ctrl-C or a crash leaves that file holding every unit that
finished; ``--resume`` reads it (a torn last line is ignored), keeps the units whose trials
are all there, runs the others and writes the file again in the sweep's deterministic
order, so a resumed sweep's records equal an uninterrupted one's (wall times aside).
Resumption is per unit, so ``memory_scope: series`` stays exact.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
from dataclasses import fields
from pathlib import Path
from typing import (Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple,
                    Union)

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.evaluation.records import (_LIST_FIELDS, _LIST_SEP, TrialRecord, task_key,
                                                   write_records)

_LOG = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")
#: Ray runs a task again this many times when its worker or node dies (not on a Python
#: exception in a trial, which is a bug to report, not a fault to hide).
RAY_MAX_RETRIES = 5
#: Object store of a cluster the driver starts itself (bytes): results are a few kB per
#: unit, so the default (30 % of RAM) would only take memory from a shared machine.
RAY_OBJECT_STORE_BYTES = 100 * 1024 * 1024

Key = Tuple[str, str, str, int, int]


def record_key(record: TrialRecord) -> Key:
    """A trial's identity in one sweep: (configuration, split, task, seed, trial)."""
    return (record.configuration, record.split, record.task_id, int(record.seed),
            int(record.trial))


def unit_keys(unit: Any) -> List[Key]:
    """The keys of the records a work unit produces."""
    return [(unit.configuration, unit.split, task_key(unit.task), int(unit.seed), int(k))
            for k in unit.trials]


# ------------------------------------------------------------------ journal
class Journal:
    """The sweep's records file, appended unit by unit (module docstring)."""

    def __init__(self, path: Union[str, Path], fmt: str = "") -> None:
        self.path = Path(path)
        self.fmt = (fmt or self.path.suffix.lstrip(".")).lower()
        if self.fmt not in ("jsonl", "csv"):
            raise ConfigError(f"{self.path}: record format must be jsonl or csv")
        self._names = [f.name for f in fields(TrialRecord)]
        self._handle: Optional[io.TextIOBase] = None

    def load(self) -> List[TrialRecord]:
        """The records already in the file; a torn last line (a killed write) is dropped."""
        if not self.path.is_file():
            return []
        text = self.path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            text = text[:text.rfind("\n") + 1]
        out: List[TrialRecord] = []
        if self.fmt == "jsonl":
            for line in text.splitlines():
                if line.strip():
                    out.append(TrialRecord.from_dict(json.loads(line)))
            return out
        for row in csv.DictReader(io.StringIO(text, newline="")):
            out.append(TrialRecord.from_dict(row))
        return out

    def start(self, keep: Sequence[TrialRecord] = ()) -> None:
        """Open the file for appending, holding only ``keep`` (written atomically)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", encoding="utf-8", newline="") as handle:
            if self.fmt == "csv":
                csv.DictWriter(handle, fieldnames=self._names).writeheader()
            handle.write(self._rows(keep))
        os.replace(tmp, self.path)
        self._handle = self.path.open("a", encoding="utf-8", newline="")

    def _rows(self, records: Iterable[TrialRecord]) -> str:
        buf = io.StringIO()
        if self.fmt == "jsonl":
            for r in records:
                buf.write(json.dumps(r.to_dict()) + "\n")
        else:
            writer = csv.DictWriter(buf, fieldnames=self._names)
            for r in records:
                row = r.to_dict()
                writer.writerow({k: (_LIST_SEP.join(str(v) for v in row[k])
                                     if k in _LIST_FIELDS else row[k]) for k in self._names})
        return buf.getvalue()

    def append(self, records: Sequence[TrialRecord]) -> None:
        """One finished unit: written in one call and flushed, so Ctrl-C keeps it whole."""
        if self._handle is None:
            return
        self._handle.write(self._rows(records))
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def finish(self, records: Sequence[TrialRecord]) -> Path:
        """Replace the journal by the sorted records (the file an uninterrupted run writes)."""
        self.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        write_records(records, tmp, self.fmt)
        os.replace(tmp, self.path)
        return self.path


def split_done(units: Sequence[Any], done: Sequence[TrialRecord]
               ) -> Tuple[List[Any], List[TrialRecord]]:
    """(units still to run, records kept): a unit is kept only when all its trials are in
    ``done``; records of no unit of this sweep, of a partial unit or duplicated are dropped."""
    first: Dict[Key, TrialRecord] = {}
    for r in done:
        first.setdefault(record_key(r), r)
    todo: List[Any] = []
    kept: List[TrialRecord] = []
    for unit in units:
        keys = unit_keys(unit)
        if keys and all(k in first for k in keys):
            kept.extend(first[k] for k in keys)
        else:
            todo.append(unit)
    return todo, kept


class Collector:
    """Records by key: the first of each key counts, later copies are dropped and counted."""

    def __init__(self, expected: Iterable[Key]) -> None:
        self.expected: Set[Key] = set(expected)
        self.records: List[TrialRecord] = []
        self.seen: Set[Key] = set()
        self.duplicates = 0

    def add(self, batch: Sequence[TrialRecord]) -> List[TrialRecord]:
        """The records of ``batch`` not seen before (what the journal and the bar get)."""
        new = []
        for r in batch:
            key = record_key(r)
            if key in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(key)
            new.append(r)
        self.records.extend(new)
        return new

    def check(self) -> None:
        missing = self.expected - self.seen
        if missing:
            raise RuntimeError(f"sweep: {len(missing)} trial(s) never came back, e.g. "
                               f"{sorted(missing)[:3]}")
        extra = self.seen - self.expected
        if extra:
            raise RuntimeError(f"sweep: {len(extra)} record(s) of no unit of this sweep, "
                               f"e.g. {sorted(extra)[:3]}")


# ------------------------------------------------------------------ Ray
def import_ray() -> Any:
    """``ray``, or a ConfigError saying how to install the optional extra."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs the optional 'ray' package: run "
                          "scripts/setup.sh --with-ray (requirements-ray.txt)") from None
    return ray


class RayStats:
    """What the Ray executor measured (the overhead figure of docs/evaluation.md)."""

    def __init__(self) -> None:
        self.cluster_cpus = 0
        self.connect_s = 0.0
        self.task_wall_s = 0.0
        self.task_cpu_s = 0.0
        self.units = 0
        self.nodes: Dict[str, int] = {}          # node id -> units it returned
        #: per unit: its task's timing (_ray_task) + "submit" and "received" (driver clock)
        self.timings: List[Dict[str, Any]] = []

    def to_dict(self) -> Dict[str, Any]:
        return {"cluster_cpus": self.cluster_cpus, "connect_s": round(self.connect_s, 3),
                "task_wall_s": round(self.task_wall_s, 3),
                "task_cpu_s": round(self.task_cpu_s, 3), "units": self.units,
                "nodes": dict(self.nodes)}


def unit_overhead(timings: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Ray's own time per unit from the tasks' timings (one clock: the machine's).

    A unit's overhead is the time its worker slot was not running it although it could
    have: from when it was submitted or its worker finished the previous unit (whichever is
    later) to its start, plus from its end to the driver holding its records. The first
    unit of each worker process also builds the runner (simulator, knowledge base): that
    set-up is reported apart, as the local pool's forked workers inherit it instead."""
    by_pid: Dict[int, List[Dict[str, Any]]] = {}
    for t in sorted(timings, key=lambda t: t["start"]):
        by_pid.setdefault(t["pid"], []).append(t)
    overhead, compute, first = 0.0, 0.0, 0.0
    n = 0
    for runs in by_pid.values():
        first += runs[0]["end"] - runs[0]["start"]
        for prev, t in zip(runs, runs[1:]):
            ready = max(t["submit"], prev["end"])
            overhead += max(0.0, t["start"] - ready) + max(0.0, t["received"] - t["end"])
            compute += t["end"] - t["start"]
            n += 1
    return {"units_measured": n, "workers": len(by_pid),
            "overhead_s_per_unit": overhead / n if n else float("nan"),
            "compute_s_per_unit": compute / n if n else float("nan"),
            "overhead_fraction": overhead / compute if compute > 0 else float("nan"),
            "first_unit_s_per_worker": first / len(by_pid) if by_pid else float("nan")}


#: Stats of the last Ray sweep in this process (read by the overhead benchmark and tests).
LAST_RAY_STATS = RayStats()


def run_ray(units: Sequence[Any], address: str, workers: int,
            on_batch: Callable[[List[TrialRecord]], None],
            ray_task: Callable[[Any], Tuple[List[Dict[str, Any]], Dict[str, Any]]]) -> int:
    """Run ``units`` as Ray tasks; ``on_batch`` gets each unit's records as it finishes.
    Returns the cluster's CPU count. At most two tasks per CPU are in flight, so the
    driver's and the object store's memory stay flat however many units the sweep has."""
    global LAST_RAY_STATS
    ray = import_ray()
    stats = LAST_RAY_STATS = RayStats()
    t0 = time.perf_counter()
    started = False
    if not ray.is_initialized():
        env = {"env_vars": {k: v for k, v in os.environ.items()
                            if k in ("AGENTIC_GRASP_DATA", "XDG_DATA_HOME")}}
        if address:
            ray.init(address=address, runtime_env=env, logging_level=logging.WARNING,
                     log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, runtime_env=env,
                     object_store_memory=RAY_OBJECT_STORE_BYTES,
                     logging_level=logging.WARNING, log_to_driver=False)
        started = True
    try:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        stats.cluster_cpus = cpus
        stats.connect_s = time.perf_counter() - t0
        task = ray.remote(num_cpus=1, max_retries=RAY_MAX_RETRIES)(ray_task)
        queue = list(units)
        queue.reverse()                             # pop() from the end keeps the order
        pending: Dict[Any, Any] = {}
        limit = 2 * cpus
        try:
            while queue or pending:
                while queue and len(pending) < limit:
                    unit = queue.pop()
                    pending[task.remote(unit)] = time.time()
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    submitted = pending.pop(ref)
                    rows, timing = ray.get(ref)
                    timing.update(submit=submitted, received=time.time())
                    stats.timings.append(timing)
                    stats.task_wall_s += timing["end"] - timing["start"]
                    stats.task_cpu_s += timing["cpu"]
                    stats.units += 1
                    stats.nodes[timing["node"]] = stats.nodes.get(timing["node"], 0) + 1
                    on_batch([TrialRecord.from_dict(r) for r in rows])
        finally:
            for ref in pending:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - the cluster may be gone (Ctrl-C hit it)
                    break
    finally:
        if started:
            ray.shutdown()
    return cpus


__all__ = ["Collector", "EXECUTORS", "Journal", "LAST_RAY_STATS", "RayStats", "import_ray",
           "record_key", "run_ray", "split_done", "unit_keys", "unit_overhead"]
