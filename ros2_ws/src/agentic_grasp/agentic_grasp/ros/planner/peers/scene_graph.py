"""The planner's constraint function over the scene-graph node's InferConstraints service."""
from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from std_msgs.msg import Header

from agentic_grasp.ros.common.dependencies import DependencyError, GoalSignal
from agentic_grasp.ros.common.peer_call import PeerCall, service_call
from agentic_grasp.ros.conversions.fields import message_key
from agentic_grasp.ros.conversions.scene import (constraint_set_from_msgs, relation_from_msg,
                                                 scene_objects_from_msg)
from agentic_grasp.ros.conversions.perception import scene_to_msg
from agentic_grasp.ros.recording.inputs import tapped
from agentic_grasp.core.scene_graph.constraints import ConstraintSet
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.scene_graph.graph import SceneGraph, graph_from_relations
from agentic_grasp.core.types import ObjectInstance
from agentic_grasp_interfaces.srv import InferConstraints

PEER = "scene_graph"


class TaskGraph(NamedTuple):
    """One InferConstraints answer with ``every_target``: G of a perception, the constraints
    on each of its objects, and the key of the objects it was asked for (:meth:`scene_key`):
    a sub-goal on exactly these objects takes its constraints from here, without a call."""

    graph: SceneGraph
    constraints: Dict[str, ConstraintSet]
    key: bytes


class SceneGraphService:
    """BuildSceneGraph + InferConstraints of (objects, target id), for the planner's
    ConstraintReasoner (goal_peers.BoundSceneGraph), and the task plan's graph with the
    constraints on every object (:meth:`task_graph`), both answered by the scene-graph node
    (which also publishes G for RViz), so the planner in the graph reasons on one graph of
    one configuration, as it does in process.

    A refusal (success=false: a scene the node finds invalid) raises DependencyError rather
    than returning no constraints: grasping next to a fragile neighbour without the
    constraints that protect it is not a safe fallback.
    """

    def __init__(self, node: Node, timeout_s: float, callback_group: CallbackGroup,
                 service: str = "infer_constraints", frame_id: str = "world",
                 source: str = "") -> None:
        client = node.create_client(InferConstraints, service, callback_group=callback_group)
        self._client = client
        self.caller = PeerCall(PEER, timeout_s)   # its liveness watch: set by the planner node
        #: Records each exchange (recording/inputs.DecisionTap; None: not recorded).
        self.tap: Any = None
        self._node = node
        self._frame = frame_id
        self._source = source

    def scene_key(self, objects: Sequence[ObjectInstance]) -> bytes:
        """The objects as the service receives them (the scene message without its stamp,
        by content, :func:`message_key`): two equal keys are answered alike."""
        return message_key(scene_to_msg(objects, Header(frame_id=self._frame),
                                              self._source))

    def _infer(self, objects: Sequence[ObjectInstance], target_id: str,
               signal: Optional[GoalSignal], every_target: bool = False) -> Tuple[Any, Any]:
        header = Header(stamp=self._node.get_clock().now().to_msg(), frame_id=self._frame)
        request = InferConstraints.Request(scene=scene_to_msg(objects, header, self._source),
                                           target_id=target_id, every_target=every_target)
        response = self._answer(request, signal)
        if not response.success:
            raise DependencyError(PEER, f"infer_constraints refused the scene: "
                                        f"{response.message}")
        return request, response

    def _answer(self, request: Any, signal: Optional[GoalSignal]) -> Any:
        """The node's response to ``request`` (replay answers it from the recording)."""
        return tapped(self.tap, "infer_constraints", request, lambda: service_call(
            self.caller, self._client, request, signal))

    def task_graph(self, objects: Sequence[ObjectInstance],
                   signal: Optional[GoalSignal] = None) -> TaskGraph:
        """G of ``objects`` and the constraints on every one of them, from one call (the
        request with ``every_target``; each entry as a request naming it would answer)."""
        request, response = self._infer(objects, "", signal, every_target=True)
        try:
            graph = graph_from_relations(scene_objects_from_msg(request.scene),
                                         [relation_from_msg(r) for r in response.relations])
            every = {e.target_id: constraint_set_from_msgs(e.target_id, e.constraints)
                     for e in response.every_target}
        except ValidationError as exc:
            raise DependencyError(PEER, f"infer_constraints answered an invalid graph: "
                                        f"{exc}") from None
        if set(every) != set(graph.ids):
            raise DependencyError(PEER, "infer_constraints answered constraints for "
                                        f"{sorted(every)}, not for the scene's objects "
                                        f"{sorted(graph.ids)}")
        request.scene.header = Header(frame_id=self._frame)      # the key is stamp-free
        return TaskGraph(graph, every, message_key(request.scene))

    def constraints(self, objects: Sequence[ObjectInstance], target_id: str,
                    signal: Optional[GoalSignal] = None) -> ConstraintSet:
        _, response = self._infer(objects, target_id, signal)
        try:
            return constraint_set_from_msgs(target_id, response.constraints)
        except ValidationError as exc:
            raise DependencyError(PEER, f"infer_constraints answered an invalid constraint: "
                                        f"{exc}") from None
