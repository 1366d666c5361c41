"""The planner's peer call (PeerCall) beside the awaited call of ``ros2/examples``.

``ros2/examples`` (rclpy/services/minimal_client, ``client_async_callback.py``) calls a
service from a coroutine the executor runs: ``while not cli.wait_for_service(1.0)``, then
``response = await cli.call_async(request)``. The planner instead calls through
``common.peer_call.PeerCall`` from its goal's thread (timeouts, cancel, a liveness watch,
resending to a restarted peer). This bench measures whether the plain awaited call would
hold, on the real scene-graph node (a query: ``InferConstraints`` of a two-object scene),
started and respawned by the Launcher's supervisor as bringup does:

1. **latency**: ``n`` calls of each kind, alternating, in steady state;
2. **a peer killed and respawned**: each round SIGKILLs the scene-graph node and at once
   calls it both ways (the supervisor restarts it after its restart delay); a call not
   answered within ``deadline_s`` counts as never answered, with the time of those that
   were;
3. **after the restart is known**: the plain awaited call sent the moment the respawned
   node is alive again and its service discovered (what a careful caller would do), per
   round;
4. **a fresh client's first call**: a new client node, ``wait_for_service``, one call.

It prints counts and times; it never decides pass or fail (docs/ros-layout.md reads them).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional

import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Header

from agentic_grasp.core.sim.simulator import Simulator
from agentic_grasp.core.supervision import RestartPolicy
from agentic_grasp.ros.common.dependencies import DependencyError, GoalCanceled, GoalSignal
from agentic_grasp.ros.common.liveness import PeerMonitor
from agentic_grasp.ros.common.peer_call import PeerCall, service_call
from agentic_grasp.ros.conversions.perception import scene_to_msg
from agentic_grasp.ros.graph.launcher import Launcher
from agentic_grasp_interfaces.srv import InferConstraints

from agentic_grasp_lab.benchmarks.timing import summarize

PEER = "scene_graph"
SERVICE = "infer_constraints"
#: The planner's own timeouts for the scene graph and its goal's restart budget
#: (config/planner.yaml timeouts.infer_constraints_s, timeouts.restart_wait_s).
CALL_TIMEOUT_S = 10.0
RESTART_BUDGET_S = 20.0
#: Restarts without backoff or give-up, so that every round meets the same restart delay.
POLICY = RestartPolicy(delay_s=0.5, backoff=1.0, max_delay_s=0.5, max_crashes=1000)


def _request(task: str = "it_cup_near_vase") -> Any:
    sim = Simulator.from_config()
    sim.load_task(task, trial_seed=0)
    objects = list(sim.objects())
    return InferConstraints.Request(scene=scene_to_msg(objects, Header(frame_id="world")),
                                    target_id=objects[0].id)


class _Bench:
    """One client node spinning in a MultiThreadedExecutor thread, as the planner's does."""

    def __init__(self) -> None:
        self.node = Node("peer_call_bench")
        self.group = ReentrantCallbackGroup()
        self.signal: Optional[GoalSignal] = None
        self.monitor = PeerMonitor(self.node, [PEER], on_lost=self._on_lost)
        self.executor = MultiThreadedExecutor(num_threads=4)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def _on_lost(self, _peer: str) -> None:
        signal = self.signal
        if signal is not None:
            signal.poke()

    def client(self, node: Optional[Node] = None) -> Any:
        return (node or self.node).create_client(InferConstraints, SERVICE,
                                                 callback_group=self.group)

    def awaited(self, client: Any, request: Any, deadline_s: float,
                wait_for_service: bool = True) -> Optional[float]:
        """ros2/examples' call: wait_for_service in 1 s steps, then ``await call_async``, in
        a coroutine the executor runs. Seconds to the answer, None when none came within
        ``deadline_s`` (the awaited future has no timeout of its own)."""
        start = time.monotonic()

        async def call() -> Any:
            return await client.call_async(request)

        if wait_for_service:
            while not client.wait_for_service(timeout_sec=1.0):
                if time.monotonic() - start > deadline_s:
                    return None
        done = threading.Event()
        task = self.executor.create_task(call)
        task.add_done_callback(lambda _t: done.set())
        self.executor.wake()
        left = max(0.0, deadline_s - (time.monotonic() - start))
        if not done.wait(left) or task.exception() is not None:
            task.cancel()
            return None
        return time.monotonic() - start

    def peer_call(self, client: Any, request: Any, resend_always: bool = False) -> Any:
        """The planner's call: (seconds, "") or (None, why it ended)."""
        caller = PeerCall(PEER, CALL_TIMEOUT_S, watch=self.monitor,
                          resend_always=resend_always)
        self.signal = GoalSignal(RESTART_BUDGET_S)
        start = time.monotonic()
        try:
            service_call(caller, client, request, self.signal)
        except (DependencyError, GoalCanceled) as exc:
            return None, f"{type(exc).__name__}: {exc}"
        return time.monotonic() - start, ""

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()


def _times(values: List[Optional[float]]) -> Dict[str, Any]:
    answered = [v for v in values if v is not None]
    return {"calls": len(values), "answered": len(answered),
            "never_answered": len(values) - len(answered),
            "seconds": [round(v, 3) for v in answered]}


def _wait(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def run(n: int = 200, rounds: int = 5, fresh: int = 10,
        deadline_s: float = 30.0) -> Dict[str, Any]:
    """The four measurements of the module docstring."""
    own = not rclpy.ok()
    if own:
        rclpy.init()
    launcher = Launcher({"acquired": "none", "perception": "oracle"}, only=[PEER])
    launcher.start()
    launcher.supervise(POLICY)
    bench = _Bench()
    request = _request()
    out: Dict[str, Any] = {"peer": PEER, "service": SERVICE, "deadline_s": deadline_s}
    try:
        plain, planner = bench.client(), bench.client()
        if not _wait(lambda: plain.service_is_ready() and bench.monitor.alive(PEER), 60.0):
            raise RuntimeError("the scene-graph node did not come up")
        for _ in range(10):                                    # warm-up, untimed
            bench.awaited(plain, request, deadline_s)
            bench.peer_call(planner, request)
        lat_a: List[float] = []
        lat_b: List[float] = []
        for _ in range(n):
            t_a = bench.awaited(plain, request, deadline_s)
            t_b, why = bench.peer_call(planner, request)
            if t_a is not None:
                lat_a.append(t_a)
            if t_b is not None:
                lat_b.append(t_b)
        out["latency"] = {"awaited": summarize(lat_a), "peer_call": summarize(lat_b),
                          "awaited_lost": n - len(lat_a), "peer_call_lost": n - len(lat_b)}

        killed_a: List[Optional[float]] = []
        killed_b: List[Optional[float]] = []
        why_b: List[str] = []
        after_a: List[Optional[float]] = []
        back_s: List[float] = []
        for _ in range(rounds):
            restarts = launcher.restarts().get(PEER, 0)
            losses = bench.monitor.losses(PEER)
            # a fresh pair of clients per round, as a goal after the death would have
            plain_r, planner_r, after_r = bench.client(), bench.client(), bench.client()
            _wait(lambda: all(c.service_is_ready() for c in (plain_r, planner_r, after_r)),
                  10.0)
            killed_at = time.monotonic()
            launcher.kill_node(PEER)
            answers: Dict[str, Any] = {}

            def back() -> None:
                """When the node, known lost, is alive again and its service discovered (the
                liveness watch's loss verdict comes 1.2 s after the kill; until then the dead
                node's service is still listed)."""
                if _wait(lambda: launcher.restarts().get(PEER, 0) > restarts
                         and bench.monitor.losses(PEER) > losses
                         and bench.monitor.alive(PEER) and plain_r.service_is_ready(),
                         deadline_s):
                    answers["back"] = time.monotonic() - killed_at
                    # 3: the plain call, sent the moment the respawned service is discovered
                    answers["after"] = bench.awaited(after_r, request, 10.0)

            calls = [threading.Thread(target=lambda: answers.__setitem__(
                         "a", bench.awaited(plain_r, request, deadline_s))),
                     threading.Thread(target=lambda: answers.__setitem__(
                         "b", bench.peer_call(planner_r, request))),
                     threading.Thread(target=back)]
            for thread in calls:
                thread.start()
            for thread in calls:
                thread.join(deadline_s + 5.0)
            killed_a.append(answers.get("a"))
            t_b, why = answers.get("b", (None, "no answer"))
            killed_b.append(t_b)
            if why:
                why_b.append(why)
            if "back" in answers:
                back_s.append(answers["back"])
            after_a.append(answers.get("after"))
            for client in (plain_r, planner_r, after_r):
                bench.node.destroy_client(client)
            time.sleep(1.0)
        out["killed"] = {"awaited": _times(killed_a), "peer_call": _times(killed_b),
                         "peer_call_errors": why_b,
                         "service_back_s": [round(v, 3) for v in back_s]}
        out["after_restart_known"] = {"awaited": _times(after_a)}

        fresh_a: List[Optional[float]] = []
        fresh_b: List[Optional[float]] = []
        for k in range(fresh):
            for kind, sink in (("a", fresh_a), ("b", fresh_b)):
                node = Node(f"peer_call_bench_fresh_{kind}{k}")
                bench.executor.add_node(node)
                client = bench.client(node)
                if kind == "a":
                    sink.append(bench.awaited(client, request, 5.0))
                else:
                    _wait(client.service_is_ready, 10.0)
                    sink.append(bench.peer_call(client, request, resend_always=True)[0])
                bench.executor.remove_node(node)
                node.destroy_node()
        out["fresh_client"] = {"awaited": _times(fresh_a), "peer_call": _times(fresh_b)}
    finally:
        bench.close()
        launcher.stop()
        if own:
            rclpy.try_shutdown()
    return out


def report(result: Dict[str, Any]) -> str:
    lat = result["latency"]
    lines = [f"peer calls of {result['peer']} ({result['service']}), the planner's PeerCall "
             f"beside ros2/examples' awaited call"]
    for kind in ("awaited", "peer_call"):
        s = lat[kind]
        lines.append(f"  steady state  {kind:<10} p50 {s['p50_ms']:7.2f} ms  p90 "
                     f"{s['p90_ms']:7.2f} ms  p99 {s['p99_ms']:7.2f} ms  (n={s['n']}, lost "
                     f"{lat[kind + '_lost']})")
    lines.append(f"  PeerCall / awaited p50 ratio: "
                 f"{lat['peer_call']['p50_ms'] / lat['awaited']['p50_ms']:.2f}")
    killed = result["killed"]
    for kind in ("awaited", "peer_call"):
        k = killed[kind]
        lines.append(f"  peer killed, call at once  {kind:<10} answered {k['answered']}/"
                     f"{k['calls']} within {result['deadline_s']:g} s  {k['seconds']}")
    lines.append(f"  service back after (s): {killed['service_back_s']}")
    a = result["after_restart_known"]["awaited"]
    lines.append(f"  awaited, sent when the respawned service is discovered: answered "
                 f"{a['answered']}/{a['calls']} within 10 s  {a['seconds']}")
    for kind in ("awaited", "peer_call"):
        f = result["fresh_client"][kind]
        lines.append(f"  fresh client's first call  {kind:<10} answered {f['answered']}/"
                     f"{f['calls']}")
    return "\n".join(lines)
