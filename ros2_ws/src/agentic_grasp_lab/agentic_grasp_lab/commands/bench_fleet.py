"""``agentic-grasp bench fleet``: four robots sharing the PostgreSQL fleet store.

Three parts, each printed beside its baseline from the same run:

1. learning (evaluation/studies/fleet.py): each robot's curve with the fleet store beside the
   same robot alone on the same seeds (``--fleet-goals`` goals per object, default 10);
2. commit-to-served delay: one robot commits, two others' retrievers serve it (p50 / p99);
3. scale (benchmarks/fleet_scale.py): start-up and per-request latency with
   ``--scale-records`` fleet records (default 2 x 10^4; 10^6 for the issue's number),
   postgres store beside the file store.

The run starts its own throw-away PostgreSQL server (agentic_grasp_lab/testing/pg_server.py;
``scripts/setup.sh --with-postgres`` installs the binaries): it never writes to the database
of $AGENTIC_GRASP_PG_DSN. Reuses ``--perception``, ``--out``, ``--learn-seed``,
``--no-progress`` and ``--json``.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_fleet_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("fleet (bench fleet)")
    group.add_argument("--fleet-goals", type=int, default=10,
                       help="goals per object and robot, in rounds (default 10)")
    group.add_argument("--fleet-block", type=int, default=5, help="goals per block (default 5)")
    group.add_argument("--fleet-eval", type=int, default=5,
                       help="held-out seeds per object after the rounds (default 5)")
    group.add_argument("--fleet-groups", default="far_ood,near_ood",
                       help="object sets dealt to the robots (config/ood/splits.yaml)")
    group.add_argument("--robots", type=int, default=4, help="robots (processes; default 4)")
    group.add_argument("--fleet-deal", choices=("split", "same", "category"),
                       default="split",
                       help="split (default): each robot its own objects; same: every robot "
                       "every object, on its own seeds; category: objects whose superclass "
                       "another object shares, siblings on different robots (use with "
                       "--fleet-groups in_distribution,near_ood)")
    group.add_argument("--scale-records", type=int, default=20000,
                       help="fleet records for the latency / start-up part (default 2e4; "
                       "1000000 for the issue's 10^6)")
    group.add_argument("--scale-file-records", type=int, default=None,
                       help="records in the file store's part (default: as many; jsonschema "
                       "validation makes 10^6 lines about half an hour of CPU)")
    group.add_argument("--delay-records", type=int, default=200,
                       help="records of the commit-to-served measurement (default 200)")
    group.add_argument("--fleet-parts", default="learning,delay,scale",
                       help="which parts to run (comma-separated)")


def run_fleet_bench(args: argparse.Namespace) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.testing.pg_server import PgServer

    parts = {p.strip() for p in args.fleet_parts.split(",") if p.strip()}
    out_dir = Path(args.out) if args.out else Path("results") / "fleet"
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    server = PgServer()
    try:
        if "learning" in parts:
            # on use: cli.py imports every command's module to build its parser
            from agentic_grasp_lab.evaluation.studies.fleet import format_fleet, run_fleet

            res = run_fleet(goals=args.fleet_goals, block=args.fleet_block,
                            eval_trials=args.fleet_eval, seed=args.learn_seed,
                            perception=args.perception or "vlm_sim",
                            groups=[g.strip() for g in args.fleet_groups.split(",")
                                    if g.strip()],
                            dsn=server.create_database("fleet_learning"), robots=args.robots,
                            how=args.fleet_deal,
                            progress=not args.no_progress)
            print(format_fleet(res), flush=True)
            result["learning"] = res.to_dict()
        if "delay" in parts:
            # on use: cli.py imports every command's module to build its parser
            from agentic_grasp_lab.benchmarks.fleet_scale import run_delay

            d = run_delay(server.create_database("fleet_delay"), out_dir, args.delay_records)
            print(f"commit-to-served delay over {d['records']} records x 2 robots: p50 "
                  f"{d['p50_ms']} ms, p99 {d['p99_ms']} ms, max {d['max_ms']} ms, "
                  f"{d['never_served']} never served (a request every "
                  f"{d['request_every_ms']:.0f} ms; target p99 <= 1000 ms); CPU of a "
                  f"pick-up p50 {d['pickup_cpu_p50_ms']} ms, p99 {d['pickup_cpu_p99_ms']} ms; "
                  f"load average {d['loadavg_1min_before_after'][0]} -> "
                  f"{d['loadavg_1min_before_after'][1]} on {d['cpus']} CPUs", flush=True)
            result["delay"] = d
        if "scale" in parts:
            # on use: cli.py imports every command's module to build its parser
            from agentic_grasp_lab.benchmarks.fleet_scale import format_scale, run_scale

            s = run_scale(server.create_database("fleet_scale"), out_dir, args.scale_records,
                          args.scale_file_records)
            print(format_scale(s), flush=True)
            result["scale"] = s
    finally:
        server.close()
    (out_dir / "fleet.json").write_text(json.dumps(result, indent=1, default=str))
    print(f"results: {out_dir / 'fleet.json'} (machine shared: compare ratios, not seconds)")
    return result if args.json else {}


__all__ = ["add_fleet_arguments", "run_fleet_bench"]
