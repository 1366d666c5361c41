"""``agentic-grasp replay BAG``: a recorded run's observations through today's planner.

A regression check of a planner change against recorded sessions: see
agentic_grasp.ros.recording.replay. Each goal runs under the configuration of its goal log
(``--configuration`` overrides it for every goal: "what would no_scene_graph have done on
this session") and its recorded result is printed beside the replayed one.

Exit status 0 when every attempt and result agree with the recording, 1 when the replay
diverges or the bag is damaged (the readable goals are still replayed and reported), 2 when
the bag cannot be read at all or the configuration is unknown.
"""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bag", help="rosbag2 folder (agentic-grasp bringup --record DIR)")
    parser.add_argument("--configuration", default="",
                        help="Table II configuration to replay every goal under (default: "
                             "each goal's own, from the goal log; full without one)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")


def _result(r) -> str:
    text = "success" if r["success"] else "failure"
    grasped = ", ".join(r["grasped_ids"]) or "nothing"
    return f"{text}, {r['attempt_count']} attempt(s), grasped {grasped}"


def run(args: argparse.Namespace) -> int:
    from agentic_grasp.core.errors import ConfigError
    from agentic_grasp.ros.recording.reader import BagError
    from agentic_grasp.ros.recording.replay import replay_bag

    try:
        report = replay_bag(args.bag, args.configuration or None)
    except (BagError, ConfigError) as exc:
        print(f"replay of {args.bag} failed: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - e.g. a message layout replay cannot read
        print(f"replay of {args.bag} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        agrees = report["agrees"] and all(g["metrics"]["result_agrees"]
                                          for g in report["goals"])
        print(f"replay of {report['bag']} under {report['configuration']}: "
              f"{'agrees' if agrees else 'DIVERGES'} ({len(report['goals'])} goal(s))")
        for goal in report["goals"]:
            m = goal["metrics"]
            print(f"  goal {goal['goal_id'][:8]} {goal['instruction']!r} "
                  f"[{goal['configuration']}, {goal['configuration_source']}]")
            rec = goal["recorded"]
            print(f"    recorded: {_result(rec)}"
                  + (f" (error {rec['error_code']}: {rec['message']})"
                     if rec["error_code"] else ""))
            print(f"    replayed: {_result(goal['replayed'])} -> "
                  f"{'same result' if m['result_agrees'] else 'DIFFERENT result'}; "
                  f"attempts agree {m['agreement']}")
            for d in goal["decisions"]:
                print(f"    {d['target_id']}: {d['initial_source']}, retrieved "
                      f"{d['retrieved']}, constraints {d['constraints']}")
            if m["first_divergence"]:
                div = m["first_divergence"]
                print(f"    first divergence at attempt {div['attempt_index']} "
                      f"({div['target_id']}): {div['diff']}")
    for warning in report["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    if not report["complete"]:
        print(f"bag is damaged, only its readable part was replayed: {report['stopped']}",
              file=sys.stderr)
        return 1
    ok = report["agrees"] and all(g["metrics"]["result_agrees"] for g in report["goals"])
    return 0 if ok else 1
