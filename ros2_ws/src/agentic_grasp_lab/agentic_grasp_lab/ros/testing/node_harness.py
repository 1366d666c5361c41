"""In-process node tests: the node under test and a client node spun on a background thread.

Tests call services and parameter clients from the test thread and wait on futures with a
deadline (never spin from the test thread while the executor thread spins the same nodes).
"""
from __future__ import annotations

import threading
from typing import Any, Type

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient

from agentic_grasp.ros.common.futures import wait_done

TIMEOUT_S = 10.0
#: How long a service may take to be discovered (s), the node's own and its six parameter
#: services: on the loaded CI machine discovery is slower than an answer (a fresh-clone run
#: found the scene-graph node's parameter services not ready after 10 s, ready just after).
DISCOVERY_S = 60.0


def wait_future(future: Any, timeout: float = TIMEOUT_S) -> Any:
    """The future's result; an assertion error if it does not complete in time."""
    assert wait_done(future, timeout), f"no answer within {timeout} s"
    return future.result()


class NodeHarness:
    """Owns the node under test, a client node and the executor thread spinning both.

    Subclasses create their subscriptions and clients on ``client_node`` in ``setup()``,
    which runs before spinning starts, then the harness waits for ``service`` to appear.
    """

    def __init__(self, node: Any, client_name: str, service_type: Type, service: str) -> None:
        self.node = node
        self.client_node = rclpy.create_node(client_name)
        self.executor = MultiThreadedExecutor(num_threads=3)
        self.executor.add_node(self.node)
        self.executor.add_node(self.client_node)
        self.setup()
        self.cli = self.client_node.create_client(service_type, service)
        self.params = AsyncParameterClient(self.client_node, self.node.get_name())
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
        if not self.cli.wait_for_service(timeout_sec=DISCOVERY_S):
            self.close()
            raise RuntimeError(f"{service} did not appear over DDS")

    def setup(self) -> None:
        """Create extra subscriptions on ``client_node`` (before spinning starts)."""

    def set_params(self, **values: Any) -> Any:
        params = [Parameter(k, value=v) for k, v in values.items()]
        assert self.params.wait_for_services(timeout_sec=DISCOVERY_S), \
            "parameter services not discovered"
        return wait_future(self.params.set_parameters(params)).results

    def close(self) -> None:
        self.executor.shutdown()
        self.thread.join(timeout=TIMEOUT_S)
        self.node.destroy_node()
        self.client_node.destroy_node()
