"""The planner node's peers bound to one GraspObject goal (its cancel and its feedback).

- :class:`TargetCrops`: the perception node's crops at the perceived target box
  (``perception/target_crop``), the visual query of HAA-RAG;
- :class:`BoundPerception`: the perceive service, announcing each call as feedback and
  asking again after an error answer;
- :class:`BoundRetriever`: the retrieval service, announcing each query as feedback;
- :class:`BoundSceneGraph`: the scene graph's constraints, where a sub-goal starts;
- :class:`BoundArm`: the executor's arm, its waits cut short by the goal's cancel.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np
from sensor_msgs.msg import Image

from agentic_grasp.backends.dependencies import GoalCanceled, GoalSignal
from agentic_grasp.backends.executor_arm import ExecutorArmBackend
from agentic_grasp.backends.perception_service import PerceptionService
from agentic_grasp.backends.retrieval_service import RetrievalService
from agentic_grasp.backends.scene_graph_service import SceneGraphService
from agentic_grasp.conversions import rgb_from_msg
from agentic_grasp.core.arm import ArmBackend, ArmResult, CancelCheck, PhaseCallback
from agentic_grasp.core.perception.backend import PerceptionResult
from agentic_grasp.core.types import GraspParameters


class TargetCrops:
    """The perception node's target crops (``perception/target_crop``), for the visual query.

    ``expect()`` before a perceive call forgets older crops; ``crop_for(id, wait)`` returns
    the crop of that call's target (waiting up to ``wait`` s, as the crop may arrive just
    after the service's response), or None: then retrieval runs without s_vis.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._crops: Dict[str, np.ndarray] = {}

    def expect(self) -> None:
        with self._cond:
            self._crops.clear()

    def add(self, msg: Image) -> None:
        try:
            crop = rgb_from_msg(msg)
        except Exception:  # noqa: BLE001 - a bad crop only costs the visual query
            return
        with self._cond:
            self._crops[msg.header.frame_id] = crop
            self._cond.notify_all()

    def crop_for(self, target_id: str, wait_s: float) -> Optional[np.ndarray]:
        with self._cond:
            self._cond.wait_for(lambda: target_id in self._crops, timeout=wait_s)
            return self._crops.get(target_id)

    def visual_query(self, wait_s: float) -> Callable[[Any], Optional[np.ndarray]]:
        """The planner's visual query: the crop of the perceived target (ObjectInstance)."""
        def query(target: Any) -> Optional[np.ndarray]:
            return self.crop_for(target.id, wait_s)

        return query


class BoundPerception:
    """The perceive service for one goal: ``perceive(text)`` for the planner.

    An answer with an error (e.g. no colour/depth pair yet) is asked again ``retries`` times
    after ``retry_delay_s``, since such errors pass with the next camera frame; ``announce``
    publishes the ``perceive`` feedback (GoalSession.stage), ``warn`` logs the retry.
    """

    def __init__(self, service: PerceptionService, signal: GoalSignal, crops: TargetCrops,
                 retries: int, retry_delay_s: float, announce: Callable[[str], None],
                 warn: Callable[[str], None]) -> None:
        self._service = service
        self._signal = signal
        self._crops = crops
        self._retries = retries
        self._delay = retry_delay_s
        self._announce = announce
        self._warn = warn

    def __call__(self, text: str) -> PerceptionResult:
        signal = self._signal
        self._announce(f"perceiving: {text}")
        self._crops.expect()
        result = self._service.perceive(text, signal)
        for _ in range(self._retries):
            if result.ok:
                break
            self._warn(f"perception error, asking again: {result.error}")
            self._announce(f"perception error ({result.error}); asking again")
            signal.wait_event(threading.Event(), self._delay)
            if signal.cancelled:
                raise GoalCanceled("canceled while waiting to perceive again")
            result = self._service.perceive(text, signal)
        return result


class BoundRetriever:
    """The retrieval service for one goal: feedback first, waits cut short by its cancel.

    ``announce(text)`` publishes the ``retrieve`` feedback of the goal (GoalSession.stage).
    """

    def __init__(self, service: RetrievalService, signal: GoalSignal,
                 announce: Callable[[str], None]) -> None:
        self._service = service
        self._signal = signal
        self._announce = announce

    def retrieve(self, category: str, affordance: Any, embedding: Any = None,
                 crop: Any = None, embedding_model: Optional[str] = None,
                 k: Optional[int] = None, mode: Optional[str] = None,
                 size: Any = None, perception_backend: Optional[str] = None) -> Any:
        kind = getattr(getattr(affordance, "type", None), "value", affordance)
        self._announce(f"HAA-RAG for category {category!r}, affordance {kind}")
        return self._service.retrieve(category, affordance, embedding, crop, embedding_model,
                                      k, mode, size, perception_backend,
                                      signal=self._signal)


class BoundSceneGraph:
    """The scene graph's ``infer_constraints`` for one goal, as the planner's constraint_fn.

    The planner asks for constraints first thing in a sub-goal, so the call also tells the
    session that the sub-goal on ``target_id`` has started.
    """

    def __init__(self, service: SceneGraphService, signal: GoalSignal, session: Any) -> None:
        self._service = service
        self._signal = signal
        self._session = session

    def __call__(self, objects: Sequence[Any], target_id: str) -> Any:
        self._session.enter(target_id)
        self._session.stage("reason", f"scene graph of {len(objects)} objects, constraints "
                                      f"on {target_id}")
        return self._service.constraints(objects, target_id, self._signal)

    def graph(self, objects: Sequence[Any]) -> Any:
        """The scene graph of a perception, for the task plan (the planner's scene_graph_fn;
        no feedback: the task plan that follows is the step a client sees)."""
        return self._service.graph(objects, self._signal)


class BoundArm(ArmBackend):
    """The executor arm for one goal: its waits are cut short by the goal's cancel."""

    name = "executor"

    def __init__(self, arm: ExecutorArmBackend, signal: GoalSignal) -> None:
        self._arm = arm
        self._signal = signal

    def execute(self, target_id: str, grasp: GraspParameters, on_phase: PhaseCallback,
                is_cancelled: CancelCheck) -> ArmResult:
        return self._arm.execute(target_id, grasp, on_phase, is_cancelled, signal=self._signal)


__all__ = ["BoundArm", "BoundPerception", "BoundRetriever", "BoundSceneGraph", "TargetCrops"]
