"""Planner node: the public ``grasp_object`` action (GraspObject), paper Sec. IV.

Per goal: instruction -> ReflectivePlanner.run_task (Algorithm 1 per sub-goal; the loop lives
in agentic_grasp.core.planner) with its four peers reached over ROS:

- perceive: the perception node's ``perceive`` service, before the task, before every
  sub-goal (a long-horizon task re-perceives: the grasped object has left the table) and
  after every failed attempt; an answer with an error (e.g. no colour/depth pair yet) is
  asked again ``perceive_retries`` times after ``perceive_retry_delay_s``, since such
  errors pass with the next camera frame;
- HAA-RAG: the retrieval node's ``retrieve_strategies`` service, once per sub-goal, with
  the perception node's camera crop at the perceived target box (``perception/target_crop``)
  as ``target_crop`` when ``visual_query`` is camera (the default), so s_vis is computed by
  the retrieval node's configured embedding model;
- scene graph + constraints: the scene-graph node's ``infer_constraints`` service, once per
  sub-goal (the node also publishes G and its markers for RViz);
- the arm: the executor's ``execute_grasp`` action, one goal per attempt.

Goal policy:

- one goal at a time: a goal arriving while one runs is rejected (GoalResponse.REJECT, the
  only answer rclpy's goal callback can give, so the reason is logged here);
- a malformed goal (empty instruction, more than ``max_instruction_chars`` characters, an
  unknown configuration) is *accepted and aborted at once* with ERROR_INVALID_GOAL and the
  reason in ``message``: a rejection carries no text, and the caller should see why;
- ``configuration`` "" runs the node's ``configuration`` parameter (default "full"), any
  other Table II name that configuration (core/planner/configurations.py);
- cancel is honoured between sub-goals, between attempts and during an attempt: the running
  ExecuteGrasp goal is canceled too (the arm stops before its next phase), and a wait on
  perception, retrieval or the scene graph is abandoned at once;
- every peer call has a timeout (``timeouts.*``); a peer that does not answer ends the goal
  with ERROR_DEPENDENCY_TIMEOUT and a message naming the node that did not answer. An
  executor whose arm is unavailable ends it the same way (see ExecutorArmBackend);
- a peer that *dies* during the goal (``PEERS``; agentic_grasp.liveness reports it within a
  one-second lease) ends it at once with ERROR_PEER_LOST naming the peer, the running
  ExecuteGrasp goal canceled; a goal that arrives while a lost peer is not back yet ends the
  same way at once;
- the result lists every attempt (AttemptRecord) and the ids grasped; a failed grasp is
  aborted with ERROR_GRASP_FAILED, perception errors with ERROR_PERCEPTION_FAILED, an
  instruction naming nothing perceived with ERROR_TARGET_NOT_FOUND, a cancel ends CANCELED
  with ERROR_CANCELED.

Feedback: one message per step with ``stage`` perceive | retrieve | reason | plan | execute
| reflect | done, the sub-goal (0-based index and count; the count grows when a support
dependency inserts a prerequisite), target, attempt index r, retry level, and for
``reflect`` the failure type and correction. ``thought`` is the step's text: the Thought of
Algorithm 1 at ``plan``, the motion phase at ``execute``, the evidence at ``reflect``.

Topics: ``planner/attempts`` (AttemptRecord, reliable, every attempt as it ends, with the
GraspOutcome exactly as the executor returned it), ``planner/goal_log`` (GoalLog, one per
goal when it ends: instruction, configuration, stamps, result; latched with a history, see
agentic_grasp.goal_log) and ``planner/markers`` (MarkerArray,
latched: the grasp about to be executed: approach arrow from the pre-grasp pose, the two
fingers at the commanded opening, a label with grasp type, force and width).

Episodic memory (Sec. IV-C) lives for the node's session: one memory per Table II
configuration, kept across goals, so a cup grasped once is grasped from memory the next
time; ``memory_lifetime: goal`` empties it at every goal instead (benchmark trials).
``memory_scope`` of config/planner.yaml is the in-process episode runner's switch. The
level-3 perturbation generator is reseeded with ``seed`` at every goal, so a goal's outcome
does not depend on the goals before it, except through episodic memory.

Parameters: every key of ``planner: ros__parameters:`` in config/planner.yaml (the core's
PlannerConfig, dotted names such as ``corrections.slip_force_scale``) plus the node-level
ones of its second section (``timeouts.*``, ``max_instruction_chars``, ``result_timeout_s``,
``memory_lifetime``, ``world_frame``, ``perceive_retries``, ``perceive_retry_delay_s``).
All are read at start-up.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from geometry_msgs.msg import Pose, Quaternion, Vector3
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from agentic_grasp import goal_log, qos
from agentic_grasp.backends.dependencies import (DependencyError, DependencyTimeout,
                                                 GoalCanceled, GoalSignal, PeerLost)
from agentic_grasp.backends.executor_arm import ExecutorArmBackend
from agentic_grasp.backends.perception_service import PerceptionService
from agentic_grasp.backends.retrieval_service import RetrievalService
from agentic_grasp.backends.scene_graph_service import SceneGraphService
from agentic_grasp.conversions import attempt_record_to_msg, point, rgb_from_msg
from agentic_grasp.core.arm import ArmBackend, ArmResult, CancelCheck, PhaseCallback
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.retrieval.acquisition import (Acquirer, AcquisitionContext,
                                                      resolve_acquired_path)
from agentic_grasp.core.kinematics import closing_axis
from agentic_grasp.core.planner import (CONFIGURATIONS, STATUS_BLOCKED, STATUS_CANCELED,
                                        STATUS_NOT_PERCEIVED, EpisodicMemory, PlannerConfig,
                                        ReflectivePlanner, TaskOutcome, get_configuration)
from agentic_grasp.core.planner.memory import MemoryLifetime
from agentic_grasp.core.types import GraspParameters
from agentic_grasp.liveness import PeerMonitor
from agentic_grasp.nodes.runner import spin_node
from agentic_grasp.params import declare
from agentic_grasp_interfaces.action import GraspObject
from agentic_grasp_interfaces.msg import AttemptRecord, GoalLog

NODE_NAME = "planner"
ACTION = "grasp_object"
ATTEMPTS_TOPIC = "planner/attempts"
MARKERS_TOPIC = "planner/markers"
#: The perception node's camera crop at the perceived target box (the visual query).
CROP_TOPIC = "perception/target_crop"
STAGES = ("perceive", "retrieve", "reason", "plan", "execute", "reflect", "done")
MEMORY_LIFETIMES = ("session", "goal")
#: Threads of the node's executor: the goal's own thread, the peers' responses and feedback,
#: the goal and cancel callbacks of a second client, with room to spare.
EXECUTOR_THREADS = 6
#: Nodes a goal cannot go on without: the four the planner calls and the executor's simulated
#: arm (never seen alive with arm:=moveit, so never reported lost there).
PEERS = ("perception", "retrieval", "scene_graph", "executor", "sim")

Result = GraspObject.Result

# ---- parameters ------------------------------------------------------------------------------

#: Descriptions of the core's planner parameters (config/planner.yaml explains each in full).
PLANNER_DESCRIPTIONS: Dict[str, str] = {
    "configuration": "Table II configuration run when a goal leaves it empty: "
                     + ", ".join(CONFIGURATIONS),
    "max_retries": "Rmax: retries after the first attempt (up to Rmax + 1 attempts per "
                   "sub-goal)",
    "seed": "Seed of the level-3 perturbation generator, reseeded at every goal",
    "level_by": "Attempt index that selects the correction level: failed_attempt (paper) or "
                "next_attempt",
    "level1_max_index": "r <= this gives a level-1 correction",
    "level2_index": "r == this gives a level-2 correction (larger r: level 3)",
    "escalate_unchanged": "Replace a correction that changes nothing by the next level's",
    "memory_scope": "Episodic memory scope of the in-process episode runner (trial | "
                    "session); this node uses memory_lifetime",
    "strategy_direction_tolerance_rad": "Largest angle between a retrieved strategy's "
                                        "approach and a constraint-imposed one (rad)",
    "rebase_min_shift_m": "Target shift after which the grasps follow a re-perceived target "
                          "(m)",
    "rebase_min_yaw_rad": "Target turn after which the grasps follow a re-perceived target "
                          "(rad)",
    "continue_after_subgoal_failure": "Go on with the next sub-goal after one failed",
    "episode_visual_query": "s_vis source of the in-process episode runner (none | render)",
}
#: Descriptions of the parameter groups (one per PlannerConfig section).
SECTION_DESCRIPTIONS: Dict[str, str] = {
    "default_grasp": "Fixed default grasp (w/o HAA-RAG and retrieval fallback)",
    "limits": "Bounds every planned grasp is clipped into",
    "classification": "ClassifyFailure (14-type taxonomy)",
    "corrections": "Level-1 correction rule",
    "level2": "Level-2 grasp-type rotation",
    "level3": "Level-3 replan perturbation",
    "time_model": "Modelled compute time per stage (episode results)",
    "grasp_synthesis": "Grasp fitting, Franka Hand model and clearance-aware candidates",
}
_UNITS = {"_m": "m", "_n": "N", "_s": "s", "_rad": "rad", "_mps": "m/s"}


def _unit(name: str) -> str:
    return next((f" ({unit})" for suffix, unit in _UNITS.items() if name.endswith(suffix)), "")


def planner_parameter_defaults(config: Optional[PlannerConfig] = None) -> Dict[str, Any]:
    """Every PlannerConfig field as a dotted ROS parameter name -> default value."""
    config = config if config is not None else PlannerConfig()
    out: Dict[str, Any] = {}
    for f in fields(config):
        value = getattr(config, f.name)
        if not is_dataclass(value):
            out[f.name] = value
            continue
        for sub in fields(value):
            inner = getattr(value, sub.name)
            if isinstance(inner, dict):
                for key, item in inner.items():
                    out[f"{f.name}.{sub.name}.{key}"] = item
            elif is_dataclass(inner):               # grasp_synthesis.hand
                for leaf in fields(inner):
                    item = getattr(inner, leaf.name)
                    out[f"{f.name}.{sub.name}.{leaf.name}"] = \
                        list(item) if isinstance(item, tuple) else item
            else:
                out[f"{f.name}.{sub.name}"] = list(inner) if isinstance(inner, tuple) else inner
    return out


def planner_parameter_description(name: str) -> str:
    if name in PLANNER_DESCRIPTIONS:
        return PLANNER_DESCRIPTIONS[name]
    section, _, rest = name.partition(".")
    prefix = SECTION_DESCRIPTIONS.get(section, section)
    return f"{prefix}: {rest.replace('.', ' ')}{_unit(rest)} (config/planner.yaml)"


@dataclass(frozen=True)
class NodeSettings:
    """The node-level parameters (second section of config/planner.yaml)."""

    perceive_timeout_s: float = 30.0
    retrieve_timeout_s: float = 5.0
    constraints_timeout_s: float = 5.0
    execute_timeout_s: float = 30.0
    max_instruction_chars: int = 500
    result_timeout_s: int = 30
    memory_lifetime: str = "session"
    world_frame: str = "world"
    perceive_retries: int = 1
    perceive_retry_delay_s: float = 0.5
    visual_query: str = "camera"
    crop_wait_s: float = 0.5

    def __post_init__(self) -> None:
        if self.visual_query not in ("camera", "none"):
            raise ConfigError(f"visual_query must be camera or none, got {self.visual_query!r}")
        if not 0.0 <= float(self.crop_wait_s) < 10.0:
            raise ConfigError("crop_wait_s must be in [0, 10) s")
        for name in ("perceive_timeout_s", "retrieve_timeout_s", "constraints_timeout_s",
                     "execute_timeout_s"):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value <= 0.0:
                raise ConfigError(f"timeouts.{name[:-len('_timeout_s')]}_s must be > 0 s, "
                                  f"got {value}")
        if self.max_instruction_chars < 1:
            raise ConfigError("max_instruction_chars must be >= 1")
        if self.result_timeout_s < 1:
            raise ConfigError("result_timeout_s must be >= 1")
        if self.perceive_retries < 0 or not 0.0 <= self.perceive_retry_delay_s < 60.0:
            raise ConfigError("perceive_retries must be >= 0 and perceive_retry_delay_s in "
                              "[0, 60) s")
        if self.memory_lifetime not in MEMORY_LIFETIMES:
            raise ConfigError(f"memory_lifetime must be one of {MEMORY_LIFETIMES}, got "
                              f"{self.memory_lifetime!r}")


def validate_goal(instruction: str, configuration: str, default_configuration: str,
                  max_chars: int) -> Tuple[str, str]:
    """(reason, configuration name): reason is "" for a goal the planner can run."""
    text = instruction.strip()
    if not text:
        return "instruction is empty: say what to grasp, e.g. 'pick up the banana'", ""
    if len(instruction) > max_chars:
        return (f"instruction is {len(instruction)} characters long; at most {max_chars} "
                "are accepted"), ""
    name = configuration.strip() or default_configuration
    try:
        get_configuration(name)
    except ConfigError as exc:
        return str(exc), ""
    return "", name


# ---- RViz markers of the planned grasp -------------------------------------------------------

#: Marker geometry (RViz only): Franka finger plate and pad size, text height (m).
_FINGER_SIZE = (0.012, 0.020, 0.055)
_PAD_BEYOND_TCP = 0.010
_TEXT_HEIGHT = 0.02


def _quaternion(rotation: np.ndarray) -> Quaternion:
    """Unit quaternion of a proper rotation matrix (Shepperd's method)."""
    m = rotation
    trace = float(m[0, 0] + m[1, 1] + m[2, 2])
    if trace > 0.0:
        s = 2.0 * math.sqrt(trace + 1.0)
        w, x, y, z = 0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, \
            (m[1, 0] - m[0, 1]) / s
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        w, x, y, z = (m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, \
            (m[0, 2] + m[2, 0]) / s
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        w, x, y, z = (m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, \
            (m[1, 2] + m[2, 1]) / s
    else:
        s = 2.0 * math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        w, x, y, z = (m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, \
            (m[1, 2] + m[2, 1]) / s, 0.25 * s
    return Quaternion(x=float(x), y=float(y), z=float(z), w=float(w))


def grasp_markers(grasp: GraspParameters, header: Header, label: str = "",
                  candidate: Optional[Dict[str, Any]] = None) -> MarkerArray:
    """The planned grasp for RViz: DELETEALL, approach arrow, two fingers, a label (with the
    chosen candidate and its clearance to the perceived neighbours, in clearance mode)."""
    p = np.asarray(grasp.position, dtype=float)
    a = np.asarray(grasp.approach, dtype=float)
    c = closing_axis(a, grasp.wrist_yaw)
    rotation = np.column_stack([c, np.cross(a, c), a])      # x: closing, z: approach
    ns = "planned_grasp"
    markers = [Marker(header=header, ns=ns, id=0, action=Marker.DELETEALL)]
    standoff = max(float(grasp.approach_height), 0.05)
    markers.append(Marker(header=header, ns=ns, id=1, type=Marker.ARROW, action=Marker.ADD,
                          pose=Pose(), points=[point(p - standoff * a), point(p)],
                          scale=Vector3(x=0.008, y=0.016, z=0.025),
                          color=ColorRGBA(r=0.1, g=0.9, b=0.3, a=1.0)))
    along = _FINGER_SIZE[2] / 2.0 - _PAD_BEYOND_TCP
    for index, side in ((2, 1.0), (3, -1.0)):
        centre = p + side * (grasp.width / 2.0 + _FINGER_SIZE[0] / 2.0) * c - along * a
        markers.append(Marker(header=header, ns=ns, id=index, type=Marker.CUBE,
                              action=Marker.ADD,
                              pose=Pose(position=point(centre),
                                        orientation=_quaternion(rotation)),
                              scale=Vector3(x=_FINGER_SIZE[0], y=_FINGER_SIZE[1],
                                            z=_FINGER_SIZE[2]),
                              color=ColorRGBA(r=0.85, g=0.85, b=0.9, a=0.9)))
    text = (f"{label}{grasp.grasp_type.value}, {grasp.force:.1f} N, "
            f"{grasp.width * 1e3:.0f} mm")
    if candidate:
        clear = candidate.get("clearance_m")
        text += (f"\n{candidate.get('label', '')}: clearance "
                 + ("free (no neighbour near)" if clear is None else f"{clear * 1e3:.0f} mm")
                 + ("" if candidate.get("collision_free") else " NOT collision-free")
                 + (f" ({candidate['nearest']})" if candidate.get("nearest") else ""))
    markers.append(Marker(header=header, ns=ns, id=4, type=Marker.TEXT_VIEW_FACING,
                          action=Marker.ADD,
                          pose=Pose(position=point(p + np.array([0.0, 0.0, 0.08]))),
                          scale=Vector3(z=_TEXT_HEIGHT),
                          color=ColorRGBA(r=1.0, g=1.0, b=1.0, a=1.0), text=text))
    return MarkerArray(markers=markers)


# ---- one goal: planner events -> feedback and attempt records ------------------------------

@dataclass
class _Draft:
    """An attempt between its Thought and its reflection."""

    subgoal_index: int
    target_id: str
    attempt: int
    retry_level: int
    thought: str
    grasp: Optional[GraspParameters]
    started: float
    candidate: Optional[Dict[str, Any]] = None
    outcome: Any = None
    duration_s: float = 0.0
    ended: bool = False


class GoalSession:
    """Turns the planner's events of one goal into feedback, AttemptRecords and markers.

    Called from the goal's thread and, for motion phases, from the thread that delivers the
    executor's feedback; a lock keeps the two in order.
    """

    def __init__(self, goal_id: str, feedback: Callable[[GraspObject.Feedback], None],
                 publish_attempt: Callable[[AttemptRecord], None],
                 publish_grasp: Callable[..., None],
                 last_outcome: Callable[[], Any], header: Callable[[], Header]) -> None:
        self.goal_id = goal_id
        self._feedback = feedback
        self._publish_attempt = publish_attempt
        self._publish_grasp = publish_grasp
        self._last_outcome = last_outcome
        self._header = header
        self._lock = threading.RLock()
        self.records: List[AttemptRecord] = []
        self.grasped: List[str] = []
        self.subgoal_index = -1
        self.subgoal_count = 0
        self._target = ""
        self._between = True               # no sub-goal running (start, or after a result)
        self._draft: Optional[_Draft] = None
        self._attempt = 0
        self._level = 0

    # ---- feedback ---------------------------------------------------------------------------
    def stage(self, stage: str, thought: str = "", target_id: Optional[str] = None,
              failure_type: str = "", correction: str = "",
              retry_level: Optional[int] = None, upcoming: bool = False) -> None:
        """Publish one feedback message (``stage`` one of STAGES); ``upcoming``: about the
        sub-goal that has not started yet (the perception before it)."""
        with self._lock:
            ahead = upcoming and self._between
            index = max(0, self.subgoal_index + 1 if ahead else self.subgoal_index)
            if target_id is None:
                target_id = "" if ahead else self._target
            self._feedback(GraspObject.Feedback(
                stage=stage, subgoal_index=index,
                subgoal_count=max(self.subgoal_count, index + 1),
                target_id=target_id, attempt=0 if ahead else self._attempt,
                retry_level=(int(retry_level) if retry_level is not None
                             else 0 if ahead else self._level),
                failure_type=failure_type, correction=correction, thought=thought))

    def enter(self, target_id: str) -> None:
        """The sub-goal on ``target_id`` has started (its first event or constraint call)."""
        with self._lock:
            self._enter(target_id)

    def _enter(self, target_id: str) -> None:
        if self._between or target_id != self._target:
            self.subgoal_index += 1
            self.subgoal_count = max(self.subgoal_count, self.subgoal_index + 1)
            self._target, self._between = target_id, False
            self._attempt, self._level = 0, 0

    # ---- planner events ---------------------------------------------------------------------
    def on_event(self, event: Dict[str, Any]) -> None:
        with self._lock:
            kind = event.get("event")
            if kind == "task_plan":
                self.subgoal_count = len(event.get("subgoals", []))
                order = ", ".join(s["target_id"] for s in event.get("subgoals", []))
                self.stage("plan", f"task plan ({event.get('kind')}): {order or 'nothing'}",
                           target_id="")
                return
            if kind == "task_result":
                self._flush()
                self._between = True
                return
            target = str(event.get("target_id", ""))
            if kind != "phase":
                self._enter(target)
            if kind == "plan":
                self.stage("plan", f"initial grasp from {event.get('initial_source')}: "
                                   f"{event.get('detail')}")
            elif kind == "thought":
                self._flush()
                self._attempt = int(event.get("attempt", 0))
                self._level = int(event.get("retry_level", 0))
                grasp = GraspParameters.from_dict(event["grasp"]) if event.get("grasp") \
                    else None
                candidate = event.get("candidate")
                self._draft = _Draft(self.subgoal_index, target, self._attempt, self._level,
                                     str(event.get("text", "")), grasp, time.perf_counter(),
                                     candidate)
                if grasp is not None:
                    self._publish_grasp(grasp, f"{target} #{self._attempt + 1}: ", candidate)
                self.stage("plan", str(event.get("text", "")))
            elif kind == "phase":
                self.stage("execute", f"{event.get('phase')} ({event.get('index')}/"
                                      f"{event.get('count')})")
            elif kind == "observation":
                self._observe(event)
            elif kind == "reflection":
                diagnosis = event.get("diagnosis") or {}
                correction = event.get("correction") or {}
                if self._draft is not None:
                    self._flush(diagnosis, correction)
                self.stage("reflect", str(diagnosis.get("evidence", "")),
                           failure_type=str(diagnosis.get("failure_type", "")),
                           correction=str(correction.get("text", "")),
                           retry_level=int(correction.get("level", 0)))
            elif kind == "result":
                self._flush()
                if event.get("success"):
                    self.grasped.append(target)
                if event.get("status") == STATUS_BLOCKED:
                    self.subgoal_count += len(event.get("prerequisites", [])) + 1
                self._between = True

    def _observe(self, event: Dict[str, Any]) -> None:
        draft = self._draft
        if draft is None:
            return
        draft.outcome = self._last_outcome()
        draft.duration_s = time.perf_counter() - draft.started
        draft.ended = True
        outcome = event.get("outcome") or {}
        if event.get("success"):
            text = f"attempt {draft.attempt + 1} succeeded (Q {outcome.get('quality', 0):.2f})"
            self.stage("execute", text)
            self._flush()
        elif event.get("arm_error") not in (None, "NONE"):
            self.stage("execute", f"attempt {draft.attempt + 1} not run: {event['arm_error']}")
        else:
            events = ", ".join(f"{e['kind']}:{e['phase']}" for e in outcome.get("events", []))
            self.stage("execute", f"attempt {draft.attempt + 1} failed at "
                                  f"{outcome.get('phase_reached', '?')}"
                                  + (f" ({events})" if events else ""))

    def _flush(self, diagnosis: Optional[Dict[str, Any]] = None,
               correction: Optional[Dict[str, Any]] = None) -> None:
        """Publish the pending attempt (with its reflection, when there is one)."""
        draft, self._draft = self._draft, None
        if draft is None:
            return
        if not draft.ended:
            draft.duration_s = time.perf_counter() - draft.started
        msg = attempt_record_to_msg(self.goal_id, draft.subgoal_index, draft.target_id,
                                    draft.attempt, draft.retry_level, draft.thought,
                                    draft.grasp, draft.outcome, diagnosis or None,
                                    correction or None, draft.duration_s, self._header(),
                                    candidate=draft.candidate)
        self.records.append(msg)
        self._publish_attempt(msg)

    def close(self) -> None:
        with self._lock:
            self._flush()


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


class _BoundRetriever:
    """The retrieval service for one goal: feedback first, waits cut short by its cancel."""

    def __init__(self, service: RetrievalService, signal: GoalSignal,
                 session: GoalSession) -> None:
        self._service = service
        self._signal = signal
        self._session = session

    def retrieve(self, category: str, affordance: Any, embedding: Any = None,
                 crop: Any = None, embedding_model: Optional[str] = None,
                 k: Optional[int] = None, mode: Optional[str] = None) -> Any:
        kind = getattr(getattr(affordance, "type", None), "value", affordance)
        self._session.stage("retrieve", f"HAA-RAG for category {category!r}, affordance "
                                        f"{kind}", upcoming=True)
        return self._service.retrieve(category, affordance, embedding, crop, embedding_model,
                                      k, mode, signal=self._signal)


class _BoundArm(ArmBackend):
    """The executor arm for one goal: its waits are cut short by the goal's cancel."""

    name = "executor"

    def __init__(self, arm: ExecutorArmBackend, signal: GoalSignal) -> None:
        self._arm = arm
        self._signal = signal

    def execute(self, target_id: str, grasp: GraspParameters, on_phase: PhaseCallback,
                is_cancelled: CancelCheck) -> ArmResult:
        return self._arm.execute(target_id, grasp, on_phase, is_cancelled, signal=self._signal)


def task_error(task: TaskOutcome) -> Tuple[int, str]:
    """(error_code, message) of a finished task (ERROR_NONE on success)."""
    if task.success:
        return Result.ERROR_NONE, task.message
    if task.status == STATUS_CANCELED:
        return Result.ERROR_CANCELED, task.message
    if task.plan is None:
        return Result.ERROR_PERCEPTION_FAILED, task.message
    if not task.plan.subgoals:
        return Result.ERROR_TARGET_NOT_FOUND, task.message
    last = task.goals[-1] if task.goals else None
    if last is not None and last.status == STATUS_NOT_PERCEIVED:
        code = (Result.ERROR_PERCEPTION_FAILED if last.message.startswith("perception failed")
                else Result.ERROR_TARGET_NOT_FOUND)
        return code, f"{task.message}; {last.target_id}: {last.message}"
    detail = f"; {last.target_id}: {last.message}" if last is not None else ""
    if last is not None and last.failure_types:
        detail += f" (failures: {', '.join(last.failure_types)})"
    return Result.ERROR_GRASP_FAILED, task.message + detail


# ---- the node --------------------------------------------------------------------------------

class PlannerNode(Node):
    """Serves ``grasp_object``; one goal at a time (module docstring)."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        self.planner_config = self._declare_planner_parameters()
        self.settings = self._declare_node_parameters()
        self._acquirer = self._declare_acquisition()
        self._warn_undeclared()
        s = self.settings
        peers = ReentrantCallbackGroup()
        self.perception = PerceptionService(self, s.perceive_timeout_s, peers)
        self.retrieval = RetrievalService(self, s.retrieve_timeout_s, peers)
        self.scene_graph = SceneGraphService(self, s.constraints_timeout_s, peers,
                                             frame_id=s.world_frame, source="planner")
        self.arm = ExecutorArmBackend(self, s.execute_timeout_s, peers)
        self.pub_attempts = self.create_publisher(AttemptRecord, ATTEMPTS_TOPIC,
                                                  qos.RELIABLE_STREAM)
        self.pub_markers = self.create_publisher(MarkerArray, MARKERS_TOPIC, qos.LATCHED)
        self.pub_goal_log = self.create_publisher(GoalLog, goal_log.TOPIC, goal_log.QOS)
        self.crops = TargetCrops()
        if s.visual_query == "camera":
            self.create_subscription(Image, CROP_TOPIC, self.crops.add, qos.LATCHED,
                                     callback_group=peers)
        self._memories = MemoryLifetime()
        self._lock = threading.Lock()
        self._busy = False
        self._signal: Optional[GoalSignal] = None
        self.peers = PeerMonitor(self, PEERS, on_lost=self._on_peer_lost)
        for service in (self.perception, self.retrieval, self.scene_graph):
            caller = service.caller       # resend to a just-restarted peer (ServiceCaller)
            caller.resend_if = lambda peer=caller.peer: self.peers.back_within(peer, 10.0)
        self._server = ActionServer(
            self, GraspObject, ACTION, execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
            callback_group=ReentrantCallbackGroup(), result_timeout=int(s.result_timeout_s))
        self.get_logger().info(
            f"planner ready: configuration {self.planner_config.configuration}, Rmax "
            f"{self.planner_config.max_retries}, memory per {s.memory_lifetime}; timeouts "
            f"perceive {s.perceive_timeout_s:g} s, retrieve {s.retrieve_timeout_s:g} s, "
            f"constraints {s.constraints_timeout_s:g} s, execute {s.execute_timeout_s:g} s")

    # ---- parameters -------------------------------------------------------------------------
    def _declare_planner_parameters(self) -> PlannerConfig:
        values = {name: declare(self, name, default, planner_parameter_description(name))
                  for name, default in planner_parameter_defaults().items()}
        return PlannerConfig.from_params(values, "planner parameters")

    def _declare_node_parameters(self) -> NodeSettings:
        d = NodeSettings()
        return NodeSettings(
            perceive_timeout_s=declare(self, "timeouts.perceive_s", d.perceive_timeout_s,
                                       "Timeout of one perceive call (s); above the "
                                       "perception node's own worst case with the VLM"),
            retrieve_timeout_s=declare(self, "timeouts.retrieve_s", d.retrieve_timeout_s,
                                       "Timeout of one retrieve_strategies call (s)"),
            constraints_timeout_s=declare(self, "timeouts.constraints_s",
                                          d.constraints_timeout_s,
                                          "Timeout of one infer_constraints call (s)"),
            execute_timeout_s=declare(self, "timeouts.execute_s", d.execute_timeout_s,
                                      "Timeout of one ExecuteGrasp goal, from sending it to "
                                      "its result (s)"),
            max_instruction_chars=declare(self, "max_instruction_chars",
                                          d.max_instruction_chars,
                                          "Longer instructions are refused "
                                          "(ERROR_INVALID_GOAL)"),
            result_timeout_s=declare(self, "result_timeout_s", d.result_timeout_s,
                                     "How long a finished goal's result is kept for late "
                                     "clients (s); rclpy's 900 s default keeps every goal "
                                     "in each status message"),
            memory_lifetime=declare(self, "memory_lifetime", d.memory_lifetime,
                                    "Episodic memory lifetime: session (kept across goals, "
                                    "the paper's session-level cache) or goal"),
            world_frame=declare(self, "world_frame", d.world_frame,
                                "Frame of the scene sent to the scene graph and of the "
                                "markers (panda_link0 world)"),
            perceive_retries=declare(self, "perceive_retries", d.perceive_retries,
                                     "A perception answer with an error (no frame pair, an "
                                     "unusable VLM answer) is asked again this many times"),
            perceive_retry_delay_s=declare(self, "perceive_retry_delay_s",
                                           d.perceive_retry_delay_s,
                                           "Pause before asking perception again (s)"),
            visual_query=declare(self, "visual_query", d.visual_query,
                                 "s_vis of HAA-RAG: camera (the perception node's crop of "
                                 "the camera frame at the perceived target box, sent as "
                                 "target_crop) or none (s_vis = 0)"),
            crop_wait_s=declare(self, "crop_wait_s", d.crop_wait_s,
                                "How long retrieval waits for the target crop of the last "
                                "perception call before querying without one (s)"))

    def _declare_acquisition(self) -> Optional[Acquirer]:
        """Experience acquisition (core/retrieval/acquisition.py): one experience per attempt."""
        path = declare(self, "acquisition.path", "",
                       "Acquired-experiences JSONL file the planner appends one experience "
                       "per attempt to (the retrieval node's acquired_experiences_path); '' "
                       "or 'none' = off, 'default' = $XDG_DATA_HOME/agentic_grasp/"
                       "acquired_experiences.jsonl")
        backend = declare(self, "acquisition.perception_backend", "",
                          "Perception backend recorded in each experience's provenance "
                          "(bringup sets it from its perception argument)")
        resolved = resolve_acquired_path(path)
        if resolved is None:
            return None
        self.get_logger().info(f"experience acquisition on: appending to {resolved}")
        return Acquirer(resolved, context=AcquisitionContext(perception_backend=backend))

    def _warn_undeclared(self) -> None:
        # rclpy keeps the overrides in this attribute and offers no public accessor.
        overrides = getattr(self, "_parameter_overrides", None) or {}
        for name in sorted(overrides):
            if not self.has_parameter(name) and name != "use_sim_time":
                self.get_logger().warning(f"parameter '{name}' is not a planner parameter "
                                          "(typo?); ignored")

    # ---- action callbacks -------------------------------------------------------------------
    def _on_goal(self, goal: GraspObject.Goal) -> GoalResponse:
        with self._lock:
            if self._busy:
                self.get_logger().warning(
                    f"rejecting GraspObject goal {goal.instruction[:80]!r}: another goal is "
                    "running (one goal at a time)")
                return GoalResponse.REJECT
            self._busy = True
            self._signal = GoalSignal()
        return GoalResponse.ACCEPT

    def _on_cancel(self, _goal_handle) -> CancelResponse:
        with self._lock:
            signal = self._signal
        if signal is not None:
            signal.cancel()
        self.get_logger().info("cancel requested")
        return CancelResponse.ACCEPT

    def _on_peer_lost(self, peer: str) -> None:
        with self._lock:
            signal = self._signal
        self.get_logger().error(f"{self.peers.describe_loss(peer)}"
                                + ("; ending the running goal" if signal else ""))
        if signal is not None:
            signal.lose(peer, self.peers.describe_loss(peer))

    def _execute(self, goal_handle) -> GraspObject.Result:
        try:
            with self._lock:
                signal = self._signal or GoalSignal()
            for peer in PEERS:
                if self.peers.lost(peer):
                    signal.lose(peer, self.peers.describe_loss(peer) + " and is not back yet")
            return self._run_goal(goal_handle, signal)
        finally:
            with self._lock:
                self._busy = False
                self._signal = None

    # ---- one goal ---------------------------------------------------------------------------
    def _memory_for(self, configuration: str) -> EpisodicMemory:
        return self._memories.memory_for(configuration, get_configuration(configuration).memory,
                                         self.settings.memory_lifetime)

    def _header(self) -> Header:
        return Header(stamp=self.get_clock().now().to_msg(), frame_id=self.settings.world_frame)

    def _run_goal(self, goal_handle, signal: GoalSignal) -> GraspObject.Result:
        """Run the goal, publish its GoalLog, then end it (so a client holding the result
        knows the log is out)."""
        start_stamp = self.get_clock().now().to_msg()
        request = goal_handle.request
        result, finished = self._run_goal_inner(goal_handle, signal)
        configuration = validate_goal(request.instruction, request.configuration,
                                      self.planner_config.configuration,
                                      self.settings.max_instruction_chars)[1]
        self._guarded(self.pub_goal_log.publish)(goal_log.goal_log_msg(
            bytes(goal_handle.goal_id.uuid).hex(), request.instruction.strip(),
            request.configuration, configuration or request.configuration, start_stamp,
            self.get_clock().now().to_msg(), result))
        if not finished and self.context.ok():
            self._finish(goal_handle, result)
        return result

    def _run_goal_inner(self, goal_handle, signal: GoalSignal
                        ) -> Tuple[GraspObject.Result, bool]:
        """(result, whether the goal was already ended: a refused goal is aborted here)."""
        started = time.perf_counter()
        request = goal_handle.request
        goal_id = bytes(goal_handle.goal_id.uuid).hex()
        reason, configuration = validate_goal(request.instruction, request.configuration,
                                              self.planner_config.configuration,
                                              self.settings.max_instruction_chars)
        if reason:
            self.get_logger().warning(f"goal {goal_id[:8]} refused: {reason}")
            goal_handle.publish_feedback(GraspObject.Feedback(stage="done", thought=reason))
            goal_handle.abort()
            return Result(success=False, error_code=Result.ERROR_INVALID_GOAL,
                          message=reason), True
        instruction = request.instruction.strip()
        self.get_logger().info(f"goal {goal_id[:8]}: {instruction!r} ({configuration})")
        session = GoalSession(goal_id, self._guarded(goal_handle.publish_feedback),
                              self._guarded(self.pub_attempts.publish),
                              self._guarded(self._publish_grasp),
                              lambda: self.arm.last_outcome_msg, self._header)
        config = self.planner_config.with_configuration(configuration)
        conf = get_configuration(configuration)
        visual = None
        if self.settings.visual_query == "camera":
            def visual(target, _wait=self.settings.crop_wait_s):
                return self.crops.crop_for(target.id, _wait)
        planner = ReflectivePlanner(
            config, _BoundRetriever(self.retrieval, signal, session) if conf.retrieval else None,
            self._constraint_fn(signal, session), visual_query=visual)
        planner.reseed(config.seed)
        if self._acquirer is not None:          # one goal at a time: the context is this goal's
            self._acquirer.context = replace(self._acquirer.context, goal_id=goal_id,
                                             configuration=configuration)
            planner.attempt_sink = self._acquirer

        def perceive(text: str):
            session.stage("perceive", f"perceiving: {text}", upcoming=True)
            self.crops.expect()
            result = self.perception.perceive(text, signal)
            for _ in range(self.settings.perceive_retries):
                if result.ok:
                    break
                self.get_logger().warning(f"perception error, asking again: {result.error}")
                session.stage("perceive", f"perception error ({result.error}); asking again",
                              upcoming=True)
                signal.wait_event(threading.Event(), self.settings.perceive_retry_delay_s)
                if signal.cancelled:
                    raise GoalCanceled("canceled while waiting to perceive again")
                result = self.perception.perceive(text, signal)
            return result

        def canceled_by_client() -> bool:
            return signal.cancelled or goal_handle.is_cancel_requested

        def cancelled() -> bool:            # the core also stops between steps for a lost peer
            return canceled_by_client() or signal.lost is not None

        task: Optional[TaskOutcome] = None
        try:
            task = planner.run_task(instruction, perceive, _BoundArm(self.arm, signal),
                                    self._memory_for(configuration), cancel=cancelled,
                                    on_event=lambda e: session.on_event(e.to_dict()))
            code, message = task_error(task)
        except PeerLost:
            code, message = Result.ERROR_PEER_LOST, ""
        except DependencyTimeout as exc:
            code = Result.ERROR_DEPENDENCY_TIMEOUT
            message = f"dependency timeout: the {exc.peer} node did not answer ({exc.detail})"
        except DependencyError as exc:
            code = Result.ERROR_INTERNAL
            message = f"dependency error: the {exc.peer} node answered an error ({exc.detail})"
        except GoalCanceled as exc:
            code, message = Result.ERROR_CANCELED, f"canceled ({exc})"
        except Exception as exc:  # noqa: BLE001 - a planner bug must not take the node down
            self.get_logger().error(f"goal {goal_id[:8]} failed: {exc!r}")
            code, message = Result.ERROR_INTERNAL, f"internal error: {type(exc).__name__}: {exc}"
        session.close()
        if code != Result.ERROR_NONE and signal.lost is not None:
            code = Result.ERROR_PEER_LOST
            message = f"peer lost: {signal.lost.detail}; goal aborted"
        success = code == Result.ERROR_NONE
        if not success and code != Result.ERROR_PEER_LOST and canceled_by_client():
            code = Result.ERROR_CANCELED
        session.stage("done", message, target_id="")
        result = Result(success=success, error_code=code, message=message,
                        grasped_ids=list(task.grasped if task is not None else session.grasped),
                        attempts=session.records,
                        total_time_s=time.perf_counter() - started)
        return result, False

    def _guarded(self, publish: Callable[..., None]) -> Callable[..., None]:
        """``publish``, silent once the node shuts down under a running goal."""
        def call(*args: Any) -> None:
            if self.context.ok():
                try:
                    publish(*args)
                except Exception as exc:  # noqa: BLE001 - destroyed while shutting down
                    if self.context.ok():
                        raise
                    self.get_logger().debug(f"not published during shutdown: {exc!r}")
        return call

    def _constraint_fn(self, signal: GoalSignal, session: GoalSession):
        def constraints(objects: Sequence[Any], target_id: str):
            session.enter(target_id)
            session.stage("reason", f"scene graph of {len(objects)} objects, constraints on "
                                    f"{target_id}")
            return self.scene_graph.constraints(objects, target_id, signal)

        return constraints

    def _publish_grasp(self, grasp: GraspParameters, label: str,
                       candidate: Optional[Dict[str, Any]] = None) -> None:
        self.pub_markers.publish(grasp_markers(grasp, self._header(), label, candidate))

    def _finish(self, goal_handle, result: GraspObject.Result) -> None:
        """End the goal in exactly one of succeed / canceled / abort."""
        log = self.get_logger()
        line = (f"{'succeeded' if result.success else 'ended'}: {result.message} "
                f"({len(result.attempts)} attempts, {result.total_time_s:.2f} s)")
        if result.success:
            goal_handle.succeed()
            log.info(line)
        elif result.error_code == Result.ERROR_CANCELED and self._cancel_state(goal_handle):
            goal_handle.canceled()
            log.info(line)
        else:
            goal_handle.abort()
            log.warning(line)

    @staticmethod
    def _cancel_state(goal_handle, timeout_s: float = 1.0) -> bool:
        """True once rclpy has moved the goal to CANCELING (it does so right after the
        cancel callback returns, possibly after this thread already finished the goal)."""
        deadline = time.monotonic() + timeout_s
        wait = threading.Event()
        while not goal_handle.is_cancel_requested:
            if time.monotonic() > deadline:
                return False
            wait.wait(0.01)
        return True

    def destroy_node(self) -> None:
        with self._lock:
            signal = self._signal
        if signal is not None:
            signal.cancel()             # a running goal stops waiting on its peers
        super().destroy_node()


def main(args=None) -> None:
    spin_node(PlannerNode, num_threads=EXECUTOR_THREADS, args=args)


if __name__ == "__main__":
    main()
