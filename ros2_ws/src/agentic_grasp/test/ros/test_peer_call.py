"""The one peer call (ros/common/peer_call.py) against a scripted peer: no node graph.

A fake watch stands for the planner's PeerMonitor and fake futures for rclpy's; each case is
one of the call's duties: answer, timeout, cancel, a lost query peer waited for and asked
again, a lost motion peer ending the goal, a restarting peer waited for within the goal's
restart budget (and the budget running out), resending to a just-restarted peer.
"""
from __future__ import annotations

import threading
import time

import pytest

from agentic_grasp.ros.common.dependencies import (DependencyTimeout, GoalCanceled, GoalSignal,
                                                   PeerLost)
from agentic_grasp.ros.common.peer_call import PeerCall


class Future:
    def __init__(self) -> None:
        self._done = False
        self._result = None
        self._callbacks = []
        self._lock = threading.Lock()

    def add_done_callback(self, cb) -> None:
        with self._lock:
            if not self._done:
                self._callbacks.append(cb)
                return
        cb(self)

    def set_result(self, value) -> None:
        with self._lock:
            self._done, self._result = True, value
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def done(self) -> bool:
        return self._done

    def result(self):
        return self._result

    def exception(self):
        return None


class Watch:
    """PeerMonitor's view of one peer, scripted by the test."""

    def __init__(self) -> None:
        self.dead = set()
        self.count = {}
        self.back_at = {}

    def lost(self, peer):
        return peer in self.dead

    def losses(self, peer):
        return self.count.get(peer, 0)

    def back_within(self, peer, seconds):
        at = self.back_at.get(peer)
        return at is not None and time.monotonic() - at < seconds

    def describe_loss(self, peer):
        return f"the {peer} node died"

    def die(self, peer, signal=None):
        self.dead.add(peer)
        self.count[peer] = self.count.get(peer, 0) + 1
        if signal is not None:
            signal.poke()

    def back(self, peer):
        self.dead.discard(peer)
        self.back_at[peer] = time.monotonic()


class Peer:
    """A service: ``answer`` says whether a request sent now is answered (after ``delay_s``)."""

    def __init__(self, answer=lambda n: True, delay_s: float = 0.0) -> None:
        self.sent = []
        self.abandoned = 0
        self.answer = answer
        self.delay_s = delay_s
        self.up = True

    def send(self):
        future = Future()
        n = len(self.sent)
        self.sent.append(future)
        if self.answer(n):
            threading.Timer(self.delay_s, future.set_result, args=(f"answer {n}",)).start()
        return future

    def abandon(self, _future) -> None:
        self.abandoned += 1


def call(caller, peer, signal, resend=True):
    return caller.call(signal, "service perceive", lambda: peer.up, peer.send, peer.abandon,
                       resend=resend)


def later(seconds, fn, *args):
    threading.Timer(seconds, fn, args=args).start()


def test_an_answer_is_returned():
    assert call(PeerCall("perception", 1.0, Watch()), Peer(), GoalSignal()) == "answer 0"


def test_no_answer_is_a_timeout_naming_the_peer():
    peer = Peer(answer=lambda n: False)
    with pytest.raises(DependencyTimeout, match="did not answer within 0.3 s"):
        call(PeerCall("perception", 0.3, Watch()), peer, GoalSignal())
    assert peer.abandoned == 1


def test_a_peer_that_never_appears_is_a_timeout():
    peer = Peer()
    peer.up = False
    with pytest.raises(DependencyTimeout, match="did not appear"):
        call(PeerCall("perception", 0.2, Watch()), peer, GoalSignal())


def test_a_server_never_seen_is_waited_for_until_the_start_up_window_ends():
    # Discovery can outlast a call's timeout while the graph comes up: a goal sent then
    # waits for it (the demo whose planner saw no infer_constraints within 5 s).
    peer = Peer()
    peer.up = False
    caller = PeerCall("scene_graph", 0.2, Watch())
    caller.startup_until = time.monotonic() + 5.0
    later(0.8, setattr, peer, "up", True)
    t0 = time.monotonic()
    assert call(caller, peer, GoalSignal()) == "answer 0"
    assert 0.7 < time.monotonic() - t0 < 3.0


def test_a_server_seen_once_has_only_the_call_timeout_to_reappear():
    peer = Peer()
    caller = PeerCall("scene_graph", 0.2, Watch())
    caller.startup_until = time.monotonic() + 30.0
    assert call(caller, peer, GoalSignal()) == "answer 0"
    peer.up = False
    t0 = time.monotonic()
    with pytest.raises(DependencyTimeout, match="did not appear"):
        call(caller, peer, GoalSignal())
    assert time.monotonic() - t0 < 2.0


def test_a_server_never_seen_after_the_start_up_window_is_a_timeout():
    peer = Peer()
    peer.up = False
    caller = PeerCall("scene_graph", 0.2, Watch())
    caller.startup_until = time.monotonic() + 0.5
    t0 = time.monotonic()
    with pytest.raises(DependencyTimeout, match="did not appear"):
        call(caller, peer, GoalSignal())
    assert 0.45 < time.monotonic() - t0 < 2.0


def test_a_cancel_ends_the_wait_at_once():
    signal = GoalSignal()
    later(0.1, signal.cancel)
    t0 = time.monotonic()
    with pytest.raises(GoalCanceled):
        call(PeerCall("perception", 5.0, Watch()), Peer(answer=lambda n: False), signal)
    assert time.monotonic() - t0 < 1.0


def test_a_query_whose_peer_dies_waits_for_it_and_asks_again():
    watch, signal = Watch(), GoalSignal(restart_budget_s=5.0)
    peer = Peer(answer=lambda n: n >= 1)         # the dead instance never answers
    later(0.1, watch.die, "perception", signal)
    later(0.2, setattr, peer, "up", False)        # gone from the graph while it restarts
    later(0.5, setattr, peer, "up", True)
    later(0.5, watch.back, "perception")
    assert call(PeerCall("perception", 2.0, watch), peer, signal) == "answer 1"
    assert signal.lost is None and 0.2 < signal.restart_left() < 5.0


def test_a_motion_whose_peer_dies_ends_the_goal():
    watch, signal = Watch(), GoalSignal(restart_budget_s=5.0)
    later(0.1, watch.die, "sim", signal)
    caller = PeerCall("executor", 5.0, watch, depends=("executor", "sim"))
    t0 = time.monotonic()
    with pytest.raises(PeerLost, match="the sim node died"):
        call(caller, Peer(answer=lambda n: False), signal, resend=False)
    assert time.monotonic() - t0 < 1.0
    assert signal.lost is not None and signal.lost.peer == "sim"


def test_a_goal_its_peer_died_before_answering_goes_to_the_restart():
    watch, signal = Watch(), GoalSignal(restart_budget_s=5.0)
    peer = Peer(answer=lambda n: n >= 1)
    later(0.1, watch.die, "executor", signal)
    later(0.4, watch.back, "executor")
    caller = PeerCall("executor", 5.0, watch, depends=("executor", "sim"))
    answer = caller.call(signal, "action execute_grasp", lambda: True, peer.send,
                         peer.abandon, resend=False, again_after_loss=True)
    assert answer == "answer 1" and len(peer.sent) == 2 and signal.lost is None


def test_a_call_to_a_restarting_peer_waits_within_the_goal_budget():
    watch, signal = Watch(), GoalSignal(restart_budget_s=5.0)
    watch.die("retrieval")                       # dead before the goal's first call
    later(0.4, watch.back, "retrieval")
    t0 = time.monotonic()
    # a timeout shorter than the restart: the wait is the budget's, not the call's
    assert call(PeerCall("retrieval", 0.2, watch), Peer(), signal) == "answer 0"
    assert time.monotonic() - t0 >= 0.35


def test_a_peer_not_back_within_the_budget_ends_the_goal():
    watch, signal = Watch(), GoalSignal(restart_budget_s=0.3)
    watch.die("retrieval")
    with pytest.raises(PeerLost, match="not back within the goal's restart budget"):
        call(PeerCall("retrieval", 5.0, watch), Peer(), signal)


def test_a_just_restarted_peer_is_asked_again_until_it_answers():
    watch = Watch()
    watch.back("scene_graph")                    # came back a moment ago
    peer = Peer(answer=lambda n: n >= 2)         # its first answers are dropped (DDS)
    caller = PeerCall("scene_graph", 2.0, watch, resend_s=0.1)
    assert call(caller, peer, GoalSignal()) == "answer 2"
    assert len(peer.sent) == 3 and peer.abandoned == 2      # the dropped copies


def test_an_answer_that_a_dependency_died_waits_for_our_verdict():
    # the executor notices its sim's death first; the call confirms it with its own watch
    watch, signal = Watch(), GoalSignal()
    caller = PeerCall("executor", 5.0, watch, depends=("executor", "sim"))
    since = caller.losses()
    later(0.2, watch.die, "sim")
    lost = caller.lost_within(signal, since, 2.0)
    assert lost is not None and lost.peer == "sim" and signal.lost is lost
    assert caller.lost_within(GoalSignal(), caller.losses(), 0.2) is None
