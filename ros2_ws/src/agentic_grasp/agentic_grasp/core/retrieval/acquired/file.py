"""The acquired-experiences file as a whole: validate, stats, list, export, prune.

Used by ``agentic-grasp kb validate --acquired / stats / list / export / prune``. The file is
the raw log (one record per attempt); consolidation is a view computed from it
(:mod:`.consolidation`), so pruning by goal id or time range removes the attempts themselves
and the retrieval node, which sees the file replaced, rebuilds its view from what is left.

Prune rewrites the file atomically: the kept lines go to a temporary file in the same folder,
fsync-ed, then ``os.replace``-d over the original under the same exclusive ``flock`` that
:func:`.jsonl.append_line` takes, so a concurrent append either lands before the rewrite (and
is kept) or after it (in the new file). A SIGKILL during prune leaves the old or the new
file, never a mix.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from agentic_grasp.core.retrieval.acquired.acquisition import extend_taxonomy
from agentic_grasp.core.retrieval.config import ConsolidationConfig
from agentic_grasp.core.retrieval.acquired.consolidation import consolidate
from agentic_grasp.core.retrieval.jsonl import read_jsonl
from agentic_grasp.core.retrieval.knowledge_base import (Experience, KnowledgeBase,
                                                         record_problems)
from agentic_grasp.core.retrieval.taxonomy import Taxonomy

PathLike = Union[str, Path]


@dataclass
class AcquiredContent:
    experiences: List[Experience]
    problems: List[str]
    warnings: List[str]


def read_acquired(path: PathLike, taxonomy: Optional[Taxonomy] = None) -> AcquiredContent:
    """Every valid record of the file, with the problems of the others (file:line, field)."""
    path = Path(path)
    base = taxonomy or Taxonomy.load()
    content = read_jsonl(path)
    problems = [f"{path}:{line}: {msg}" for line, msg in content.errors]
    warnings = []
    if content.partial_tail is not None:
        warnings.append(f"{path}:{content.partial_line}: incomplete last line without newline "
                        "(an interrupted append) ignored")
    out, found = experiences_of([(f"{path}:{line}", r) for line, r in content.records], base)
    return AcquiredContent(out, problems + found, warnings)


def experiences_of(pairs: Sequence[Tuple[str, Any]], taxonomy: Optional[Taxonomy] = None
                   ) -> Tuple[List[Experience], List[str]]:
    """(experiences, problems) of (where, record) pairs from either store: each valid
    record once (a repeated id is a problem naming both places)."""
    base = taxonomy or Taxonomy.load()
    tax = extend_taxonomy(base, [r for _, r in pairs])
    seen: Dict[str, str] = {}
    out: List[Experience] = []
    problems: List[str] = []
    for where, record in pairs:
        found = record_problems(record, where, tax)
        if found:
            problems.extend(found)
            continue
        if record["id"] in seen:
            problems.append(f"{where}: entry '{record['id']}': field 'id': duplicate of the "
                            f"entry at {seen[record['id']]}")
            continue
        seen[record["id"]] = where
        out.append(Experience.from_record(record, where))
    return out, problems


def validate_acquired(path: PathLike) -> List[str]:
    """Problems of an acquired file (ids may not repeat the authored knowledge base's)."""
    path = Path(path)
    if not path.is_file():
        return [f"{path}: no such file"]
    content = read_acquired(path)
    authored = {e.id for e in KnowledgeBase.load()}
    clash = [f"{e.source}: entry '{e.id}': field 'id': also an authored experience"
             for e in content.experiences if e.id in authored]
    return content.problems + clash + content.warnings


def stats(path: Optional[PathLike] = None,
          config: Optional[ConsolidationConfig] = None) -> Dict[str, Any]:
    """Per category: entries, attempts, success rate and sources (authored vs acquired)."""
    if path is not None and Path(path).is_file():
        content = read_acquired(path)
        return stats_of(content.experiences, content.problems, config)
    return stats_of([], [], config)


def stats_of(experiences: Sequence[Experience], problems: Sequence[str],
             config: Optional[ConsolidationConfig] = None) -> Dict[str, Any]:
    """:func:`stats` of acquired experiences from any store (consolidated over all of them:
    the fleet's records merge and are capped together, as the retrieval node serves them)."""
    kb = KnowledgeBase.load()
    rows: Dict[str, Dict[str, Any]] = defaultdict(lambda: {
        "authored": 0, "authored_successful": 0, "acquired_attempts": 0,
        "acquired_successes": 0, "acquired_entries": 0, "dropped": 0})
    for e in kb:
        r = rows[e.category]
        r["authored"] += 1
        r["authored_successful"] += int(e.success)
    for e in experiences:
        r = rows[e.category]
        r["acquired_attempts"] += 1
        r["acquired_successes"] += int(e.success)
    if experiences:
        merged, dropped = consolidate(list(experiences),
                                      config or ConsolidationConfig.from_config())
        for e in merged:
            rows[e.category]["acquired_entries"] += 1
        for d in dropped:
            rows[d.category]["dropped"] += 1
    return {"categories": dict(sorted(rows.items())), "problems": list(problems)}


def format_stats(data: Mapping[str, Any]) -> str:
    head = (f"{'category':<16} {'authored':>8} {'ok':>4} {'acq.att':>8} {'acq.ok':>7} "
            f"{'rate':>6} {'entries':>8} {'dropped':>8}")
    lines = [head, "-" * len(head)]
    for cat, r in data["categories"].items():
        n = r["acquired_attempts"]
        rate = f"{100 * r['acquired_successes'] / n:5.1f}%" if n else "    -"
        lines.append(f"{cat:<16} {r['authored']:>8} {r['authored_successful']:>4} {n:>8} "
                     f"{r['acquired_successes']:>7} {rate:>6} {r['acquired_entries']:>8} "
                     f"{r['dropped']:>8}")
    if data.get("problems"):
        lines.append(f"{len(data['problems'])} invalid acquired line(s) (kb validate "
                     "--acquired lists them)")
    return "\n".join(lines)


def _matcher(goal_ids: Sequence[str], since: Optional[float],
             until: Optional[float]) -> Callable[[Mapping[str, Any]], bool]:
    goals = [g for g in goal_ids if g]

    def match(record: Mapping[str, Any]) -> bool:
        acq = record.get("acquisition") or {}
        if not isinstance(acq, Mapping):
            return False
        gid = str(acq.get("goal_id", ""))
        if goals and not any(gid == g or gid.startswith(g) for g in goals):
            return False
        try:
            t = float(acq.get("time", -1.0))
        except (TypeError, ValueError):
            return False
        if since is not None and t < since:
            return False
        if until is not None and t > until:
            return False
        return bool(goals) or since is not None or until is not None

    return match


def select(path: PathLike, goal_ids: Sequence[str] = (), since: Optional[float] = None,
           until: Optional[float] = None) -> List[Dict[str, Any]]:
    """Records matching a goal id (or prefix) and/or a time range; all when none given."""
    content = read_jsonl(path)
    if not goal_ids and since is None and until is None:
        return [r for _, r in content.records]
    match = _matcher(goal_ids, since, until)
    return [r for _, r in content.records if isinstance(r, Mapping) and match(r)]


def prune(path: PathLike, goal_ids: Sequence[str] = (), since: Optional[float] = None,
          until: Optional[float] = None, dry_run: bool = False) -> Tuple[int, int]:
    """Remove the records matching (goal ids and/or [since, until]); (removed, kept).

    Refuses to run without a criterion. Unparsable lines are kept untouched (prune removes
    attempts, it does not repair files); a torn last line is dropped.
    """
    if not goal_ids and since is None and until is None:
        raise ValueError("kb prune needs --goal and/or --since/--until")
    return prune_matching(path, _matcher(goal_ids, since, until), dry_run)


def prune_matching(path: PathLike, match: Callable[[Mapping[str, Any]], bool],
                   dry_run: bool = False) -> Tuple[int, int]:
    """Remove the records for which ``match`` holds (atomic rewrite, module docstring)."""
    path = Path(path)
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = path.read_bytes()
        lines = data.split(b"\n")
        tail = lines.pop()          # '' after the final newline, else a torn line: dropped
        kept: List[bytes] = []
        removed = 0
        for raw in lines:
            try:
                record = json.loads(raw.decode("utf-8")) if raw.strip() else None
            except (UnicodeDecodeError, json.JSONDecodeError):
                record = None
            if isinstance(record, Mapping) and match(record):
                removed += 1
                continue
            kept.append(raw)
        del tail
        if not dry_run and removed:
            tmp = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.",
                                              delete=False)
            try:
                tmp.write(b"".join(line + b"\n" for line in kept))
                tmp.flush()
                os.fsync(tmp.fileno())
                tmp.close()
                os.chmod(tmp.name, 0o644)
                os.replace(tmp.name, path)
            except BaseException:
                tmp.close()
                if os.path.exists(tmp.name):
                    os.unlink(tmp.name)
                raise
        return removed, len(kept)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


__all__ = ["AcquiredContent", "format_stats", "prune", "prune_matching", "read_acquired",
           "experiences_of", "select", "stats", "stats_of", "validate_acquired"]
