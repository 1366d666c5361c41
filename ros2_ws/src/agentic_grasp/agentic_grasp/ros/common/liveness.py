"""Peer liveness over DDS: a node whose process dies is known dead within about 1.2 s.

Every node announces itself (``announce``, called by common.runner.spin_node): one publisher on
``alive/<node name>`` (std_msgs/Empty; nothing is ever published on it) with AUTOMATIC
liveliness and a lease of :data:`LEASE_S`. The DDS participant asserts that liveliness from
its own thread (rmw_fastrtps announces every 2/3 of the lease), so a node that is merely busy
(a Python callback holding the GIL for a render) stays alive, and a process that is gone
(SIGKILL, a segfault) is reported not alive by every subscriber within about one lease.
Graph discovery alone notices a killed process only when the participant's lease ends (Fast
DDS: 20 s by default), which is what made a dead peer cost a full per-call timeout.

A lapse is not a death. DDS reports "not alive" as soon as one lease passes without an
assertion, which a stalled machine (a frozen container, a VM's stolen time, both ends
delayed at once) produces for a peer that is alive: with a 1 s liveliness lease, whose
assertions came every 0.67 s, a 0.33 s stall was enough, and CI saw live peers declared dead.
So the lease is short (assertions often) and the verdict is :data:`CONFIRM_S` later: a peer
that DDS says is not alive and that has not come back after CONFIRM_S is dead; one that comes
back sooner had a lapse (counted, see :meth:`PeerMonitor.lapses`). A death is then known
LEASE_S + CONFIRM_S after it, and a stall up to CONFIRM_S + LEASE_S / 3 is survived. A node
that shuts down in order removes its writer, which DDS reports as such (no lease ran out):
that peer is dead at once. SIGKILL and SIGSTOP look the same to DDS (measured: both "not
alive" 0.52 s after the signal with a 1 s lease; SIGCONT: alive again within 1 ms).

:class:`PeerMonitor` subscribes to the peers' announcements and calls ``on_lost(peer)`` when a
peer that was alive is dead by that rule, ``on_back(peer)`` when a lost peer returns (a
respawned node announces itself again). A peer never seen alive is not "lost": a wait for it
to appear is the caller's own timeout (e.g. "service did not appear").
"""
from __future__ import annotations

import threading
import time
from functools import partial
from typing import Callable, Dict, Iterable, Optional

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.duration import Duration
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.exceptions import InvalidHandle
from rclpy.node import Node
from rclpy.qos import (DurabilityPolicy, LivelinessPolicy, QoSProfile, ReliabilityPolicy)
from std_msgs.msg import Empty

#: Liveliness lease (s). Short so that assertions come often (every 2/3 lease, about 0.17 s):
#: the part of a stall DDS itself forgives is LEASE_S / 3, the rest is CONFIRM_S's.
LEASE_S = 0.25
#: Time (s) a peer may stay "not alive" before it is dead. A goal has 2 s from a
#: peer's death to its end. With the old 1 s lease the kill test's goals ended 0.34-0.63 s
#: after SIGKILL, and DDS's "not alive" comes 1/3 to 1 lease after a death, so the planner's
#: wind-down after the verdict (the running call's cancel, the result, the goal log) is under
#: 0.3 s. LEASE_S + CONFIRM_S = 1.2 s leaves 0.8 s of the 2 s for it, and a stall of up to
#: CONFIRM_S + LEASE_S / 3 = 1.03 s, three times the 0.33 s the 1 s lease survived, is a lapse.
CONFIRM_S = 0.95
TOPIC_PREFIX = "alive/"


def liveliness_qos(lease_s: float = LEASE_S) -> QoSProfile:
    return QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE,
                      liveliness=LivelinessPolicy.AUTOMATIC,
                      liveliness_lease_duration=Duration(seconds=lease_s))


def topic(peer: str) -> str:
    return TOPIC_PREFIX + peer


def announce(node: Node, lease_s: float = LEASE_S):
    """The publisher whose liveliness stands for ``node``'s (keep it as long as the node)."""
    return node.create_publisher(Empty, topic(node.get_name()), liveliness_qos(lease_s))


class PeerMonitor:
    """Liveliness of named peer nodes, with callbacks on death and return (module docstring).

    Callbacks run on the node's executor, in a callback group of their own, so they land
    while the node's other callbacks (a goal's thread waiting on a peer) are busy. The
    verdict timer of each peer runs in the same group, so an event and a verdict never race.
    """

    def __init__(self, node: Node, peers: Iterable[str],
                 on_lost: Optional[Callable[[str], None]] = None,
                 on_back: Optional[Callable[[str], None]] = None,
                 lease_s: float = LEASE_S, confirm_s: float = CONFIRM_S) -> None:
        self.peers = list(peers)
        self._node = node
        self.lease_s = lease_s
        self.confirm_s = confirm_s
        self._on_lost = on_lost
        self._on_back = on_back
        self._lock = threading.Lock()
        #: DDS's view: an assertion within the last lease.
        self._alive: Dict[str, bool] = {p: False for p in self.peers}
        #: Our verdict: not alive for confirm_s, and not back since.
        self._dead: Dict[str, bool] = {p: False for p in self.peers}
        self._losses: Dict[str, int] = {p: 0 for p in self.peers}
        self._lapses: Dict[str, int] = {p: 0 for p in self.peers}
        self._suspect: Dict[str, bool] = {p: False for p in self.peers}
        self._seen: Dict[str, bool] = {p: False for p in self.peers}
        self._why: Dict[str, str] = {}
        self._back_at: Dict[str, float] = {}
        group = MutuallyExclusiveCallbackGroup()
        self._verdicts = {}
        for peer in self.peers:
            self._verdicts[peer] = node.create_timer(
                confirm_s, partial(self._verdict, peer), callback_group=group, autostart=False)
        self._subscriptions = [
            node.create_subscription(
                Empty, topic(peer), lambda _msg: None, liveliness_qos(lease_s),
                callback_group=group,
                event_callbacks=SubscriptionEventCallbacks(
                    liveliness=partial(self._on_liveliness, peer)))
            for peer in self.peers]

    def _on_liveliness(self, peer: str, info) -> None:
        """DDS's liveliness change of ``peer``'s announcement.

        The counts tell the cases apart: a lease that ran out moves a writer from alive to
        not alive (``not_alive_count_change`` > 0); an orderly shutdown removes the writer
        (alive count down, not-alive count unchanged); a stalled writer that asserts again
        moves back (``not_alive_count_change`` < 0); a restarted node is a new writer, alive,
        while its old one stays not alive until the participant lease ends.
        """
        alive = int(info.alive_count) > 0
        lost = back = False
        with self._lock:
            was = self._alive[peer]
            self._alive[peer] = alive
            self._seen[peer] = self._seen[peer] or alive
            if was and not alive and not self._dead[peer]:
                if int(info.not_alive_count_change) > 0:
                    # The lease ran out: a death or a stall (DDS cannot tell them apart).
                    self._suspect[peer] = True
                    self._why[peer] = (f"died: its liveliness (lease {self.lease_s:g} s) was "
                                       f"lost and not back within {self.confirm_s:g} s")
                    self._arm_verdict(peer, True)       # dead unless back within confirm_s
                else:
                    # The writer is gone (its node shut down and said so): no doubt to wait on.
                    self._why[peer] = "left the graph (its liveliness writer was removed)"
                    lost = self._die(peer)
            elif alive and not was:
                self._arm_verdict(peer, False)
                if self._suspect[peer] and int(info.not_alive_count_change) < 0:
                    self._lapses[peer] += 1             # the same writer, back in time
                elif self._suspect[peer]:
                    # A new writer while the old one is still not alive: the node was
                    # restarted within the verdict window, so the old one did die.
                    self._why[peer] = ("died: it was restarted (a new instance announced itself "
                                       "while the old one's liveliness was lost)")
                    lost = self._die(peer)
                self._suspect[peer] = False
            elif alive and was and int(info.not_alive_count_change) > 0 \
                    and not self._dead[peer]:
                # Both in one status (taken late): the old writer's lease ran out and a new
                # writer is alive, so the node was restarted.
                self._why[peer] = ("died: it was restarted (a new instance announced itself "
                                   "while the old one's liveliness was lost)")
                lost = self._die(peer)
            if alive and self._dead[peer]:
                self._dead[peer] = False
                self._back_at[peer] = time.monotonic()
                back = True
        if lost and self._on_lost is not None:
            self._on_lost(peer)
        if back and self._on_back is not None:
            self._on_back(peer)

    def _arm_verdict(self, peer: str, start: bool) -> None:
        """Start (or stop) ``peer``'s verdict timer. While the node is being destroyed (a
        peer's lease running out as the whole graph shuts down) there is nothing to decide."""
        timer = self._verdicts.get(peer)            # None once the monitor is destroyed
        try:
            if timer is not None and start:
                timer.reset()
            elif timer is not None:
                timer.cancel()
        except InvalidHandle:
            pass

    def _die(self, peer: str) -> bool:
        """Record ``peer``'s death (lock held); False when it was dead already."""
        self._suspect[peer] = False
        if self._dead[peer]:
            return False
        self._dead[peer] = True
        self._losses[peer] += 1
        return True

    def _verdict(self, peer: str) -> None:
        with self._lock:
            self._arm_verdict(peer, False)              # one-shot
            lost = self._suspect[peer] and not self._alive[peer] and self._die(peer)
        if lost and self._on_lost is not None:
            self._on_lost(peer)

    def alive(self, peer: str) -> bool:
        """True while DDS reports ``peer`` alive (False before it was ever seen, and during a
        lapse)."""
        with self._lock:
            return self._alive.get(peer, False)

    def seen(self, peer: str) -> bool:
        """True once DDS has reported ``peer`` alive (whatever came after)."""
        with self._lock:
            return self._seen.get(peer, False)

    def lost(self, peer: str) -> bool:
        """True when ``peer`` was alive and is dead since (module docstring; not back yet)."""
        with self._lock:
            return self._dead.get(peer, False)

    def back_within(self, peer: str, seconds: float) -> bool:
        """True when ``peer`` came back from a loss less than ``seconds`` ago (a restart)."""
        with self._lock:
            at = self._back_at.get(peer)
        return at is not None and time.monotonic() - at < seconds

    def losses(self, peer: str) -> int:
        """How often ``peer`` was lost so far (a caller compares counts across a wait)."""
        with self._lock:
            return self._losses.get(peer, 0)

    def lapses(self, peer: str) -> int:
        """How often ``peer`` was reported not alive by DDS and came back before the verdict
        (a stall, not a death)."""
        with self._lock:
            return self._lapses.get(peer, 0)

    def destroy(self) -> None:
        """Stop watching (a monitor made for one goal, e.g. a sender's lease, ends with it):
        its subscriptions and verdict timers leave the node; no callback comes after."""
        node = self._node
        for sub in self._subscriptions:
            node.destroy_subscription(sub)
        for timer in self._verdicts.values():
            node.destroy_timer(timer)
        self._subscriptions, self._verdicts = [], {}
        self._on_lost = self._on_back = None

    def describe_loss(self, peer: str) -> str:
        with self._lock:
            why = self._why.get(peer, f"died: its liveliness (lease {self.lease_s:g} s) was "
                                      "lost")
        return f"the {peer} node {why}"


__all__ = ["CONFIRM_S", "LEASE_S", "PeerMonitor", "TOPIC_PREFIX", "announce", "liveliness_qos",
           "topic"]
