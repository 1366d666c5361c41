"""``agentic-grasp show``: pictures of what the robot saw and decided (one PNG per attempt
and a contact sheet per goal; see agentic_grasp.ros.recording.show).

``show BAG --out DIR`` renders a recording; ``show --live --out DIR`` attaches to the running
graph, waits for the next goal to end and renders it.

Exit status 0 when pictures were written from a whole bag, 1 for a damaged bag (the
readable goals are still drawn) or when nothing was there to draw, 2 when the bag cannot be
read at all (or, live, when no goal ended within ``--timeout``).
"""
from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bag", nargs="?", default="",
                        help="rosbag2 folder or .mcap/.db3 file (not with --live)")
    parser.add_argument("--out", default="out/show", help="folder for the PNGs (default "
                                                         "out/show)")
    parser.add_argument("--goal", default="", help="only the goal whose id starts with this")
    parser.add_argument("--live", action="store_true",
                        help="attach to the running graph and draw the next goal")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="--live: how long to wait for a goal to end (s)")


def run(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.ros.recording.bag.reader import BagError
    from agentic_grasp.ros.recording.show import write_pictures

    if args.live == bool(args.bag):
        print("show: give a BAG, or --live (not both)", file=sys.stderr)
        return 2
    bag = args.bag
    if args.live:
        # on use: cli.py imports every command's module to build its parser
        from agentic_grasp.ros.recording.live import record_next_goal

        try:
            bag, goal_id = record_next_goal(args.out, args.timeout)
        except TimeoutError as exc:
            print(f"show --live: {exc}", file=sys.stderr)
            return 2
        args.goal = args.goal or goal_id
        print(f"goal {goal_id[:8]} ended; its recording: {bag}")
    try:
        report = write_pictures(bag, args.out, args.goal or None)
    except BagError as exc:
        print(f"cannot read bag: {exc}", file=sys.stderr)
        return 2
    for path in report["written"]:
        print(path)
    for warning in report["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    if not report["complete"]:
        print(f"bag is damaged, pictures of its readable part only: {report['stopped']}",
              file=sys.stderr)
        return 1
    if not report["written"]:
        print("no attempts in the bag: nothing to draw", file=sys.stderr)
        return 1
    return 0
