"""The planner node's peers bound to one GraspObject goal (its cancel and its feedback).

- :class:`WorldClock`: when the world last changed (goal start, end of each arm motion);
- :class:`TargetCrops`: the crop of the last perception answer (cut from its capture), the
  visual query of HAA-RAG;
- :class:`BoundPerception`: the perceive service, asking for a capture at or after the last
  world change, announcing each call as feedback and asking again after an error answer;
- :class:`BoundRetriever`: the retrieval service, announcing each query as feedback;
- :class:`BoundSceneGraph`: the scene graph's constraints, where a sub-goal starts;
- :class:`BoundArm`: the executor's arm, its waits cut short by the goal's cancel.

The four Bound* classes implement the planner's ports (core/planner/ports.py), as the
in-process benchmark's and replay's peers do.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

from agentic_grasp.ros.common.dependencies import GoalCanceled, GoalSignal
from agentic_grasp.ros.planner.peers.executor_arm import ExecutorArmBackend
from agentic_grasp.ros.planner.peers.perception import PerceptionService
from agentic_grasp.ros.planner.peers.retrieval import RetrievalService
from agentic_grasp.ros.planner.peers.scene_graph import SceneGraphService, TaskGraph
from agentic_grasp.ros.conversions.wrist_view import time_of
from agentic_grasp.ros.recording import codec
from agentic_grasp.ros.recording.inputs import tapped
from agentic_grasp.core.arm.backend import (ArmError, ArmResult, CancelCheck, PhaseCallback,
                                            ViewResult, WristCameraInfo)
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.scene_graph.constraints import ConstraintSet
from agentic_grasp.core.perception.backend import PerceptionResult
from agentic_grasp.core.planner.ports import (Arm, ConstraintReasoner, Perceiver,
                                              RetrievalRequest, Retriever)
from agentic_grasp.core.retrieval.results import RetrievalResult
from agentic_grasp.core.scene_graph.graph import SceneGraph
from agentic_grasp.core.types import GraspParameters


class WorldClock:
    """When the world this goal perceives last changed, as far as the planner knows.

    The goal's start (a client loads its scene before it sends the goal) and the end of
    each arm motion (BoundArm marks it, whatever the outcome: the arm may have moved
    something). Perception is asked for a capture taken at or after it.
    """

    def __init__(self, now: Callable[[], Any]) -> None:
        self._now = now
        self.changed = now()

    def mark(self, at: Any = None) -> None:
        """The world changed now, or ``at`` (Time) when the arm says when its motion ended."""
        self.changed = at if at is not None else self._now()


class TargetCrops:
    """The target crop of the last perception answer, for the visual query of HAA-RAG.

    The crop travels in the Perceive response, cut from the capture that answer was
    computed from; ``set`` replaces it with each answer (None when the answer had none), so
    a crop of an earlier capture or another target is never used.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._target_id = ""
        self._crop: Optional[np.ndarray] = None
        self.capture_ns = 0

    def set(self, target_id: str, crop: Optional[np.ndarray], capture_ns: int = 0) -> None:
        with self._lock:
            self._target_id, self._crop, self.capture_ns = target_id, crop, capture_ns

    def crop_for(self, target_id: str) -> Optional[np.ndarray]:
        with self._lock:
            return self._crop if target_id and target_id == self._target_id else None

    def visual_query(self) -> Callable[[Any], Optional[np.ndarray]]:
        """The planner's visual query: the crop of the perceived target (ObjectInstance)."""
        def query(target: Any) -> Optional[np.ndarray]:
            return self.crop_for(target.id)

        return query


class BoundPerception(Perceiver):
    """The perceive service for one goal: the planner's Perceiver in the node graph.

    Each call asks for a capture taken at or after ``world.changed`` and names the goal
    (re-perception is per goal); the answer's crop goes to ``crops``. An answer with an
    error (e.g. no capture in time) is asked again ``retries`` times after
    ``retry_delay_s``; ``announce`` publishes the ``perceive`` feedback
    (GoalSession.stage), ``warn`` logs the retry.
    """

    wrist_camera = True         # look(): the executor's wrist camera (perception decides)

    def __init__(self, service: PerceptionService, signal: GoalSignal, crops: TargetCrops,
                 retries: int, retry_delay_s: float, announce: Callable[[str], None],
                 warn: Callable[[str], None], world: WorldClock, goal_id: str = "") -> None:
        self._service = service
        self._signal = signal
        self._crops = crops
        self._retries = retries
        self._delay = retry_delay_s
        self._announce = announce
        self._warn = warn
        self._world = world
        self._goal_id = goal_id

    def _ask(self, text: str, camera: Any = None) -> PerceptionResult:
        answer = self._service.perceive(text, self._signal, self._world.changed,
                                        self._goal_id, camera)
        target = answer.result.target
        self._crops.set(target.id if target is not None else "", answer.crop,
                        answer.capture_ns)
        return answer.result

    def perceive(self, instruction: str) -> PerceptionResult:
        return self._perceive(instruction)

    def _perceive(self, text: str, camera: Any = None) -> PerceptionResult:
        signal = self._signal
        self._announce(f"perceiving: {text}" + (" (wrist camera)" if camera else ""))
        self._crops.set("", None)
        result = self._ask(text, camera)
        for _ in range(self._retries):
            if result.ok:
                break
            self._warn(f"perception error, asking again: {result.error}")
            self._announce(f"perception error ({result.error}); asking again")
            signal.wait_event(threading.Event(), self._delay)
            if signal.canceled:
                raise GoalCanceled("canceled while waiting to perceive again")
            result = self._ask(text, camera)
        return result

    def look(self, instruction: str, camera: Camera) -> PerceptionResult:
        """Perceive the wrist camera's capture, ``camera`` being the wrist camera where the
        last view motion put it (core Camera)."""
        return self._perceive(instruction, camera)


class BoundRetriever(Retriever):
    """The retrieval service for one goal: feedback first, waits cut short by its cancel.

    ``announce(text)`` publishes the ``retrieve`` feedback of the goal (GoalSession.stage).
    """

    def __init__(self, service: RetrievalService, signal: GoalSignal,
                 announce: Callable[[str], None]) -> None:
        self._service = service
        self._signal = signal
        self._announce = announce

    def retrieve(self, request: RetrievalRequest) -> RetrievalResult:
        affordance = request.affordance
        kind = getattr(getattr(affordance, "type", None), "value", affordance)
        self._announce(f"HAA-RAG for category {request.category!r}, affordance {kind}")
        return self._service.retrieve(request.category, affordance, None, request.crop, None,
                                      request.k, None, request.size,
                                      request.perception_backend, signal=self._signal)


class BoundSceneGraph(ConstraintReasoner):
    """The scene-graph node for one goal, as the planner's ConstraintReasoner.

    The planner asks for constraints first thing in a sub-goal, so the call also tells the
    session that the sub-goal on ``target_id`` has started. The task plan's graph is asked
    with the constraints on every object (SceneGraphService.task_graph): a sub-goal on the
    same objects (the first one, on the perception the plan was made from) takes its
    constraints from that answer, one InferConstraints call fewer; a sub-goal on objects
    perceived since asks the node.
    """

    def __init__(self, service: SceneGraphService, signal: GoalSignal, session: Any) -> None:
        self._service = service
        self._signal = signal
        self._session = session
        self._task: Optional[TaskGraph] = None

    def constraints(self, objects: Sequence[Any], target_id: str) -> ConstraintSet:
        self._session.enter(target_id)
        self._session.stage("reason", f"scene graph of {len(objects)} objects, constraints "
                                      f"on {target_id}")
        task = self._task
        if task is not None and target_id in task.constraints \
                and self._service.scene_key(objects) == task.key:
            return task.constraints[target_id]
        return self._service.constraints(objects, target_id, self._signal)

    def scene_graph(self, objects: Sequence[Any]) -> SceneGraph:
        """The scene graph of a perception, for the task plan (no feedback: the task plan
        that follows is the step a client sees)."""
        self._task = self._service.task_graph(objects, self._signal)
        return self._task.graph


class BoundArm(Arm):
    """The executor arm for one goal: its waits are cut short by the goal's cancel. A view
    motion marks the world clock at the instant the arm reports reaching the view, so the
    wrist look asks for a capture from then on. ``tap`` records each answer as the planner
    gets it (recording/inputs.DecisionTap; None: not recorded)."""

    name = "executor"

    def __init__(self, arm: ExecutorArmBackend, signal: GoalSignal,
                 world: Optional[WorldClock] = None, tap: Any = None) -> None:
        self._arm = arm
        self._signal = signal
        self._world = world
        self._tap = tap

    def _recorded(self, kind: str, request: Any, call: Callable[[], Any],
                  to_data: Callable[[Any], Any]) -> Any:
        return tapped(None if self._tap is None else _DataTap(self._tap, to_data), kind,
                      request, call)

    def execute(self, target_id: str, grasp: GraspParameters, on_phase: PhaseCallback,
                is_canceled: CancelCheck) -> ArmResult:
        try:
            return self._recorded(
                "execute", {"target_id": target_id, "grasp": codec.grasp_data(grasp)},
                lambda: self._arm.execute(target_id, grasp, on_phase, is_canceled,
                                          signal=self._signal), codec.arm_result_data)
        finally:
            if self._world is not None:      # the motion has ended: later captures show it
                self._world.mark()

    def wrist_camera(self) -> Optional[WristCameraInfo]:
        return self._recorded("wrist_camera", None,
                              lambda: self._arm.wrist_camera(self._signal),
                              codec.wrist_camera_data)

    def move_camera_to(self, T_world_cam: Any, is_canceled: CancelCheck) -> ViewResult:
        result = self._recorded(
            "move_camera", {"T_world_cam": np.asarray(T_world_cam, dtype=float).tolist()},
            lambda: self._arm.move_camera_to(T_world_cam, is_canceled, signal=self._signal),
            codec.view_result_data)
        if self._world is not None and result.error != ArmError.NONE:
            self._world.mark()               # refused or stopped: maybe moved, maybe not
        elif self._world is not None:
            self._world.mark(time_of(result.reached_ns) if result.reached_ns else None)
        return result


class _DataTap:
    """A DecisionTap for domain answers: ``to_data`` turns the answer into plain data."""

    def __init__(self, tap: Any, to_data: Callable[[Any], Any]) -> None:
        self._tap, self._to_data = tap, to_data

    def __call__(self, kind: str, request: Any, response: Any) -> None:
        self._tap(kind, request, self._to_data(response))

    def error(self, kind: str, request: Any, exc: BaseException) -> None:
        self._tap.error(kind, request, exc)


__all__ = ["BoundArm", "BoundPerception", "BoundRetriever", "BoundSceneGraph", "TargetCrops",
           "WorldClock"]
