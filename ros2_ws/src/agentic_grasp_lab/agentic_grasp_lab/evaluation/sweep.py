"""The benchmark sweep (paper Sec. V-A/B): configurations x tasks x trials x seeds, in process.

Protocol (config/evaluation.yaml, defaults = the paper's): every Table II configuration x the
12 tasks x 30 trials x 5 seeds = 8 x 360 x 5 = 14,400 trials. Each trial is one call of
:func:`agentic_grasp.core.planner.episode.run_trial` (simulator + oracle perception +
planner); nothing here decides an outcome.

Pairing: the seed a trial runs with, :func:`trial_seed`, is derived from (base seed, task id,
trial index) only, so trial k of task t under seed s sees the same scene jitter, the same
execution noise draws and the same perception noise in every configuration: a difference
between two configurations on a trial comes from what the configurations switch.

Episodic memory (``memory_scope``): "trial" (the paper's 30 independent trials, default)
gives every trial a fresh memory, so within-trial transfer is all it can do; "series" keeps
one memory across the trials of a (configuration, task, seed) series, in trial order (the
planner node's session memory). A series always runs in one worker, in order, so both scopes
are reproducible for any number of workers.

Parallelism: the work is cut into units of (configuration, task, seed) with their trials and
handed to a ``multiprocessing`` pool (``executor: local``; the units of one task and seed
under every configuration go to one worker together and run trial by trial across the
configurations, :meth:`TrialRunner.run_group`) or, one Ray task per such group, to a
Ray cluster (``executor: ray``, :mod:`.executors`, which also keeps the records journal
that ``--resume`` completes). Each worker builds the simulator, the planner
constants and the knowledge base with its HAA-RAG index once, in the pool initialiser, and
reuses them for every trial (a trial only reloads its scene). Records are sorted into one
deterministic order at the end, so 1 or N workers give identical records (wall times aside).
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from agentic_grasp.core import paths
from agentic_grasp.core.config import node_params
from agentic_grasp.core.errors import ConfigError
from agentic_grasp_lab.evaluation.records import TrialRecord, sort_records
from agentic_grasp.core.sim.scenes import task_key, trial_seed
from agentic_grasp_lab.evaluation import worker as _worker
from agentic_grasp_lab.evaluation.worker import TrialRunner, WorkUnit, _init_worker, _run_group
from agentic_grasp.core.grasping.config import CONSTRAINT_MODES
from agentic_grasp.core.planner.configurations import VISUAL_QUERIES, get_configuration
from agentic_grasp.core.planner.episode import PERCEPTION_MODES
from agentic_grasp.core.sim import list_tasks
from agentic_grasp_lab.evaluation.executors import EXECUTORS, Journal, Tally, run_ray

_LOG = logging.getLogger(__name__)

NODE_NAME = "evaluation"
#: Lifetime of the episodic memory in a sweep (module docstring).
MEMORY_SCOPES = ("trial", "series")


# ------------------------------------------------------------------ configuration
@dataclass
class SweepConfig:
    """What to run (``evaluation: ros__parameters:`` of config/evaluation.yaml).

    ``tasks`` empty = every scene of config/scenes/ (the 12 tasks); ``workers`` 0 = one per
    CPU core; ``start_method`` "" = fork where available (workers inherit what the parent
    already built), else spawn.
    """

    configurations: Tuple[str, ...] = ("full", "no_recovery", "no_episodic_memory",
                                       "no_scene_graph", "heuristic", "heuristic_box",
                                       "no_haa_rag", "vlm_only")
    tasks: Tuple[str, ...] = ()
    trials_per_task: int = 30
    seeds: Tuple[int, ...] = (0, 1, 2, 3, 4)
    workers: int = 0
    start_method: str = ""
    confidence: float = 0.95
    output_dir: str = "out/bench"
    records_format: str = "jsonl"
    table_v_configurations: Tuple[str, ...] = ("no_scene_graph", "no_constraint_inference",
                                               "full")
    # constraint modes Table V is run with besides planner.yaml's own ("paper" =
    # the paper's fixed adjustments beside the clearance-aware default)
    table_v_constraint_modes: Tuple[str, ...] = ("paper",)
    ood_splits_file: str = "ood/splits.yaml"
    ood_trials_per_object: int = 30
    ood_seeds: Tuple[int, ...] = (0, 1, 2, 3, 4)
    memory_scope: str = "trial"
    perception: str = "vlm_sim"
    visual_query: str = "camera"
    executor: str = "local"
    ray_address: str = ""

    def __post_init__(self) -> None:
        if self.perception not in PERCEPTION_MODES:
            raise ConfigError(f"evaluation.perception must be one of {PERCEPTION_MODES}, got "
                              f"{self.perception!r}")
        if self.visual_query not in VISUAL_QUERIES:
            raise ConfigError(f"evaluation.visual_query must be one of {VISUAL_QUERIES}, got "
                              f"{self.visual_query!r}")

        self.configurations = tuple(str(c) for c in self.configurations)
        self.table_v_configurations = tuple(str(c) for c in self.table_v_configurations)

        self.table_v_constraint_modes = tuple(str(m) for m in self.table_v_constraint_modes)
        for mode in self.table_v_constraint_modes:
            if mode not in CONSTRAINT_MODES:
                raise ConfigError(f"evaluation.table_v_constraint_modes: {mode!r} is not one "
                                  f"of {CONSTRAINT_MODES}")
        for name in self.configurations + self.table_v_configurations:
            get_configuration(name)                 # ConfigError naming the valid ones
        self.tasks = tuple(str(t) for t in self.tasks)
        self.seeds = tuple(int(s) for s in self.seeds)
        self.ood_seeds = tuple(int(s) for s in self.ood_seeds)
        for name in ("trials_per_task", "ood_trials_per_object"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or int(value) < 1:
                raise ConfigError(f"evaluation.{name} must be an integer >= 1, got {value!r}")
            setattr(self, name, int(value))
        if int(self.workers) < 0:
            raise ConfigError(f"evaluation.workers must be >= 0, got {self.workers}")
        self.workers = int(self.workers)
        if not self.seeds or not self.ood_seeds:
            raise ConfigError("evaluation.seeds and evaluation.ood_seeds must not be empty")
        if self.start_method not in ("", "fork", "spawn", "forkserver"):
            raise ConfigError(f"evaluation.start_method: unknown {self.start_method!r}")
        if not 0.0 < float(self.confidence) < 1.0:
            raise ConfigError("evaluation.confidence must be in (0, 1)")
        self.confidence = float(self.confidence)
        if self.memory_scope not in MEMORY_SCOPES:
            raise ConfigError(f"evaluation.memory_scope must be one of {MEMORY_SCOPES}, got "
                              f"{self.memory_scope!r}")

        if self.executor not in EXECUTORS:
            raise ConfigError(f"evaluation.executor must be one of {EXECUTORS}, got "
                              f"{self.executor!r}")
        self.ray_address = str(self.ray_address or "")
        if self.records_format not in ("jsonl", "csv"):
            raise ConfigError("evaluation.records_format must be jsonl or csv")

    @classmethod
    def from_params(cls, params: Mapping[str, Any], source: str = "evaluation parameters"
                    ) -> "SweepConfig":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(params) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown evaluation parameter(s) {unknown}")
        kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in params.items()}
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def from_config(cls, path: Union[str, Path, None] = None) -> "SweepConfig":
        """Read ``evaluation: ros__parameters:`` from config/evaluation.yaml (or ``path``)."""
        file = Path(path) if path else paths.config_file(NODE_NAME)
        return cls.from_params(node_params(NODE_NAME, file), str(file))

    def task_list(self) -> List[str]:
        return list(self.tasks) or list_tasks()


# ------------------------------------------------------------------ work units
def make_units(configurations: Sequence[str], tasks: Sequence[str], trials: int,
               seeds: Sequence[int], splits: Optional[Mapping[str, str]] = None,
               memory_scope: str = "trial", perception: str = "oracle",
               visual_query: str = "none", constraint_mode: str = "") -> List[WorkUnit]:
    """Every (configuration, task, seed) unit with trials 0..trials-1."""
    if memory_scope not in MEMORY_SCOPES:
        raise ConfigError(f"memory_scope must be one of {MEMORY_SCOPES}, got {memory_scope!r}")
    splits = splits or {}
    return [WorkUnit(c, t, int(s), tuple(range(int(trials))), splits.get(t, ""),
                     memory_scope, perception, visual_query, constraint_mode)
            for c in configurations for s in seeds for t in tasks]


def group_units(units: Sequence[WorkUnit]) -> List[List[WorkUnit]]:
    """Units that differ only in their configuration, together, in order of first
    appearance (:meth:`TrialRunner.run_group`). The local pool runs a group in one worker,
    the Ray executor as one task; the journal and the progress bar still get its records
    unit by unit."""
    groups: Dict[tuple, List[WorkUnit]] = {}
    for u in units:
        key = (u.task, u.seed, tuple(sorted(u.trials)), u.split, u.memory_scope,
               u.perception, u.visual_query, u.constraint_mode)
        groups.setdefault(key, []).append(u)
    return list(groups.values())


# ------------------------------------------------------------------ progress
class Progress:
    """A one-line progress report on stderr (tqdm is not a dependency of the project)."""

    def __init__(self, total: int, label: str = "trials", enabled: bool = True,
                 stream: Any = None) -> None:
        self.total, self.label, self.enabled = int(total), label, enabled
        self.stream = stream or sys.stderr
        self.done = 0
        self.start = time.perf_counter()
        self._last = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, n: int) -> None:
        self.done += int(n)
        if not self.enabled:
            return
        now = time.perf_counter()
        final = self.done >= self.total
        every = 0.2 if self._tty else 10.0
        if not final and now - self._last < every:
            return
        self._last = now
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        text = (f"[sweep] {self.done}/{self.total} {self.label} "
                f"({100.0 * self.done / max(self.total, 1):.0f} %), {elapsed:.1f} s, "
                f"{rate:.0f}/s, ETA {eta:.0f} s")
        if self._tty:
            self.stream.write("\r" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


# ------------------------------------------------------------------ the sweep
@dataclass
class SweepResult:
    """Records in deterministic order plus how the sweep ran.

    A sweep with a journal file does not hold its records (:mod:`.executors`, memory):
    ``records`` reads them from that file on first use."""

    held: Optional[List[TrialRecord]]
    wall_s: float
    workers: int
    n_units: int
    trial_wall_s: float = 0.0               # sum of the trials' own wall times
    setup_s: float = 0.0                    # building simulator, planner, HAA-RAG (in wall_s)
    n_records: int = 0
    path: Optional[Path] = None             # the records file (journal), if any
    fmt: str = ""

    @property
    def records(self) -> List[TrialRecord]:
        if self.held is None:
            self.held = Journal(self.path, self.fmt).load() if self.path else []
        return self.held

    def totals(self) -> Dict[str, Any]:
        n = self.n_records
        return {"trials": n, "wall_s": round(self.wall_s, 3), "workers": self.workers,
                "units": self.n_units, "setup_s": round(self.setup_s, 3),
                "trials_per_s": round(n / self.wall_s, 1)
                if self.wall_s > 0 else None,
                "mean_trial_wall_ms": round(1e3 * self.trial_wall_s / n, 3) if n else None}


def resolve_workers(workers: Optional[int]) -> int:
    """``workers`` or, for 0/None, the CPU cores this process may use."""
    if workers:
        return max(1, int(workers))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:              # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _ray_task(group: List[WorkUnit]) -> Tuple[List[List[Dict[str, Any]]], Dict[str, Any]]:
    """Body of a Ray task (:func:`.executors.run_ray`): the records of each unit of a
    :func:`group_units` group, run as the local pool runs it (:meth:`TrialRunner.run_group`),
    and where and when it ran (node, worker pid, epoch start and end, CPU seconds). The
    runner is built once per Ray worker process, as in the local pool; its build time is
    in that worker's first task. It lives here, beside the units it runs, so executors
    never imports this module."""
    import ray      # the optional extra (requirements-ray.txt), in a Ray worker only

    start, cpu0 = time.time(), time.process_time()
    rows = _run_group(group)
    return rows, {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                  "start": start, "end": time.time(), "cpu": time.process_time() - cpu0}


def run_units(units: Sequence[WorkUnit], workers: Optional[int] = None,
              progress: bool = True, start_method: str = "",
              on_records: Optional[Callable[[List[TrialRecord]], None]] = None,
              executor: str = "local", ray_address: str = "",
              journal: Union[str, Path, None] = None, resume: bool = False
              ) -> SweepResult:
    """Run work units; sorted records (module docstring).

    ``executor`` "local": in this process for 1 worker, else a ``multiprocessing`` pool;
    "ray": one Ray task per group (:mod:`.executors`; ``ray_address`` "" starts a cluster
    of ``workers`` CPUs here, else joins that one). ``journal``: the records file, appended
    unit by unit as they finish and rewritten sorted at the end; with ``resume`` the units
    whose records it already holds are not run again.
    """
    if executor not in EXECUTORS:
        raise ConfigError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    all_units = list(units)
    order = list(dict.fromkeys(u.configuration for u in all_units))
    book = Journal(journal) if journal is not None else None
    # with a journal the records live in its file, not here (executors docstring: memory)
    tally = Tally(all_units, keep=book is None)
    if book is not None and resume:
        units, kept = book.resume(all_units)
        for unit in kept:
            tally.done(unit)
        if kept:
            _LOG.info("resume: %d of %d units already in %s", len(kept), len(all_units),
                      book.path)
    elif book is not None:
        book.start()
    total = sum(len(u.trials) for u in all_units)
    bar = Progress(total, enabled=progress)
    bar.done = tally.count
    trial_wall = [0.0]

    def take(batch: List[TrialRecord]) -> None:
        new = tally.add(batch)
        if book is not None:
            book.append(new)
        if on_records:
            on_records(new)
        trial_wall[0] += sum(r.wall_s for r in new)
        bar.update(len(new))

    start = time.perf_counter()
    setup = 0.0
    groups = group_units(units)
    n_workers = min(resolve_workers(workers), max(1, len(groups)))
    try:
        if executor == "ray":
            n_workers = run_ray(groups, ray_address, resolve_workers(workers), take,
                                _ray_task) \
                if units else n_workers
        elif n_workers == 1 or not units:
            _init_worker()
            setup = time.perf_counter() - start
            for group in groups:
                for records in _worker._RUNNER.run_group(group):
                    take(records)
        else:
            method = start_method or ("fork" if "fork" in mp.get_all_start_methods()
                                      else "spawn")
            if method == "fork":
                _init_worker()          # built once here; every forked worker inherits it
                setup = time.perf_counter() - start
            ctx = mp.get_context(method)
            with ctx.Pool(n_workers, initializer=_init_worker) as pool:
                for unit_rows in pool.imap_unordered(_run_group, groups, chunksize=1):
                    for rows in unit_rows:
                        take([TrialRecord.from_dict(r) for r in rows])
    finally:
        if book is not None:
            book.close()
    wall = time.perf_counter() - start
    tally.check()
    if tally.duplicates:
        _LOG.warning("sweep: %d duplicate record(s) dropped (a unit ran twice)",
                     tally.duplicates)
    held = None
    if book is not None:
        book.finish_units(order)
    else:
        held = sort_records(tally.records, order)
    return SweepResult(held, wall, n_workers, len(all_units), trial_wall_s=trial_wall[0],
                       setup_s=setup, n_records=tally.count,
                       path=book.path if book else None, fmt=book.fmt if book else "")


def run_sweep(configurations: Sequence[str], tasks: Sequence[str], trials: int,
              seeds: Sequence[int], workers: Optional[int] = None, progress: bool = True,
              splits: Optional[Mapping[str, str]] = None, start_method: str = "",
              memory_scope: str = "trial", perception: str = "oracle",
              visual_query: str = "none", constraint_mode: str = "",
              executor: str = "local", ray_address: str = "",
              journal: Union[str, Path, None] = None, resume: bool = False) -> SweepResult:
    """Every configuration x task x seed x trial (module docstring); sorted records
    (``executor``, ``ray_address``, ``journal``, ``resume``: :func:`run_units`)."""
    units = make_units(configurations, tasks, trials, seeds, splits, memory_scope,
                       perception, visual_query, constraint_mode)
    _LOG.info("sweep: %d configurations x %d tasks x %d trials x %d seeds = %d trials",
              len(configurations), len(tasks), trials, len(seeds),
              sum(len(u.trials) for u in units))
    return run_units(units, workers, progress, start_method, executor=executor,
                     ray_address=ray_address, journal=journal, resume=resume)


__all__ = ["MEMORY_SCOPES", "Progress", "SweepConfig", "SweepResult", "TrialRunner",
           "WorkUnit", "group_units", "make_units", "resolve_workers", "run_sweep", "run_units",
           "task_key", "trial_seed"]
