"""The planner's peers as ports: what :class:`ReflectivePlanner` asks of the world.

Four small abstract classes, each with typed requests and answers, so the three ways of
running the planner supply the same peers and cannot drift apart:

- :class:`Perceiver`: episode.CameraPerception (in process), goal_peers.BoundPerception
  (the planner node), replay.ReplayPerception (replay);
- :class:`Retriever`: peers.HaaRagRetriever (in process and replay),
  goal_peers.BoundRetriever (the retrieval node's service);
- :class:`ConstraintReasoner`: peers.SceneGraphReasoner (in process and replay),
  goal_peers.BoundSceneGraph (the scene-graph node's service);
- :class:`Arm`: core.arm.InProcessSimArm (in process), goal_peers.BoundArm (the executor),
  replay.ReplayArm (the recorded outcomes).

The planner refuses (TypeError) a peer that does not subclass its port: a duck-typed object
with a near-miss signature would otherwise be found out only mid-goal. :class:`Arm` is the
executor's :class:`~agentic_grasp.core.arm.ArmBackend` itself: the planner asks of an arm
exactly what the executor's backends already answer (typed ArmResult and ViewResult), and
the arm backends sit below the planner, so the ABC lives with them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.arm.backend import ArmBackend
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.scene_graph.constraints import ConstraintSet
from agentic_grasp.core.perception.backend import PerceptionResult
from agentic_grasp.core.retrieval.haa_rag import RetrievalResult
from agentic_grasp.core.scene_graph.graph import SceneGraph
from agentic_grasp.core.types import AffordanceDescriptor, ObjectInstance


#: The planner's arm: one grasp attempt (execute) and, where the arm carries one, the wrist
#: camera's model and view motions (core/arm.py).
Arm = ArmBackend


class Perceiver(ABC):
    """Perception from pixels for the planner: a fresh PerceptionResult per question.

    ``perceive`` looks through the fixed camera; ``look`` through the wrist camera where the
    last view motion put it. A perceiver without a wrist camera leaves ``wrist_camera``
    False: the planner then never asks it to look (a hidden target is reported not found).
    """

    #: Whether :meth:`look` may be asked (the wrist-camera search of instruction/uncover.py).
    wrist_camera: bool = False

    @abstractmethod
    def perceive(self, instruction: str) -> PerceptionResult:
        """The fixed camera's view, perceived for ``instruction`` (its target named)."""

    def look(self, instruction: str, camera: Camera) -> PerceptionResult:
        """The wrist camera's capture, ``camera`` being where the view motion left it."""
        raise NotImplementedError(f"{type(self).__name__} has no wrist camera")


@dataclass(frozen=True)
class RetrievalRequest:
    """One HAA-RAG query: the perceived target's category, affordance and size (m, the
    affordance fallback's size term), the visual query (an RGB crop, None = none), ``k``
    (None = the retriever's configured k) and what perceived the target (experiences
    acquired under the oracle serve oracle runs only)."""

    category: str
    affordance: AffordanceDescriptor
    size: Tuple[float, ...]
    crop: Optional[np.ndarray] = None
    k: Optional[int] = None
    perception_backend: str = ""

    @classmethod
    def of(cls, target: ObjectInstance, crop: Optional[np.ndarray], k: Optional[int],
           perception_backend: str) -> "RetrievalRequest":
        """The query for a perceived target (its affordance must be known)."""
        if target.affordance is None:
            raise ValueError(f"no affordance perceived for {target.id}: nothing to retrieve")
        size = tuple(float(v) for v in np.asarray(target.size, dtype=float).reshape(-1))
        return cls(target.category, target.affordance, size, crop, k, perception_backend)


class Retriever(ABC):
    """HAA-RAG for the planner: the top-k strategies for a perceived target."""

    @abstractmethod
    def retrieve(self, request: RetrievalRequest) -> RetrievalResult:
        """The ranked strategies (RetrievalResult of core/retrieval/haa_rag.py)."""


class ConstraintReasoner(ABC):
    """BuildSceneGraph + InferConstraints of one configuration and camera: the task plan's
    scene graph and each sub-goal's constraints come from the same reasoning."""

    @abstractmethod
    def scene_graph(self, objects: Sequence[ObjectInstance]) -> SceneGraph:
        """The scene graph of a perception (the task plan's support order)."""

    @abstractmethod
    def constraints(self, objects: Sequence[ObjectInstance], target_id: str) -> ConstraintSet:
        """The constraints on ``target_id`` in the scene graph of ``objects``; the planner
        asks first thing in a sub-goal."""


def require_port(value: object, port: type, what: str, optional: bool = False) -> None:
    """TypeError unless ``value`` implements ``port`` (None allowed when ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, port):
        name = "Arm (core.arm.ArmBackend)" if port is Arm else port.__name__
        raise TypeError(f"the planner's {what} must implement "
                        f"agentic_grasp.core.planner.ports.{name}"
                        f"{' or be None' if optional else ''}; got "
                        f"{type(value).__module__}.{type(value).__qualname__}")


__all__ = ["Arm", "ConstraintReasoner", "Perceiver", "RetrievalRequest", "Retriever",
           "require_port"]
