"""The planner's GraspObject action and the scene set-up around it, over a GraphClient.

Used by ``agentic-grasp grasp`` (:mod:`agentic_grasp.commands.grasp`), the lab's benchmarks
(``agentic_grasp_lab.ros.benchmarks``) and the whole-graph tests: a module below both, so
the benchmarks need not import a CLI command. ``commands/grasp.py`` imports it to build the
CLI's parser, so rclpy and the graph client are imported where they are used, keeping
``agentic-grasp --help`` light.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Tuple


class PlannerClient:
    """GraspObject over a GraphClient's node (composition: its node spins in GraphClient's
    thread, so every wait here blocks on a future with a timeout, never spins). Requests go
    through OrderedActionClient, so a fast reply (an invalid goal aborts at once) is never
    lost between sending and waiting, and a goal whose request or answer DDS lost is sent
    again under the same goal id (OrderedActionClient.send_goal_resending).

    ``grasp_object`` is served by the front node, which ends the goal with ERROR_PEER_LOST
    when the planner dies (a result, as any plain client gets). The front's own liveliness
    is watched (agentic_grasp.ros.common.liveness): when the process serving the action dies while a
    goal runs, :meth:`wait` raises about 1.2 s after the death (lease and verdict) instead of
    waiting out its timeout (the action server vanishes from the graph only after DDS's 20 s
    participant lease).

    ``lease``: the goals hold a lease on motion (GraspObject ``sender_liveliness_topic``,
    common.sender_lease): this client announces its liveliness on a topic of its own
    (``alive/<node>_<pid>_<random>``: unique, so two clients never share a writer count) and
    names it in each goal, so a goal whose client dies is canceled and the arm stops.
    """

    def __init__(self, graph: Any, action: str = "grasp_object",
                 planner_node: str = "grasp_front", lease: bool = False) -> None:
        # on use (module docstring)
        from agentic_grasp.ros.common.dependencies import OrderedActionClient
        from agentic_grasp.ros.common.liveness import PeerMonitor
        from agentic_grasp_interfaces.action import GraspObject

        self.graph = graph
        self._action = OrderedActionClient(graph.node, GraspObject, action)
        self._goal_type = GraspObject.Goal
        self._handle = None
        self._lock = threading.Lock()
        self._planner = planner_node
        self._waits: set = set()
        self.liveness = PeerMonitor(graph.node, [planner_node], on_lost=self._wake)
        self._losses_at_send = 0
        self.lease_topic = ""
        self._announcement = None
        if lease:
            # on use (module docstring)
            import os
            import secrets
            from agentic_grasp.ros.common.liveness import liveliness_qos, topic
            from std_msgs.msg import Empty

            self.lease_topic = topic(f"{graph.node.get_name()}_{os.getpid()}_"
                                     f"{secrets.token_hex(4)}")
            self._announcement = graph.node.create_publisher(Empty, self.lease_topic,
                                                             liveliness_qos())

    def _wake(self, _peer: str) -> None:
        with self._lock:
            waits = list(self._waits)
        for event in waits:
            event.set()

    def close(self) -> None:
        self._action.destroy()

    def wait_for_server(self, timeout_s: float) -> bool:
        return self._action.wait_for_server(timeout_sec=timeout_s)

    def send(self, instruction: str, configuration: str = "",
             on_feedback: Optional[Callable[[Any], None]] = None,
             timeout_s: float = 10.0, seed: Optional[int] = None) -> Any:
        """Send a goal; its ClientGoalHandle (check ``accepted``). GraphError when the planner
        is not there or does not answer. ``seed``: the goal's trial seed (None: the planner
        node's own, GraspObject.action)."""
        # on use (module docstring)
        from agentic_grasp.ros.client.graph_client import GraphError

        if not self.wait_for_server(timeout_s):
            raise GraphError(f"the planner's grasp_object action is not available within "
                             f"{timeout_s:.0f} s (is the planner node running?)")
        callback = (lambda fb: on_feedback(fb.feedback)) if on_feedback else None
        goal = self._goal_type(instruction=instruction, configuration=configuration,
                               seed=-1 if seed is None else int(seed),
                               sender_liveliness_topic=self.lease_topic)
        self._losses_at_send = self.liveness.losses(self._planner)
        handle = self._action.send_goal_resending(goal, callback, timeout_s)
        if handle is None:
            raise GraphError(f"grasp_object: the planner did not answer the goal within "
                             f"{timeout_s:.0f} s")
        with self._lock:
            self._handle = handle if handle.accepted else None
        return handle

    def wait(self, handle: Any, timeout_s: float) -> Tuple[int, Any]:
        """(goal status, GraspObject.Result) of an accepted goal; GraphError (after canceling
        it) when the result does not come within ``timeout_s``."""
        # on use (module docstring)
        from agentic_grasp.ros.client.graph_client import GraphError, PeerLostError

        future = handle.get_result_async()
        done = threading.Event()
        with self._lock:
            self._waits.add(done)
        try:
            future.add_done_callback(lambda _f: done.set())
            if self.liveness.losses(self._planner) == self._losses_at_send:
                done.wait(timeout_s)
        finally:
            with self._lock:
                self._waits.discard(done)
        if not future.done() and self.liveness.losses(self._planner) != self._losses_at_send:
            with self._lock:
                self._handle = None
            raise PeerLostError(f"grasp_object: {self.liveness.describe_loss(self._planner)} "
                                "while the goal ran; its result is lost (bringup restarts "
                                "the planner: send the goal again)")
        if not future.done():
            self.cancel(handle)
            raise GraphError(f"grasp_object: no result within {timeout_s:.0f} s (goal "
                             "canceled)")
        with self._lock:
            if self._handle is handle:
                self._handle = None
        response = future.result()
        return int(response.status), response.result

    def result(self, handle: Any, timeout_s: float) -> Any:
        """The goal's GraspObject.Result (see :meth:`wait`)."""
        return self.wait(handle, timeout_s)[1]

    def cancel(self, handle: Any = None, timeout_s: float = 5.0) -> bool:
        """Ask the planner to cancel ``handle`` (default: the goal sent last); True once the
        planner has answered the cancel request."""
        with self._lock:
            handle = handle or self._handle
        if handle is None:
            return False
        future = handle.cancel_goal_async()
        self.graph.wait_future(future, timeout_s)
        return future.done()

    def grasp(self, instruction: str, configuration: str = "",
              on_feedback: Optional[Callable[[Any], None]] = None,
              timeout_s: float = 300.0, server_timeout_s: float = 10.0,
              seed: Optional[int] = None) -> Any:
        """Send and wait: the result, or GraphError (not available, rejected, timed out)."""
        # on use (module docstring)
        from agentic_grasp.ros.client.graph_client import GraphError

        handle = self.send(instruction, configuration, on_feedback, server_timeout_s, seed)
        if not handle.accepted:
            raise GraphError("grasp_object goal rejected: the planner is busy with another "
                             "goal (one at a time)")
        return self.result(handle, timeout_s)


def load_scene(graph: Any, task: str, seed: int, timeout_s: float = 30.0,
               settle_s: float = 0.0) -> Any:
    """Load a task scene and wait until the simulator's ground truth shows it.

    LoadScene answers before its ground-truth message has reached every subscriber; the
    oracle perception reads that topic, so a goal sent at once could be perceived in the
    previous scene. Seeing the new scene on this client's own subscription to the same
    latched topic is the sign that it is out; ``settle_s`` then leaves the other
    subscribers time to take it (see :func:`wait_until_perceived` for the exact check).
    """
    # on use (module docstring)
    import time

    # on use (module docstring)
    from agentic_grasp.ros.client.graph_client import GraphError

    loaded = graph.load_scene(task, seed, timeout_s=timeout_s)
    want = set(loaded.object_ids)
    deadline = time.monotonic() + timeout_s
    while {o.id for o in graph.ground_truth(timeout_s)} != want:
        if time.monotonic() > deadline:
            raise GraphError(f"sim/ground_truth did not show the scene of {task} within "
                             f"{timeout_s:.0f} s")
        graph._truth_event.clear()
        graph._truth_event.wait(0.05)
    if settle_s > 0.0:
        # The perception node takes the message in its own time (its sensor callbacks run
        # one at a time, camera images included, on a busy machine).
        threading.Event().wait(settle_s)
    return loaded


def _wait_for_oracle(graph: Any, object_ids: Any, timeout_s: float) -> None:
    """With the oracle backend, wait until perception has taken the newly loaded scene (the
    exact check); with the VLM each call costs seconds, so the settle time must do."""
    # on use (module docstring)
    from agentic_grasp_interfaces.srv import Perceive

    client = graph.node.create_client(Perceive, "perceive")
    try:
        if not client.wait_for_service(timeout_sec=timeout_s):
            return                      # the planner reports a missing perception node itself
        probe = client.call_async(Perceive.Request(instruction="clear the table"))
        graph.wait_future(probe, timeout_s)
        if probe.done() and probe.result().result.backend == "oracle":
            wait_until_perceived(graph, client, object_ids, timeout_s)
    finally:
        graph.node.destroy_client(client)


def wait_until_perceived(graph: Any, perceive_client: Any, object_ids: Any,
                         timeout_s: float = 10.0) -> None:
    """Block until the perception node's answer lists exactly ``object_ids``.

    For the oracle backend (tests, benchmarks): the exact sign that perception has taken a
    newly loaded scene. (With the VLM a call costs seconds and may miss an object.)
    """
    # on use (module docstring)
    import time

    # on use (module docstring)
    from agentic_grasp.ros.client.graph_client import GraphError
    from agentic_grasp_interfaces.srv import Perceive

    want = set(object_ids)
    deadline = time.monotonic() + timeout_s
    seen: Any = None
    while time.monotonic() < deadline:
        future = perceive_client.call_async(Perceive.Request(instruction="clear the table"))
        # At most 1 s per probe: an answer lost to a just-restarted server is asked again.
        graph.wait_future(future, max(0.1, min(1.0, deadline - time.monotonic())))
        if future.done():
            seen = {o.id for o in future.result().result.objects}
            if seen == want:
                return
        threading.Event().wait(0.05)
    raise GraphError(f"perception did not see {sorted(want)} within {timeout_s:.0f} s "
                     f"(last answer: {sorted(seen) if seen is not None else 'none'})")


__all__ = ["PlannerClient", "load_scene", "wait_until_perceived"]
