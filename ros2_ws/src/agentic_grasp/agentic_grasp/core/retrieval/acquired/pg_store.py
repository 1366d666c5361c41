"""The fleet's acquired experiences in PostgreSQL (psycopg 3): one table, many robots.

Why a database: several robots (processes, machines) add attempts at once and every retrieval
node must see what any of them learned by its next request. PostgreSQL gives transactions
(an attempt is committed whole or not at all: a writer SIGKILLed mid-transaction leaves
nothing), many concurrent writers, LISTEN/NOTIFY for live pick-up, and the lab's standard
backup. Similarity stays in the retrieval node's in-memory index (pgvector is not packaged
for Debian 12): the database is the durable, shared record, not the search engine.

Connection: a DSN from ``AGENTIC_GRASP_PG_DSN`` (``postgresql://user@host:port/db`` or
``host=... dbname=...``), else libpq's own ``PG*`` variables (``PGHOST``, ``PGPORT``,
``PGDATABASE``, ``PGUSER``, ``PGPASSWORD`` or ``~/.pgpass``). A password never goes in a
params file; error messages name the host, port and database, never the password.

Schema (versioned, :data:`MIGRATIONS`; ``agentic_grasp_schema`` holds the versions applied):
each acquired record is one row of ``acquired_experience`` keyed by its ``id`` (carried in the
record, unique per attempt), so importing a file twice or replaying a spool after a crash adds
nothing (``ON CONFLICT (id) DO NOTHING``). The provenance columns (robot, goal, subgoal,
attempt, time, perception backend, configuration) are copied out of the record for filters
(``kb list --robot``, a retrieval filter on ``perception_backend``); the record itself is the
``jsonb`` column, exactly as the JSONL file holds it. Migrations run under an advisory lock,
so four planners starting at once migrate once. A database whose schema is newer than this
code is refused with its version.

Reading in commit order: ``seq`` (bigserial) is assigned at insert, not at commit, so a reader
that only asked for ``seq > last`` could skip a row whose transaction committed after a later
one. Each row also stores its transaction id (``xid8``); a poll reads the rows whose xid is at
least the ``xmin`` of the previous poll's snapshot (every transaction below it had finished),
and drops those it has already seen by seq. Deletes (``kb prune``) bump a generation counter:
a reader that sees it change starts again from the top.
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from agentic_grasp.core.errors import ConfigError

_LOG = logging.getLogger(__name__)

#: The one DSN variable (libpq's PG* variables are used when it is unset).
DSN_ENV = "AGENTIC_GRASP_PG_DSN"
#: NOTIFY channel the insert and delete triggers signal on.
CHANNEL = "agentic_grasp_acquired"
#: pg_advisory_xact_lock key of the migrations ('agrasp' in ASCII).
MIGRATION_LOCK = 0x616772617370
#: Newest schema version this code knows.
SCHEMA_VERSION = 1

MIGRATIONS: Dict[int, Sequence[str]] = {
    1: (
        """CREATE TABLE acquired_experience (
            seq bigserial PRIMARY KEY,
            id text NOT NULL UNIQUE,
            robot text NOT NULL,
            goal_id text NOT NULL,
            subgoal integer NOT NULL DEFAULT 0,
            attempt integer NOT NULL DEFAULT 0,
            time double precision NOT NULL,
            perception_backend text NOT NULL,
            configuration text NOT NULL,
            category text NOT NULL,
            success boolean NOT NULL,
            record jsonb NOT NULL,
            xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
            committed_at timestamptz NOT NULL DEFAULT clock_timestamp())""",
        "CREATE INDEX acquired_experience_robot_time ON acquired_experience (robot, time)",
        "CREATE INDEX acquired_experience_time ON acquired_experience (time)",
        "CREATE INDEX acquired_experience_xid ON acquired_experience (xid)",
        """CREATE TABLE agentic_grasp_generation (
            one boolean PRIMARY KEY DEFAULT true CHECK (one),
            generation bigint NOT NULL)""",
        "INSERT INTO agentic_grasp_generation VALUES (true, 0)",
        f"""CREATE FUNCTION agentic_grasp_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_notify('{CHANNEL}', 'insert'); RETURN NULL; END $$""",
        f"""CREATE FUNCTION agentic_grasp_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              UPDATE agentic_grasp_generation SET generation = generation + 1;
              PERFORM pg_notify('{CHANNEL}', 'reset'); RETURN NULL;
            END $$""",
        """CREATE TRIGGER acquired_experience_insert AFTER INSERT ON acquired_experience
            FOR EACH STATEMENT EXECUTE FUNCTION agentic_grasp_on_insert()""",
        """CREATE TRIGGER acquired_experience_delete AFTER DELETE OR TRUNCATE
            ON acquired_experience FOR EACH STATEMENT EXECUTE FUNCTION agentic_grasp_on_delete()""",
    ),
}

_COLUMNS = ("id", "robot", "goal_id", "subgoal", "attempt", "time", "perception_backend",
            "configuration", "category", "success", "record")
_AUTH_STATES = {"28000", "28P01", "3D000", "42501"}
_AUTH_WORDS = ("password authentication failed", "authentication failed", "does not exist",
               "no pg_hba.conf entry", "permission denied", "no password supplied")


class StoreUnavailable(OSError):
    """The database cannot be reached now (down, restarting, network): spool and retry."""


class StoreConfigError(ConfigError):
    """The database refuses us for good (credentials, unknown database, newer schema)."""


def resolve_dsn(dsn: Optional[str] = None) -> str:
    """``dsn``, else $AGENTIC_GRASP_PG_DSN, else '' (libpq then reads its PG* variables)."""
    if dsn:
        return dsn
    return os.environ.get(DSN_ENV, "")


def describe_dsn(dsn: str) -> str:
    """'host H port P database D user U' of ``dsn`` and the PG* variables; no password."""
    try:
        from psycopg.conninfo import conninfo_to_dict  # psycopg: optional, the fleet store only

        info = conninfo_to_dict(dsn) if dsn else {}
    except Exception:  # noqa: BLE001 - an unparsable DSN: name what the environment says
        info = {}
    host = info.get("host") or os.environ.get("PGHOST") or "localhost (default socket)"
    port = info.get("port") or os.environ.get("PGPORT") or "5432"
    db = info.get("dbname") or os.environ.get("PGDATABASE") or \
        info.get("user") or os.environ.get("PGUSER") or "(the user's name)"
    user = info.get("user") or os.environ.get("PGUSER") or "(the login name)"
    return f"host {host} port {port} database {db} user {user}"


def _scrub(text: str, dsn: str) -> str:
    """``text`` without any password the DSN or PGPASSWORD holds."""
    secrets = [os.environ.get("PGPASSWORD", "")]
    match = re.search(r"password\s*=\s*'?([^'\s]+)", dsn or "")
    if match:
        secrets.append(match.group(1))
    match = re.search(r"://[^:/@]*:([^@]*)@", dsn or "")
    if match:
        secrets.append(match.group(1))
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def connect(dsn: str, timeout_s: float = 3.0, application: str = "agentic_grasp"):
    """An autocommit psycopg connection; StoreConfigError or StoreUnavailable naming where."""
    import psycopg  # optional (requirements.in): only the fleet store needs it

    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, int(timeout_s)),
                               application_name=application)
    except psycopg.Error as exc:
        first = _scrub(str(exc).strip().splitlines()[-1] if str(exc).strip() else
                       type(exc).__name__, dsn)
        where = describe_dsn(dsn)
        state = getattr(exc, "sqlstate", None)
        if state in _AUTH_STATES or any(w in str(exc) for w in _AUTH_WORDS):
            raise StoreConfigError(f"PostgreSQL fleet store at {where}: refused: {first} "
                                   f"(check {DSN_ENV} or the PG* variables, ~/.pgpass)") \
                from None
        raise StoreUnavailable(f"PostgreSQL fleet store at {where} is not reachable: "
                               f"{first}") from None


def migrate(conn, dsn: str = "") -> int:
    """Bring the schema to :data:`SCHEMA_VERSION` (once, under an advisory lock); the
    version. A schema newer than this code is refused (StoreConfigError)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS agentic_grasp_schema (version integer "
                     "PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
        row = conn.execute("SELECT coalesce(max(version), 0) FROM agentic_grasp_schema")
        version = int(row.fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreConfigError(
                f"PostgreSQL fleet store at {describe_dsn(dsn)}: schema version {version} is "
                f"newer than this agentic_grasp knows ({SCHEMA_VERSION}); upgrade "
                "agentic_grasp on this robot")
        for v in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[v]:
                conn.execute(statement)
            conn.execute("INSERT INTO agentic_grasp_schema (version) VALUES (%s)", (v,))
            _LOG.info("fleet store: schema migrated to version %d", v)
    return SCHEMA_VERSION


def row_of(record: Mapping[str, Any], robot: str = "") -> Tuple[Any, ...]:
    """The table row of one acquired record (provenance columns + the record as jsonb)."""
    from psycopg.types.json import Jsonb  # psycopg: optional, see connect

    acq = record.get("acquisition") or {}
    return (str(record["id"]), str(acq.get("robot") or robot or ""),
            str(acq.get("goal_id", "")), int(acq.get("subgoal", 0) or 0),
            int(acq.get("attempt", 0) or 0), float(acq.get("time", 0.0) or 0.0),
            str(acq.get("perception_backend", "")), str(acq.get("configuration", "")),
            str(record.get("category", "")), bool(record.get("success")), Jsonb(dict(record)))


_INSERT = (f"INSERT INTO acquired_experience ({', '.join(_COLUMNS)}) VALUES "
           f"({', '.join(['%s'] * len(_COLUMNS))}) ON CONFLICT (id) DO NOTHING")


@dataclass
class Filter:
    """Which records a listing / prune / retrieval means (all given criteria must hold)."""

    robots: Sequence[str] = ()
    goal_ids: Sequence[str] = ()          # a goal id or its prefix
    since: Optional[float] = None
    until: Optional[float] = None
    perception_backends: Sequence[str] = ()

    def empty(self) -> bool:
        return not (self.robots or self.goal_ids or self.perception_backends) and \
            self.since is None and self.until is None

    def sql(self) -> Tuple[str, List[Any]]:
        """A WHERE clause ('' when empty) and its parameters."""
        parts: List[str] = []
        args: List[Any] = []
        if self.robots:
            parts.append("robot = ANY(%s)")
            args.append(list(self.robots))
        if self.goal_ids:
            parts.append("(" + " OR ".join(["goal_id LIKE %s"] * len(self.goal_ids)) + ")")
            args.extend(g.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
                        for g in self.goal_ids)
        if self.since is not None:
            parts.append("time >= %s")
            args.append(float(self.since))
        if self.until is not None:
            parts.append("time <= %s")
            args.append(float(self.until))
        if self.perception_backends:
            parts.append("perception_backend = ANY(%s)")
            args.append(list(self.perception_backends))
        return (" WHERE " + " AND ".join(parts)) if parts else "", args


@dataclass
class PostgresStore:
    """Reads and writes ``acquired_experience`` (module docstring). Not thread-safe: one
    connection; the retrieval side's listener has its own (:class:`Listener`)."""

    dsn: str = ""
    timeout_s: float = 3.0
    application: str = "agentic_grasp"
    _conn: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.dsn = resolve_dsn(self.dsn)

    @property
    def where(self) -> str:
        return describe_dsn(self.dsn)

    def connection(self):
        """The open connection (connected and migrated on first use)."""
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = connect(self.dsn, self.timeout_s, self.application)
        try:
            migrate(conn, self.dsn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _run(self, fn):
        """fn(connection); a lost connection becomes StoreUnavailable (and is dropped)."""
        import psycopg  # optional, see connect

        conn = self.connection()
        try:
            return fn(conn)
        except psycopg.OperationalError as exc:
            self.close()
            raise StoreUnavailable(f"PostgreSQL fleet store at {self.where}: "
                                   f"{_scrub(str(exc).strip(), self.dsn)}") from None

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            self._conn = None

    # ---- writing -------------------------------------------------------------------------
    def insert(self, records: Iterable[Mapping[str, Any]], robot: str = "",
               batch: int = 1000) -> int:
        """Insert records (one transaction per ``batch``); how many were new."""
        rows = [row_of(r, robot) for r in records]

        def work(conn) -> int:
            added = 0
            for lo in range(0, len(rows), max(1, batch)):
                with conn.transaction():
                    with conn.cursor() as cur:
                        for row in rows[lo:lo + batch]:
                            cur.execute(_INSERT, row)
                            added += max(cur.rowcount, 0)
            return added

        return self._run(work)

    def delete(self, flt: Filter, dry_run: bool = False) -> Tuple[int, int]:
        """Remove matching records (one transaction); (removed, kept)."""
        where, args = flt.sql()
        if not where:
            raise ValueError("kb prune needs --robot, --goal and/or --since/--until")

        def work(conn) -> Tuple[int, int]:
            with conn.transaction():
                if dry_run:
                    n = conn.execute(f"SELECT count(*) FROM acquired_experience{where}",
                                     args).fetchone()[0]
                else:
                    n = conn.execute(f"DELETE FROM acquired_experience{where}", args).rowcount
                total = conn.execute("SELECT count(*) FROM acquired_experience").fetchone()[0]
            return int(n), int(total) - (int(n) if dry_run else 0)

        return self._run(work)

    # ---- reading -------------------------------------------------------------------------
    def select(self, flt: Optional[Filter] = None) -> List[Dict[str, Any]]:
        """Matching records in insertion order."""
        where, args = (flt or Filter()).sql()
        return self._run(lambda conn: [r[0] for r in conn.execute(
            f"SELECT record FROM acquired_experience{where} ORDER BY seq", args)])

    def count(self) -> int:
        return int(self._run(lambda c: c.execute(
            "SELECT count(*) FROM acquired_experience").fetchone()[0]))

    def read_since(self, xmin: Optional[int], seen: Dict[int, None],
                   flt: Optional[Filter] = None, after_seq: Optional[int] = None,
                   limit: Optional[int] = None
                   ) -> Tuple[List[Tuple[int, Dict[str, Any], str]], int, int]:
        """(new (seq, record, record as JSON text) triples, this snapshot's xmin, generation).
        The text is the server's (one line): the local cache writes it as it is, with no
        second encoding (a third of the CPU of a 10^6-record start-up).

        ``xmin`` given: the rows whose transaction id is at least ``xmin`` (the previous
        snapshot's: every row committed since), minus the ``seen`` seqs (module doc).
        ``xmin`` None: a page of the whole table, ``limit`` rows with seq > ``after_seq`` in
        seq order (a full read pages through the table, keeping the FIRST page's xmin so the
        incremental reads after it miss nothing committed meanwhile).
        """
        where, args = (flt or Filter()).sql()
        if xmin is not None:
            cond, extra = "xid >= %s::text::xid8", [str(xmin)]
        else:
            cond, extra = "seq > %s", [int(after_seq or 0)]
        clause = f"{where} AND {cond}" if where else f" WHERE {cond}"
        tail = " ORDER BY seq" + (" LIMIT %s" if limit else "")
        params = args + extra + ([int(limit)] if limit else [])

        # One statement, one round trip: a statement (autocommit, READ COMMITTED) runs on
        # one snapshot, and pg_current_snapshot() is that statement's, so the xmin and
        # generation returned are those of the very snapshot the rows were read from (four
        # round trips before: BEGIN REPEATABLE READ, snapshot, rows, COMMIT; each a wake-up
        # of this process, which on a loaded machine is what the pick-up delay is made of).
        # The LEFT JOIN returns the snapshot row even when no record is new.
        sql = (f"WITH snap AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin, "
               f"generation FROM agentic_grasp_generation), "
               f"rows AS (SELECT seq, record::text AS record FROM acquired_experience"
               f"{clause}{tail}) "
               f"SELECT snap.xmin, snap.generation, rows.seq, rows.record "
               f"FROM snap LEFT JOIN rows ON true ORDER BY rows.seq")

        def work(conn):
            found = conn.execute(sql, params).fetchall()
            loads = json.loads
            new = [(int(s), loads(r), r) for _, _, s, r in found
                   if s is not None and int(s) not in seen]
            return new, int(found[0][0]), int(found[0][1])

        return self._run(work)


class Listener:
    """LISTEN on :data:`CHANNEL` in a thread: ``pending`` is set on every notification and
    after every (re)connect; ``connected`` says whether the server is reachable now."""

    def __init__(self, dsn: str, retry_s: float = 1.0, timeout_s: float = 3.0) -> None:
        self.dsn = resolve_dsn(dsn)
        self.retry_s = float(retry_s)
        self.timeout_s = float(timeout_s)
        self.pending = threading.Event()
        self.connected = threading.Event()
        self.reconnects = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._conn: Any = None
        self._thread = threading.Thread(target=self._loop, name="fleet-listen", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn = connect(self.dsn, self.timeout_s, "agentic_grasp-listen")
            except (StoreUnavailable, StoreConfigError) as exc:
                self.last_error = str(exc)
                self._stop.wait(self.retry_s)
                continue
            self._conn = conn
            try:
                conn.execute(f"LISTEN {CHANNEL}")
                self.connected.set()
                self.reconnects += 1
                self.pending.set()       # whatever happened while away: read it now
                while not self._stop.is_set():
                    for _ in conn.notifies(timeout=0.5):
                        self.pending.set()
                    conn.execute("SELECT 1")      # notices a server that went away
            except Exception as exc:  # noqa: BLE001 - any loss: reconnect after a pause
                self.last_error = _scrub(str(exc), self.dsn)
            finally:
                self.connected.clear()
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass
                self._conn = None
            self._stop.wait(self.retry_s)

    def wait_connected(self, timeout: float) -> bool:
        return self.connected.wait(timeout)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)


__all__ = ["CHANNEL", "DSN_ENV", "Filter", "Listener", "MIGRATIONS", "PostgresStore",
           "SCHEMA_VERSION", "StoreConfigError", "StoreUnavailable", "connect", "describe_dsn",
           "migrate", "resolve_dsn", "row_of"]
