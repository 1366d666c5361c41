"""``agentic-grasp eval retrieval``: Table IV (P@1, P@3, MRR, affordance match) beside the paper."""
from __future__ import annotations

import argparse
import json

#: one-line help of ``eval`` in ``agentic-grasp --help`` (read through the entry point)
HELP = "evaluations against the paper's tables: retrieval (Table IV)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="eval_command", metavar="WHAT")
    sub.required = True
    retrieval = sub.add_parser("retrieval", help="Table IV: HAA-RAG vs the CLIP-only baseline")
    retrieval.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.retrieval import evaluate_retrieval, format_table

    results = evaluate_retrieval()
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    else:
        print(format_table(results))
    return 0
