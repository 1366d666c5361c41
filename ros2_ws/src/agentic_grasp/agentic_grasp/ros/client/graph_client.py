"""A synchronous client of the node graph for the CLI, tests and benchmarks.

The client's node spins in its own executor thread for its whole life; callers block on
futures with a timeout that ends in a clear ``GraphError``. The ExecuteGrasp client and the
ground-truth subscription are made on first use: an action client receives every feedback
and status message of its action and a subscriber every message of its topic, so a client
that only sends GraspObject goals (``agentic-grasp grasp``, bench graph) would otherwise
spend CPU on the executor's and simulator's traffic of the very goals it sends.
(Re-adding a node to the global executor per call, as ``rclpy.spin_until_future_complete``
does, made action round trips grow from 4 ms to 40+ ms over a benchmark run on these
machines.)
"""
from __future__ import annotations

import threading
from typing import Callable, List, Optional

import rclpy
from agentic_grasp.ros.common.dependencies import OrderedActionClient as ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from agentic_grasp.ros.common import dependencies, qos
from agentic_grasp.ros.conversions.grasp import grasp_to_msg
from agentic_grasp.ros.conversions.perception import objects_from_msgs
from agentic_grasp.core.types import GraspParameters, ObjectInstance
from agentic_grasp.ros.common.futures import wait_done
from agentic_grasp_interfaces.action import ExecuteGrasp
from agentic_grasp_interfaces.msg import SceneGraph
from agentic_grasp_interfaces.srv import LoadScene
from agentic_grasp.ros.common.peer_call import PeerCall, service_call


class GraphError(RuntimeError):
    """A peer did not answer in time or answered with an error."""


class PeerLostError(GraphError):
    """The node serving a request died (lost its liveliness) before it answered."""


class GraphClient:
    """Owns one rclpy node; call close() (or use as a context manager)."""

    def __init__(self, name: str = "agentic_grasp_client", context=None) -> None:
        self._own_context = False
        if context is None and not rclpy.ok():
            rclpy.init()
            self._own_context = True
        self.node = Node(name, context=context)
        self._load = self.node.create_client(LoadScene, "sim/load_scene")
        self._lazy = threading.Lock()
        self._execute_client: Optional[ActionClient] = None
        self._truth: Optional[SceneGraph] = None
        self._truth_event = threading.Event()
        self._truth_sub = None
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name=f"{name}_spin", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self._executor.spin()
        except Exception:  # noqa: BLE001 - shutdown races end the thread quietly
            pass

    def __enter__(self) -> "GraphClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._executor.shutdown(timeout_sec=2.0)
        self._thread.join(timeout=2.0)
        if self._execute_client is not None:
            self._execute_client.destroy()
        self.node.destroy_node()
        if self._own_context and rclpy.ok():
            rclpy.try_shutdown()

    @property
    def _execute(self) -> ActionClient:
        """The ExecuteGrasp client, made on first use (module docstring)."""
        with self._lazy:
            if self._execute_client is None:
                self._execute_client = ActionClient(self.node, ExecuteGrasp, "execute_grasp")
            return self._execute_client

    def _subscribe_truth(self) -> None:
        """The ground-truth subscription, made on first use (latched: the last scene comes
        at once)."""
        with self._lazy:
            if self._truth_sub is None:
                self._truth_sub = self.node.create_subscription(
                    SceneGraph, "sim/ground_truth", self._on_truth, qos.LATCHED)

    def _on_truth(self, msg: SceneGraph) -> None:
        self._truth = msg
        self._truth_event.set()

    @staticmethod
    def wait_future(future, timeout_s: float):
        """Block until ``future`` is done (the executor thread completes it) or time runs out."""
        wait_done(future, timeout_s)

    def _wait(self, future, timeout_s: float, what: str):
        self.wait_future(future, timeout_s)
        if not future.done():
            future.cancel()
            raise GraphError(f"{what}: no answer within {timeout_s:.1f} s")
        if future.exception() is not None:
            raise GraphError(f"{what}: {future.exception()}")
        return future.result()

    def _call(self, client, request, timeout_s: float, what: str):
        """A service call whose request is sent again every GOAL_RESEND_S while unanswered
        (a fresh client's first request can be lost to DDS matching, see
        common.dependencies.GOAL_RESEND_S). For calls that may be answered twice."""
        caller = PeerCall(what.split("/")[0], timeout_s, resend_s=dependencies.GOAL_RESEND_S,
                          resend_always=True)
        try:
            return service_call(caller, client, request)
        except dependencies.DependencyError as exc:
            raise GraphError(str(exc)) from None

    # ---- simulator ------------------------------------------------------------------------
    def load_scene(self, task: str, seed: int = 0, timeout_s: float = 10.0) -> LoadScene.Response:
        if not self._load.wait_for_service(timeout_sec=timeout_s):
            raise GraphError("sim/load_scene is not available (is the sim node running?)")
        self._truth = None
        self._truth_event.clear()
        # Loading the same scene twice is harmless: a lost first request is sent again.
        response = self._call(self._load, LoadScene.Request(task=task, seed=seed), timeout_s,
                              "sim/load_scene")
        if not response.success:
            raise GraphError(response.message)
        return response

    def ground_truth(self, timeout_s: float = 5.0) -> List[ObjectInstance]:
        self._subscribe_truth()
        self._truth_event.wait(timeout_s)
        if self._truth is None:
            raise GraphError("no message on sim/ground_truth (is the sim node running?)")
        return objects_from_msgs(self._truth.objects)

    # ---- executor -------------------------------------------------------------------------
    def execute_grasp(self, target_id: str, grasp: GraspParameters, timeout_s: float = 30.0,
                      on_feedback: Optional[Callable] = None,
                      goal_msg: Optional[ExecuteGrasp.Goal] = None) -> ExecuteGrasp.Result:
        """Send one ExecuteGrasp goal and wait for its result (rejection -> GraphError)."""
        if not self._execute.wait_for_server(timeout_sec=min(timeout_s, 10.0)):
            raise GraphError("execute_grasp action server is not available")
        goal = goal_msg or ExecuteGrasp.Goal(target_id=target_id, grasp=grasp_to_msg(grasp))
        feedback_cb = (lambda fb: on_feedback(fb.feedback)) if on_feedback else None
        handle = self._execute.send_goal_resending(goal, feedback_cb, timeout_s)
        if handle is None:
            raise GraphError(f"execute_grasp goal: no answer within {timeout_s:.1f} s")
        if not handle.accepted:
            raise GraphError("execute_grasp goal rejected (executor busy)")
        return self._wait(handle.get_result_async(), timeout_s, "execute_grasp result").result
