"""When to restart a node that died: delay with backoff, and when to give up (ROS-free).

``agentic-grasp bringup`` (launcher.Launcher) asks a :class:`CrashHistory` per node what to do
with each exit; ``launch/bringup.launch.py`` gives ``ros2 launch`` the same first delay and a
bound on restarts (``respawn_delay``, ``respawn_max_retries``), which is all launch offers.

The policy: the n-th crash within ``window_s`` is restarted after ``delay_s * backoff**(n-1)``
(capped at ``max_delay_s``); the (``max_crashes`` + 1)-th crash within the window gives up on
that node, the rest of the graph keeps running. A node that exits with :data:`EXIT_CONFIG`
(its configuration cannot work, e.g. a corrupt knowledge base) is not restarted at all: a
restart would read the same files and fail the same way. A clean exit (0, or the SIGINT
codes) is not a crash either: someone stopped it on purpose.

Backoff is for a node that crashes as it starts. A node that had been up for ``stable_s``
before it died was not crash-looping (a SIGKILL from outside, a fault mid-run): it is
restarted after the first delay again, and only the quick crashes in a row since count for the
backoff. Without that, the fifth death of a sim within a minute, each after it had served for
seconds, waited 8 s before its restart and was back 11 s after it died; with it, 2-3 s. Every
crash still counts towards ``max_crashes``.

Why these numbers: the first delay (0.5 s) is short so a killed node is back within the 5 s
the planner's clients are promised (a node process starts in 1.5-3 s on the 2-core test
machines); ``stable_s`` (5 s) is past that start, so a node dying during it keeps backing off;
doubling to at most 8 s keeps a node that crashes at start from burning a core in
a tight loop; 5 crashes in 60 s is a node that will not stay up, which a human has to look at.
"""
from __future__ import annotations

import faulthandler
import signal
from collections import deque
from dataclasses import dataclass
from typing import Deque, Optional

from agentic_grasp.core.errors import ConfigError

#: The signal on which a node writes every thread's Python stack to stderr
#: (:func:`enable_stack_dumps`); the launcher sends it to a node still running after SIGINT,
#: before it escalates.
STACKS_SIGNAL = signal.SIGUSR1
#: The signal that ends a node whose DDS teardown hangs (ros/common/runner.py: a Fast DDS 2.14
#: deadlock between its event thread and a receiving thread), after its stacks are written;
#: its process then ends with status -SIGALRM (-14).
TEARDOWN_SIGNAL = signal.SIGALRM
#: Exit status of a node whose configuration cannot work (sysexits.h EX_CONFIG): never
#: restarted, since a restart would fail the same way.
EXIT_CONFIG = 78
#: Exit statuses of a node stopped on purpose (0, SIGINT as -2 from Popen or 130 from a
#: shell, SIGTERM as -15 or 143, and the teardown watchdog's -14 or 142: it is armed only
#: once the node has stopped): not crashes.
CLEAN_EXITS = frozenset({0, -int(signal.SIGINT), 128 + int(signal.SIGINT),
                         -int(signal.SIGTERM), 128 + int(signal.SIGTERM),
                         -int(TEARDOWN_SIGNAL), 128 + int(TEARDOWN_SIGNAL)})


@dataclass(frozen=True)
class RestartPolicy:
    delay_s: float = 0.5
    backoff: float = 2.0
    max_delay_s: float = 8.0
    max_crashes: int = 5
    window_s: float = 60.0
    stable_s: float = 5.0

    def __post_init__(self) -> None:
        if not (self.delay_s >= 0.0 and self.backoff >= 1.0 and self.max_delay_s >= self.delay_s
                and self.max_crashes >= 0 and self.window_s > 0.0 and self.stable_s >= 0.0):
            raise ConfigError(f"invalid restart policy {self}")


#: The policy of bringup and of the launch file.
DEFAULT_POLICY = RestartPolicy()


@dataclass(frozen=True)
class Decision:
    restart: bool
    delay_s: float
    reason: str


class CrashHistory:
    """The crashes of one node, and what to do about the latest exit."""

    def __init__(self, name: str, policy: RestartPolicy = DEFAULT_POLICY) -> None:
        self.name = name
        self.policy = policy
        self._crashes: Deque[float] = deque()
        self._quick = 0           # crashes in a row, each within stable_s of its start
        self.restarts = 0
        self.gave_up: Optional[str] = None

    def on_exit(self, code: Optional[int], now: float,
                up_s: Optional[float] = None) -> Decision:
        """Decide after the node's process ended with ``code`` at ``now`` (monotonic s),
        ``up_s`` after it was started (None: unknown, every crash in the window backs off)."""
        p = self.policy
        if code == EXIT_CONFIG:
            return self._give_up(f"{self.name} stopped with a configuration error (exit "
                                 f"{EXIT_CONFIG}, message above); not restarted: a restart "
                                 "would fail the same way")
        if code in CLEAN_EXITS:
            return self._give_up(f"{self.name} exited cleanly (status {code}); not restarted")
        while self._crashes and now - self._crashes[0] > p.window_s:
            self._crashes.popleft()
        self._crashes.append(now)
        n = len(self._crashes)
        if n > p.max_crashes:
            return self._give_up(f"{self.name} crashed {n} times within {p.window_s:g} s "
                                 f"(last status {code}); giving up on it, the rest keeps "
                                 "running")
        if up_s is None:
            streak = n
        else:             # a node that had been up stable_s was not crashing at its start
            self._quick = 1 if up_s >= p.stable_s else self._quick + 1
            streak = min(self._quick, n)
        delay = min(p.max_delay_s, p.delay_s * p.backoff ** (streak - 1))
        self.restarts += 1
        return Decision(True, delay, f"{self.name} died (status {code}), crash {n} within "
                                     f"{p.window_s:g} s; restarting in {delay:.1f} s")

    def _give_up(self, reason: str) -> Decision:
        self.gave_up = reason
        return Decision(False, 0.0, reason)


def enable_stack_dumps() -> None:
    """In a node process: write every thread's stack to stderr on :data:`STACKS_SIGNAL` and
    before a crash (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) ends the process, so a node that
    will not stop, or dies in native code, leaves word of where it was."""
    faulthandler.enable(all_threads=True)
    faulthandler.register(STACKS_SIGNAL, all_threads=True)
    # the teardown watchdog's signal: stacks first, then its default action ends the process
    faulthandler.register(TEARDOWN_SIGNAL, all_threads=True, chain=True)


def arm_teardown_watchdog(seconds: float) -> None:
    """End this process by :data:`TEARDOWN_SIGNAL` (stacks written first, when
    :func:`enable_stack_dumps` ran) if it is still running ``seconds`` from now. Armed once a
    node has stopped serving, before its DDS entities are destroyed: a deadlock there holds
    the GIL, so only a signal's default action can end the process (ros/common/runner.py)."""
    signal.setitimer(signal.ITIMER_REAL, seconds)


__all__ = ["CLEAN_EXITS", "CrashHistory", "DEFAULT_POLICY", "Decision", "EXIT_CONFIG",
           "RestartPolicy", "STACKS_SIGNAL", "TEARDOWN_SIGNAL", "arm_teardown_watchdog",
           "enable_stack_dumps"]
