"""Where a sweep's work units run, and the records journal that makes a sweep resumable.

Executors (``bench paper --executor local|ray``):

- ``local``: today's ``multiprocessing`` pool on this machine (:func:`.sweep.run_units`).
- ``ray``: the work units of one (task, seed) under every configuration
  (:func:`.sweep.group_units`, as the local pool hands them to a worker) are one Ray task,
  which runs them trial by trial across the configurations (``TrialRunner.run_group``:
  the configurations see trial k's scene alike, so the worker's exact caches hit) and
  returns each unit's records. Without an address Ray starts a cluster on this machine
  (one CPU per worker); with one (``--ray-address HOST:PORT`` or ``auto``) the driver
  joins a running cluster. ``ray`` is an optional extra (``scripts/setup.sh --with-ray``,
  requirements-ray.txt) and is imported only when this executor runs, so the core never
  needs it.

Faults: a task's records come back only when all its units have run, as the return value
of the task. A worker node that dies mid-task loses that task; Ray runs it again on a live
node (``max_retries``), so each of its units is counted once. The driver still keys every
record by (configuration, split, task, seed, trial) and keeps the first of any duplicate,
so no trial is ever counted twice, and it checks at the end that every expected key
arrived.

Journal: as each unit finishes its records are appended (and flushed) to the sweep's
records file. A sweep stopped by Ctrl-C or a crash leaves that file holding every unit that
finished; ``--resume`` reads it (a torn last line is ignored), keeps the units whose trials
are all there, runs the others and writes the file again in the sweep's deterministic
order, so a resumed sweep's records equal an uninterrupted one's (wall times aside).
Resumption is per unit, so ``memory_scope: series`` stays exact.

Memory: with a journal the driver holds no record while the sweep runs. Records go to the
file as they arrive; the driver keeps per unit the trials still missing (:class:`Tally`) and
where its records lie in the file (:class:`Journal` blocks), and writes the sorted file at
the end by copying those bytes. Ray results are dropped as soon as they are read. So the
driver's memory does not grow with the trials of a long sweep; the records are
read back only by whoever asks for them (``SweepResult.records``, e.g. for the tables).
"""
from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
from collections import deque
from dataclasses import fields
from pathlib import Path
from typing import (Any, Callable, Deque, Dict, Iterable, List, Optional, Sequence, Set,
                    Tuple, Union)

from agentic_grasp.core.errors import ConfigError
from agentic_grasp_lab.evaluation.records import (_LIST_FIELDS, _LIST_SEP, TrialRecord,
                                                  write_records)
from agentic_grasp.core.sim.scenes import task_key

_LOG = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")
#: Ray runs a task again this many times when its worker or node dies (not on a Python
#: exception in a trial, which is a bug to report, not a fault to hide).
RAY_MAX_RETRIES = 5
#: Object store of a cluster the driver starts itself (bytes): results are a few kB per
#: unit, so the default (30 % of RAM) would only take memory from a shared machine.
RAY_OBJECT_STORE_BYTES = 100 * 1024 * 1024
#: Unit timings the Ray executor keeps for the overhead figure (RayStats.timings).
RAY_TIMINGS_KEPT = 1000

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
UnitId = Tuple[str, str, str, int]
#: A unit's records in the journal file: (first byte, end byte, trials ascending).
Block = Tuple[int, int, bool]


def unit_id(unit: Any) -> UnitId:
    """A work unit's identity: (configuration, split, task, seed)."""
    return (unit.configuration, unit.split, task_key(unit.task), int(unit.seed))


def record_unit(record: TrialRecord) -> UnitId:
    """The identity of the unit a record belongs to (:func:`unit_id`)."""
    return record_key(record)[:4]


class Journal:
    """The sweep's records file, appended unit by unit (module docstring).

    The driver keeps no record: it remembers only where in the file each unit's records
    lie (:data:`Block`, a few numbers per unit), and :meth:`finish_units` writes the sorted
    file by copying those bytes, so its memory does not grow with the sweep's trials."""

    def __init__(self, path: Union[str, Path], fmt: str = "") -> None:
        self.path = Path(path)
        self.fmt = (fmt or self.path.suffix.lstrip(".")).lower()
        if self.fmt not in ("jsonl", "csv"):
            raise ConfigError(f"{self.path}: record format must be jsonl or csv")
        self._names = [f.name for f in fields(TrialRecord)]
        self._handle: Optional[Any] = None
        self._size = 0
        self.blocks: Dict[UnitId, List[Block]] = {}

    def load(self) -> List[TrialRecord]:
        """The records already in the file; a torn last line (a killed write) is dropped."""
        if not self.path.is_file():
            return []
        text = self.path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            text = text[:text.rfind("\n") + 1]
        return self._parse(text, header=True)

    def _parse(self, text: str, header: bool) -> List[TrialRecord]:
        if self.fmt == "jsonl":
            return [TrialRecord.from_dict(json.loads(line)) for line in text.splitlines()
                    if line.strip()]
        rows = csv.DictReader(io.StringIO(text, newline=""),
                              fieldnames=None if header else self._names)
        return [TrialRecord.from_dict(row) for row in rows]

    def _header(self) -> bytes:
        if self.fmt != "csv":
            return b""
        buf = io.StringIO()
        csv.DictWriter(buf, fieldnames=self._names).writeheader()
        return buf.getvalue().encode("utf-8")

    def _open(self, tmp: Path) -> None:
        os.replace(tmp, self.path)
        self._handle = self.path.open("ab")
        self._size = self._handle.tell()

    def start(self, keep: Sequence[TrialRecord] = ()) -> None:
        """Open the file for appending, holding only ``keep`` (written atomically)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        self.blocks = {}
        with tmp.open("wb") as handle:
            handle.write(self._header())
            self._size = handle.tell()
            for block in _by_unit(keep):
                self._write_block(handle, block)
        self._open(tmp)

    def resume(self, units: Sequence[Any]) -> Tuple[List[Any], List[Any]]:
        """(units to run, units kept): a unit is kept only when all its trials are in the
        file; the file is rewritten holding only the kept units and opened for appending.
        JSONL is read line by line, so what stays in memory is an offset per line, never a
        record; CSV (whose rows may span lines) goes through :func:`split_done`."""
        if self.fmt != "jsonl" or not self.path.is_file():
            todo, kept = split_done(units, self.load())
            self.start(kept)
            done = {unit_id(u) for u in units} - {unit_id(u) for u in todo}
            return todo, [u for u in units if unit_id(u) in done]
        first: Dict[UnitId, Dict[int, Tuple[int, int]]] = {}
        with self.path.open("rb") as src:
            pos = 0
            for line in src:
                end = pos + len(line)
                if line.endswith(b"\n") and line.strip():
                    key = record_key(TrialRecord.from_dict(json.loads(line)))
                    first.setdefault(key[:4], {}).setdefault(key[4], (pos, end))
                pos = end
            tmp = self.path.with_name(self.path.name + ".tmp")
            todo: List[Any] = []
            kept: List[Any] = []
            self.blocks = {}
            self._size = 0
            with tmp.open("wb") as out:
                for unit in units:
                    lines = first.get(unit_id(unit), {})
                    trials = [int(k) for k in unit.trials]
                    if not trials or not all(k in lines for k in trials):
                        todo.append(unit)
                        continue
                    data = b""
                    for k in trials:
                        a, b = lines[k]
                        src.seek(a)
                        data += src.read(b - a)
                    out.write(data)
                    self._note(unit_id(unit), len(data), trials == sorted(trials))
                    kept.append(unit)
        self._open(tmp)
        return todo, kept

    def _note(self, uid: UnitId, n: int, ascending: bool) -> None:
        self.blocks.setdefault(uid, []).append((self._size, self._size + n, ascending))
        self._size += n

    def _write_block(self, handle: Any, records: Sequence[TrialRecord]) -> None:
        data = self._rows(records).encode("utf-8")
        handle.write(data)
        trials = [int(r.trial) for r in records]
        self._note(record_unit(records[0]), len(data), trials == sorted(trials))

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
        for block in _by_unit(records):
            self._write_block(self._handle, block)
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

    def finish_units(self, configurations: Sequence[str]) -> Path:
        """Replace the journal by its records in :func:`.records.sort_records`'s order,
        unit by unit from the blocks (the same bytes :meth:`finish` writes): a unit is
        contiguous in that order, and its trials are ascending within a block."""
        self.close()
        order = {name: i for i, name in enumerate(configurations)}
        ids = sorted(self.blocks, key=lambda u: (order.get(u[0], len(order)),) + u)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with self.path.open("rb") as src, tmp.open("wb") as out:
            out.write(self._header())
            for uid in ids:
                parts = []
                for a, b, _ in self.blocks[uid]:
                    src.seek(a)
                    parts.append(src.read(b - a))
                if len(parts) == 1 and self.blocks[uid][0][2]:
                    out.write(parts[0])
                    continue
                text = b"".join(parts).decode("utf-8")
                records = sorted(self._parse(text, header=False), key=lambda r: r.trial)
                out.write(self._rows(records).encode("utf-8"))
        os.replace(tmp, self.path)
        return self.path


def _by_unit(records: Sequence[TrialRecord]) -> List[List[TrialRecord]]:
    """``records`` cut into runs of one unit each (a unit's records arrive together)."""
    out: List[List[TrialRecord]] = []
    last: Optional[UnitId] = None
    for r in records:
        uid = record_unit(r)
        if uid != last:
            out.append([])
            last = uid
        out[-1].append(r)
    return out


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


class Tally:
    """Which trials of the sweep's units have come back: the first record of each key
    counts, later copies are dropped and counted. It holds, per unit, the trials still
    missing (a set that shrinks to empty), not the keys or records seen, so its memory
    does not grow with the trials; ``keep`` also holds the records (a sweep without a
    journal file returns them from memory)."""

    def __init__(self, units: Iterable[Any], keep: bool = False) -> None:
        self.left: Dict[UnitId, Set[int]] = {}
        self.trials: Dict[UnitId, Tuple[int, ...]] = {}
        for u in units:
            uid = unit_id(u)
            self.trials[uid] = tuple(int(k) for k in u.trials)
            self.left.setdefault(uid, set()).update(self.trials[uid])
        self.records: Optional[List[TrialRecord]] = [] if keep else None
        self.duplicates = 0
        self.count = 0
        self.extra: List[Key] = []

    def done(self, unit: Any) -> None:
        """``unit``'s trials are all in (kept by --resume)."""
        n = len(self.left[unit_id(unit)])
        self.left[unit_id(unit)] = set()
        self.count += n

    def add(self, batch: Sequence[TrialRecord]) -> List[TrialRecord]:
        """The records of ``batch`` not seen before (what the journal and the bar get)."""
        new = []
        for r in batch:
            key = record_key(r)
            left = self.left.get(key[:4])
            if left is not None and key[4] in left:
                left.discard(key[4])
            elif left is not None and key[4] in self.trials[key[:4]]:
                self.duplicates += 1
                continue
            elif len(self.extra) < 3:          # of no unit: reported by check()
                self.extra.append(key)
            new.append(r)
        self.count += len(new)
        if self.records is not None:
            self.records.extend(new)
        return new

    def check(self) -> None:
        missing = sorted(k + (t,) for k, left in self.left.items() for t in left)
        if missing:
            raise RuntimeError(f"sweep: {len(missing)} trial(s) never came back, e.g. "
                               f"{missing[:3]}")
        if self.extra:
            raise RuntimeError(f"sweep: record(s) of no unit of this sweep, "
                               f"e.g. {sorted(self.extra)[:3]}")


# ------------------------------------------------------------------ Ray
def import_ray() -> Any:
    """``ray``, or a ConfigError saying how to install the optional extra."""
    try:
        import ray      # the optional extra (requirements-ray.txt)
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
        self.tasks = 0
        self.nodes: Dict[str, int] = {}          # node id -> units it returned
        #: per task: its timing (_ray_task) + "submit" and "received" (driver clock); the
        #: last RAY_TIMINGS_KEPT tasks only, so a long sweep's driver stays flat
        self.timings: Deque[Dict[str, Any]] = deque(maxlen=RAY_TIMINGS_KEPT)

    def to_dict(self) -> Dict[str, Any]:
        return {"cluster_cpus": self.cluster_cpus, "connect_s": round(self.connect_s, 3),
                "task_wall_s": round(self.task_wall_s, 3),
                "task_cpu_s": round(self.task_cpu_s, 3), "units": self.units,
                "tasks": self.tasks,
                "nodes": dict(self.nodes)}


def unit_overhead(timings: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Ray's own time per task (a group of units, ``*_per_unit`` in the keys for history)
    from the tasks' timings (one clock: the machine's).

    A task's overhead is the time its worker slot was not running it although it could
    have: from when it was submitted or its worker finished the previous task (whichever
    is later) to its start, plus from its end to the driver holding its records. The first
    task of each worker process also builds the runner (simulator, knowledge base): that
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


def run_ray(tasks: Sequence[Any], address: str, workers: int,
            on_batch: Callable[[List[TrialRecord]], None],
            ray_task: Callable[[Any], Tuple[List[List[Dict[str, Any]]], Dict[str, Any]]]
            ) -> int:
    """Run each of ``tasks`` (a group of work units) as one Ray task, ``ray_task`` its
    body, which returns the records of each of its units and its timing; ``on_batch`` gets
    each unit's records as its task finishes. Returns the cluster's CPU count. At most two
    tasks per CPU are in flight, so the driver's and the object store's memory stay flat
    however many units the sweep has."""
    global LAST_RAY_STATS
    ray = import_ray()
    stats = LAST_RAY_STATS = RayStats()
    t0 = time.perf_counter()
    started = False
    if not ray.is_initialized():
        env = {"env_vars": {k: v for k, v in os.environ.items()
                            if k in ("AGENTIC_GRASP_DATA", "AGENTIC_GRASP_DATA_HOME",
                                     "XDG_DATA_HOME")}}
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
        queue = list(tasks)
        queue.reverse()                             # pop() from the end keeps the order
        pending: Dict[Any, Any] = {}
        limit = 2 * cpus
        try:
            while queue or pending:
                while queue and len(pending) < limit:
                    pending[task.remote(queue.pop())] = time.time()
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    submitted = pending.pop(ref)
                    rows, timing = ray.get(ref)
                    # the result is in this process now: drop the last reference, so
                    # the object store frees it (and with it the task's lineage)
                    del ref
                    timing.update(submit=submitted, received=time.time())
                    stats.timings.append(timing)
                    stats.task_wall_s += timing["end"] - timing["start"]
                    stats.task_cpu_s += timing["cpu"]
                    stats.units += len(rows)
                    stats.tasks += 1
                    stats.nodes[timing["node"]] = stats.nodes.get(timing["node"], 0) \
                        + len(rows)
                    for unit_rows in rows:
                        on_batch([TrialRecord.from_dict(r) for r in unit_rows])
                del ready
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


__all__ = ["EXECUTORS", "Journal", "LAST_RAY_STATS", "RayStats", "Tally", "import_ray",
           "record_key", "record_unit", "run_ray", "split_done", "unit_id", "unit_keys",
           "unit_overhead"]
