"""``agentic-grasp bench paper``: the paper's evaluation in process.

Runs the Table II sweep (every configuration x 12 tasks x 30 trials x 5 seeds by default,
config/evaluation.yaml), the extra Table V row, the OOD study and Table IV, prints every
table beside the paper's numbers and writes trial records, tables.json, report.txt and PNG
figures into the output folder (default out/bench/). ``--from-records`` re-tabulates a
previous run without running a trial.

Wiring (commands/bench.py): ``add_paper_arguments(parser)`` adds this command's options to
the ``bench paper`` parser (it skips ``--json`` when the parser already has it; with ``only``
just some of them, for the benchmarks that share them) and ``run_paper(args) -> int`` runs
it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, List, Mapping, Optional, Tuple


def _has_option(parser: argparse.ArgumentParser, option: str) -> bool:
    return option in getattr(parser, "_option_string_actions", {})


def _option(*flags: str, **kwargs) -> Tuple[Tuple[str, ...], dict]:
    return flags, kwargs


#: The paper benchmark's options (all default to config/evaluation.yaml), by flag: the other
#: benchmarks that share some of them add those (:func:`add_paper_arguments` ``only``).
PAPER_OPTIONS = [
    _option("--config", metavar="FILE", default=None,
            help="evaluation parameters (default config/evaluation.yaml)"),
    _option("--configurations", metavar="LIST", default=None,
            help="comma-separated Table II configurations (default: all 7)"),
    _option("--tasks", metavar="LIST", default=None,
            help="comma-separated task ids or scene files (default: the 12 tasks)"),
    _option("--trials", type=int, default=None,
            help="trials per task and seed (default 30)"),
    _option("--seeds", metavar="LIST", default=None,
            help="comma-separated base seeds (default 0,1,2,3,4)"),
    _option("--workers", type=int, default=None,
            help="worker processes (default: one per CPU core)"),
    _option("--out", metavar="DIR", default=None,
            help="output folder (default out/bench under the repository)"),
    _option("--format", choices=("jsonl", "csv"), default=None,
            help="trial record format (default jsonl)"),
    _option("--memory-scope", choices=("trial", "series"), default=None,
            help="episodic memory per trial (paper, default) or kept across "
            "the trials of a configuration/task/seed series"),
    _option("--perception", choices=("vlm_sim", "vlm_sim_perfect", "oracle"),
            default=None,
            help="perception of every trial (default config/evaluation.yaml: "
            "vlm_sim, the simulated VLM with its error model; vlm_sim_perfect: "
            "the same at zero noise; oracle: ground truth, the old default)"),
    _option("--visual-query", choices=("camera", "render", "none"), default=None,
            help="s_vis of HAA-RAG: camera crop at the perceived box (default), "
            "the object rendered alone, or none (s_vis = 0)"),
    _option("--no-oracle-comparison", action="store_true",
            help="skip the oracle run of the full system behind the per-task "
            "oracle vs default-perception table and figure"),
    _option("--only", metavar="LIST", default=None,
            help="run only some parts: comma-separated of table2 (Tables II, "
            "III), table5, ood, table4 (default: all)"),
    _option("--no-figures", action="store_true", help="skip the PNG figures"),
    _option("--no-progress", action="store_true", help="no progress line"),
    _option("--quick", action="store_true",
            help="a short run: 1 seed x 5 trials per task (smoke test)"),
    _option("--from-records", metavar="DIR", default=None,
            help="re-tabulate the records of a previous run in DIR (no trials)"),
    _option("--profile", type=int, default=0, metavar="N",
            help="also profile N trials per task and configuration (seed 0)"),
    _option("--executor", choices=("local", "ray"), default=None,
            help="where the trials run: local (default), a process pool here; "
            "ray, one Ray task per (configuration, task, seed) unit (the optional "
            "extra of scripts/setup.sh --with-ray)"),
    _option("--ray-address", metavar="ADDR", default=None,
            help="with --executor ray: join the cluster at ADDR (HOST:PORT or "
            "auto) instead of starting one here with --workers CPUs"),
    _option("--resume", action="store_true",
            help="complete the records files an interrupted run (Ctrl-C, a "
            "crash) left in --out instead of starting again"),
    _option("--ros", action="store_true",
            help="run the Table II trials end to end through the ROS graph "
            "(all nodes as processes, one trial at a time: size it with "
            "--tasks/--trials/--seeds/--configurations)"),
]


def add_paper_arguments(parser: argparse.ArgumentParser,
                        only: Optional[Mapping[str, Optional[str]]] = None,
                        title: str = "paper benchmark (Tables II-V, OOD)") -> Any:
    """Options of the paper benchmark; ``only``: just these flags, each with its own help
    text where the value is not None (another benchmark that shares them). Returns the
    argument group."""
    group = parser.add_argument_group(title)
    for flags, kwargs in PAPER_OPTIONS:
        if only is not None and flags[0] not in only:
            continue
        if only is not None and only[flags[0]] is not None:
            kwargs = {**kwargs, "help": only[flags[0]]}
        group.add_argument(*flags, **kwargs)
    if (only is None or "--json" in only) and not _has_option(parser, "--json"):
        group.add_argument("--json", action="store_true",
                           help=(only or {}).get("--json")
                           or "print machine-readable totals and tables")
    return group


def _split(text: Optional[str]) -> Optional[List[str]]:
    if text is None:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def _config(args: argparse.Namespace):
    # on use: cli.py imports every command's module to build its parser
    from dataclasses import replace

    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.evaluation.sweep import SweepConfig

    cfg = SweepConfig.from_config(args.config)
    changes = {}
    if args.configurations is not None:
        changes["configurations"] = tuple(_split(args.configurations))
    if args.tasks is not None:
        changes["tasks"] = tuple(_split(args.tasks))
    if args.seeds is not None:
        changes["seeds"] = tuple(int(s) for s in _split(args.seeds))
        changes["ood_seeds"] = changes["seeds"]
    if args.trials is not None:
        changes["trials_per_task"] = args.trials
        changes["ood_trials_per_object"] = args.trials
    if args.quick:
        changes.update(seeds=(0,), ood_seeds=(0,), trials_per_task=5, ood_trials_per_object=5)
    if args.workers is not None:
        changes["workers"] = args.workers
    if args.format is not None:
        changes["records_format"] = args.format
    if args.memory_scope is not None:
        changes["memory_scope"] = args.memory_scope
    if getattr(args, "perception", None) is not None:
        changes["perception"] = args.perception
    if getattr(args, "visual_query", None) is not None:
        changes["visual_query"] = args.visual_query
    if getattr(args, "executor", None) is not None:
        changes["executor"] = args.executor
    if getattr(args, "ray_address", None) is not None:
        changes["ray_address"] = args.ray_address
    return replace(cfg, **changes) if changes else cfg


def run_paper(args: argparse.Namespace) -> int:
    """Run the paper benchmark as selected by ``args``; 0 on success, 2 on a usage error."""
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.errors import ConfigError
    from agentic_grasp_lab.evaluation.report import (PaperBenchOptions, load_records,
                                                     run_paper_benchmark, tabulate,
                                                     write_report_figures)
    from agentic_grasp_lab.evaluation.records import write_json

    as_json = bool(getattr(args, "json", False))
    try:
        cfg = _config(args)
    except (ConfigError, ValueError) as exc:
        print(f"agentic-grasp bench: {exc}", file=sys.stderr)
        return 2
    parts = set(_split(args.only) or ["table2", "table5", "ood", "table4"])
    unknown = parts - {"table2", "table5", "ood", "table4"}
    if unknown:
        print(f"agentic-grasp bench: --only: unknown part(s) {sorted(unknown)}",
              file=sys.stderr)
        return 2
    if getattr(args, "ray_address", None) and cfg.executor != "ray":
        print("agentic-grasp bench: --ray-address needs --executor ray", file=sys.stderr)
        return 2
    start = time.perf_counter()
    if getattr(args, "ros", False):
        why = _ros_refusal(args, cfg)
        if why:
            print(f"agentic-grasp bench: {why}", file=sys.stderr)
            return 2
        return _run_ros(args, cfg, as_json, start)
    if args.from_records:
        if getattr(args, "resume", False) or cfg.executor != "local":
            print("agentic-grasp bench: --from-records runs no trial; it has no --resume or "
                  "--executor ray", file=sys.stderr)
            return 2
        folder = Path(args.from_records)
        records = load_records(folder)
        if not records:
            print(f"agentic-grasp bench: no records in {folder}", file=sys.stderr)
            return 2
        report = tabulate(records, cfg, retrieval="table4" in parts)
        report["totals"] = {"records": {k: len(v) for k, v in records.items()}}
        report["files"] = {}
        if not args.no_figures:
            report["files"] = write_report_figures(report["tables"], folder)
        previous = folder / "tables.json"
        totals = {}
        if previous.is_file():          # keep the totals of the run that made the records
            totals = json.loads(previous.read_text(encoding="utf-8")).get("totals", {})
        report["files"]["tables"] = str(write_json({"tables": report["tables"],
                                                    "totals": totals}, previous))
    else:
        options = PaperBenchOptions(
            config=cfg, out_dir=Path(args.out) if args.out else None,
            table_ii="table2" in parts, table_v="table5" in parts, ood="ood" in parts,
            retrieval="table4" in parts, figures=not args.no_figures,
            progress=not args.no_progress and not as_json,
            oracle_comparison=not getattr(args, "no_oracle_comparison", False),
            resume=bool(getattr(args, "resume", False)))
        try:
            report = run_paper_benchmark(options)
        except ConfigError as exc:
            print(f"agentic-grasp bench: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"\nagentic-grasp bench: interrupted; the finished units are in "
                  f"{options.output_dir()}: the same command with --resume completes them",
                  file=sys.stderr)
            return 130
    if args.profile:
        # on use: cli.py imports every command's module to build its parser
        from agentic_grasp_lab.evaluation.timing import format_profile, profile_trials

        profile = profile_trials(cfg.configurations, cfg.task_list(), int(args.profile))
        report["totals"]["profile"] = profile
        report["text"] += "\n\n" + format_profile(profile)
        if "tables" in report["files"]:             # keep the files in step with the print
            write_json({"tables": report["tables"], "totals": report["totals"]},
                       report["files"]["tables"])
        if "report" in report["files"]:
            Path(report["files"]["report"]).write_text(report["text"] + "\n", encoding="utf-8")
    report["totals"]["total_wall_s"] = round(time.perf_counter() - start, 3)
    if as_json:
        print(json.dumps({"totals": report["totals"], "tables": report["tables"],
                          "files": report["files"]}, indent=2, default=str))
        return 0
    print(report["text"])
    sweep = report["totals"].get("table_ii_sweep")
    if sweep:
        print(f"\nTable II sweep ({cfg.perception} perception, {cfg.visual_query} visual "
              f"query): {sweep['trials']} trials in {sweep['wall_s']:.1f} s with "
              f"{sweep['workers']} worker(s) ({sweep['trials_per_s']:.0f} trials/s, "
              f"{sweep['mean_trial_wall_ms']:.1f} ms per trial)")
    for name, path in report["files"].items():
        print(f"wrote {name}: {path}")
    return 0


def _ros_refusal(args: argparse.Namespace, cfg) -> str:
    """Why ``--ros`` cannot honour the options given ("" when it can): every option of the
    in-process benchmark is run the same way through the graph or refused, never ignored."""
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.ros.benchmarks.ros_sweep import check_ros_options

    asked = set(_split(args.only) or [])
    if asked - {"table2"}:
        return (f"--ros runs Table II (and Table III, which derives from it) only; "
                f"--only {','.join(sorted(asked - {'table2'}))} runs in process: drop --ros")
    if args.from_records:
        return "--ros and --from-records exclude each other (--from-records runs no trial)"
    if args.profile:
        return "--profile profiles in-process trials: drop --ros"
    if cfg.executor != "local" or getattr(args, "resume", False):
        return ("--ros runs one trial at a time through the graph; "
                "it has no --executor ray or --resume")
    return check_ros_options(cfg.perception, cfg.visual_query, cfg.memory_scope)


def _run_ros(args: argparse.Namespace, cfg, as_json: bool, start: float) -> int:
    """Table II (and what derives from it) from trials run through the ROS graph, then the
    same trials in process (``--workers`` applies there) and their agreement, trial by
    trial (agentic_grasp_lab/evaluation/agreement.py)."""
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.ros.benchmarks.ros_sweep import run_ros_sweep
    from agentic_grasp_lab.evaluation.agreement import agreement, format_agreement
    from agentic_grasp_lab.evaluation.records import write_json, write_records
    from agentic_grasp_lab.evaluation.report import tabulate
    from agentic_grasp_lab.evaluation.sweep import run_sweep

    def progress(done: int, total: int) -> None:
        if not as_json and not args.no_progress:
            print(f"\r[ros] {done}/{total} trials", end="" if done < total else "\n",
                  file=sys.stderr, flush=True)

    tasks = cfg.task_list()
    out = Path(args.out) if args.out else Path("out/bench_ros")
    out.mkdir(parents=True, exist_ok=True)
    # in process first: its worker pool forks, which must happen before rclpy's threads exist
    inprocess = run_sweep(cfg.configurations, tasks, cfg.trials_per_task, cfg.seeds,
                          workers=cfg.workers, progress=False, memory_scope=cfg.memory_scope,
                          perception=cfg.perception, visual_query=cfg.visual_query).records
    write_records(inprocess, out / f"table_ii_inprocess_records.{cfg.records_format}")
    records = run_ros_sweep(cfg.configurations, tasks, cfg.trials_per_task, cfg.seeds,
                            progress, perception=cfg.perception,
                            visual_query=cfg.visual_query, memory_scope=cfg.memory_scope)
    path = write_records(records, out / f"table_ii_records.{cfg.records_format}")
    report = tabulate({"table_ii": records}, cfg, retrieval=False)
    agree = agreement(records, inprocess)
    write_json(agree, out / "agreement.json")
    wall = round(time.perf_counter() - start, 3)
    if as_json:
        print(json.dumps({"tables": report["tables"], "agreement": agree, "records": str(path),
                          "trials": len(records), "perception": cfg.perception,
                          "total_wall_s": wall}, indent=2, default=str))
        return 0
    print(report["text"])
    print()
    print(format_agreement(agree, cfg.perception))
    print(f"\n{len(records)} trials through the ROS graph ({cfg.perception} perception, "
          f"{cfg.visual_query} visual query) in {wall:.1f} s; records: {path}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Stand-alone entry point (``python -m agentic_grasp_lab.commands.bench_paper``)."""
    parser = argparse.ArgumentParser(prog="agentic-grasp bench",
                                     description=__doc__.splitlines()[0])
    add_paper_arguments(parser)
    return run_paper(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
