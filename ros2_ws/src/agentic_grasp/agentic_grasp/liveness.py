"""Peer liveness over DDS: a node whose process dies is known dead within one lease.

Every node announces itself (``announce``, called by nodes.runner.spin_node): one publisher on
``alive/<node name>`` (std_msgs/Empty; nothing is ever published on it) with AUTOMATIC
liveliness and a lease of :data:`LEASE_S`. The DDS participant asserts that liveliness from
its own thread (rmw_fastrtps announces every 2/3 of the lease), so a node that is merely busy
(a Python callback holding the GIL for a render) stays alive, and a process that is gone
(SIGKILL, a segfault) is reported not alive by every subscriber within about one lease.
Graph discovery alone notices a killed process only when the participant's lease ends (Fast
DDS: 20 s by default), which is what made a dead peer cost a full per-call timeout.

:class:`PeerMonitor` subscribes to the peers' announcements and calls ``on_lost(peer)`` when a
peer that was alive loses its liveliness, ``on_back(peer)`` when it returns (a respawned node
announces itself again). A peer never seen alive is not "lost": a wait for it to appear is the
caller's own timeout (e.g. "service did not appear").
"""
from __future__ import annotations

import threading
import time
from functools import partial
from typing import Callable, Dict, Iterable, Optional

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.duration import Duration
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.qos import (DurabilityPolicy, LivelinessPolicy, QoSProfile, ReliabilityPolicy)
from std_msgs.msg import Empty

#: Liveliness lease (s): a dead peer is reported within about this long. Half the 2 s a goal
#: may take to end after a peer's death, leaving the other half for the goal to wind down;
#: well above the few milliseconds DDS needs to deliver an assertion on loopback.
LEASE_S = 1.0
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
    """Liveliness of named peer nodes, with callbacks on loss and return (module docstring).

    Callbacks run on the node's executor, in a callback group of their own, so they land
    while the node's other callbacks (a goal's thread waiting on a peer) are busy.
    """

    def __init__(self, node: Node, peers: Iterable[str],
                 on_lost: Optional[Callable[[str], None]] = None,
                 on_back: Optional[Callable[[str], None]] = None,
                 lease_s: float = LEASE_S) -> None:
        self.peers = list(peers)
        self.lease_s = lease_s
        self._on_lost = on_lost
        self._on_back = on_back
        self._lock = threading.Lock()
        self._alive: Dict[str, bool] = {p: False for p in self.peers}
        self._lost_at: Dict[str, float] = {}
        self._losses: Dict[str, int] = {p: 0 for p in self.peers}
        self._back_at: Dict[str, float] = {}
        group = MutuallyExclusiveCallbackGroup()
        self._subscriptions = [
            node.create_subscription(
                Empty, topic(peer), lambda _msg: None, liveliness_qos(lease_s),
                callback_group=group,
                event_callbacks=SubscriptionEventCallbacks(
                    liveliness=partial(self._on_liveliness, peer)))
            for peer in self.peers]

    def _on_liveliness(self, peer: str, info) -> None:
        alive = int(info.alive_count) > 0
        with self._lock:
            was = self._alive[peer]
            self._alive[peer] = alive
            if was and not alive:
                self._lost_at[peer] = time.monotonic()
                self._losses[peer] += 1
            if alive and not was and peer in self._lost_at:
                self._back_at[peer] = time.monotonic()
        if was and not alive and self._on_lost is not None:
            self._on_lost(peer)
        elif alive and not was and self._on_back is not None:
            self._on_back(peer)

    def alive(self, peer: str) -> bool:
        """True while ``peer`` is announced alive (False before it was ever seen)."""
        with self._lock:
            return self._alive.get(peer, False)

    def lost(self, peer: str) -> bool:
        """True when ``peer`` was alive and has lost its liveliness since (not back yet)."""
        with self._lock:
            return not self._alive.get(peer, False) and peer in self._lost_at

    def back_within(self, peer: str, seconds: float) -> bool:
        """True when ``peer`` came back from a loss less than ``seconds`` ago (a restart)."""
        with self._lock:
            at = self._back_at.get(peer)
        return at is not None and time.monotonic() - at < seconds

    def losses(self, peer: str) -> int:
        """How often ``peer`` was lost so far (a caller compares counts across a wait)."""
        with self._lock:
            return self._losses.get(peer, 0)

    def describe_loss(self, peer: str) -> str:
        return (f"the {peer} node died: its liveliness (lease {self.lease_s:g} s) was lost")


__all__ = ["LEASE_S", "PeerMonitor", "TOPIC_PREFIX", "announce", "liveliness_qos", "topic"]
