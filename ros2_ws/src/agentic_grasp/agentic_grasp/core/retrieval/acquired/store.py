"""Where acquired experiences live: two stores behind one small interface.

- ``file`` (the embedded default): today's JSON Lines file, one ``O_APPEND`` write + fsync per
  record (:mod:`.jsonl`), followed by append offset (:class:`.live.AcquiredLog`).
- ``postgres`` (the fleet store, :mod:`.pg_store`): many robots append to one table and every
  retrieval node follows it through LISTEN/NOTIFY.

Both offer ``append(record, taxonomy)``, ``select(Filter)``, ``delete(Filter, dry_run)`` and
``source()`` (what :class:`.live.LiveRetriever` polls), so the planner's Acquirer, the
retrieval node and ``agentic-grasp kb`` do not care which one is configured. Authored
experiences stay read-only files in kb_data/ either way.

Faults of the fleet store lose nothing:

- **Database gone mid-run**: :class:`FleetStore.append` writes the record to a local spool
  file with the file store's crash-safety (one O_APPEND write, fsync) and says "spool"; the
  next append (at most every ``retry_s``) replays the spool in one transaction with
  ``ON CONFLICT (id) DO NOTHING`` and only then truncates it, so a crash between the two
  replays again and adds nothing.
- **Database down at start**: :class:`FleetSource` serves the local cache (the fleet records
  this node last read from the database) plus this robot's spool, says so, and switches to
  the database, reading it whole, once its listener reconnects.
"""
from __future__ import annotations

import fcntl
import logging
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple, Union

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.paths import user_data_dir
from agentic_grasp.core.retrieval.acquired.acquisition import extend_taxonomy
from agentic_grasp.core.retrieval.acquired.file import prune_matching
from agentic_grasp.core.retrieval.acquired.live import AcquiredLog, LogChunk
from agentic_grasp.core.retrieval.jsonl import append_line, read_jsonl
from agentic_grasp.core.retrieval.knowledge_base import record_problems
from agentic_grasp.core.retrieval.acquired.pg_store import (Filter, Listener, PostgresStore,
                                                            StoreConfigError, StoreUnavailable,
                                                            describe_dsn)
from agentic_grasp.core.retrieval.taxonomy import Taxonomy

_LOG = logging.getLogger(__name__)

STORES = ("file", "postgres")
PathLike = Union[str, Path]


def data_dir() -> Path:
    """The per-user data folder (core/paths.user_data_dir)."""
    return user_data_dir()


def default_robot() -> str:
    """The robot's name when none is configured: the host name (one robot per machine)."""
    return (socket.gethostname() or "robot")[:64]


def resolve_local(value: str, name: str) -> Path:
    """'' / 'default' -> ``data_dir() / name``; anything else is the path itself."""
    text = (value or "").strip()
    return data_dir() / name if text in ("", "default") else Path(text).expanduser()


def check_store(kind: str) -> str:
    kind = (kind or "file").strip().lower()
    if kind not in STORES:
        raise ValidationError(f"unknown experience store {kind!r} (one of {', '.join(STORES)})")
    return kind


def _validate(record: Mapping[str, Any], where: str, taxonomy: Optional[Taxonomy]) -> None:
    """Nothing the loader would reject enters a store (``taxonomy`` None: kb_data's, with
    the link the record itself names for a category it does not know)."""
    if taxonomy is None:
        taxonomy = extend_taxonomy(Taxonomy.load(), [record])
    problems = record_problems(dict(record), where, taxonomy)
    if problems:
        raise ValidationError("; ".join(problems))


def record_matches(record: Mapping[str, Any], flt: Filter) -> bool:
    """The file-side twin of :meth:`.pg_store.Filter.sql` (records without a robot have
    robot '')."""
    acq = record.get("acquisition") or {}
    if not isinstance(acq, Mapping):
        return flt.empty()
    if flt.robots and str(acq.get("robot", "")) not in flt.robots:
        return False
    gid = str(acq.get("goal_id", ""))
    if flt.goal_ids and not any(gid.startswith(g) for g in flt.goal_ids if g):
        return False
    if flt.perception_backends and str(acq.get("perception_backend", "")) \
            not in flt.perception_backends:
        return False
    if flt.since is not None or flt.until is not None:
        try:
            t = float(acq.get("time", -1.0))
        except (TypeError, ValueError):
            return False
        if (flt.since is not None and t < flt.since) or (flt.until is not None and
                                                          t > flt.until):
            return False
    return True


class FileStore:
    """Today's JSON Lines file (module docstring)."""

    kind = "file"

    def __init__(self, path: PathLike, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync

    @property
    def where(self) -> str:
        return str(self.path)

    def append(self, record: Mapping[str, Any], taxonomy: Optional[Taxonomy] = None) -> str:
        _validate(record, str(self.path), taxonomy)
        append_line(self.path, dict(record), fsync=self.fsync)
        return "file"

    def select(self, flt: Optional[Filter] = None) -> List[Dict[str, Any]]:
        if not self.path.is_file():
            return []
        flt = flt or Filter()
        return [r for _, r in read_jsonl(self.path).records
                if isinstance(r, Mapping) and record_matches(r, flt)]

    def delete(self, flt: Filter, dry_run: bool = False) -> Tuple[int, int]:
        if flt.empty():
            raise ValueError("kb prune needs --robot, --goal and/or --since/--until")
        return prune_matching(self.path, lambda r: record_matches(r, flt), dry_run)

    def source(self):
        return AcquiredLog(self.path)

    def close(self) -> None:
        pass


class FleetStore:
    """The PostgreSQL fleet store with this robot's spool (module docstring)."""

    kind = "postgres"

    def __init__(self, dsn: str = "", spool_path: Optional[PathLike] = None,
                 robot: str = "", retry_s: float = 5.0, fsync: bool = True,
                 timeout_s: float = 3.0) -> None:
        self.pg = PostgresStore(dsn, timeout_s=timeout_s)
        self.spool_path = Path(spool_path) if spool_path else resolve_local("",
                                                                            "fleet_spool.jsonl")
        self.robot = robot
        self.retry_s = float(retry_s)
        self.fsync = fsync
        self.spooled = 0
        self.replayed = 0
        self._next_try = 0.0

    @property
    def where(self) -> str:
        return f"postgres ({self.pg.where})"

    def append(self, record: Mapping[str, Any], taxonomy: Optional[Taxonomy] = None) -> str:
        """'db' when committed, 'spool' when the database is away (durable locally)."""
        _validate(record, self.where, taxonomy)
        if self._spool_size() and not self.replay():
            return self._spool(record)
        if time.monotonic() < self._next_try:
            return self._spool(record)
        try:
            self.pg.insert([record], self.robot)
        except (StoreUnavailable, StoreConfigError) as exc:
            # refused credentials mid-run (a rotated password) lose nothing either: the
            # attempt waits in the spool like in an outage, and the error is logged
            (_LOG.error if isinstance(exc, StoreConfigError) else _LOG.warning)(
                "%s; spooling to %s until it returns", exc, self.spool_path)
            self._next_try = time.monotonic() + self.retry_s
            return self._spool(record)
        return "db"

    def check(self) -> str:
        """Connect once (the planner does at start-up): StoreConfigError for refused
        credentials or an unknown schema version; '' when connected, else why not (the
        database is away: appends spool until it returns)."""
        try:
            self.pg.connection()
        except StoreUnavailable as exc:
            return str(exc)
        return ""

    def _spool(self, record: Mapping[str, Any]) -> str:
        append_line(self.spool_path, dict(record), fsync=self.fsync)
        self.spooled += 1
        return "spool"

    def _spool_size(self) -> int:
        try:
            return self.spool_path.stat().st_size
        except FileNotFoundError:
            return 0

    def replay(self, force: bool = False) -> bool:
        """Move the spool into the database; True when the spool is empty afterwards."""
        if not self._spool_size():
            return True
        if not force and time.monotonic() < self._next_try:
            return False
        fd = os.open(self.spool_path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            records = [r for _, r in read_jsonl(self.spool_path).records
                       if isinstance(r, Mapping)]
            try:
                added = self.pg.insert(records, self.robot, batch=max(1, len(records)))
            except (StoreUnavailable, StoreConfigError):
                self._next_try = time.monotonic() + self.retry_s
                return False
            os.ftruncate(fd, 0)          # only after the commit: a crash here replays again
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self.replayed += added
        _LOG.info("fleet store back: replayed %d spooled record(s) (%d new)", len(records),
                  added)
        return True

    def select(self, flt: Optional[Filter] = None) -> List[Dict[str, Any]]:
        return self.pg.select(flt)

    def delete(self, flt: Filter, dry_run: bool = False) -> Tuple[int, int]:
        return self.pg.delete(flt, dry_run)

    def import_records(self, records: List[Mapping[str, Any]], taxonomy: Taxonomy,
                       batch: int = 1000) -> Tuple[int, int, List[str]]:
        """(added, already there, problems): valid records inserted, ``batch`` per
        transaction; an invalid one is reported and skipped."""
        ok, problems = [], []
        for i, r in enumerate(records, start=1):
            found = record_problems(dict(r) if isinstance(r, Mapping) else r,
                                    f"record {i}", taxonomy)
            if found:
                problems.extend(found)
            else:
                ok.append(r)
        added = self.pg.insert(ok, self.robot, batch=batch)
        return added, len(ok) - added, problems

    def source(self, cache_path: Optional[PathLike] = None,
               flt: Optional[Filter] = None) -> "FleetSource":
        return FleetSource(self.pg.dsn, cache_path, self.spool_path, flt=flt)

    def close(self) -> None:
        self.pg.close()


def open_store(kind: str, path: Optional[PathLike] = None, robot: str = "",
               spool_path: Optional[PathLike] = None, dsn: str = "", fsync: bool = True):
    """A FileStore on ``path`` or a FleetStore on the DSN (the environment's by default)."""
    if check_store(kind) == "file":
        if path is None:
            raise ValidationError("the file store needs its path")
        return FileStore(path, fsync=fsync)
    return FleetStore(dsn, spool_path, robot=robot, fsync=fsync)


def _write_lines(path: Path, lines: List[str], replace: bool) -> None:
    """The local cache (one JSON text per record, as the server wrote it): whole (atomic
    replace) or appended in one write; no fsync (a torn tail is dropped on read, and the
    database is the record)."""
    data = "".join(t + "\n" for t in lines).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    if replace:
        tmp = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.",
                                          delete=False)
        with tmp:
            tmp.write(data)
        os.replace(tmp.name, path)
    elif data:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


class FleetSource:
    """What a LiveRetriever follows with the fleet store: the database (LISTEN/NOTIFY, read
    in commit order), this robot's spool, and, while the database is away at start, the
    local cache. Yields :class:`.live.LogChunk`s; a record id is yielded once."""

    #: Rows were schema-validated by their writer (LiveRetriever then checks lightly).
    validated_at_write = True

    def __init__(self, dsn: str = "", cache_path: Optional[PathLike] = None,
                 spool_path: Optional[PathLike] = None, flt: Optional[Filter] = None,
                 retry_s: float = 1.0, page: int = 20000) -> None:
        self.pg = PostgresStore(dsn, application="agentic_grasp-retrieval")
        self.flt = flt
        self.name = f"postgres ({describe_dsn(self.pg.dsn)})"
        self.cache_path = Path(cache_path) if cache_path else resolve_local(
            "", "fleet_cache.jsonl")
        self.spool_path = Path(spool_path) if spool_path else None
        self._spool_log = AcquiredLog
        self._spool = AcquiredLog(self.spool_path) if self.spool_path else None
        self._ids: Set[str] = set()
        self._seen: Dict[int, None] = {}
        self._xmin: Optional[int] = None
        self._xmin_start = 0
        self._after = 0
        self._generation: Optional[int] = None
        #: Rows per page of a full read (bounds memory at 10^6 records); ``backlog``: more
        #: pages to come.
        self.page = int(page)
        self.backlog = False
        self.status = ""
        try:
            self.pg.connection()       # StoreConfigError (credentials, schema) propagates
            self.online = True
            self.status = f"following {self.name}"
        except StoreUnavailable as exc:
            self.online = False
            self.status = (f"{exc}: serving the authored knowledge base + the local cache "
                           f"{self.cache_path} + spool; the database is read once it returns")
            _LOG.warning(self.status)
        self._offline_loaded = False
        self._lost_at = (0, time.monotonic())
        self.listener = Listener(self.pg.dsn, retry_s=retry_s)
        if self.online:
            self.listener.wait_connected(3.0)

    def _fresh(self, records: List[Tuple[Any, Any]], out: List[Tuple[Any, Any]]) -> None:
        for line, r in records:
            rid = r.get("id") if isinstance(r, Mapping) else None
            if isinstance(rid, str):
                if rid in self._ids:
                    continue
                self._ids.add(rid)
            out.append((line, r))

    def poll(self):
        chunk = LogChunk()
        if not self.online and not self._offline_loaded:
            self._offline_loaded = True
            if self.cache_path.is_file():
                content = read_jsonl(self.cache_path)
                self._fresh([(f"cache {n}", r) for n, r in content.records], chunk.records)
        if not self.online and self._back():
            self.online = True
            self.status = f"following {self.name} (back after an outage)"
            _LOG.info(self.status)
            self._restart(chunk)
            self.listener.pending.set()      # read it whole now
        if self.online and self.listener.pending.is_set():
            self.listener.pending.clear()
            self._read_db(chunk)
        if self._spool is not None:
            part = self._spool.poll()
            self._fresh([(f"spool {n}", r) for n, r in part.records], chunk.records)
        return chunk

    def wait(self, timeout: float) -> bool:
        """Block until the listener has news (a notification, a reconnect) or ``timeout``
        seconds passed; True when a poll has something to read. LiveRetriever's pick-up
        thread waits here, so a commit is read, consolidated and indexed when its
        notification arrives, not by the next request."""
        return self.listener.pending.wait(timeout) or (not self.online and self._back())

    def _back(self) -> bool:
        """The listener reconnected since we lost the database (or, should only our own
        connection have failed, it has stayed connected for ``2 x retry`` since)."""
        if not self.listener.connected.is_set():
            return False
        return self.listener.reconnects > self._lost_at[0] or \
            time.monotonic() - self._lost_at[1] > 2 * self.listener.retry_s

    def _restart(self, chunk) -> None:
        """Start again from the top (a prune, or the database back after an outage)."""
        chunk.reset = True
        chunk.records.clear()
        self._ids.clear()
        self._seen.clear()
        self._xmin = None
        self._after = 0
        if self.spool_path is not None:
            self._spool = self._spool_log(self.spool_path)

    def _read_db(self, chunk) -> None:
        """New rows (incremental), or the next page of a full read (``backlog`` stays True
        and ``pending`` set until the last page: LiveRetriever keeps polling)."""
        full = self._xmin is None
        try:
            if full:
                new, xmin, generation = self.pg.read_since(None, self._seen, self.flt,
                                                           self._after, self.page)
            else:
                new, xmin, generation = self.pg.read_since(self._xmin, self._seen, self.flt)
        except StoreUnavailable as exc:
            self.online = False
            self.backlog = False         # a full read cut short starts again on return
            self._offline_loaded = True  # keep serving what we have
            self._lost_at = (self.listener.reconnects, time.monotonic())
            self.status = f"{exc}: keeping the records read so far"
            _LOG.warning(self.status)
            return
        if self._generation is not None and generation != self._generation:
            self._restart(chunk)         # records were deleted: read everything again
            self._generation = generation
            self.listener.pending.set()
            self.backlog = True
            return
        self._generation = generation
        first_page = full and self._after == 0
        if first_page:
            self._xmin_start = xmin
        for seq, _, _ in new:
            self._seen[seq] = None
        if full:
            self._after = new[-1][0] if new else self._after
            self.backlog = len(new) >= self.page
            if self.backlog:
                self.listener.pending.set()
            else:
                self._xmin = self._xmin_start
        else:
            self._xmin = xmin
        records = [(f"seq {s}", r) for s, r, _ in new]
        self._fresh(records, chunk.records)
        try:
            _write_lines(self.cache_path, [t for _, _, t in new], replace=first_page)
        except OSError as exc:
            _LOG.warning("fleet cache %s not written: %s", self.cache_path, exc)

    def close(self) -> None:
        self.listener.close()
        self.pg.close()


__all__ = ["FileStore", "FleetSource", "FleetStore", "STORES", "check_store", "data_dir",
           "default_robot", "open_store", "record_matches", "resolve_local"]
