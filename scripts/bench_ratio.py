#!/usr/bin/env python3
"""Time one `agentic-grasp bench paper` command in this checkout and in a baseline commit, in the
same session, and print the ratio (a sweep's speed is a ratio against a baseline
measured beside it, since these machines differ by 1.5-2 x from one session to the next).

Usage (from a shell with `source scripts/env.sh`):

    scripts/bench_ratio.py [--base REF] [--runs N] [--target RATIO] [--keep DIR]

The default command is the issue's protocol: Table II, 12,600 vlm_sim trials (7
configurations x 12 tasks x 5 seeds x 30 trials) on 2 workers,

    bench paper --only table2 --no-oracle-comparison --no-figures --workers 2
                --configurations full,no_recovery,no_episodic_memory,no_scene_graph,
                                 heuristic_box,no_haa_rag,vlm_only

and the baseline is ac31665, the commit the issue measured (271 s there), where today's
`heuristic_box` was called `heuristic` (`--base-configurations`). The baseline's tree is
`git archive`d into a temporary folder and run from its own sources and data
(PYTHONPATH, AGENTIC_GRASP_DATA), on this checkout's venv and built interfaces. Runs
alternate, baseline first, one at a time; each is timed as a whole command (wall clock, and
user + system CPU of the process and its workers). The ratio is median(this) /
median(baseline) of the wall times. With `--runs 2` or more, the records of this
checkout's runs must be identical (scripts/bench_diff.py). Exit status 1 when they are
not, or when the ratio is above `--target`.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path("ros2_ws/src/agentic_grasp")
#: the lab (bench, eval) beside the runtime; absent from trees older than the package split
LAB = Path("ros2_ws/src/agentic_grasp_lab")
CONFIGURATIONS = ("full,no_recovery,no_episodic_memory,no_scene_graph,heuristic_box,"
                  "no_haa_rag,vlm_only")
BASE_CONFIGURATIONS = ("full,no_recovery,no_episodic_memory,no_scene_graph,heuristic,"
                       "no_haa_rag,vlm_only")
COMMAND = ["paper", "--only", "table2", "--no-oracle-comparison", "--no-figures",
           "--workers", "2", "--no-progress"]


def _tree_env(tree: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / p) for p in (PACKAGE, LAB)
                                         if (tree / p).is_dir()] +
                                        [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                         if p])
    env["AGENTIC_GRASP_DATA"] = str(tree)
    return env


def _run(tree: Path, configurations: str, out: Path, log: Path) -> tuple:
    """(wall s, CPU s) of one bench command in ``tree``; its output folder ``out``."""
    cmd = [sys.executable, "-m", "agentic_grasp.cli", "bench", *COMMAND,
           "--configurations", configurations, "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(log, "w") as fh:
        code = subprocess.call(cmd, cwd=tempfile.gettempdir(), env=_tree_env(tree),
                               stdout=fh, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise SystemExit(f"bench failed in {tree} (exit {code}); see {log}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="ac31665", help="baseline commit (default ac31665)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each tree (alternating)")
    parser.add_argument("--configurations", default=CONFIGURATIONS)
    parser.add_argument("--base-configurations", default=BASE_CONFIGURATIONS)
    parser.add_argument("--target", type=float, default=None,
                        help="largest acceptable ratio (120 / 271 = 0.443)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep every run's output folder and log here")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")

    work = Path(tempfile.mkdtemp(prefix="bench_ratio_"))
    keep = args.keep or work
    keep.mkdir(parents=True, exist_ok=True)
    try:
        base = work / "base"
        base.mkdir()
        got = subprocess.run(["git", "-C", str(ROOT), "archive", args.base],
                             capture_output=True)
        if got.returncode != 0:
            raise SystemExit(f"cannot archive {args.base!r}: "
                             f"{got.stderr.decode(errors='replace').strip()}")
        archive = got.stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              check=True, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--",
                                str(PACKAGE), str(LAB), "config"], capture_output=True,
                               text=True).stdout.strip()
        label = head + (" + uncommitted changes" if dirty else "")
        rows = []
        for k in range(args.runs):
            for name, tree, confs in (("base", base, args.base_configurations),
                                      ("this", ROOT, args.configurations)):
                out = keep / f"{name}_{k}"
                wall, cpu = _run(tree, confs, out, keep / f"{name}_{k}.log")
                rows.append((name, k, wall, cpu, out))
                print(f"{name} run {k + 1}: {wall:7.1f} s wall, {cpu:7.1f} s CPU", flush=True)
        walls = {n: [r[2] for r in rows if r[0] == n] for n in ("base", "this")}
        cpus = {n: [r[3] for r in rows if r[0] == n] for n in ("base", "this")}
        ratio = statistics.median(walls["this"]) / statistics.median(walls["base"])
        print(f"\nbaseline {args.base}: median {statistics.median(walls['base']):.1f} s wall, "
              f"{statistics.median(cpus['base']):.1f} s CPU ({len(walls['base'])} run(s))")
        print(f"this checkout {label}: median {statistics.median(walls['this']):.1f} s wall, "
              f"{statistics.median(cpus['this']):.1f} s CPU ({len(walls['this'])} run(s))")
        print(f"ratio this / baseline (wall): {ratio:.3f}; CPU: "
              f"{statistics.median(cpus['this']) / statistics.median(cpus['base']):.3f}")
        status = 0
        mine = [r[4] for r in rows if r[0] == "this"]
        for other in mine[1:]:
            same = subprocess.call([sys.executable, str(ROOT / "scripts" / "bench_diff.py"),
                                    str(mine[0]), str(other)], stdout=subprocess.DEVNULL)
            print(f"records of {mine[0].name} and {other.name}: "
                  f"{'identical' if same == 0 else 'DIFFERENT'}")
            status |= same != 0
        if args.target is not None:
            verdict = "met" if ratio <= args.target else "MISSED"
            print(f"target ratio {args.target:.3f}: {verdict}")
            status |= ratio > args.target
        return int(bool(status))
    finally:
        # the baseline's tree, and the runs' outputs unless --keep put them elsewhere
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
