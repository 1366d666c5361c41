"""Ray executor benchmarks: overhead per unit on a two-node local cluster, and a
long sweep through Ray interrupted and resumed with the memory sampled as it runs.

``python -m agentic_grasp_lab.benchmarks.ray_sweep overhead [--units N] [--trials T]``
    The same units run in process (one worker, grouped by (task, seed) as the executors
    run them: each group's compute, CPU and wall) and then as Ray tasks (one per group) on
    a head + worker node (1 CPU each, separate ``ray start`` processes).
    Overhead = (Ray sweep wall x cluster CPUs - the units' wall inside their tasks) / the
    units' wall inside their tasks: every slot-second the cluster spent on anything but a
    trial (scheduling, transfer, result handling, idle slots), per unit of compute. The
    connect time and the workers' first-unit set-up are reported apart.

``python -m agentic_grasp_lab.benchmarks.ray_sweep soak [--trials-total N] [--perception P]``
``[--two-node]``
    N trials (units of 30) with ``--executor ray`` on a local cluster, stopped half-way as
    Ctrl-C stops it, then resumed with ``resume=True``; the driver's and the Ray workers' RSS
    is sampled every 2.5 % of the trials and the driver's growth fitted in kB per trial.
    Checks that every trial is there exactly once.

Benchmarks print numbers; they are not tests. On a shared machine wall times include the
other processes: the CPU times are the comparable figures.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

from agentic_grasp_lab.evaluation.records import sort_records
from agentic_grasp_lab.evaluation.sweep import (group_units, make_units, run_units, SweepConfig,
                                                TrialRunner)
from agentic_grasp.core.sim import list_tasks
from agentic_grasp_lab.evaluation import executors
from agentic_grasp_lab.testing.ray_cluster import LocalRayCluster


def _units(n_units: int, trials: int, perception: str) -> List[Any]:
    cfg = SweepConfig.from_config()
    seeds = list(range(max(1, -(-n_units // (len(cfg.configurations) * 12)))))
    units = make_units(cfg.configurations, list_tasks(), trials, seeds,
                       perception=perception, visual_query="camera")
    return units[:n_units]


def overhead(n_units: int = 24, trials: int = 30, perception: str = "vlm_sim"
             ) -> Dict[str, Any]:
    units = _units(n_units, trials, perception)
    runner = TrialRunner()
    runner.run_unit(units[0])                       # imports, first-call caches
    local_wall, local_cpu = [], []
    local_records = []
    for group in group_units(units):                # as the executors run them
        w0, c0 = time.perf_counter(), time.process_time()
        for rows in runner.run_group(group):
            local_records.extend(rows)
        local_wall.append(time.perf_counter() - w0)
        local_cpu.append(time.process_time() - c0)
    with LocalRayCluster() as cluster:
        os.environ.update(cluster.driver_env())
        t0 = time.perf_counter()
        result = run_units(units, progress=False, executor="ray",
                           ray_address=cluster.address)
        total = time.perf_counter() - t0
    stats = executors.LAST_RAY_STATS
    wall = total - stats.connect_s
    slot_s = wall * stats.cluster_cpus
    order = list(dict.fromkeys(u.configuration for u in units))
    same = [r.comparable() for r in result.records] == \
        [r.comparable() for r in sort_records(local_records, order)]
    per_unit = executors.unit_overhead(stats.timings)
    return {"units": len(units), "trials_per_unit": trials, "perception": perception,
            "per_unit": {k: round(v, 4) if isinstance(v, float) else v
                         for k, v in per_unit.items()},
            "cluster_cpus": stats.cluster_cpus, "nodes": len(stats.nodes),
            "tasks": len(local_wall),
            "local_task_wall_s_mean": round(sum(local_wall) / len(local_wall), 4),
            "local_task_cpu_s_mean": round(sum(local_cpu) / len(local_wall), 4),
            "ray_connect_s": round(stats.connect_s, 3), "ray_sweep_wall_s": round(wall, 3),
            "ray_task_wall_s_sum": round(stats.task_wall_s, 3),
            "ray_task_cpu_s_sum": round(stats.task_cpu_s, 3),
            "ray_task_wall_s_mean": round(stats.task_wall_s / max(1, stats.tasks), 4),
            "slot_overhead_fraction": round((slot_s - stats.task_wall_s) / stats.task_wall_s,
                                            4),
            "records_equal_local": same}


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _ray_worker_pids() -> List[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        # Ray retitles its workers "ray::<task>" / "ray::IDLE"
        if b"default_worker.py" in cmd or cmd.startswith((b"ray::_ray_task", b"ray::IDLE")):
            out.append(int(entry.name))
    return out


def soak(trials_total: int = 10_000, perception: str = "oracle", workers: int = 2,
         two_node: bool = False) -> Dict[str, Any]:
    """``two_node``: on a head + worker node started with ``ray start`` (1 CPU each, as the
    executor tests use) instead of ``ray.init``'s local cluster, whose raylet can time out
    waiting for its metrics agent on a heavily loaded machine."""
    if two_node:    # ray_cluster needs the optional ray extra
        from agentic_grasp_lab.testing.ray_cluster import LocalRayCluster

        with LocalRayCluster() as cluster:
            os.environ.update(cluster.driver_env())
            return _soak(trials_total, perception, workers, cluster.address)
    return _soak(trials_total, perception, workers, "")


def _soak(trials_total: int, perception: str, workers: int, address: str) -> Dict[str, Any]:
    units = _units(-(-trials_total // 30), 30, perception)
    total = sum(len(u.trials) for u in units)
    samples: List[Dict[str, Any]] = []
    done = [0]
    every = max(30, total // 40)

    def sample(batch, stop_at=None):
        done[0] += len(batch)
        if done[0] // every != (done[0] - len(batch)) // every:
            pids = _ray_worker_pids()
            samples.append({"trials": done[0], "driver_rss_mb": round(_rss_mb(os.getpid()), 1),
                            "workers_rss_mb": [round(_rss_mb(p), 1) for p in pids]})
        if stop_at is not None and done[0] >= stop_at:
            raise KeyboardInterrupt

    folder = Path(tempfile.mkdtemp(prefix="ray_soak_"))
    path = folder / "records.jsonl"
    t0 = time.perf_counter()
    try:
        run_units(units, workers=workers, progress=False, executor="ray", journal=path,
                  ray_address=address, on_records=lambda b: sample(b, total // 2))
    except KeyboardInterrupt:
        pass
    first = time.perf_counter() - t0
    # the whole lines left in the file (loading them as records would itself add their
    # ~2.5 kB each to the driver the soak measures)
    with path.open("rb") as handle:
        kept = sum(1 for line in handle if line.endswith(b"\n"))
    done[0] = kept
    t1 = time.perf_counter()
    result = run_units(units, workers=workers, progress=False, executor="ray", journal=path,
                       ray_address=address, resume=True, on_records=sample)
    after = round(_rss_mb(os.getpid()), 1)      # the driver before anything reads the file
    # count the file's records line by line: the sweep's result holds none (flat driver)
    n, keys = 0, set()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            keys.add(hash((row["configuration"], row["task_id"], row["seed"], row["trial"])))
            n += 1
    return {"trials": total, "units": len(units), "perception": perception,
            "interrupted_after_trials": kept, "first_wall_s": round(first, 1),
            "resume_wall_s": round(time.perf_counter() - t1, 1),
            "records": n, "unique_keys": len(keys), "result_holds_records":
            result.held is not None, "driver_rss_mb_at_end": after,
            "driver_kb_per_trial": _slope_kb(samples, kept),
            "records_file": str(path), "rss_samples": samples}


def _slope_kb(samples: List[Dict[str, Any]], resumed_at: int) -> Dict[str, Any]:
    """The driver's RSS growth in kB per trial (least squares over the samples) before the
    interrupt and after the resume, each leaving out its first sample (imports, Ray's own
    start)."""
    out: Dict[str, Any] = {}
    for name, part in (("first", [s for s in samples if s["trials"] <= resumed_at]),
                       ("resumed", [s for s in samples if s["trials"] > resumed_at])):
        part = part[1:]
        if len(part) < 2:
            continue
        xs = [s["trials"] for s in part]
        ys = [s["driver_rss_mb"] * 1024.0 for s in part]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        out[name] = round(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx, 4) \
            if sxx else None
    return out


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentic_grasp_lab.benchmarks.ray_sweep",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("overhead", "soak"))
    parser.add_argument("--units", type=int, default=24)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--trials-total", type=int, default=10_000)
    parser.add_argument("--perception", default=None)
    parser.add_argument("--two-node", action="store_true",
                        help="soak: on a head + worker node started with ray start")
    args = parser.parse_args(argv)
    if args.what == "overhead":
        out = overhead(args.units, args.trials, args.perception or "vlm_sim")
    else:
        out = soak(args.trials_total, args.perception or "oracle", two_node=args.two_node)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
