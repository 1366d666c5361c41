"""Replay evaluation: a recorded run's observations through today's planner (no simulator).

The bag's perception results are served back, in order, to :meth:`ReflectivePlanner.run_task`
(per perceive instruction, the last one repeated once they run out: without new motion the
recorded scene is what there is to see). Retrieval is the core HAA-RAG over the configured
knowledge base, constraints the core scene graph, planning the core planner under the
configuration asked for. The arm is :class:`ReplayArm`: it returns the recorded attempt
outcomes in order while the planned grasp matches the recorded one within
:data:`TOLERANCES`; a grasp that differs is a *divergence*: nothing can be observed for it, so
the replay stops there (the arm answers CANCELED, which ends the task) and reports the diff.

Each goal runs under the configuration of its goal log (``/planner/goal_log``) unless one is
given for all; its recorded result (the goal log's, else the last attempt's) is reported
beside the replayed one. A bag without a goal log replays under ``full`` with a warning.

Output: per goal the decisions (retrieved strategy ids, constraints, initial grasp source and
g0, every attempt's grasp and correction) and the metrics (recorded success, per attempt
whether the replayed decision agrees with the recorded one, the first divergence). Nothing
time-dependent is reported, so the same bag and configuration give the same report.
"""
from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from agentic_grasp.core.arm import ArmBackend, ArmError, ArmResult, CancelCheck, PhaseCallback
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.perception import PerceptionResult
from agentic_grasp.core.planner import EpisodicMemory, PlannerConfig, ReflectivePlanner
from agentic_grasp.core.planner import get_configuration
from agentic_grasp.core.planner.peers import SceneGraphReasoner, as_retriever
from agentic_grasp.core.planner.ports import ConstraintReasoner, Perceiver
from agentic_grasp.core.scene_graph import SceneGraphConfig
from agentic_grasp.core.types import GraspParameters
# The bag's messages are read with the converters the planner node uses on the live ones
# (duck-typed: rosbags objects read like rclpy messages; enums by their constants' names).
from agentic_grasp.ros.conversions.grasp import grasp_from_msg, outcome_from_msg
from agentic_grasp.ros.conversions.perception import perception_result_from_msg

_LOG = logging.getLogger(__name__)

PERCEPTION_TOPIC = "/perception/result"
ATTEMPTS_TOPIC = "/planner/attempts"
FEEDBACK_TOPIC = "/grasp_object/_action/feedback"
GOAL_LOG_TOPIC = "/planner/goal_log"
#: Largest differences for which a planned grasp counts as the recorded one. Recorded values
#: pass through float32 message fields and the planner reruns the same arithmetic, so an
#: unchanged planner agrees to ~1e-7; the tolerances only absorb that.
TOLERANCES: Dict[str, float] = {"position_m": 1e-4, "approach_rad": 1e-3, "width_m": 1e-4,
                                "force_n": 1e-3, "approach_height_m": 1e-4,
                                "speed_mps": 1e-4, "wrist_yaw_rad": 1e-3}


def grasp_diff(planned: GraspParameters, recorded: GraspParameters) -> Dict[str, Any]:
    """Fields of ``planned`` outside TOLERANCES of ``recorded`` ({} when they agree)."""
    diff: Dict[str, Any] = {}
    d = float(np.linalg.norm(np.asarray(planned.position) - np.asarray(recorded.position)))
    if d > TOLERANCES["position_m"]:
        diff["position_m"] = round(d, 6)
    a, b = np.asarray(planned.approach, float), np.asarray(recorded.approach, float)
    cos = float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))
    angle = math.acos(max(-1.0, min(1.0, cos)))
    if angle > TOLERANCES["approach_rad"]:
        diff["approach_rad"] = round(angle, 6)
    for name, key in (("width", "width_m"), ("force", "force_n"),
                      ("approach_height", "approach_height_m"), ("speed", "speed_mps")):
        delta = abs(float(getattr(planned, name)) - float(getattr(recorded, name)))
        if delta > TOLERANCES[key]:
            diff[key] = round(delta, 6)
    yaw = abs(math.remainder(float(planned.wrist_yaw) - float(recorded.wrist_yaw), math.pi))
    if yaw > TOLERANCES["wrist_yaw_rad"]:     # a parallel gripper is symmetric under pi
        diff["wrist_yaw_rad"] = round(yaw, 6)
    if planned.grasp_type != recorded.grasp_type:
        diff["grasp_type"] = [planned.grasp_type.value, recorded.grasp_type.value]
    return diff


# ---- the replayed world ------------------------------------------------------------------

class ReplayPerception(Perceiver):
    """The planner's Perceiver in replay: the recorded answers to ``text`` in order, the
    last one repeated (no wrist camera: a recorded wrist look is not served back)."""

    def __init__(self, results: Sequence[Tuple[str, Any]]) -> None:
        self._by_text: Dict[str, List[Any]] = {}
        for text, msg in results:
            self._by_text.setdefault(text, []).append(msg)
        self._served: Dict[str, int] = {}
        self.calls: List[Dict[str, Any]] = []

    def perceive(self, instruction: str) -> PerceptionResult:
        text = instruction
        queue = self._by_text.get(text)
        if not queue:
            self.calls.append({"instruction": text, "recorded": False})
            return PerceptionResult.failure("replay", f"no recorded perception for {text!r}")
        index = self._served.get(text, 0)
        self._served[text] = index + 1
        self.calls.append({"instruction": text, "recorded": index < len(queue)})
        return perception_result_from_msg(queue[min(index, len(queue) - 1)])


class ReplayArm(ArmBackend):
    """Returns the recorded outcomes in order while the planned grasps match the recorded."""

    name = "replay"

    def __init__(self, attempts: Sequence[Any]) -> None:
        self._attempts = list(attempts)
        self.cursor = 0
        self.log: List[Dict[str, Any]] = []
        self.divergence: Optional[Dict[str, Any]] = None

    def execute(self, target_id: str, grasp_: GraspParameters, on_phase: PhaseCallback,
                is_canceled: CancelCheck) -> ArmResult:
        index = self.cursor
        if index >= len(self._attempts):
            return self._diverge(index, target_id, grasp_, None,
                                 {"extra_attempt": "the recording has no attempt here"})
        rec = self._attempts[index]
        recorded = grasp_from_msg(rec.grasp)
        diff = grasp_diff(grasp_, recorded)
        if rec.target_id != target_id:
            diff["target_id"] = [target_id, rec.target_id]
        if diff:
            return self._diverge(index, target_id, grasp_, rec, diff)
        self.cursor += 1
        result = outcome_from_msg(rec.outcome)
        self.log.append({"index": index, "target_id": target_id, "agree": True,
                         "recorded_success": bool(rec.outcome.success)})
        if not rec.outcome.phase_reached:      # the recorded arm never ran this attempt
            return ArmResult(ArmError.BACKEND_FAILURE, "recorded attempt did not run")
        return ArmResult(ArmError.NONE, "", result)

    def _diverge(self, index: int, target_id: str, planned: GraspParameters,
                 rec: Any, diff: Dict[str, Any]) -> ArmResult:
        self.divergence = {"attempt_index": index, "target_id": target_id,
                           "planned": _grasp_dict(planned),
                           "recorded": (None if rec is None
                                        else _grasp_dict(grasp_from_msg(rec.grasp))),
                           "diff": diff}
        self.log.append({"index": index, "target_id": target_id, "agree": False})
        return ArmResult(ArmError.CANCELED, "replay divergence: no outcome can be observed")

    @property
    def remaining(self) -> int:
        return len(self._attempts) - self.cursor


def _grasp_dict(g: GraspParameters) -> Dict[str, Any]:
    d = g.to_dict()
    return {k: ([round(float(x), 5) for x in v] if isinstance(v, (list, tuple)) else
                round(float(v), 5) if isinstance(v, float) else v) for k, v in d.items()}


# ---- the bag -> goals ----------------------------------------------------------------------

@dataclasses.dataclass
class RecordedGoal:
    goal_id: str
    instruction: str
    perceptions: List[Tuple[str, Any]]
    attempts: List[Any]
    #: The goal's GoalLog (configuration and result), None when the bag has none for it.
    log: Any = None


@dataclasses.dataclass
class RecordedSession:
    """What replay reads from a bag: its goals, and whether the bag was read to its end."""

    goals: List[RecordedGoal]
    stopped: str = ""                       # "" or where a damaged bag stops
    warnings: List[str] = dataclasses.field(default_factory=list)


def read_session(path: Union[str, Path]) -> RecordedSession:
    """The GraspObject goals of a bag with their perception answers, attempts and goal log.

    Goals are told apart by the goal id of the attempt records, of the action feedback and
    of the goal log; a perception answer belongs to the goal whose time span holds it (the
    feedback's first to last message, widened by the goal log's start and end stamps when
    the bag has them; a bag without either is one goal). The instruction is the goal log's,
    else that of the goal's first perception answer. A goal log whose goal left nothing else
    in the bag (a goal before the recorder started, replayed to it by the latched topic) is
    not a recorded goal, nor is one that had ended before the recording began whose attempts
    the attempt history delivered (recording.reader.goals_before). A damaged bag gives the
    goals of its readable part.
    """
    from agentic_grasp.ros.recording.reader import BagReader, goals_before, stamp_ns

    reader = BagReader(path)
    topics = reader.by_topic([PERCEPTION_TOPIC, ATTEMPTS_TOPIC, FEEDBACK_TOPIC,
                              GOAL_LOG_TOPIC])
    warnings = [f"{topic}: {why}" for topic, why in sorted(reader.undecodable.items())]
    logs: Dict[str, Any] = {}
    for _, log in topics.get(GOAL_LOG_TOPIC, []):
        logs[log.goal_id] = log
    spans: Dict[str, List[int]] = {}

    def widen(gid: str, stamp: int) -> None:
        span = spans.setdefault(gid, [stamp, stamp])
        span[0], span[1] = min(span[0], stamp), max(span[1], stamp)

    for stamp, fb in topics.get(FEEDBACK_TOPIC, []):
        widen(bytes(np.asarray(fb.goal_id.uuid, dtype=np.uint8)).hex(), stamp)
    attempts: Dict[str, List[Any]] = {}
    for _, rec in topics.get(ATTEMPTS_TOPIC, []):
        attempts.setdefault(rec.goal_id, []).append(rec)
    present = (set(spans) | set(attempts)) - goals_before(
        topics, logs, spans, [rec for _, rec in topics.get(ATTEMPTS_TOPIC, [])])
    for gid in present & set(logs):
        widen(gid, stamp_ns(logs[gid].start_stamp))
        widen(gid, stamp_ns(logs[gid].end_stamp))
    first_attempt = {gid: i for i, gid in enumerate(dict.fromkeys(
        rec.goal_id for _, rec in topics.get(ATTEMPTS_TOPIC, [])))}
    order = sorted(present, key=lambda g: (spans.get(g, [0, 0])[0], first_attempt.get(g, 0)))
    perceptions = topics.get(PERCEPTION_TOPIC, [])
    goals = []
    for gid in order:
        span = spans.get(gid)
        mine = [(m.instruction, m) for stamp, m in perceptions
                if span is None or span[0] <= stamp <= span[1]]
        log = logs.get(gid)
        instruction = log.instruction if log is not None else mine[0][0] if mine else ""
        goals.append(RecordedGoal(gid, instruction, mine, attempts.get(gid, []), log))
    if goals and not topics.get(GOAL_LOG_TOPIC):
        warnings.append(f"the bag has no goal log ({GOAL_LOG_TOPIC}): configurations are "
                        "assumed, recorded results are taken from the last attempt")
    elif any(g.log is None for g in goals):
        warnings.append("goals without a goal log: " + ", ".join(
            g.goal_id[:8] for g in goals if g.log is None))
    return RecordedSession(goals, reader.state.stopped, warnings)


def recorded_goals(path: Union[str, Path]) -> List[RecordedGoal]:
    """The goals of :func:`read_session` (the readable part of a damaged bag)."""
    return read_session(path).goals


# ---- the replay ----------------------------------------------------------------------------

def _constraints_report(goal: Any) -> List[str]:
    return [] if goal.constraints is None else list(goal.constraints.explanations())


def recorded_result(recorded: RecordedGoal) -> Dict[str, Any]:
    """The goal's result as recorded: the goal log's, else what its attempts say."""
    log = recorded.log
    if log is not None:
        return {"source": "goal_log", "success": bool(log.success),
                "error_code": int(log.error_code), "message": str(log.message),
                "grasped_ids": list(log.grasped_ids), "attempt_count": int(log.attempt_count)}
    ran = [a for a in recorded.attempts if a.outcome.phase_reached]
    grasped = list(dict.fromkeys(a.target_id for a in ran if a.outcome.success))
    last = recorded.attempts[-1] if recorded.attempts else None
    return {"source": "attempts", "success": bool(last is not None and last.outcome.success),
            "error_code": None, "message": "", "grasped_ids": grasped,
            "attempt_count": len(recorded.attempts)}


def replay_goal(recorded: RecordedGoal, configuration: str, memory: EpisodicMemory,
                retriever: Any, config: PlannerConfig,
                reasoner: ConstraintReasoner) -> Dict[str, Any]:
    """One recorded goal through the planner under ``configuration``: decisions + metrics
    (``retriever``: a core HAA-RAG or a ports.Retriever; ``reasoner``: the task plan's
    graph and the constraints, of one configuration and camera)."""
    conf = get_configuration(configuration)
    planner = ReflectivePlanner(config.with_configuration(configuration),
                                as_retriever(retriever) if conf.retrieval else None, reasoner)
    planner.reseed(config.seed)
    perceive = ReplayPerception(recorded.perceptions)
    arm = ReplayArm(recorded.attempts)
    task = planner.run_task(recorded.instruction, perceive, arm, memory)
    decisions = []
    for sub in task.goals:
        decisions.append({
            "target_id": sub.target_id, "status": sub.status,
            "retrieved": [s["id"] for s in sub.retrieval.get("strategies", [])],
            "constraints": _constraints_report(sub),
            "initial_source": sub.initial_source,
            "g0": None if sub.g0 is None else _grasp_dict(sub.g0),
            "attempts": [{"attempt": a.index, "retry_level": a.retry_level,
                          "grasp": _grasp_dict(a.grasp),
                          "failure_type": a.failure_type,
                          "correction": None if a.correction is None else a.correction.text}
                         for a in sub.attempts if a.arm_error != ArmError.CANCELED]})
    agreement = [entry["agree"] for entry in arm.log]
    recorded_res = recorded_result(recorded)
    missing = arm.remaining if arm.divergence is None else 0
    replayed_res = {"success": bool(task.success) and arm.divergence is None,
                    "message": task.message if arm.divergence is None else
                    "stopped at the first divergence (no outcome can be observed for it)",
                    "grasped_ids": list(task.grasped),
                    "attempt_count": sum(len(d["attempts"]) for d in decisions)}
    same_result = all(recorded_res[k] == replayed_res[k]
                      for k in ("success", "grasped_ids", "attempt_count"))
    return {"goal_id": recorded.goal_id, "instruction": recorded.instruction,
            "configuration": configuration, "decisions": decisions,
            "recorded": recorded_res, "replayed": replayed_res,
            "metrics": {"recorded_attempts": len(recorded.attempts),
                        "recorded_success": recorded_res["success"],
                        "replayed_attempts": sum(agreement),
                        "agreement": agreement,
                        "agrees": arm.divergence is None and missing == 0,
                        "result_agrees": same_result,
                        "unreplayed_recorded_attempts": missing,
                        "replay_success": replayed_res["success"],
                        "first_divergence": arm.divergence}}


def goal_configuration(recorded: RecordedGoal, override: Optional[str]) -> Tuple[str, str]:
    """(configuration, where it came from): the override, else the goal log's, else full."""
    if override:
        return override, "override"
    if recorded.log is not None and recorded.log.configuration:
        return str(recorded.log.configuration), "goal_log"
    return "full", "assumed (no goal log)"


def replay_bag(path: Union[str, Path], configuration: Optional[str] = None,
               retriever: Any = None, config: Optional[PlannerConfig] = None
               ) -> Dict[str, Any]:
    """Every goal of the bag replayed in order, under each goal's logged configuration or
    ``configuration`` for all; one episodic memory per configuration for the session (the
    planner node's default memory lifetime).

    ``complete`` is False when the bag stops early (``stopped`` says where): the goals of
    the readable part are replayed, a goal cut off mid-way then disagrees.
    """
    if configuration:
        get_configuration(configuration)            # ConfigError on an unknown name
    config = config if config is not None else PlannerConfig.from_config()
    session = read_session(path)
    scene_config = SceneGraphConfig.from_config()
    reasoner = SceneGraphReasoner(scene_config, Camera().position)
    memories: Dict[str, EpisodicMemory] = {}
    warnings = list(session.warnings)
    goals = []
    for recorded in session.goals:
        name, source = goal_configuration(recorded, configuration)
        try:
            conf = get_configuration(name)
        except Exception as exc:  # noqa: BLE001 - ConfigError: a log from another release
            warnings.append(f"goal {recorded.goal_id[:8]}: {exc}; not replayed")
            continue
        if retriever is None and conf.retrieval:
            from agentic_grasp.core.retrieval import build_retriever

            retriever = build_retriever()
        memory = memories.setdefault(name, EpisodicMemory(enabled=conf.memory))
        report = replay_goal(recorded, name, memory, retriever, config, reasoner)
        report["configuration_source"] = source
        goals.append(report)
    for w in warnings:
        _LOG.warning("replay of %s: %s", path, w)
    return {"bag": str(path), "configuration": configuration or "from goal log",
            "goals": goals, "warnings": warnings,
            "complete": not session.stopped, "stopped": session.stopped,
            "agrees": all(g["metrics"]["agrees"] for g in goals) and bool(goals)}
