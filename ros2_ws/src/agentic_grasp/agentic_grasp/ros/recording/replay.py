"""Replay: a recorded session's goals through today's planner, on the recorded answers.

Faithful replay (the default) hands the planner, for each goal, what the live planner was
handed (recording/inputs.py: ``planner/decision_inputs``): the goal's seed and episodic
memory, and every peer's answer, through the planner node's own peer bindings
(goal_peers.BoundPerception, BoundRetriever, BoundSceneGraph: their retries, their scene-key
cache) with the peers' client modules replaced by ones that answer from the recording and
convert with the same functions (perception_service.perception_answer,
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
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from agentic_grasp.core.arm import ArmBackend, CancelCheck, PhaseCallback
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.planner import PlannerConfig, ReflectivePlanner, get_configuration
from agentic_grasp.core.planner.events import (PlanEvent, ReflectionEvent, ResultEvent,
                                               ThoughtEvent)
from agentic_grasp.core.planner.peers import SceneGraphReasoner
from agentic_grasp.core.scene_graph import SceneGraphConfig
from agentic_grasp.ros.recording import codec
from agentic_grasp.ros.recording.compare import (Divergence, Exchanges, data_diff, grasp_diff,
                                                 summarize, verdict)
from agentic_grasp.ros.recording.inputs import TOPIC as _INPUTS, InputsError, parse_documents

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
    from agentic_grasp.ros.recording.reader import BagReader, goals_before

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
    from agentic_grasp_interfaces.action import GraspObject

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


# ---- the recorded peers --------------------------------------------------------------------

def _raise_recorded(error: Mapping[str, Any]) -> None:
    """Raise again what a peer call raised live."""
    from agentic_grasp.ros.backends.dependencies import (DependencyError, DependencyTimeout,
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
        from agentic_grasp.ros.backends.perception_service import perception_answer
        from agentic_grasp.ros.backends.wrist_view import pose_to_msg
        from agentic_grasp_interfaces.srv import Perceive

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
        from agentic_grasp.ros.backends.retrieval_service import retrieval_request
        from agentic_grasp.ros.conversions.retrieval import retrieval_result_from_msg
        from agentic_grasp_interfaces.srv import RetrieveStrategies

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
    """The retrieval node's answer to ``request`` (ros/nodes/retrieval_node.py _on_retrieve,
    without its logging)."""
    from agentic_grasp.core.errors import ValidationError
    from agentic_grasp.ros.conversions.retrieval import (retrieval_query_from_msg,
                                                         retrieved_strategy_to_msg)
    from agentic_grasp.ros.nodes.retrieval_node import affordance_weights
    from agentic_grasp_interfaces.srv import RetrieveStrategies

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


def _recorded_scene_graph(exchanges: Exchanges) -> Any:
    """A SceneGraphService whose InferConstraints answers come from the recording."""
    from builtin_interfaces.msg import Time
    from agentic_grasp.ros.backends.scene_graph_service import SceneGraphService
    from agentic_grasp_interfaces.srv import InferConstraints

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


class _Quiet:
    """GoalSession's place for BoundSceneGraph: no feedback in replay."""

    def enter(self, _target_id: str) -> None:
        pass

    def stage(self, *_args: Any, **_kwargs: Any) -> None:
        pass


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
        from agentic_grasp.core.retrieval import build_retriever
        from agentic_grasp.core.retrieval.config import RetrievalConfig
        from agentic_grasp.core.retrieval.live import build_live_retriever

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
    from agentic_grasp.ros.backends.dependencies import GoalSignal
    from agentic_grasp.ros.goal_peers import (BoundPerception, BoundRetriever,
                                              BoundSceneGraph, TargetCrops, WorldClock)
    from agentic_grasp.ros.goal_session import exception_error, task_error
    from agentic_grasp.ros.recording.memory_state import memory_from_state

    header = goal.header or {}
    recorded_conf = str(header.get("configuration") or goal.log.configuration)
    name = configuration or recorded_conf
    conf = get_configuration(name)
    config = (config or recorded_config(header)).with_configuration(name)
    ex = Exchanges(goal.documents, _raise_recorded)
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
                else BoundSceneGraph(_recorded_scene_graph(ex), signal, _Quiet()))
    planner = ReflectivePlanner(config, retriever, reasoner)
    rng = header.get("rng_seed", config.seed)
    planner.reseed(rng)
    if "perception" in recompute:
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
        from agentic_grasp_interfaces.action import GraspObject

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


__all__ = ["AcquiredAsThen", "RecordedArm", "RecordedGoal", "RecordedPerception",
           "RecordedRetrieval", "RecordedSession", "ReplayRefused", "read_session",
           "recorded_goals", "replay_bag", "replay_goal"]
