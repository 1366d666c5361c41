"""When a node is really ready: every service and action it calls is discovered.

A node that has built its servers says "ready" in its log, but its peers may not see those
servers for seconds yet: DDS discovers each participant, then each endpoint, on its own, and
on a loaded machine that took longer than a peer call's whole timeout (a demo's planner saw
no ``infer_constraints`` within its 5 s although the scene-graph node had said "ready" 3.5 s
before the goal). So readiness is judged from the caller's side: :class:`ClientReadiness`
watches every service client and action client of its node (``service_is_ready`` /
``server_is_ready``: rmw_fastrtps answers true once the server's endpoints are in this
node's graph and the client's request writer and response reader are matched) and logs
:data:`READY_MARK` once all of them are. A node that calls nobody logs it at once.

``agentic-grasp bringup`` (ros/graph/launcher.py) reads that line in each node's output and
says "ready" when every node has said it. A goal sent earlier does not need it: the planner's
peer calls wait for a server they never saw until the start-up window ends
(common.peer_call.PeerCall.startup_until).
"""
from __future__ import annotations

import threading
from typing import Callable, Dict, List

from rclpy.action import ActionClient
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

#: The log line's start that tells the launcher a node's callees are all discovered.
READY_MARK = "callees discovered"
#: How often the clients are checked until all are discovered (s): discovery itself takes
#: tens of milliseconds at best, so a tenth of a second adds little to a start.
POLL_S = 0.1
#: Start-up window of a node's calls (s from its start; the planner's is its parameter
#: ``timeouts.startup_s``, config/planner.yaml says why this long): a server never seen yet
#: is waited for until it ends, not only for the call's timeout.
STARTUP_S = 120.0
#: How often a node still waiting names what it waits for (s).
REPORT_S = 10.0


def client_checks(node: Node) -> Dict[str, Callable[[], bool]]:
    """Every service client and action client of ``node``, by name, with its check."""
    checks: Dict[str, Callable[[], bool]] = {}
    for client in node.clients:
        checks[f"service {client.srv_name}"] = client.service_is_ready
    for waitable in node.waitables:
        if isinstance(waitable, ActionClient):
            checks[f"action {waitable._action_name}"] = waitable.server_is_ready
    return checks


class ClientReadiness:
    """Logs :data:`READY_MARK` once every client of ``node`` sees its server (module
    docstring); ``ready`` is set then. The clients are listed when this is built: build it
    after the node's constructor."""

    def __init__(self, node: Node, poll_s: float = POLL_S, report_s: float = REPORT_S) -> None:
        self._node = node
        self._checks = client_checks(node)
        self.ready = threading.Event()
        self._polls = 0
        self._report_every = max(1, int(round(report_s / poll_s)))
        self._timer = None
        if not self._checks:
            self._done()
            return
        self._timer = node.create_timer(poll_s, self._poll,
                                        callback_group=MutuallyExclusiveCallbackGroup())

    def missing(self) -> List[str]:
        """The callees not discovered yet."""
        return [name for name, check in self._checks.items() if not check()]

    def _poll(self) -> None:
        if self.ready.is_set():
            return
        missing = self.missing()
        if not missing:
            self._done()
            return
        self._polls += 1
        if self._polls % self._report_every == 0:
            self._node.get_logger().info(f"waiting to discover: {', '.join(missing)}")

    def _done(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.ready.set()
        what = ", ".join(sorted(self._checks)) if self._checks else "none (it calls no peer)"
        self._node.get_logger().info(f"{READY_MARK}: {what}")


__all__ = ["ClientReadiness", "POLL_S", "READY_MARK", "STARTUP_S", "client_checks"]
