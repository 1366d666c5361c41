"""HAA-RAG for the planner over the retrieval node's RetrieveStrategies service."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from agentic_grasp.ros.common.dependencies import GoalSignal
from agentic_grasp.ros.common.peer_call import PeerCall, service_call
from agentic_grasp.ros.conversions.grasp import affordance_to_msg
from agentic_grasp.ros.conversions.retrieval import retrieval_result_from_msg
from agentic_grasp.ros.conversions.images import rgb_to_msg
from agentic_grasp.ros.recording.inputs import tapped
from agentic_grasp.core.retrieval.results import RetrievalResult
from agentic_grasp.core.types import AffordanceDescriptor
from agentic_grasp_interfaces.srv import RetrieveStrategies

PEER = "retrieval"


class RetrievalService:
    """The planner's Retriever protocol (``retrieve(category, affordance, ...)``) as a client.

    The answer is the same RetrievalResult HAARAG.retrieve returns in process; a query the
    node refuses (success=false) comes back empty with the node's reason, and the planner
    falls back to its default grasp saying why. A node that does not answer within
    ``timeout_s`` raises DependencyTimeout.
    """

    def __init__(self, node: Node, timeout_s: float, callback_group: CallbackGroup,
                 service: str = "retrieve_strategies") -> None:
        client = node.create_client(RetrieveStrategies, service, callback_group=callback_group)
        self._client = client
        self.caller = PeerCall(PEER, timeout_s)   # its liveness watch: set by the planner node
        #: Records each exchange (recording/inputs.DecisionTap; None: not recorded).
        self.tap: Any = None

    def retrieve(self, category: str, affordance: AffordanceDescriptor,
                 embedding: Optional[np.ndarray] = None, crop: Optional[np.ndarray] = None,
                 embedding_model: Optional[str] = None, k: Optional[int] = None,
                 mode: Optional[str] = None, size: Optional[Sequence[float]] = None,
                 perception_backend: Optional[str] = None,
                 signal: Optional[GoalSignal] = None) -> RetrievalResult:
        request = retrieval_request(category, affordance, embedding, crop, embedding_model, k,
                                    mode, size, perception_backend)
        response: Any = tapped(self.tap, "retrieve", request, lambda: service_call(
            self.caller, self._client, request, signal))
        return retrieval_result_from_msg(response)


def retrieval_request(category: str, affordance: AffordanceDescriptor,
                      embedding: Optional[np.ndarray] = None, crop: Optional[np.ndarray] = None,
                      embedding_model: Optional[str] = None, k: Optional[int] = None,
                      mode: Optional[str] = None, size: Optional[Sequence[float]] = None,
                      perception_backend: Optional[str] = None) -> Any:
    """The RetrieveStrategies request of one query (replay compares recorded ones to it)."""
    request = RetrieveStrategies.Request(category=category,
                                         affordance=affordance_to_msg(affordance),
                                         embedding_model=embedding_model or "",
                                         k=int(k or 0), mode=mode or "",
                                         perception_backend=perception_backend or "")
    if size is not None:        # the affordance fallback's size term, as in process
        request.size = [float(v) for v in np.asarray(size, dtype=float).reshape(-1)]
    if embedding is not None:
        request.visual_embedding = [float(v) for v in np.asarray(embedding).reshape(-1)]
    if crop is not None:
        request.target_crop = rgb_to_msg(np.asarray(crop, dtype=np.uint8))
    return request
