"""``agentic-grasp kb``: validate the knowledge base; inspect and prune acquired experiences.

- ``kb validate [PATH] [--acquired FILE]``: every problem, file:line, entry and field;
- ``kb stats [--acquired FILE]``: per category, authored and acquired counts, success rates,
  consolidated entries and what the per-category cap drops;
- ``kb list [--acquired FILE] [--goal ID] [--since T] [--until T]``: acquired records;
- ``kb export OUT [--acquired FILE] [filters]``: the selected records as JSON Lines;
- ``kb prune [--acquired FILE] (--goal ID ... | --since T --until T) [--dry-run]``: remove
  the attempts of a bad goal or a bad day (atomic rewrite; the retrieval node re-reads it);
- ``kb import FILE [--robot NAME]``: move an acquired JSONL file into the fleet store
  (PostgreSQL); each record's id is its key, so importing twice adds nothing;
- ``kb reset [--yes]``: forget what the robot learnt on this machine: remove the acquired
  experiences and the fleet spool from the per-user data folder, after asking (the authored
  knowledge base in kb_data/ and the fleet store are left alone).

``--store postgres`` makes stats / list / export / prune work on the fleet store (DSN from
$AGENTIC_GRASP_PG_DSN or libpq's PG* variables) instead of the file; ``--robot NAME``
(repeatable) keeps one robot's records.

``--acquired`` defaults to the per-user file bringup uses: acquired_experiences.jsonl in
$AGENTIC_GRASP_DATA_HOME (``agentic-grasp --data-dir``), by default
~/.local/share/agentic_grasp. Times are Unix seconds or ISO 8601 (``2026-12-01T09:00``, UTC
unless an offset is given).

Exit status: 0 done, 1 a check that failed (validate found problems, import skipped invalid
records, reset declined), 2 a usage or system error (no such file, the store unreachable).
"""
from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from agentic_grasp.core.errors import ConfigError


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
    p.add_argument("--store", choices=("file", "postgres"), default="file",
                   help="file (--acquired, default) or postgres: the fleet store, DSN from "
                   "$AGENTIC_GRASP_PG_DSN or the PG* variables")


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--robot", action="append", default=[], metavar="NAME",
                   help="only this robot's records (repeatable)")
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
    validate.add_argument("--store", choices=("file", "postgres"), default="file",
                          help="postgres: also validate every record of the fleet store")
    stats = sub.add_parser("stats", help="per category: counts, success rates, sources")
    _acquired_arg(stats)
    stats.add_argument("--json", action="store_true")
    stats.add_argument("--robot", action="append", default=[], metavar="NAME",
                       help="only this robot's records (repeatable)")
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
    imp = sub.add_parser("import", help="move an acquired JSONL file into the fleet store")
    imp.add_argument("file", help="acquired-experiences JSONL file")
    imp.add_argument("--robot", default="", help="robot name for records that carry none "
                     "(default: the host name)")
    imp.add_argument("--batch", type=int, default=1000, help="records per transaction")
    reset = sub.add_parser("reset", help="forget what the robot learnt: remove the acquired "
                           "experiences and the fleet spool of the per-user data folder, "
                           "after asking")
    reset.add_argument("--yes", "-y", action="store_true", help="do not ask")


def _path(args: argparse.Namespace) -> Path:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.retrieval.acquired.acquisition import default_acquired_path

    return Path(args.acquired) if args.acquired else default_acquired_path()


def _filter(args: argparse.Namespace):
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.retrieval.acquired.pg_store import Filter

    return Filter(robots=tuple(getattr(args, "robot", []) or ()),
                  goal_ids=tuple(getattr(args, "goal", []) or ()),
                  since=getattr(args, "since", None), until=getattr(args, "until", None))


def _import(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.retrieval.jsonl import read_jsonl
    from agentic_grasp.core.retrieval.acquired.store import FleetStore, default_robot
    from agentic_grasp.core.retrieval.taxonomy import Taxonomy
    from agentic_grasp.core.retrieval.acquired.acquisition import extend_taxonomy

    path = Path(args.file)
    if not path.is_file():
        print(f"error: {path}: no such file")
        return 2
    content = read_jsonl(path)
    robot = args.robot or default_robot()
    records = []
    for _, r in content.records:
        if isinstance(r, dict) and isinstance(r.get("acquisition"), dict) \
                and not r["acquisition"].get("robot"):
            r = {**r, "acquisition": {**r["acquisition"], "robot": robot}}
        records.append(r)
    store = FleetStore(robot=robot)
    try:
        tax = extend_taxonomy(Taxonomy.load(), records)
        added, present, problems = store.import_records(records, tax, batch=args.batch)
    finally:
        store.close()
    for line, msg in content.errors:
        print(f"error: {path}:{line}: {msg}")
    for problem in problems:
        print(f"error: {problem}")
    print(f"imported {added} new record(s) into {store.where}; {present} already there; "
          f"{len(problems) + len(content.errors)} invalid skipped")
    return 1 if problems or content.errors else 0


#: What the robot writes into the per-user data folder (core/paths.user_data_dir): the
#: acquired experiences and the fleet store's spool of records not yet sent.
LEARNT_FILES = ("acquired_experiences.jsonl", "fleet_spool.jsonl")


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


def _reset(args: argparse.Namespace, ask=input) -> int:
    """Remove LEARNT_FILES from the data folder once the user says yes: 0 removed (or
    nothing there), 1 the user declined (nothing removed)."""
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.paths import user_data_dir

    folder = user_data_dir()
    found = [folder / name for name in LEARNT_FILES if (folder / name).is_file()]
    if not found:
        print(f"nothing to reset: {folder} holds no learnt experience")
        return 0
    for path in found:
        print(f"  {path}: {_count_lines(path)} record(s)")
    if not args.yes:
        try:
            answer = ask(f"remove these {len(found)} file(s)? The robot forgets what it learnt "
                         "here (kb_data/ stays). [y/N] ")
        except EOFError:            # no terminal to ask on
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing removed (give --yes to reset without asking)")
            return 1
    for path in found:
        path.unlink()
    print(f"removed {len(found)} file(s) from {folder}: the next run starts from kb_data/ alone")
    return 0


def run(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.retrieval.acquired.pg_store import StoreUnavailable

    try:
        return _run(args)
    except (ConfigError, StoreUnavailable) as exc:
        print(f"error: {exc}")
        return 2                    # a system error, not a failed check


def _run(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.retrieval import validate_kb
    from agentic_grasp.core.retrieval.acquired import file as acquired_file
    from agentic_grasp.core.retrieval.acquired.store import FileStore, FleetStore

    if args.kb_command == "validate":
        problems = validate_kb(args.path)
        if args.acquired:
            problems += acquired_file.validate_acquired(args.acquired)
        if args.store == "postgres":
            store = FleetStore()
            try:
                problems += acquired_file.experiences_of(
                    [(f"{store.where} {r.get('id')}", r) for r in store.select()])[1]
            finally:
                store.close()
        for problem in problems:
            print(f"error: {problem}")
        if problems:
            print(f"{len(problems)} problem(s) found")
            return 1
        print("knowledge base valid" + (" (with the acquired file)" if args.acquired else "")
              + (" (with the fleet store)" if args.store == "postgres" else ""))
        return 0
    if args.kb_command == "import":
        return _import(args)
    if args.kb_command == "reset":
        return _reset(args)
    path = _path(args)
    fleet = args.store == "postgres"
    if not fleet and not path.is_file():
        if args.kb_command == "stats":
            print(acquired_file.format_stats(acquired_file.stats(None)))
            print(f"(no acquired experiences: {path} does not exist)")
            return 0
        print(f"error: {path}: no acquired-experiences file")
        return 2
    store = FleetStore() if fleet else FileStore(path)
    try:
        return _on_store(args, store, acquired_file)
    finally:
        store.close()


def _on_store(args: argparse.Namespace, store, acquired_file) -> int:
    if args.kb_command == "stats":
        if store.kind == "file" and not args.robot:
            data = acquired_file.stats(store.path)
        else:
            exps, problems = acquired_file.experiences_of(
                [(f"{store.where} {r.get('id')}", r) for r in store.select(_filter(args))])
            data = acquired_file.stats_of(exps, problems)
        print(json.dumps(data, indent=1) if args.json else acquired_file.format_stats(data))
        return 0
    flt = _filter(args)
    if args.kb_command == "list":
        for r in store.select(flt):
            acq = r.get("acquisition") or {}
            when = datetime.fromtimestamp(float(acq.get("time", 0)), timezone.utc)
            print(f"{r.get('id')}  {r.get('category'):<14} "
                  f"{'ok  ' if r.get('success') else 'FAIL'} "
                  f"{(r.get('failure_mode') or ''):<16} goal {str(acq.get('goal_id', ''))[:12]} "
                  f"{when:%Y-%m-%dT%H:%M:%SZ} {acq.get('perception_backend', '')} "
                  f"{acq.get('robot', '')}")
        return 0
    if args.kb_command == "export":
        records = store.select(flt)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                       encoding="utf-8")
        print(f"exported {len(records)} record(s) to {out}")
        return 0
    if args.kb_command == "prune":
        try:
            removed, kept = store.delete(flt, dry_run=args.dry_run)
        except ValueError as exc:
            print(f"error: {exc}")
            return 2
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb} {removed} record(s), {kept} kept in {store.where}")
        return 0
    return 2
