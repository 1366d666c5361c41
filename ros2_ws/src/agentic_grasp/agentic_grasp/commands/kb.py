"""``agentic-grasp kb validate``: check every knowledge-base file against its schema."""
from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="kb_command", metavar="KB_COMMAND")
    sub.required = True
    validate = sub.add_parser("validate", help="validate kb_data/ (or PATH) against the schema")
    validate.add_argument("path", nargs="?", default=None,
                          help="knowledge-base folder or file (default: kb_data/experiences)")


def run(args: argparse.Namespace) -> int:
    from agentic_grasp.core.retrieval import validate_kb

    problems = validate_kb(args.path)
    for problem in problems:
        print(f"error: {problem}")
    if problems:
        print(f"{len(problems)} problem(s) found")
        return 1
    print("knowledge base valid")
    return 0
