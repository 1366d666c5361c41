"""The in-process implementations of the planner's ports (ports.py): HAA-RAG and the scene
graph called directly, and a perceiver made of plain functions.

The in-process benchmark (episode.py) and replay (ros/recording/replay.py) use
:class:`HaaRagRetriever` and :class:`SceneGraphReasoner`; the node graph's planner node
implements the same ports over its peers' services (ros/planner/goal_peers.py).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.scene_graph.constraints import ConstraintSet, infer_constraints
from agentic_grasp.core.perception.backend import PerceptionResult
from agentic_grasp.core.planner.ports import (ConstraintReasoner, Perceiver, RetrievalRequest,
                                              Retriever)
from agentic_grasp.core.scene_graph.graph import SceneGraph, build_scene_graph
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.types import ObjectInstance


class HaaRagRetriever(Retriever):
    """A core HAA-RAG (HAARAG, or a LiveRetriever that grows) as the planner's Retriever.

    The request's fields go to ``rag.retrieve`` as its keyword arguments, every one of them
    every time (the perceived size included), as the retrieval node passes them on.
    """

    def __init__(self, rag: Any) -> None:
        if rag is None:
            raise TypeError("HaaRagRetriever needs a HAA-RAG (core.retrieval.HAARAG)")
        self.rag = rag

    def retrieve(self, request: RetrievalRequest) -> Any:
        return self.rag.retrieve(request.category, request.affordance, crop=request.crop,
                                 size=request.size, k=request.k,
                                 perception_backend=request.perception_backend)


def as_retriever(rag: Any) -> Optional[Retriever]:
    """``rag`` as the planner's Retriever: a Retriever as it is, None as None, a core HAA-RAG
    wrapped in :class:`HaaRagRetriever` (for callers that hold the HAA-RAG itself)."""
    if rag is None or isinstance(rag, Retriever):
        return rag
    return HaaRagRetriever(rag)


class SceneGraphReasoner(ConstraintReasoner):
    """BuildSceneGraph + InferConstraints in process, of one configuration and camera
    (None: the default SceneGraphConfig, and the fixed camera of config/camera.yaml, as
    build_scene_graph defaults)."""

    def __init__(self, config: Optional[SceneGraphConfig] = None,
                 camera_position: Optional[Sequence[float]] = None) -> None:
        self.config = config if config is not None else SceneGraphConfig()
        self.camera_position = camera_position

    def scene_graph(self, objects: Sequence[ObjectInstance]) -> SceneGraph:
        return build_scene_graph(objects, self.camera_position, self.config)

    def constraints(self, objects: Sequence[ObjectInstance], target_id: str) -> ConstraintSet:
        graph = build_scene_graph(objects, self.camera_position, self.config)
        return infer_constraints(graph, target_id, self.config)


class FunctionPerceiver(Perceiver):
    """A perceiver made of functions: ``perceive(instruction)`` and, for a wrist camera,
    ``look(instruction, camera)`` (None: no wrist camera)."""

    def __init__(self, perceive: Callable[[str], PerceptionResult],
                 look: Optional[Callable[[str, Camera], PerceptionResult]] = None) -> None:
        self._perceive = perceive
        self._look = look
        self.wrist_camera = look is not None

    def perceive(self, instruction: str) -> PerceptionResult:
        return self._perceive(instruction)

    def look(self, instruction: str, camera: Camera) -> PerceptionResult:
        if self._look is None:
            return super().look(instruction, camera)
        return self._look(instruction, camera)


__all__ = ["FunctionPerceiver", "HaaRagRetriever", "SceneGraphReasoner", "as_retriever"]
