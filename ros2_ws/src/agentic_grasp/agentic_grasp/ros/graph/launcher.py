"""Starts the node graph as child processes and stops it cleanly (no ros2 launch needed).

Each node runs as ``python -m <module> --ros-args -r __node:=<name> --params-file ...``.
SIGINT/SIGTERM to the launcher forwards SIGINT to every child (rclpy's clean shutdown), waits,
then escalates to SIGTERM and SIGKILL, so no node outlives the launcher. Before it escalates,
it names each node still running and has it write its threads' stacks (ros/common/runner.py).

Each bringup has its own run folder (graph.new_run_dir, removed at its stop): the sim keeps its
world there, so a sim restarted within the run comes back in it, and the next bringup starts
its configured scene.

With supervision on (``agentic-grasp bringup``; :meth:`Launcher.supervise`), a node that dies
is restarted after a delay with backoff and given up on after repeated crashes, following
core.supervision; the other nodes are not touched. The recorder is never restarted (its bag
folder exists by then; a second writer would refuse it).

Bringup says "ready" once every node has logged that every service and action it calls is
discovered (:data:`agentic_grasp.ros.common.readiness.READY_MARK`, read from the node's
output): a node's own "ready" says only that its servers exist, not that its callers see
them yet (:mod:`agentic_grasp.ros.common.readiness`). It is said once, for the start; a
restarted node's callers rediscover it through their peer calls (common.peer_call).

A node killed while it creates its DDS participant (the last-resort SIGKILL here, a crash)
can leave a shared-memory port that hangs every later participant taking it
(:mod:`agentic_grasp.ros.common.fastdds_shm`). The launcher removes the Fast DDS files no process
holds before it starts the graph, after any of its nodes died by a signal other than SIGINT,
and before it restarts such a node.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from agentic_grasp.core import paths
from agentic_grasp.core.supervision import (DEFAULT_POLICY, STACKS_SIGNAL, TEARDOWN_SIGNAL,
                                            CrashHistory, RestartPolicy)
from agentic_grasp.ros.common import fastdds_shm
from agentic_grasp.ros.common.readiness import READY_MARK
from agentic_grasp.ros.graph.description import (DEFAULT_ARGS, RECORDER, NodeSpec, new_run_dir,
                                                 selected_nodes)


#: How long a node still running after SIGINT is given to write its stacks (s): faulthandler
#: writes them from its signal handler, without the GIL, in milliseconds.
STACKS_WAIT_S = 0.5


def killed_by_signal(code: Optional[int]) -> bool:
    """Whether an exit code is a death by a signal other than SIGINT (the orderly stop):
    such a process may have been building its participant (module docstring)."""
    return code is not None and code < 0 and code != -signal.SIGINT


def _ros_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def node_command(spec: NodeSpec, args: Dict[str, str],
                 extra: Optional[Dict[str, object]] = None) -> List[str]:
    cmd = [sys.executable, "-u", "-m", spec.module, "--ros-args", "-r", f"__node:={spec.name}"]
    params = paths.config_dir() / spec.params_file
    if params.is_file():
        cmd += ["--params-file", str(params)]
    if args.get("params_file"):
        cmd += ["--params-file", str(Path(args["params_file"]).resolve())]
    params = {**spec.overrides({**DEFAULT_ARGS, **args}), **(extra or {})}
    for key, value in params.items():
        cmd += ["-p", f"{key}:={_ros_value(value)}"]
    return cmd


class Launcher:
    """Owns the child processes of one bringup."""

    def __init__(self, args: Dict[str, str], log_prefix: bool = True,
                 env: Optional[Dict[str, str]] = None,
                 extra_params: Optional[Dict[str, Dict[str, object]]] = None,
                 only: Optional[Sequence[str]] = None) -> None:
        self.args = {**DEFAULT_ARGS, **{k: v for k, v in args.items() if v is not None}}
        self.procs: Dict[str, subprocess.Popen] = {}
        self._extra = extra_params or {}
        self._only = set(only) if only else None
        self._log_prefix = log_prefix
        self._env = {**os.environ, **(env or {})}
        # Nodes started without scripts/env.sh get its Fast DDS profile too (large captures).
        self._env.setdefault("FASTRTPS_DEFAULT_PROFILES_FILE",
                             str(paths.config_dir() / "fastdds_localhost.xml"))
        self._threads: List[threading.Thread] = []
        self._specs: Dict[str, NodeSpec] = {}
        self._history: Dict[str, CrashHistory] = {}
        self._pending: Dict[str, float] = {}        # node -> monotonic time of its restart
        self._started: Dict[str, float] = {}        # node -> monotonic time of its start
        self._procs_lock = threading.RLock()
        self._stopping = threading.Event()
        self._supervisor: Optional[threading.Thread] = None
        #: Set once every started node has logged READY_MARK (module docstring).
        self.ready = threading.Event()
        self._ready_nodes: set = set()
        self._t0 = time.monotonic()
        self._all_started = False

    def start(self) -> None:
        """Start the selected nodes, and the recorder first when ``record`` names a folder
        (so the latched topics and the first messages land in the bag)."""
        fastdds_shm.remove_stale()
        self._t0 = time.monotonic()
        # the run's own folder: the sim keeps its world there, and a respawned sim restores it
        self.args.setdefault("run_dir", str(new_run_dir()))
        if self.args.get("record"):
            self.args["record"] = str(Path(self.args["record"]).resolve())
            self.start_node(RECORDER)
        for spec in selected_nodes(self.args):
            if self._only is None or spec.name in self._only:
                self.start_node(spec)
        self._all_started = True
        self._node_ready("", None)                 # all may have said it already
    def start_node(self, spec: NodeSpec) -> subprocess.Popen:
        """Start (or restart) one node's process."""
        proc = subprocess.Popen(node_command(spec, self.args, self._extra.get(spec.name)),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=self._env, text=True, bufsize=1, start_new_session=True)
        with self._procs_lock:
            self.procs[spec.name] = proc
            self._specs[spec.name] = spec
            self._started[spec.name] = time.monotonic()
            self._ready_nodes.discard(spec.name)
        thread = threading.Thread(target=self._pump, args=(spec.name, proc), daemon=True)
        thread.start()
        self._threads.append(thread)
        return proc

    def kill_node(self, name: str) -> None:
        """SIGKILL one node (tests of a dead peer)."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5.0)
        fastdds_shm.remove_stale()

    def restart_node(self, name: str) -> subprocess.Popen:
        spec = next(s for s in selected_nodes(self.args) if s.name == name)
        return self.start_node(spec)

    def _pump(self, name: str, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stderr.write(f"[{name}] {line}" if self._log_prefix else line)
            if READY_MARK in line:
                self._node_ready(name, proc)

    def _node_ready(self, name: str, proc: Optional[subprocess.Popen]) -> None:
        """``name`` discovered every peer it calls (``proc`` None: only check); bringup is
        ready when all nodes have, once all were started."""
        with self._procs_lock:
            if proc is not None:
                if self.procs.get(name) is not proc:   # an earlier instance's last words
                    return
                self._ready_nodes.add(name)
            # the recorder calls nobody and nobody calls it (and it is no spin_node node)
            waited = {n for n in self.procs if n != RECORDER.name}
            if self.ready.is_set() or not self._all_started \
                    or not waited <= self._ready_nodes:
                return
            self.ready.set()
        self._say(f"ready: every node's services and actions are discovered by the nodes "
                  f"that call them ({time.monotonic() - self._t0:.1f} s after start)")

    def wait_ready(self, timeout_s: float) -> bool:
        """Whether bringup became ready (module docstring) within ``timeout_s``."""
        return self.ready.wait(timeout_s)

    def dead(self) -> List[str]:
        with self._procs_lock:
            return [name for name, p in self.procs.items() if p.poll() is not None]

    # ---- supervision --------------------------------------------------------------------------
    def supervise(self, policy: RestartPolicy = DEFAULT_POLICY, poll_s: float = 0.1) -> None:
        """Restart nodes that die, in a background thread, until :meth:`stop`."""
        with self._procs_lock:
            for name in self.procs:
                if name != RECORDER.name:
                    self._history.setdefault(name, CrashHistory(name, policy))
        self._supervisor = threading.Thread(target=self._supervise, args=(poll_s,),
                                            name="bringup_supervisor", daemon=True)
        self._supervisor.start()

    def restarts(self) -> Dict[str, int]:
        """How often each supervised node was restarted so far."""
        return {name: h.restarts for name, h in self._history.items()}

    def given_up(self) -> Dict[str, str]:
        """Nodes no longer restarted, with the reason."""
        return {name: h.gave_up for name, h in self._history.items() if h.gave_up}

    def _say(self, text: str) -> None:
        sys.stderr.write(f"[bringup] {text}\n")

    def _supervise(self, poll_s: float) -> None:
        while not self._stopping.wait(poll_s):
            now = time.monotonic()
            with self._procs_lock:
                for name, proc in list(self.procs.items()):
                    history = self._history.get(name)
                    if proc.poll() is None or name in self._pending:
                        continue
                    if history is None:
                        if name == RECORDER.name and not getattr(proc, "_reported", False):
                            self._say("recorder exited; not restarted (the bag is closed)")
                            proc._reported = True  # type: ignore[attr-defined]
                        continue
                    if history.gave_up:
                        continue
                    decision = history.on_exit(proc.returncode, now,
                                               up_s=now - self._started.get(name, now))
                    self._say(decision.reason)
                    if decision.restart:
                        self._pending[name] = now + decision.delay_s
                for name, at in list(self._pending.items()):
                    if now >= at and not self._stopping.is_set():
                        del self._pending[name]
                        if killed_by_signal(self.procs[name].returncode):
                            fastdds_shm.remove_stale()
                        self.start_node(self._specs[name])
                        self._say(f"{name} restarted (restart {self._history[name].restarts})")

    def stop(self, timeout_s: float = 5.0) -> Dict[str, int]:
        """SIGINT every child, then SIGTERM, then SIGKILL; returns exit codes."""
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=2.0)
        started = time.monotonic()
        for sig, wait in ((signal.SIGINT, timeout_s), (signal.SIGTERM, 2.0),
                          (signal.SIGKILL, 2.0)):
            alive = [p for p in self.procs.values() if p.poll() is None]
            if not alive:
                break
            if sig == signal.SIGTERM:
                self._ask_for_stacks(time.monotonic() - started)
            for proc in alive:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait
            for proc in alive:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        for thread in self._threads:
            thread.join(timeout=1.0)
        codes = {name: p.returncode for name, p in self.procs.items()}
        for name, code in codes.items():
            if code == -TEARDOWN_SIGNAL:
                self._say(f"{name} stopped, but its DDS teardown hung and its watchdog ended "
                          "it (Fast DDS deadlock: ros/common/runner.py)")
        if any(killed_by_signal(code) for code in codes.values()):
            fastdds_shm.remove_stale()
        if self.args.get("run_dir"):
            shutil.rmtree(self.args["run_dir"], ignore_errors=True)
        return codes

    def _ask_for_stacks(self, after_s: float) -> None:
        """Name the nodes still running after SIGINT and have each write its threads' stacks
        (core.supervision.STACKS_SIGNAL; a node that does not handle it ends by it, as it
        was about to be ended anyway)."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                continue
            self._say(f"{name} still running {after_s:.1f} s after "
                      f"SIGINT; its threads' stacks follow, then SIGTERM")
            try:
                os.kill(proc.pid, STACKS_SIGNAL)
            except ProcessLookupError:
                pass
        time.sleep(STACKS_WAIT_S)

    def wait_forever(self, supervise: bool = True) -> int:
        """Block until a signal arrives; then stop everything.

        With ``supervise`` a dead node is restarted (see :meth:`supervise`) and bringup ends
        on its own only once it has given up on every node; without it, the first node that
        exits stops the whole graph (status 1).
        """
        stop = threading.Event()
        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
        if supervise:
            self.supervise()
        try:
            while not stop.wait(0.2):
                if supervise:
                    supervised = [n for n in self.procs if n != RECORDER.name]
                    if supervised and all(n in self.given_up() for n in supervised):
                        self._say("no node left running; shutting down")
                        break
                    continue
                dead = self.dead()
                if dead:
                    self._say(f"node(s) exited: {', '.join(dead)}; shutting down")
                    break
        finally:
            codes = self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0 if stop.is_set() else 1 if any(codes.values()) else 0
