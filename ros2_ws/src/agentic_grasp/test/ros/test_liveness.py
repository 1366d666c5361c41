"""PeerMonitor against a real peer process over Fast DDS: a stall is a lapse, a death is a loss.

The peer is a small process that announces itself like every node of the graph
(``liveness.announce``). SIGSTOP freezes it the way a starved or frozen machine does (DDS
reports it "not alive" exactly as after SIGKILL); SIGCONT lets it go on. A stall shorter than
the verdict window must not count as a death; SIGKILL must, within LEASE_S + CONFIRM_S; an
orderly shutdown is a death at once; a respawned peer is back, and a peer restarted within
the verdict window is a death too (its new instance must not pass for the old one's return).
"""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

PEER = "liveness_peer"
#: The peer process: rclpy, one announcement, spin until SIGINT.
PEER_SCRIPT = f"""
import rclpy
from rclpy.executors import ExternalShutdownException
from agentic_grasp.ros.common.liveness import announce
rclpy.init()
node = rclpy.create_node({PEER!r})
announce(node)
try:
    rclpy.spin(node)
except (KeyboardInterrupt, ExternalShutdownException):
    pass
node.destroy_node()
rclpy.try_shutdown()
"""
#: A process starts slowly on a loaded 2-core machine.
START_S = 60.0


class Watch:
    """A PeerMonitor on its own executor thread, with the callbacks' times."""

    def __init__(self, **monitor_kwargs) -> None:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor

        from agentic_grasp.ros.common.liveness import PeerMonitor

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("liveness_watch", context=self.context)
        self.lost_at = []
        self.back_at = []
        self.monitor = PeerMonitor(self.node, [PEER],
                                   on_lost=lambda _p: self.lost_at.append(time.monotonic()),
                                   on_back=lambda _p: self.back_at.append(time.monotonic()),
                                   **monitor_kwargs)
        self.executor = MultiThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def wait(self, predicate, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, what
            time.sleep(0.01)

    def close(self) -> None:
        # The spin thread stops first: Executor.shutdown under a thread still waiting in it
        # took its guard condition away ("'NoneType' object has no attribute 'handle'" in
        # wait_for_ready_callbacks, seen once in a loop of test/ros).
        self._stop.set()
        self.thread.join(5.0)
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


def _peer() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PEER_SCRIPT])


@pytest.fixture
def watch(ros_domain):
    w = Watch()
    yield w
    w.close()


@pytest.fixture
def peer(ros_domain):
    procs = []

    def start():
        procs.append(_peer())
        return procs[-1]

    yield start
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
        p.wait(10.0)


def test_a_stall_shorter_than_the_verdict_is_a_lapse_not_a_death(watch, peer):
    from agentic_grasp.ros.common.liveness import CONFIRM_S, LEASE_S

    p = peer()
    watch.wait(lambda: watch.monitor.alive(PEER), START_S, "the peer never came up")
    # Longer than a whole lease and than what the old 1 s lease survived (0.33 s), well
    # inside the verdict window.
    stall = LEASE_S + 0.5 * CONFIRM_S
    p.send_signal(signal.SIGSTOP)
    watch.wait(lambda: not watch.monitor.alive(PEER), 5.0, "DDS never reported the stall")
    time.sleep(max(0.0, stall - LEASE_S))
    p.send_signal(signal.SIGCONT)
    watch.wait(lambda: watch.monitor.alive(PEER), 5.0, "the peer did not come back")
    time.sleep(CONFIRM_S)               # a wrong verdict would be given by now
    assert watch.lost_at == [] and watch.monitor.losses(PEER) == 0
    assert not watch.monitor.lost(PEER)
    assert watch.monitor.lapses(PEER) >= 1


def test_sigkill_is_a_death_within_lease_and_verdict(watch, peer):
    from agentic_grasp.ros.common.liveness import CONFIRM_S, LEASE_S

    p = peer()
    watch.wait(lambda: watch.monitor.alive(PEER), START_S, "the peer never came up")
    p.kill()
    killed = time.monotonic()
    watch.wait(lambda: watch.lost_at, 10.0, "SIGKILL was never reported as a death")
    took = watch.lost_at[0] - killed
    # Never before the verdict window has passed; at most a lease and the window later,
    # plus scheduling slack on a loaded machine.
    assert CONFIRM_S <= took <= LEASE_S + CONFIRM_S + 0.5, took
    assert watch.monitor.lost(PEER) and watch.monitor.losses(PEER) == 1
    assert "not back within" in watch.monitor.describe_loss(PEER)
    # A respawned peer is back, and no longer lost.
    peer()
    watch.wait(lambda: watch.back_at, START_S, "the respawned peer was not back")
    assert not watch.monitor.lost(PEER)


def test_an_orderly_shutdown_is_a_death_at_once(watch, peer):
    from agentic_grasp.ros.common.liveness import CONFIRM_S

    p = peer()
    watch.wait(lambda: watch.monitor.alive(PEER), START_S, "the peer never came up")
    p.send_signal(signal.SIGINT)
    stopped = time.monotonic()
    watch.wait(lambda: watch.lost_at, 10.0, "the shutdown was never reported")
    assert p.wait(10.0) == 0
    # The writer's removal is reported as such (no lease ran out): no verdict window to
    # wait out (only printed: a loaded machine may be slow to run the peer's SIGINT handler).
    print(f"orderly shutdown reported {watch.lost_at[0] - stopped:.2f} s after SIGINT "
          f"(verdict window {CONFIRM_S:g} s)")
    assert "left the graph" in watch.monitor.describe_loss(PEER)


def test_a_restart_within_the_verdict_window_is_a_death(ros_domain, peer):
    """The old instance frozen (not alive, never back), a new one started: with a verdict
    window longer than the new process takes to start, only the new writer's appearance can
    tell that the old instance is gone."""
    w = Watch(confirm_s=120.0)
    try:
        old = peer()
        w.wait(lambda: w.monitor.alive(PEER), START_S, "the peer never came up")
        old.send_signal(signal.SIGSTOP)
        w.wait(lambda: not w.monitor.alive(PEER), 5.0, "DDS never reported the stall")
        assert w.lost_at == []
        peer()
        w.wait(lambda: w.lost_at, START_S, "the restart was not reported as a death")
        assert w.back_at and w.back_at[0] >= w.lost_at[0]
        assert w.monitor.losses(PEER) == 1 and not w.monitor.lost(PEER)
        assert "restarted" in w.monitor.describe_loss(PEER)
        assert w.monitor.lapses(PEER) == 0
    finally:
        w.close()


def test_the_sim_arm_sends_nothing_to_a_peer_in_doubt(watch, peer):
    """The executor's sim arm waits before an attempt's first request while the sim is not
    alive, not only once it is judged lost: killed, its lease run out, its verdict pending,
    a request would reach the restarted instance and the old one's verdict, landing during
    the call, would end that sound attempt as lost (CI, test_restart_wait_graph[sim])."""
    from agentic_grasp.ros.executor.sim_arm import SimArmBackend

    backend = SimArmBackend(watch.node, service=f"/{PEER}/arm", timeout_s=START_S)
    monitor = backend._monitor
    old = peer()
    watch.wait(lambda: monitor.alive(PEER), START_S, "the peer never came up")
    old.kill()
    watch.wait(lambda: not monitor.alive(PEER), 5.0, "DDS never reported the kill")
    in_doubt = monitor.losses(PEER) == 0 and not monitor.lost(PEER)
    returned = []
    waiter = threading.Thread(target=lambda: (backend._await_back(lambda: False),
                                              returned.append((monitor.alive(PEER),
                                                               monitor.losses(PEER)))))
    waiter.start()
    peer()                                           # the supervisor's respawn
    waiter.join(START_S + 5.0)
    assert in_doubt, "the verdict came before the wait began: the case was not probed"
    assert returned == [(True, 1)], returned       # the new instance, the old one judged
