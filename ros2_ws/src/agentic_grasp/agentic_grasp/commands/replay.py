"""``agentic-grasp replay BAG``: a recorded run's observations through today's planner.

A regression check of a planner change against recorded sessions: see
agentic_grasp.recording.replay. Exit status 0 when every attempt agrees with the recording,
1 when the replay diverges, 2 when the bag cannot be read.
"""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bag", help="rosbag2 folder (agentic-grasp bringup --record DIR)")
    parser.add_argument("--configuration", default="full",
                        help="Table II configuration to replay under (default full)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")


def run(args: argparse.Namespace) -> int:
    from agentic_grasp.recording.replay import replay_bag

    try:
        report = replay_bag(args.bag, args.configuration)
    except Exception as exc:  # noqa: BLE001 - an unreadable bag or unknown configuration
        print(f"replay of {args.bag} failed: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(f"replay of {report['bag']} under {report['configuration']}: "
              f"{'agrees' if report['agrees'] else 'DIVERGES'}")
        for goal in report["goals"]:
            m = goal["metrics"]
            print(f"  goal {goal['goal_id'][:8]} {goal['instruction']!r}: recorded "
                  f"{'success' if m['recorded_success'] else 'failure'} in "
                  f"{m['recorded_attempts']} attempt(s); agreement {m['agreement']}")
            for d in goal["decisions"]:
                print(f"    {d['target_id']}: {d['initial_source']}, retrieved "
                      f"{d['retrieved']}, constraints {d['constraints']}")
            if m["first_divergence"]:
                div = m["first_divergence"]
                print(f"    first divergence at attempt {div['attempt_index']} "
                      f"({div['target_id']}): {div['diff']}")
    return 0 if report["agrees"] else 1
