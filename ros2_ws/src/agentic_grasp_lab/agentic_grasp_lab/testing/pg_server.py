"""A throw-away PostgreSQL server for the fleet-store tests and ``bench fleet``.

Debian's PostgreSQL 15 binaries (``initdb``, ``pg_ctl``; /usr/lib/postgresql/15/bin, or
$AGENTIC_GRASP_PG_BIN; ``scripts/setup.sh --with-postgres`` installs them) make a cluster in a
temporary folder that listens on a free loopback port only, with password (SCRAM) auth over
TCP so a wrong password is really refused. initdb and the server refuse to run as root: as
root they run as the ``postgres`` user (runuser), the folder chowned to it. ``stop`` and
``kill`` (SIGKILL of the postmaster, for the "database gone mid-run" tests) and ``start``
again on the same port and data.
"""
from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Optional

DEFAULT_BIN = "/usr/lib/postgresql/15/bin"


def pg_bin() -> Path:
    """The folder of initdb and pg_ctl; FileNotFoundError (with the fix) when absent."""
    folder = Path(os.environ.get("AGENTIC_GRASP_PG_BIN", DEFAULT_BIN))
    for tool in ("initdb", "pg_ctl", "postgres"):
        if not (folder / tool).is_file():
            raise FileNotFoundError(
                f"PostgreSQL 15 server binaries not found ({folder / tool}): run "
                "scripts/setup.sh --with-postgres (apt-get install postgresql-15) or set "
                "AGENTIC_GRASP_PG_BIN")
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """initdb + pg_ctl in a temporary folder (module docstring)."""

    def __init__(self, port: Optional[int] = None, user: str = "agentic") -> None:
        self.bin = pg_bin()
        self.port = port or free_port()
        self.user = user
        self.password = secrets.token_hex(12)
        self.root = Path(tempfile.mkdtemp(prefix="agentic-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as: List[str] = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self._as:
            os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", user,
                   "--pwfile", str(pwfile), "--auth-local=scram-sha-256",
                   "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"])
        pwfile.unlink()
        with open(self.data / "postgresql.conf", "a") as fh:
            fh.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                     f"unix_socket_directories = '{self.root}'\nfsync = on\n"
                     "max_connections = 100\nshared_buffers = 32MB\n")
        self.start()

    def _run(self, cmd: List[str], check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(self._as + cmd, check=check, capture_output=True, text=True,
                              timeout=120)

    def dsn(self, dbname: str = "postgres", password: Optional[str] = None) -> str:
        pw = self.password if password is None else password
        return (f"host=127.0.0.1 port={self.port} dbname={dbname} user={self.user} "
                f"password={pw} connect_timeout=3")

    def start(self) -> None:
        result = self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l",
                            str(self.log), "-w", "-t", "60", "start"], check=False)
        if result.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {result.stderr}\n{tail}")

    def stop(self, mode: str = "fast") -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"],
                  check=False)

    def kill(self) -> None:
        """SIGKILL the postmaster (the database "gone" mid-run), then reap its children."""
        pid_file = self.data / "postmaster.pid"
        if not pid_file.exists():
            return
        pid = int(pid_file.read_text().splitlines()[0])
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        time.sleep(0.5)                  # the backends notice the postmaster is gone

    def create_database(self, name: str) -> str:
        import psycopg      # the fleet store's driver, needed only once a server runs

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


__all__ = ["PgServer", "free_port", "pg_bin"]
