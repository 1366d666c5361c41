"""A real two-node Ray cluster on this machine: a head and a worker node, each its own
``ray start --block`` process group, for the executor tests and the overhead benchmark.

Why process groups: ``ray stop`` stops every Ray process of the machine (another user's
cluster too), so this helper only ever signals the groups it started. ``kill_worker()``
SIGKILLs the worker node's group (raylet, its workers): a node dying mid-sweep.
Memory is kept small for a shared machine: 1 CPU per node, a small object store, no
dashboard.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

#: Object store of each node (bytes); a sweep's results are a few kB per unit.
OBJECT_STORE_BYTES = 80 * 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_cli() -> List[str]:
    exe = Path(sys.executable).with_name("ray")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ray.scripts.scripts"]


class LocalRayCluster:
    """``with LocalRayCluster() as cluster:`` -> ``cluster.address`` for ``ray.init``."""

    def __init__(self, worker_cpus: int = 1, head_cpus: int = 1,
                 start_timeout_s: float = 90.0,
                 extra_env: Optional[Dict[str, str]] = None) -> None:
        self.head_cpus, self.worker_cpus = int(head_cpus), int(worker_cpus)
        self.timeout = float(start_timeout_s)
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        # short: Ray's unix socket paths must stay under ~107 characters
        self.temp_dir = tempfile.mkdtemp(prefix="agr", dir="/tmp")
        self.head: Optional[subprocess.Popen] = None
        self.worker: Optional[subprocess.Popen] = None
        # Ray's token authentication with a token of this cluster's own (a driver joins with
        # ``driver_env()``), and fast node-failure detection, so a killed node's tasks are
        # retried within seconds
        self.token = secrets.token_hex(16)
        self.env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.token,
                        RAY_health_check_period_ms="500",
                        RAY_health_check_timeout_ms="1000",
                        RAY_health_check_failure_threshold="3",
                        RAY_USAGE_STATS_ENABLED="0", **(extra_env or {}))

    def _start(self, args: List[str], log: str) -> subprocess.Popen:
        out = open(os.path.join(self.temp_dir, log), "wb")
        return subprocess.Popen(_ray_cli() + ["start", "--block"] + args, stdout=out,
                                stderr=subprocess.STDOUT, env=self.env,
                                start_new_session=True)

    def start(self) -> "LocalRayCluster":
        common = ["--object-store-memory", str(OBJECT_STORE_BYTES), "--disable-usage-stats"]
        self.head = self._start(["--head", "--port", str(self.port), "--node-ip-address",
                                 "127.0.0.1", "--num-cpus", str(self.head_cpus),
                                 "--include-dashboard=false", "--temp-dir", self.temp_dir]
                                + common, "head.log")
        self._wait_nodes(1)
        self.worker = self._start(["--address", self.address, "--node-ip-address",
                                   "127.0.0.1", "--num-cpus", str(self.worker_cpus)]
                                  + common, "worker.log")
        self._wait_nodes(2)
        return self

    def driver_env(self) -> Dict[str, str]:
        """The variables a driver process needs to join (set them before ``ray.init``)."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}

    def alive_nodes(self) -> int:
        """Alive nodes as the head's GCS reports them (``ray status``, no driver needed)."""
        proc = subprocess.run(_ray_cli() + ["status", "--address", self.address],
                              capture_output=True, text=True, env=self.env, timeout=60)
        text = proc.stdout
        if "Active:" not in text:
            return 0
        block = text.split("Active:", 1)[1].split("Pending:", 1)[0]
        return sum(1 for line in block.splitlines() if "node_" in line)

    def _wait_nodes(self, n: int) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for proc, name in ((self.head, "head"), (self.worker, "worker")):
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"ray {name} node exited: {self.log(name)}")
            if self.alive_nodes() >= n:
                return
            time.sleep(0.5)
        raise RuntimeError(f"Ray cluster did not reach {n} node(s) in {self.timeout:.0f} s: "
                           f"{self.log('head')[-2000:]}")

    def log(self, name: str) -> str:
        path = os.path.join(self.temp_dir, f"{name}.log")
        try:
            return Path(path).read_text(errors="replace")
        except OSError:
            return ""

    def on_worker_node(self, pid: int) -> bool:
        """True when process ``pid`` descends from the worker node's ``ray start`` process
        (the raylet's task workers are its children; they may lead process groups of their
        own, so the parent chain is read, not the group)."""
        if self.worker is None:
            return False
        pid = int(pid)
        for _ in range(64):
            if pid == self.worker.pid:
                return True
            if pid <= 1:
                return False
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return False
            pid = int(stat[1])                  # the parent
        return False

    def kill_worker(self) -> None:
        """SIGKILL the worker node: its raylet, object store and workers, no clean-up (its
        process group, and every process descending from it that left the group)."""
        if self.worker is None:
            return
        strays = [int(e.name) for e in Path("/proc").iterdir()
                  if e.name.isdigit() and int(e.name) != self.worker.pid
                  and self.on_worker_node(int(e.name))]
        _kill_group(self.worker, signal.SIGKILL)
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self) -> None:
        """Stop both nodes (SIGTERM, then SIGKILL what is left) and remove the temp dir."""
        for proc in (self.worker, self.head):
            if proc is not None:
                _kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 20.0
        for proc in (self.worker, self.head):
            if proc is None:
                continue
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _kill_group(proc, signal.SIGKILL)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        _kill_stragglers(self.temp_dir)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> "LocalRayCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_stragglers(temp_dir: str) -> None:
    """Processes that left the groups but name this cluster's temp dir (only those)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if temp_dir in cmd:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


__all__ = ["LocalRayCluster", "OBJECT_STORE_BYTES"]
