"""``agentic-grasp kb``: validate the knowledge base; inspect and prune acquired experiences.

- ``kb validate [PATH] [--acquired FILE]``: every problem, file:line, entry and field;
- ``kb stats [--acquired FILE]``: per category, authored and acquired counts, success rates,
  consolidated entries and what the per-category cap drops;
- ``kb list [--acquired FILE] [--goal ID] [--since T] [--until T]``: acquired records;
- ``kb export OUT [--acquired FILE] [filters]``: the selected records as JSON Lines;
- ``kb prune [--acquired FILE] (--goal ID ... | --since T --until T) [--dry-run]``: remove
  the attempts of a bad goal or a bad day (atomic rewrite; the retrieval node re-reads it).

``--acquired`` defaults to the per-user file bringup uses
($XDG_DATA_HOME/agentic_grasp/acquired_experiences.jsonl). Times are Unix seconds or ISO 8601
(``2026-12-01T09:00``, UTC unless an offset is given).
"""
from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional


def _time(text: Optional[str]) -> Optional[float]:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (Unix seconds or ISO 8601)")
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


def _acquired_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--acquired", metavar="FILE", default=None,
                   help="acquired-experiences file (default: the per-user file of bringup)")


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--goal", action="append", default=[], metavar="ID",
                   help="goal id or its prefix (repeatable)")
    p.add_argument("--since", type=_time, default=None, help="from this time (inclusive)")
    p.add_argument("--until", type=_time, default=None, help="up to this time (inclusive)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="kb_command", metavar="KB_COMMAND")
    sub.required = True
    validate = sub.add_parser("validate", help="validate kb_data/ (or PATH) against the schema")
    validate.add_argument("path", nargs="?", default=None,
                          help="knowledge-base folder or file (default: kb_data/experiences)")
    validate.add_argument("--acquired", metavar="FILE", default=None,
                          help="also validate this acquired-experiences file")
    stats = sub.add_parser("stats", help="per category: counts, success rates, sources")
    _acquired_arg(stats)
    stats.add_argument("--json", action="store_true")
    listing = sub.add_parser("list", help="list acquired experiences")
    _acquired_arg(listing)
    _filters(listing)
    export = sub.add_parser("export", help="write selected acquired experiences as JSONL")
    export.add_argument("out", help="output .jsonl file")
    _acquired_arg(export)
    _filters(export)
    prune = sub.add_parser("prune", help="remove acquired experiences by goal id / time range")
    _acquired_arg(prune)
    _filters(prune)
    prune.add_argument("--dry-run", action="store_true", help="only count what would go")


def _path(args: argparse.Namespace) -> Path:
    from agentic_grasp.core.retrieval.acquisition import default_acquired_path

    return Path(args.acquired) if args.acquired else default_acquired_path()


def run(args: argparse.Namespace) -> int:
    from agentic_grasp.core.retrieval import acquired_file, validate_kb

    if args.kb_command == "validate":
        problems = validate_kb(args.path)
        if args.acquired:
            problems += acquired_file.validate_acquired(args.acquired)
        for problem in problems:
            print(f"error: {problem}")
        if problems:
            print(f"{len(problems)} problem(s) found")
            return 1
        print("knowledge base valid" + (" (with the acquired file)" if args.acquired else ""))
        return 0
    path = _path(args)
    if args.kb_command == "stats":
        data = acquired_file.stats(path if path.is_file() else None)
        print(json.dumps(data, indent=1) if args.json else acquired_file.format_stats(data))
        if not path.is_file():
            print(f"(no acquired experiences: {path} does not exist)")
        return 0
    if not path.is_file():
        print(f"error: {path}: no acquired-experiences file")
        return 1
    if args.kb_command == "list":
        for r in acquired_file.select(path, args.goal, args.since, args.until):
            acq = r.get("acquisition") or {}
            when = datetime.fromtimestamp(float(acq.get("time", 0)), timezone.utc)
            print(f"{r.get('id')}  {r.get('category'):<14} "
                  f"{'ok  ' if r.get('success') else 'FAIL'} "
                  f"{(r.get('failure_mode') or ''):<16} goal {str(acq.get('goal_id', ''))[:12]} "
                  f"{when:%Y-%m-%dT%H:%M:%SZ} {acq.get('perception_backend', '')}")
        return 0
    if args.kb_command == "export":
        records = acquired_file.select(path, args.goal, args.since, args.until)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                       encoding="utf-8")
        print(f"exported {len(records)} record(s) to {out}")
        return 0
    if args.kb_command == "prune":
        try:
            removed, kept = acquired_file.prune(path, args.goal, args.since, args.until,
                                                dry_run=args.dry_run)
        except ValueError as exc:
            print(f"error: {exc}")
            return 2
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb} {removed} record(s), {kept} kept in {path}")
        return 0
    return 2
