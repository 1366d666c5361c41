"""``agentic-grasp eval retrieval``: Table IV (P@1, P@3, MRR, affordance match) beside the
paper; with ``--breadth N``, Table IV at catalogue breadth, judged by outcome
(evaluation/studies/retrieval_breadth.py)."""
from __future__ import annotations

import argparse
import json
import secrets
import sys

#: one-line help of ``eval`` in ``agentic-grasp --help`` (read through the entry point)
HELP = "evaluations against the paper's tables: retrieval (Table IV)"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value < 2 ** 32:
        raise argparse.ArgumentTypeError(f"must be in [0, 2^32), got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="eval_command", metavar="WHAT")
    sub.required = True
    retrieval = sub.add_parser("retrieval", help="Table IV: HAA-RAG vs the CLIP-only baseline")
    retrieval.add_argument("--json", action="store_true", help="machine-readable output")
    retrieval.add_argument(
        "--breadth", type=_positive, default=None, metavar="N",
        help="Table IV at catalogue breadth: N query objects drawn from procedural scenes "
             "(novel objects included), a strategy relevant when it grasps the object at its "
             "first attempt in the simulator; HAA-RAG, CLIP-only and category-only")
    retrieval.add_argument(
        "--scene-seed", type=_seed, default=None, metavar="S",
        help="with --breadth: the procedural scene seed the queries come from (default: "
             "drawn now and printed)")


def run(args: argparse.Namespace) -> int:
    if args.breadth is None:
        if args.scene_seed is not None:
            print("--scene-seed applies to --breadth only", file=sys.stderr)
            return 2
        # on use: cli.py imports every command's module to build its parser
        from agentic_grasp.core.retrieval import evaluate_retrieval, format_table

        results = evaluate_retrieval()
        if args.json:
            print(json.dumps(results, indent=2, default=str))
        else:
            print(format_table(results))
        return 0
    # on use: the breadth study loads the simulator and the planner's configuration
    from agentic_grasp_lab.evaluation.studies.retrieval_breadth import (evaluate_breadth,
                                                                        format_breadth)

    seed = args.scene_seed if args.scene_seed is not None else secrets.randbelow(2 ** 31)
    print(f"scene seed {seed}", file=sys.stderr if args.json else sys.stdout, flush=True)
    results = evaluate_breadth(args.breadth, seed)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    else:
        print(format_breadth(results))
    return 0
