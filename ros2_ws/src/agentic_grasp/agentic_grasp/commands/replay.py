"""``agentic-grasp replay BAG``: a recorded session's goals through today's planner.

Faithful by default: each goal runs under its recorded configuration, seed and episodic
memory, and every peer answer comes from the recording (agentic_grasp.ros.recording.replay),
so an unchanged planner reproduces every decision; a changed one shows where it decides
otherwise. ``--configuration NAME`` asks what another Table II configuration would have done:
decisions are compared up to the first divergence, after which the outcome is unobserved.
``--recompute retrieval,constraints,perception`` computes those components with today's code
and data.

Exit status: 0 when the replay ran (under ``--configuration`` divergences are its result);
1 when, under the recorded configurations, a goal was not reproduced, or, with ``--strict``,
when the bag is cut or damaged (its complete goals are still replayed and reported); 2 when
the bag cannot be replayed at all (unreadable, an earlier recording format) or an option is
wrong.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict

from agentic_grasp.core.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bag", help="rosbag2 folder (agentic-grasp bringup --record DIR)")
    parser.add_argument("--configuration", default="",
                        help="Table II configuration to replay every goal under (default: "
                             "each goal's recorded one)")
    parser.add_argument("--recompute", default="",
                        help="components to compute with today's code and data instead of "
                             "the recorded answers: retrieval, constraints, perception "
                             "(comma-separated)")
    parser.add_argument("--acquired", default="",
                        help="with --recompute retrieval: the acquired-experiences file to "
                             "read (default: the recorded path)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the bag is cut or damaged")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")


def _result(r: Dict[str, Any]) -> str:
    text = "success" if r["success"] else f"failure (error {r['error_code']})"
    return f"{text}, grasped {', '.join(r['grasped_ids']) or 'nothing'}"


def _divergence(d: Dict[str, Any]) -> str:
    where = f"attempt {d['attempt']}" + (f" on {d['target_id']}" if d["target_id"] else "")
    what = ", ".join(f"{k} {v[0]} (recorded {v[1]})" for k, v in d["diff"].items()) \
        or d["why"]
    return f"{d['kind']} at {where}: {what}"


def print_report(report: Dict[str, Any]) -> None:
    s = report["summary"]
    recompute = f", recomputing {', '.join(report['recompute'])}" if report["recompute"] else ""
    print(f"replay of {report['bag']} under {report['configuration']}{recompute}")
    for goal in report["goals"]:
        m = goal["metrics"]
        print(f"  {goal['goal_id'][:8]} {goal['instruction']!r} seed {goal['seed']} "
              f"[{goal['configuration']}]: {goal['verdict'].upper()}")
        print(f"    recorded: {_result(goal['recorded'])}")
        replayed = goal["replayed"]
        print("    replayed: " + (_result(replayed) if replayed is not None else
                                   "unobserved (the recording cannot say what followed)")
              + f"; attempts agreed {m['attempts_agreed']}/{m['recorded_attempts']}")
        if m["first_divergence"]:
            print(f"    first divergence: {_divergence(m['first_divergence'])}")
        if m["unserved"]:
            print(f"    recorded answers not asked for: {m['unserved']}")
    for refused in report["refused"]:
        print(f"  {refused['goal_id'][:8]} {refused['instruction']!r}: nothing to replay, "
              f"{refused['why']}")
    for cut in report["cut"]:
        print(f"  {cut['goal_id'][:8]} {cut['instruction']!r}: NOT REPLAYED, {cut['why']}")
    print(f"goals {s['goals']}: reproduced {s['reproduced']}, observed {s['observed']}, "
          f"unobserved {s['unobserved']}, differs {s['differs']}; cut {len(report['cut'])}")
    print(f"attempts agreed {s['attempts_agreed']} of {s['recorded_attempts']} recorded")
    if s["first_divergences"]:
        print("first divergences:")
        for d in s["first_divergences"]:
            print(f"  {d['goal_id']}: {d['kind']} at attempt {d['attempt']}"
                  + (f" on {d['target_id']}" if d["target_id"] else "")
                  + (f", {', '.join(d['parameters'])}" if d["parameters"] else ""))


def run(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.ros.recording.bag.reader import BagError
    from agentic_grasp.ros.recording.replay import ReplayRefused, replay_bag

    try:
        report = replay_bag(args.bag, args.configuration or None,
                            args.recompute.split(",") if args.recompute else (),
                            acquired=args.acquired or None)
    except (BagError, ConfigError, ReplayRefused) as exc:
        print(f"replay of {args.bag} refused: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - e.g. a message layout replay cannot read
        print(f"replay of {args.bag} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print_report(report)
    for warning in report["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    damaged = not report["complete"] or bool(report["cut"])
    if not report["complete"]:
        print(f"the bag is damaged, its readable part was replayed: {report['stopped']}",
              file=sys.stderr)
    if report["cut"]:
        print("cut goals (not replayed): "
              + ", ".join(c["goal_id"][:8] for c in report["cut"]), file=sys.stderr)
    s = report["summary"]
    if not args.configuration and (s["differs"] or s["unobserved"]):
        return 1
    return 1 if (args.strict and damaged) else 0
