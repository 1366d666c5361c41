"""Replay: a recorded session's goals through today's planner, on the recorded answers.

Faithful replay (the default) hands the planner, for each goal, what the live planner was
handed (recording/inputs.py: ``planner/decision_inputs``): the goal's seed and episodic
memory, and every peer's answer (replay_peers.py), through the planner node's own peer bindings
(goal_peers.BoundPerception, BoundRetriever, BoundSceneGraph: their retries, their scene-key
cache) with the peers' client modules replaced by ones that answer from the recording and
convert with the same functions (planner.peers.perception.perception_answer,
retrieval_result_from_msg, SceneGraphService's conversions). Under the recorded
configuration an unchanged planner therefore makes every decision again, bit for bit.

``recompute`` names components computed with today's code and data instead:
``retrieval`` (HAA-RAG over today's knowledge base plus the acquired-experiences file up to
where the retrieval node had read it when the live query came, with the recorded visual
query), ``constraints`` (the core scene graph and constraint inference), ``perception``
(today's perception backend on the recorded capture of each answer: reperceive.py; the real
VLM's answers cannot be recomputed offline and diverge there).

Every question the replayed planner asks is checked against the recorded one (compare.py).
A question the recording cannot answer (another grasp, another perception after other
motions) is the goal's first *divergence*: the replay stops there and the goal's outcome is
*unobserved*. The report counts goals reproduced, attempts agreed before divergences, and
names each divergence's attempt and parameters.

A bag without decision inputs (recorded by an earlier release) is refused, naming what it
lacks; a goal whose recording was cut (no goal log, or inputs cut short) is named and not
replayed; every complete goal is.
"""
from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.planner import PlannerConfig, ReflectivePlanner, get_configuration
from agentic_grasp.core.planner.events import (PlanEvent, ReflectionEvent, ResultEvent,
                                               ThoughtEvent)
from agentic_grasp.core.planner.peers import SceneGraphReasoner
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.ros.recording import codec
from agentic_grasp.ros.recording.compare import Divergence, Exchanges, summarize, verdict
from agentic_grasp.ros.recording.inputs import TOPIC as _INPUTS, InputsError, parse_documents
from agentic_grasp.ros.recording.replay_peers import (Quiet, RecordedArm, RecordedPerception,
                                                      RecordedRetrieval, raise_recorded,
                                                      recorded_scene_graph)
from agentic_grasp.core.retrieval import build_retriever
from agentic_grasp.core.retrieval.acquired.live import build_live_retriever
from agentic_grasp.core.retrieval.config import RetrievalConfig
from agentic_grasp.ros.recording.bag.reader import BagReader, goals_before
from agentic_grasp.ros.recording.memory_state import memory_from_state
from agentic_grasp_interfaces.action import GraspObject

_LOG = logging.getLogger(__name__)

INPUTS_TOPIC = "/" + _INPUTS
ATTEMPTS_TOPIC = "/planner/attempts"
FEEDBACK_TOPIC = "/grasp_object/_action/feedback"
GOAL_LOG_TOPIC = "/planner/goal_log"
RECOMPUTABLE = ("retrieval", "constraints", "perception")
#: What a recording must hold for faithful replay, and why (named when a bag lacks it).
REQUIRED = {INPUTS_TOPIC: "the planner's decision inputs (perception, retrieval and "
                          "constraint answers, arm outcomes, wrist views, each goal's seed "
                          "and episodic memory)",
            GOAL_LOG_TOPIC: "each goal's configuration and result"}


class ReplayRefused(ValueError):
    """A recording replay cannot use at all (an earlier format, no decision inputs)."""


# ---- the bag -> goals ----------------------------------------------------------------------

@dataclasses.dataclass
class RecordedGoal:
    goal_id: str
    instruction: str
    documents: List[Dict[str, Any]]
    attempts: List[Any]               # AttemptRecord messages
    log: Any = None                   # GoalLog (None: the goal's end is not in the bag)

    @property
    def header(self) -> Optional[Dict[str, Any]]:
        return next((d for d in self.documents if d.get("type") == "goal"), None)

    def cut(self) -> str:
        """Why this goal cannot be replayed ("" when it can)."""
        if self.header is None:
            return "its decision inputs begin before the recording did"
        seqs = [int(d["seq"]) for d in self.documents]
        if seqs != list(range(len(seqs))):
            return "some of its decision inputs are missing"
        if self.log is None:
            return "the recording ends before the goal did (no goal log)"
        return ""


@dataclasses.dataclass
class RecordedSession:
    goals: List[RecordedGoal]
    cut: List[Dict[str, str]]
    #: Goals the planner refused (an invalid goal): nothing was decided, nothing to replay.
    refused: List[Dict[str, str]] = dataclasses.field(default_factory=list)
    stopped: str = ""
    warnings: List[str] = dataclasses.field(default_factory=list)


def read_session(path: Union[str, Path]) -> RecordedSession:
    """The goals of a bag with their decision inputs, attempts and goal log.

    ReplayRefused when the bag lacks what faithful replay needs (:data:`REQUIRED`) or holds
    decision inputs of another format. Goals are ordered by their first decision input; one
    that ended before the recording began (only its latched goal log and attempts are in the
    bag, recording.reader.goals_before) is not a recorded goal.
    """
    reader = BagReader(path)
    topics = reader.by_topic([INPUTS_TOPIC, ATTEMPTS_TOPIC, FEEDBACK_TOPIC, GOAL_LOG_TOPIC])
    present = {c.topic for c in reader.bag.channels.values()}
    missing = [f"{t} ({why})" for t, why in REQUIRED.items() if t not in present]
    if missing:
        raise ReplayRefused(f"{path} was recorded without " + " and ".join(missing)
                            + "; it cannot be replayed faithfully (a recording of an earlier "
                            "release: record the session again)")
    warnings = [f"{topic}: {why}" for topic, why in sorted(reader.undecodable.items())]
    try:
        docs = parse_documents([m.data for _, m in topics.get(INPUTS_TOPIC, [])])
    except InputsError as exc:
        raise ReplayRefused(f"{path}: {exc}") from None
    logs = {log.goal_id: log for _, log in topics.get(GOAL_LOG_TOPIC, [])}
    with_feedback = {bytes(np.asarray(fb.goal_id.uuid, dtype=np.uint8)).hex()
                     for _, fb in topics.get(FEEDBACK_TOPIC, [])}
    attempts: Dict[str, List[Any]] = {}
    for _, rec in topics.get(ATTEMPTS_TOPIC, []):
        attempts.setdefault(rec.goal_id, []).append(rec)
    # decision inputs are latched with a history, like the goal log and the attempts: a
    # recorder started between goals receives earlier goals' inputs too (not recorded goals)
    before = goals_before(topics, logs, with_feedback,
                          [rec for _, rec in topics.get(ATTEMPTS_TOPIC, [])])
    order = list(docs) + [g for g in dict.fromkeys(list(attempts) + list(with_feedback))
                          if g not in docs]

    invalid_goal = int(GraspObject.Result.ERROR_INVALID_GOAL)   # refused: nothing decided
    goals, cut, refused = [], [], []
    for gid in order:
        if gid in before:
            continue
        mine = docs.get(gid, [])
        header = next((d for d in mine if d.get("type") == "goal"), None)
        log = logs.get(gid)
        instruction = (log.instruction if log is not None else
                       header["instruction"] if header is not None else "")
        goal = RecordedGoal(gid, instruction, mine, attempts.get(gid, []), log)
        why = goal.cut() if mine else "it has no decision inputs in the recording"
        if not mine and log is not None and int(log.error_code) == invalid_goal:
            refused.append({"goal_id": gid, "instruction": instruction,
                            "why": f"the planner refused it: {log.message}"})
        elif why:
            cut.append({"goal_id": gid, "instruction": instruction, "why": why})
        else:
            goals.append(goal)
    return RecordedSession(goals, cut, refused, reader.state.stopped, warnings)


# ---- recomputed retrieval: the knowledge base as the live query saw it ----------------------

class AcquiredAsThen:
    """HAA-RAG over today's knowledge base and the acquired file's first ``acquired_bytes``
    (the part the retrieval node had read when the live query came): a private copy of the
    file grows to each query's point, and one LiveRetriever follows it as the node did."""

    def __init__(self, source: Optional[str] = None) -> None:
        self._source = source
        self._dir = tempfile.TemporaryDirectory(prefix="agentic_grasp_replay_")
        self._copy = Path(self._dir.name) / "acquired.jsonl"
        self._copy.write_bytes(b"")
        self._rag: Any = None
        self._plain: Any = None
        self.notes: List[str] = []

    def __call__(self, doc: Optional[Mapping[str, Any]], goal_path: Optional[str]) -> Any:
        upto = None if doc is None else doc.get("acquired_bytes")
        path = self._source or goal_path
        if upto is None or not path:
            if self._plain is None:
                config = dataclasses.replace(RetrievalConfig.from_config(),
                                             acquired_experiences_path="")
                self._plain = build_retriever(config)
            return self._plain
        try:
            with open(path, "rb") as f:
                head = f.read(int(upto))
        except OSError as exc:
            raise ReplayRefused(f"--recompute retrieval needs the acquired file {path}: "
                                f"{exc}") from None
        if len(head) < int(upto):
            raise ReplayRefused(f"the acquired file {path} holds {len(head)} bytes, the "
                                f"recording read {upto} (pruned or replaced since): pass the "
                                "file as it was with --acquired")
        have = self._copy.read_bytes()
        if head.startswith(have):
            with open(self._copy, "ab") as f:
                f.write(head[len(have):])
        else:
            self._copy.write_bytes(head)
        if self._rag is None:
            self._rag = build_live_retriever(RetrievalConfig.from_config(),
                                             acquired_path=str(self._copy))
        return self._rag

    def close(self) -> None:
        closer = getattr(self._rag, "close", None)
        if closer is not None:
            closer()
        self._dir.cleanup()


# ---- one goal ------------------------------------------------------------------------------

def _decisions(events: List[Any]) -> List[Dict[str, Any]]:
    """Each sub-goal's decisions from the planner's events (complete or cut at divergence)."""
    out: List[Dict[str, Any]] = []
    for event in events:
        if isinstance(event, PlanEvent):
            out.append({"target_id": event.target_id, "initial_source": event.initial_source,
                        "retrieved": [s["id"] for s in event.retrieval.get("strategies", [])],
                        "constraints": list(event.constraints.explanations()),
                        "attempts": [], "status": ""})
        elif isinstance(event, ThoughtEvent) and out:
            out[-1]["attempts"].append({"attempt": event.attempt + 1,
                                        "retry_level": event.retry_level,
                                        "grasp": codec.grasp_data(event.grasp)})
        elif isinstance(event, ReflectionEvent) and out and out[-1]["attempts"]:
            out[-1]["attempts"][-1]["failure_type"] = event.diagnosis.failure_type.value
            out[-1]["attempts"][-1]["correction"] = event.correction.text
        elif isinstance(event, ResultEvent) and out:
            out[-1]["status"] = event.status
    return out


def recorded_config(header: Mapping[str, Any]) -> PlannerConfig:
    """The PlannerConfig the planner node ran the goal with (its recorded parameters)."""
    if "parameters" not in header:
        return PlannerConfig.from_config()
    names = {f.name for f in dataclasses.fields(PlannerConfig)}
    params = {k: v for k, v in (header.get("parameters") or {}).items()
              if k.split(".")[0] in names}
    return PlannerConfig.from_params(params, "the recorded planner parameters")


def recorded_result(goal: RecordedGoal) -> Dict[str, Any]:
    log = goal.log
    return {"success": bool(log.success), "error_code": int(log.error_code),
            "message": str(log.message), "grasped_ids": list(log.grasped_ids)}


def replay_goal(goal: RecordedGoal, configuration: Optional[str] = None,
                config: Optional[PlannerConfig] = None, recompute: Sequence[str] = (),
                retrieval: Optional[AcquiredAsThen] = None,
                frames: Any = None) -> Dict[str, Any]:
    """One complete recorded goal replayed (module docstring): its decisions, its verdict
    (compare.verdict) and its metrics. ``config``: None = the one the goal ran with (its
    recorded parameters); ``frames``: the bag's camera frames, for recomputed perception. A
    planner that raises is reported as the node reports it (ERROR_INTERNAL), not raised."""
    # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
    from agentic_grasp.ros.common.dependencies import GoalSignal
    from agentic_grasp.ros.planner.goal_peers import (BoundPerception, BoundRetriever,
                                                      BoundSceneGraph, TargetCrops, WorldClock)
    from agentic_grasp.ros.planner.goal_session import exception_error, task_error

    header = goal.header or {}
    recorded_conf = str(header.get("configuration") or goal.log.configuration)
    name = configuration or recorded_conf
    conf = get_configuration(name)
    config = (config or recorded_config(header)).with_configuration(name)
    ex = Exchanges(goal.documents, raise_recorded)
    signal = GoalSignal()
    memory = memory_from_state(header.get("memory"))
    if memory is not None:
        memory.enabled = bool(conf.memory)     # another configuration: its memory switch
    rag = None
    if "retrieval" in recompute:
        source = retrieval or AcquiredAsThen()
        rag = lambda doc: source(doc, header.get("acquired_path"))  # noqa: E731
    retriever = (BoundRetriever(RecordedRetrieval(ex, rag), signal, lambda _t: None)
                 if conf.retrieval else None)
    reasoner = (SceneGraphReasoner(SceneGraphConfig.from_config(), Camera().position)
                if "constraints" in recompute
                else BoundSceneGraph(recorded_scene_graph(ex), signal, Quiet()))
    planner = ReflectivePlanner(config, retriever, reasoner)
    rng = header.get("rng_seed", config.seed)
    planner.reseed(rng)
    if "perception" in recompute:
        # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
        from agentic_grasp.ros.recording.reperceive import RecomputedPerception

        if frames is None:
            raise ValueError("recomputing perception needs the bag's frames "
                             "(reperceive.RecordedFrames)")
        eyes: Any = RecomputedPerception(ex, frames)
    else:
        eyes = RecordedPerception(ex)
    perceiver = BoundPerception(eyes, signal, TargetCrops(),
                                int(header.get("perceive_retries", 0)), 0.0,
                                lambda _t: None, lambda _t: None, WorldClock(lambda: None),
                                goal.goal_id)
    events: List[Any] = []
    divergence: Optional[Divergence] = None
    code, message, grasped = 0, "", []
    try:
        task = planner.run_task(goal.instruction, perceiver, RecordedArm(ex), memory,
                                on_event=events.append)
        code, message = task_error(task)
        grasped = list(task.grasped)
    except Divergence as exc:
        divergence = exc
    except Exception as exc:  # noqa: BLE001 - what the node makes of an error, as live
        code, message = exception_error(exc) or (
            GraspObject.Result.ERROR_INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
        grasped = [e.target_id for e in events if isinstance(e, ResultEvent) and e.success]
    recorded = recorded_result(goal)
    replayed = None if divergence is not None else {
        "success": code == 0, "error_code": int(code), "message": message,
        "grasped_ids": grasped}
    result_agrees = replayed is not None and all(
        replayed[k] == recorded[k] for k in ("success", "error_code", "grasped_ids"))
    unserved = {} if divergence is not None else {      # recomputed: never asked for
        k: n for k, n in ex.unserved().items()
        if not (k == "infer_constraints" and "constraints" in recompute)}
    verdict_ = verdict(name == recorded_conf, divergence, unserved, result_agrees)
    return {"goal_id": goal.goal_id, "instruction": goal.instruction,
            "configuration": name, "recorded_configuration": recorded_conf,
            "seed": header.get("seed"), "verdict": verdict_,
            "recorded": recorded, "replayed": replayed, "decisions": _decisions(events),
            "metrics": {"recorded_attempts": ex.recorded_attempts(),
                        "attempts_agreed": ex.attempts, "motions_agreed": ex.motions,
                        "result_agrees": result_agrees, "unserved": unserved,
                        "first_divergence": None if divergence is None
                        else divergence.to_dict()}}


# ---- the bag -------------------------------------------------------------------------------

def check_recompute(recompute: Sequence[str]) -> List[str]:
    """The components to recompute, ConfigError for one that cannot be."""
    names = [n.strip() for n in recompute if n.strip()]
    for n in names:
        if n not in RECOMPUTABLE:
            raise ConfigError(f"--recompute {n!r}: not a component (one of "
                              f"{', '.join(RECOMPUTABLE)})")
    return names


def replay_bag(path: Union[str, Path], configuration: Optional[str] = None,
               recompute: Sequence[str] = (), config: Optional[PlannerConfig] = None,
               acquired: Optional[str] = None) -> Dict[str, Any]:
    """Every complete goal of the bag replayed in order (module docstring): per goal its
    report (replay_goal), the summary (compare.summarize), the cut goals named, and
    ``complete`` False when the bag stops early (``stopped`` says where)."""
    if configuration:
        get_configuration(configuration)            # ConfigError on an unknown name
    names = check_recompute(recompute)
    session = read_session(path)
    retrieval = AcquiredAsThen(acquired) if "retrieval" in names else None
    frames = None
    if "perception" in names:
        # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
        from agentic_grasp.ros.recording.reperceive import RecordedFrames

        frames = RecordedFrames(path)
    goals, warnings = [], list(session.warnings)
    try:
        for recorded in session.goals:
            try:
                goals.append(replay_goal(recorded, configuration, config, names, retrieval,
                                         frames))
            except ConfigError as exc:            # a configuration this release lacks
                warnings.append(f"goal {recorded.goal_id[:8]}: {exc}; not replayed")
    finally:
        if retrieval is not None:
            retrieval.close()
    for w in warnings:
        _LOG.warning("replay of %s: %s", path, w)
    return {"bag": str(path), "configuration": configuration or "as recorded",
            "recompute": names, "goals": goals, "summary": summarize(goals),
            "cut": session.cut, "refused": session.refused, "warnings": warnings,
            "complete": not session.stopped, "stopped": session.stopped}


def recorded_goals(path: Union[str, Path]) -> List[RecordedGoal]:
    """The complete goals of :func:`read_session`."""
    return read_session(path).goals


__all__ = ["AcquiredAsThen", "RecordedGoal", "RecordedSession", "ReplayRefused", "read_session",
           "recorded_goals", "replay_bag", "replay_goal"]
