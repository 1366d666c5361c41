"""``agentic-grasp bag info BAG``: what a recorded run holds, MCAP or sqlite3 (no ROS install).

Exit status 0 for a bag read to its end, 1 for a damaged one (cut mid-file: what is readable
is listed and where it stops is said), 2 when the path is no bag at all.
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


def run(args: argparse.Namespace) -> int:
    from agentic_grasp.ros.recording.reader import BagError, bag_info

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
