"""The planner's perceive callback over the perception node's Perceive service."""
from __future__ import annotations

from typing import Optional

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from agentic_grasp.backends.dependencies import GoalSignal, ServiceCaller
from agentic_grasp.conversions import perception_result_from_msg
from agentic_grasp.core.perception import PerceptionResult
from agentic_grasp_interfaces.srv import Perceive

PEER = "perception"


class PerceptionService:
    """``perceive(instruction)`` -> PerceptionResult, as ReflectivePlanner.run_task wants it.

    A perception *error* (no frame, target not found, VLM unreachable) is an answer: it comes
    back in ``PerceptionResult.error`` and the planner reports it. Only a node that does not
    answer within ``timeout_s`` raises DependencyTimeout. With the VLM backend one call can
    take ``max_attempts * timeout_s`` plus backoff (perception node docstring): set the
    timeout above that.
    """

    def __init__(self, node: Node, timeout_s: float, callback_group: CallbackGroup,
                 service: str = "perceive") -> None:
        client = node.create_client(Perceive, service, callback_group=callback_group)
        self._caller = ServiceCaller(client, PEER, timeout_s)
        self.caller = self._caller        # resend_if is set by the planner node

    def perceive(self, instruction: str, signal: Optional[GoalSignal] = None
                 ) -> PerceptionResult:
        response = self._caller.call(Perceive.Request(instruction=instruction), signal)
        return perception_result_from_msg(response.result)
