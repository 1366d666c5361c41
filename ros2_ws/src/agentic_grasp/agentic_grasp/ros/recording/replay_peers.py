"""The planner's peers answered from a recording, for replay (replay.py): each answer is the
recorded one while the question is the recorded one (compare.Exchanges checks it), converted
with the live planner's own functions, so an unchanged planner decides again bit for bit.

- :class:`RecordedPerception`: PerceptionService.perceive (the fixed and the wrist camera);
- :class:`RecordedRetrieval`: RetrievalService.retrieve, or recomputed over today's
  knowledge base (:func:`answer_retrieval`, the retrieval node's answer);
- :func:`recorded_scene_graph`: a SceneGraphService answering InferConstraints;
- :class:`RecordedArm`: each attempt's outcome, the wrist camera's model, each view motion;
- :func:`raise_recorded`: what a peer call raised live, raised again.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Sequence

import numpy as np
from builtin_interfaces.msg import Time

from agentic_grasp.core.arm.backend import ArmBackend, CancelCheck, PhaseCallback
from agentic_grasp.ros.recording import codec
from agentic_grasp.ros.recording.compare import Exchanges, data_diff, grasp_diff
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.ros.conversions.retrieval import (retrieval_query_from_msg,
                                                     retrieval_result_from_msg,
                                                     retrieved_strategy_to_msg)
from agentic_grasp.ros.conversions.wrist_view import pose_to_msg
from agentic_grasp_interfaces.srv import InferConstraints, Perceive, RetrieveStrategies


def raise_recorded(error: Mapping[str, Any]) -> None:
    """Raise again what a peer call raised live."""
    # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
    from agentic_grasp.ros.common.dependencies import (DependencyError, DependencyTimeout,
                                                       GoalCanceled, PeerLost)

    kind, peer, detail = error.get("type"), error.get("peer", ""), error.get("detail", "")
    if kind == "GoalCanceled":
        raise GoalCanceled(detail)
    cls = {"DependencyTimeout": DependencyTimeout, "PeerLost": PeerLost,
           "DependencyError": DependencyError}.get(str(kind))
    if cls is None:
        raise RuntimeError(f"recorded {kind}: {detail}")
    raise cls(peer, detail)


class RecordedPerception:
    """PerceptionService.perceive answered from the recording (the fixed and the wrist
    camera alike: the request names which, and where the wrist camera was)."""

    def __init__(self, exchanges: Exchanges) -> None:
        self._ex = exchanges

    def perceive(self, instruction: str, signal: Any = None, not_before: Any = None,
                 goal_id: str = "", camera: Any = None) -> Any:
        # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
        from agentic_grasp.ros.planner.peers.perception import perception_answer

        mine: Dict[str, Any] = {"instruction": instruction,
                                "camera": "wrist" if camera is not None else "fixed"}
        if camera is not None:
            mine["camera_pose"] = codec.msg_to_data(pose_to_msg(camera.T_world_cam))

        def compare(doc: Mapping[str, Any]) -> Dict[str, Any]:
            rec = {k: doc["request"].get(k) for k in mine}
            return data_diff(mine, rec, tol=1e-9)

        doc = self._ex.take("perceive", compare)
        return perception_answer(codec.data_to_msg(Perceive.Response, doc["response"]))


class RecordedRetrieval:
    """RetrievalService.retrieve answered from the recording, or recomputed by ``rag``
    (a callable: the recorded exchange -> an HAARAG-like retriever at that point)."""

    def __init__(self, exchanges: Exchanges, rag: Optional[Callable[[Any], Any]] = None) -> None:
        self._ex = exchanges
        self._rag = rag

    def retrieve(self, category: str, affordance: Any, embedding: Any = None, crop: Any = None,
                 embedding_model: Optional[str] = None, k: Optional[int] = None,
                 mode: Optional[str] = None, size: Optional[Sequence[float]] = None,
                 perception_backend: Optional[str] = None, signal: Any = None) -> Any:
        # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
        from agentic_grasp.ros.planner.peers.retrieval import retrieval_request

        request = retrieval_request(category, affordance, embedding, None, embedding_model, k,
                                    mode, size, perception_backend)
        mine = codec.msg_to_data(request)
        visual = ("target_crop", "visual_embedding")    # the live crop is the recorded one

        def compare(doc: Mapping[str, Any]) -> Dict[str, Any]:
            rec = {k: v for k, v in doc["request"].items() if k not in visual}
            return data_diff({k: v for k, v in mine.items() if k not in visual}, rec)

        doc = self._ex.take("retrieve", compare, recompute=self._rag is not None)
        if self._rag is None:
            return retrieval_result_from_msg(
                codec.data_to_msg(RetrieveStrategies.Response, doc["response"]))
        for key in visual:                       # the visual query as the live one sent it
            if doc is not None and doc["request"].get(key) is not None:
                mine[key] = doc["request"][key]
        request = codec.data_to_msg(RetrieveStrategies.Request, mine)
        return retrieval_result_from_msg(answer_retrieval(self._rag(doc), request))


def answer_retrieval(rag: Any, request: Any) -> Any:
    """The retrieval node's answer to ``request`` (ros/retrieval/node.py _on_retrieve,
    without its logging)."""
    # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
    from agentic_grasp.ros.retrieval.node import affordance_weights

    response = RetrieveStrategies.Response()
    try:
        result = rag.retrieve(**retrieval_query_from_msg(request))
    except ValidationError as exc:
        response.success, response.message = False, str(exc)
        return response
    weights = affordance_weights(rag.config)
    response.success, response.message = True, result.reason
    response.strategies = [retrieved_strategy_to_msg(s, weights) for s in result.strategies]
    response.candidates_level1 = int(result.n_level1)
    response.candidates_level2 = int(result.n_level2)
    return response


def recorded_scene_graph(exchanges: Exchanges) -> Any:
    """A SceneGraphService whose InferConstraints answers come from the recording."""
    # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
    from agentic_grasp.ros.planner.peers.scene_graph import SceneGraphService

    class _Clock:
        def now(self) -> "_Clock":
            return self

        def to_msg(self) -> Time:
            return Time()

    class _Node:
        def get_clock(self) -> _Clock:
            return _Clock()

    class RecordedSceneGraph(SceneGraphService):
        def __init__(self) -> None:          # no node, no client: the recording answers
            self.caller, self.tap, self._node = None, None, _Node()
            self._frame, self._source = "world", "planner"

        def _answer(self, request: Any, signal: Any) -> Any:
            mine = codec.msg_to_data(request)
            mine["scene"].pop("header", None)

            def compare(doc: Mapping[str, Any]) -> Dict[str, Any]:
                rec = dict(doc["request"])
                rec["scene"] = {k: v for k, v in rec["scene"].items() if k != "header"}
                return data_diff(mine, rec)

            doc = exchanges.take("infer_constraints", compare)
            return codec.data_to_msg(InferConstraints.Response, doc["response"])

    return RecordedSceneGraph()


class RecordedArm(ArmBackend):
    """The arm answered from the recording: each attempt's outcome while the planned grasp
    is the recorded one, the wrist camera's model, each view motion's result."""

    name = "replay"

    def __init__(self, exchanges: Exchanges) -> None:
        self._ex = exchanges

    def execute(self, target_id: str, grasp: Any, on_phase: PhaseCallback,
                is_canceled: CancelCheck) -> Any:
        def compare(doc: Mapping[str, Any]) -> Dict[str, Any]:
            req = doc["request"]
            diff = grasp_diff(grasp, codec.grasp_from_data(req["grasp"]))
            if req["target_id"] != target_id:
                diff["target_id"] = [target_id, req["target_id"]]
            return diff

        doc = self._ex.take("execute", compare, target_id=target_id)
        return codec.arm_result_from_data(doc["response"])

    def wrist_camera(self) -> Any:
        doc = self._ex.take("wrist_camera", lambda _doc: {})
        return codec.wrist_camera_from_data(doc["response"])

    def move_camera_to(self, T_world_cam: Any, is_canceled: CancelCheck) -> Any:
        mine = np.asarray(T_world_cam, dtype=float)

        def compare(doc: Mapping[str, Any]) -> Dict[str, Any]:
            rec = np.asarray(doc["request"]["T_world_cam"], dtype=float)
            return {} if np.allclose(mine, rec, atol=1e-9) else \
                {"view_pose": [mine.round(6).tolist(), rec.round(6).tolist()]}

        doc = self._ex.take("move_camera", compare)
        return codec.view_result_from_data(doc["response"])


class Quiet:
    """GoalSession's place for BoundSceneGraph: no feedback in replay."""

    def enter(self, _target_id: str) -> None:
        pass

    def stage(self, *_args: Any, **_kwargs: Any) -> None:
        pass


__all__ = ["Quiet", "RecordedArm", "RecordedPerception", "RecordedRetrieval",
           "answer_retrieval", "raise_recorded", "recorded_scene_graph"]
