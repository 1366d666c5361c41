"""``agentic-grasp bag info BAG``: what a recorded run holds (rosbags; no ROS 2 install)."""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bag_command", metavar="ACTION")
    sub.required = True
    info = sub.add_parser("info", help="topics, message counts and duration of a bag")
    info.add_argument("bag", help="rosbag2 folder (agentic-grasp bringup --record DIR)")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from agentic_grasp.recording.reader import bag_info

    try:
        info = bag_info(args.bag)
    except Exception as exc:  # noqa: BLE001 - any unreadable bag is one message to the user
        print(f"cannot read bag {args.bag}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    print(f"bag: {info['path']} ({info['storage']})")
    print(f"duration: {info['duration_s']:.3f} s, messages: {info['message_count']}")
    width = max((len(t["topic"]) for t in info["topics"]), default=5)
    for t in info["topics"]:
        print(f"  {t['topic']:<{width}}  {t['count']:>6}  {t['type']}")
    return 0
