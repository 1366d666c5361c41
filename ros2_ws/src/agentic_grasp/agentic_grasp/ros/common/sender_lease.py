"""A lease on motion: a goal whose sender dies is canceled, so the arm never outlives it.

An action client that opts in names, in its goal, the liveliness topic it announces on
(GraspObject ``sender_liveliness_topic``: ``alive/<name>``, a publisher with
:func:`~agentic_grasp.ros.common.liveness.liveliness_qos`, the same AUTOMATIC liveliness every
node of the graph announces itself with). The server watches that topic for as long as the
goal runs (:class:`SenderLease`). DDS asserts the liveliness from the sender's participant
thread, so a sender that is merely busy keeps its lease; a process that is gone (SIGKILL, a
crash) is known dead :data:`~agentic_grasp.ros.common.liveness.LEASE_S` +
:data:`~agentic_grasp.ros.common.liveness.CONFIRM_S` (1.2 s) after it, by the same rule the
planner applies to its peers (a lapse shorter than CONFIRM_S is survived).

A death is seen as the sender's liveliness going from alive to not alive, so the server must
have seen it alive before the arm moves: :meth:`SenderLease.wait_seen` holds the goal until
then (the new subscription matching the sender's writer and its first assertion: tens of ms
here, up to hundreds on a loaded machine). Without that wait a sender killed in the goal's
first few hundred ms was never seen alive, so never seen to die, and its goal ran to the end
(measured: 3 of 8 kill tries). A sender not seen within ``seen_s`` (it died while the goal was
being sent, or names a topic nobody announces) has its goal ended before anything moves.

A server keeps the lease of each sender across its goals (:class:`SenderLeases`, the last
:data:`KEEP` senders): Fast DDS reports a writer's liveliness to a reader only on a change, so a
second subscription of the same process to a sender already watched (one per goal) was never
told the sender is alive (measured: an MCP server's second goal waited out ``seen_s``).

The caller decides what a loss does (the front cancels the forwarded goal, whose cancel
reaches the executor, which aborts the arm). ROS-free checks of the name are here too.
"""
from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from functools import partial
from typing import Callable, Optional

from rclpy.node import Node

from agentic_grasp.ros.common.liveness import TOPIC_PREFIX, PeerMonitor

#: How long a named sender may stay unseen after the goal's start (s). The server already
#: holds the sender's participant (the goal came from it), so only the new subscription has
#: to match its writer: well under a second here, but at load average 28 a live MCP server
#: went unseen for 5 s (1 goal in about 30). Nothing moves while a goal waits here, so a long
#: wait costs only the goal of a sender that died while sending it.
SEEN_S = 15.0
#: Senders whose leases a server keeps (one subscription each): agents that come and go.
KEEP = 16
#: A topic name a lease may name: ``alive/`` and one ROS name token (letters, digits, ``_``).
_TOPIC = re.compile(r"^" + re.escape(TOPIC_PREFIX) + r"[A-Za-z_][A-Za-z0-9_]{0,127}$")


def check_topic(topic: str) -> str:
    """The reason ``topic`` cannot be a sender's liveliness topic, or "" when it can."""
    if not _TOPIC.match(topic):
        shown = topic if len(topic) <= 80 else topic[:80] + "..."
        return (f"sender_liveliness_topic {shown!r} is not a liveliness topic: expected "
                f"'{TOPIC_PREFIX}<name>' (letters, digits, _; at most 128 characters)")
    return ""


class SenderLease:
    """Watches one sender; ``on_lost(why)`` once, when it is dead (it never comes back: a
    sender's topic is its process's own)."""

    def __init__(self, node: Node, topic: str, on_lost: Callable[[str], None],
                 seen_s: float = SEEN_S) -> None:
        self.topic = topic
        self._name = topic[len(TOPIC_PREFIX):]
        self._on_lost: Optional[Callable[[str], None]] = on_lost
        self._fired = False
        self.why = ""
        #: how long the last wait_seen waited (s): the lease's cost on a goal's start
        self.seen_after_s = 0.0
        self._lock = threading.Lock()
        self._node = node
        self.monitor = PeerMonitor(node, [self._name], on_lost=self._lost)
        self.seen_s = seen_s

    def _fire(self, why: str) -> None:
        with self._lock:
            on_lost, self._on_lost = self._on_lost, None
            if not self._fired:
                self._fired, self.why = True, why
        if on_lost is not None:
            on_lost(why)

    def _lost(self, _peer: str) -> None:
        self._fire(f"the goal's sender ({self.topic}): "
                   + self.monitor.describe_loss(self._name))

    def wait_seen(self, stop: Callable[[], bool]) -> str:
        """Block (a goal's thread) until the sender has been seen alive: "" then, else why not
        (not within ``seen_s``); returns "" early when ``stop()`` (the goal was canceled)."""
        started = time.monotonic()
        deadline = started + self.seen_s
        poll = threading.Event()                    # never set: a sleep
        while not self.monitor.seen(self._name):
            if stop():
                return ""
            if time.monotonic() > deadline:
                return (f"the goal's sender ({self.topic}) was not seen alive within "
                        f"{self.seen_s:g} s of the goal's start (it died, or nobody announces "
                        "that topic); nothing was moved")
            poll.wait(0.01)
        self.seen_after_s = time.monotonic() - started
        return ""

    def lost(self) -> bool:
        """Whether the loss was reported."""
        with self._lock:
            return self._fired

    def destroy(self) -> None:
        """Stop watching: no loss is reported after this."""
        with self._lock:
            self._on_lost = None
        self.monitor.destroy()


class SenderLeases:
    """One :class:`SenderLease` per sender topic, kept across goals (module docstring);
    ``on_lost(topic, why)`` when a sender dies, whether or not a goal of it runs."""

    def __init__(self, node: Node, on_lost: Callable[[str, str], None],
                 seen_s: float = SEEN_S, keep: int = KEEP) -> None:
        self._node = node
        self._on_lost = on_lost
        self.seen_s = seen_s
        self.keep = keep
        self._lock = threading.Lock()
        self._leases: "OrderedDict[str, SenderLease]" = OrderedDict()

    def lease(self, topic: str) -> SenderLease:
        """``topic``'s lease (made on first use; the oldest beyond ``keep`` let go)."""
        with self._lock:
            lease = self._leases.pop(topic, None)
            if lease is None:
                lease = SenderLease(self._node, topic, partial(self._on_lost, topic),
                                    self.seen_s)
            self._leases[topic] = lease
            old = [self._leases.popitem(last=False)[1]
                   for _ in range(max(0, len(self._leases) - self.keep))]
        for gone in old:
            gone.destroy()
        return lease


__all__ = ["KEEP", "SEEN_S", "SenderLease", "SenderLeases", "check_topic"]
