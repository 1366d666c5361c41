"""``agentic-grasp bag info BAG``: what a recorded run holds, MCAP or sqlite3 (no ROS install).
``agentic-grasp bag record DIR --tasks ... --seeds ...``: bring the graph up with the recorder
and record one goal per task and seed (ros/recording/session.py), for replay.

``info``: exit status 0 for a bag read to its end, 1 for a damaged one (cut mid-file: what is
readable is listed and where it stops is said), 2 when the path is no bag at all. ``record``:
0 when every goal ran (whatever its result), 2 when the graph or a goal did not.
"""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bag_command", metavar="ACTION")
    sub.required = True
    info = sub.add_parser("info", help="storage, topics, message counts and duration of a bag")
    info.add_argument("bag", help="rosbag2 folder (agentic-grasp bringup --record DIR), or "
                                  "one .mcap / .db3 file")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    rec = sub.add_parser("record", help="bring up the graph with the recorder and record one "
                                        "goal per paper task and seed")
    rec.add_argument("bag", help="new rosbag2 folder to record to")
    rec.add_argument("--tasks", default="all",
                     help="comma-separated task ids, or all (the 12 paper tasks); "
                          "task:seed records that task once, at that seed")
    rec.add_argument("--seeds", default="0-4", help="seeds, e.g. 0-4 or 0,3 (default 0-4)")
    rec.add_argument("--limit", type=int, default=0,
                     help="record only the first N goals (seeds outermost; 0 = all)")
    rec.add_argument("--perception", default="", help="perception backend (bringup's default)")
    rec.add_argument("--acquired", default="default",
                     help="experience acquisition file, as bringup's --acquired ('none': off)")
    rec.add_argument("--timeout", type=float, default=300.0, help="seconds per goal")


def _record(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.sim.scenes import BENCHMARK_TASKS
    from agentic_grasp.ros.recording.session import parse_seeds, record_session, task_goals

    goals = task_goals(args.tasks.split(","), parse_seeds(args.seeds), BENCHMARK_TASKS)
    if args.limit > 0:
        goals = goals[:args.limit]
    bringup = {"acquired": args.acquired}
    if args.perception:
        bringup["perception"] = args.perception
    try:
        done = record_session(args.bag, goals, bringup, timeout_s=args.timeout)
    except Exception as exc:  # noqa: BLE001 - GraphError, a folder that exists, ...
        print(f"recording to {args.bag} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    ok = sum(g["success"] for g in done)
    print(f"recorded {len(done)} goal(s) to {args.bag}: {ok} succeeded")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.bag_command == "record":
        return _record(args)
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.ros.recording.bag.reader import BagError, bag_info

    try:
        info = bag_info(args.bag)
    except BagError as exc:
        print(f"cannot read bag: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
    else:
        print(f"bag: {info['path']} ({info['storage']}, {', '.join(info['files'])})")
        print(f"duration: {info['duration_s']:.3f} s, messages: {info['message_count']}")
        width = max((len(t["topic"]) for t in info["topics"]), default=5)
        for t in info["topics"]:
            print(f"  {t['topic']:<{width}}  {t['count']:>6}  {t['type']}")
    for note in info["notes"]:
        print(f"note: {note}", file=sys.stderr)
    if not info["complete"]:
        print(f"bag is damaged, counts are of the readable part: {info['stopped']}",
              file=sys.stderr)
        return 1
    return 0
