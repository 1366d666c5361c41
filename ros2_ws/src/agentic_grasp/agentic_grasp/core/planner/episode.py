"""One benchmark trial, in process: simulator + perception + planner (paper Sec. V).

:func:`run_trial` loads a task into a :class:`Simulator` with the trial seed (scene jitter and
execution noise), perceives with ``perception`` (seeded with the trial seed), runs every
sub-goal of the task's
instruction through :class:`ReflectivePlanner` with an :class:`InProcessSimArm`, puts each
grasped object away, and scores the trial:

- ``success``: every target of the task spec grasped (and, for an instruction whose order is
  the goal, "sort by fragility", grasped in the spec's order);
- ``constraint_satisfied`` (reported for every task, meaningful for IT): no constraint
  violation or spill event, and no collision with, knocking over or damaging of a fragile
  (fragility >= 0.5, ground truth) object other than the target, in any attempt;
- attempts, failure types, retry levels, recovery (success after a failed attempt);
- ``sim_time_s`` = sum of the simulator's motion time (outcome.duration_s) + the compute
  time model of config/planner.yaml ``time_model`` (per perception call, retrieval, scene
  graph, thought and reflection) + ``vlm_s``, the VLM latency model's seconds for every
  real VLM call (config/perception.yaml ``vlm_sim.latency``); ``wall_s`` is the real time
  the trial took.

Perception (``perception``):

- ``"vlm_sim"`` (the benchmark default): the simulated VLM with the error model of
  config/perception.yaml. The scene is rendered from the fixed camera
  (:func:`render_view`: RGB, depth and the object-id mask around the objects); the mask
  and the objects' labels are all the simulated VLM gets, and every position, extent and
  yaw comes from the depth image through the real client's geometry. Behind the
  re-perception policy (:mod:`..perception.reperception`): after a failed attempt the VLM
  is asked again only when the depth changed around the target. ``vlm_calls`` counts the
  real calls, ``perception_calls`` every look the planner took.
- ``"vlm_sim_perfect"``: the same with every error rate 0 (a perfect VLM).
- ``"oracle"``: ground truth (+ the oracle's configured noise), no rendering.

A named target that is not in view is looked for with the arm's wrist camera
(core/planner/instruction/uncover.py): :meth:`CameraPerception.look` renders the frame of the
camera the simulator's view motion put there and perceives it with the same backend.

Visual query (``visual_query``, default config/planner.yaml ``episode_visual_query``):
``"camera"`` crops the last camera frame at the perceived target's box
(:func:`render.crop_box`, as the knowledge base's crops are cut) and HAA-RAG embeds it
with its configured model (s_vis, the visual third of s_final); with the oracle, which has
no camera frame, the scene is rendered for the crop. ``"render"`` renders the perceived
object alone; ``"none"`` sends no visual query (s_vis = 0).

Expensive resources (knowledge base + HAA-RAG index, simulator catalogue and kinematics,
configuration files) are built once per process and reused; a trial only reloads the scene.
Not thread-safe: run parallel sweeps in processes.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, List, Optional

import numpy as np

from agentic_grasp.core.arm.backend import ArmError, InProcessSimArm
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.perception import (OracleBackend, OracleConfig, create_backend,
                                           load_params)
from agentic_grasp.core.perception.backend import PerceptionResult
from agentic_grasp.core.perception.reperception import (ReperceivingPerception,
                                                        ReperceptionConfig)
from agentic_grasp.core.planner.configurations import (PlannerConfig, get_configuration,
                                                     trial_rng_seed)
from agentic_grasp.core.planner.memory import EpisodicMemory, MemoryLifetime
from agentic_grasp.core.grasping.limits import STATUS_BEYOND_HAND
from agentic_grasp.core.planner.outcomes import TaskOutcome
from agentic_grasp.core.planner.peers import SceneGraphReasoner, as_retriever
from agentic_grasp.core.planner.planner import ReflectivePlanner
from agentic_grasp.core.planner.ports import Perceiver
from agentic_grasp.core.render.crops import crop_box
from agentic_grasp.core.render.views import render_object_crop, render_view
from agentic_grasp.core.retrieval import HAARAG, RetrievalConfig, build_retriever
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.sim import Simulator
from agentic_grasp.core.types import FailureType

_LOG = logging.getLogger(__name__)

#: Fragility from which a neighbour counts as fragile for constraint satisfaction; equal to
#: the scene graph's fragile_threshold so the metric checks what the constraints protect.
_FRAGILE_EVENTS = {FailureType.COLLISION.value, "knocked_over", "damaged"}
_VIOLATION_EVENTS = {FailureType.CONSTRAINT_VIOLATION.value, "spill"}


@dataclass
class TrialResult:
    """The score of one trial and everything needed to explain it."""

    task_id: str
    category: str
    configuration: str
    seed: int
    success: bool
    targets: List[str]
    grasped: List[str]
    order_ok: bool
    constraint_satisfied: bool
    violations: List[str]
    n_attempts: int
    failure_types: List[str]
    retry_levels: List[int]
    recovered: bool
    first_attempt_success: bool
    motion_s: float
    compute_s: float
    sim_time_s: float
    wall_s: float
    task: Optional[TaskOutcome] = field(default=None, repr=False)
    perception: str = "oracle"
    perception_calls: int = 0
    vlm_calls: int = 0
    vlm_s: float = 0.0
    #: sub-goals refused at planning as beyond the hand (grasping/limits.py), with reasons:
    #: neither a success nor a failed attempt
    refusals: List[str] = field(default_factory=list)
    #: per executed attempt, the simulator's true mechanism beside the planner's diagnosis
    #: from the arm's observation: [true, diagnosed], "none" for a success (evaluation
    #: only: the truth never reaches the planner)
    diagnoses: List[List[str]] = field(default_factory=list)

    def to_dict(self, with_trace: bool = False) -> Dict[str, Any]:
        out = {"task_id": self.task_id, "category": self.category,
               "configuration": self.configuration, "seed": self.seed,
               "success": self.success, "targets": list(self.targets),
               "grasped": list(self.grasped), "order_ok": self.order_ok,
               "constraint_satisfied": self.constraint_satisfied,
               "violations": list(self.violations), "n_attempts": self.n_attempts,
               "failure_types": list(self.failure_types),
               "retry_levels": list(self.retry_levels), "recovered": self.recovered,
               "first_attempt_success": self.first_attempt_success,
               "motion_s": round(self.motion_s, 4), "compute_s": round(self.compute_s, 4),
               "sim_time_s": round(self.sim_time_s, 4), "wall_s": round(self.wall_s, 6),
               "perception": self.perception, "perception_calls": self.perception_calls,
               "vlm_calls": self.vlm_calls, "vlm_s": round(self.vlm_s, 4),
               "refusals": list(self.refusals)}
        if with_trace and self.task is not None:
            out["trace"] = self.task.to_dict()
        return out


# ------------------------------------------------------------------ shared resources
@lru_cache(maxsize=1)
def _planner_config() -> PlannerConfig:
    return PlannerConfig.from_config()


@lru_cache(maxsize=1)
def _scene_graph_config() -> SceneGraphConfig:
    return SceneGraphConfig.from_config()


@lru_cache(maxsize=1)
def _oracle_config() -> OracleConfig:
    params = load_params()
    return OracleConfig.from_params(params.get("oracle"))


@lru_cache(maxsize=1)
def _perception_params() -> Dict[str, Any]:
    return load_params()


@lru_cache(maxsize=1)
def _crop_size() -> int:
    try:
        return int(RetrievalConfig.from_config().embedding.crop_size_px)
    except Exception:  # noqa: BLE001 - the crop size only has to match the knowledge base's
        return 64


#: crop_box's padding per side (fraction of the box's larger side), as the KB crops are cut.
CROP_PAD = 0.15

#: Perception modes of :func:`run_trial` (module docstring).
PERCEPTION_MODES = ("vlm_sim", "vlm_sim_perfect", "oracle")


class CameraPerception(Perceiver):
    """The in-process camera + perception of one trial (module docstring, "Perception"):
    the planner's Perceiver in the benchmark (ports.py).

    ``perceive(instruction)`` renders the simulator's current scene, runs the backend on
    the frame and keeps the frame for the camera visual query; ``crop(target)`` cuts the
    last frame at the perceived target's box.
    """

    wrist_camera = True         # look(): the frame of the wrist camera where the arm put it

    def __init__(self, sim, mode: str, seed: int, crop_size: int = 64) -> None:
        if mode not in PERCEPTION_MODES:
            raise ValueError(f"perception must be one of {PERCEPTION_MODES}, got {mode!r}")
        self.sim, self.mode, self.crop_size = sim, mode, int(crop_size)
        self.camera = Camera()
        self.frame = None
        self.frame_camera = self.camera     # the camera of ``frame``: fixed, or the wrist's
        self.last: Optional[PerceptionResult] = None
        self.vlm_calls, self.vlm_s = 0, 0.0
        params = _perception_params()
        self.latency = None
        if mode == "oracle":
            self.backend = OracleBackend(sim.objects, _oracle_config(), seed=int(seed))
            self.policy = None
            return
        cfg = dict(params)
        cfg["backend"] = "vlm_sim"
        inner = create_backend(cfg, segmentation_provider=self._segmentation, seed=int(seed))
        if mode == "vlm_sim_perfect":
            inner.config = inner.config.zero_noise()
        self.latency = inner.config.latency
        self.policy = ReperceivingPerception(
            inner, ReperceptionConfig.from_params(params.get("reperception")))
        self.backend = self.policy

    def _segmentation(self, _camera: Camera):
        frame, objects = self.frame
        return frame.instance, objects

    def render(self):
        objects = self.sim.objects()
        self.frame = (render_view(objects, self.camera), objects)
        self.frame_camera = self.camera
        return self.frame[0]

    def perceive(self, instruction: str) -> PerceptionResult:
        if self.mode == "oracle":
            self.frame = None
            self.last = self.backend.perceive(np.zeros((1, 1, 3), dtype=np.uint8),
                                              np.zeros((1, 1), dtype=np.float32),
                                              self.camera, instruction)
            return self.last
        frame = self.render()
        calls = self.policy.vlm_calls
        result = self.backend.perceive(frame.rgb, frame.depth, self.camera, instruction)
        if self.policy.vlm_calls > calls:
            self.vlm_calls += 1
            self.vlm_s += self.latency.seconds(result.completion_tokens)
        self.last = result
        return result

    def look(self, instruction: str, camera: Camera) -> PerceptionResult:
        """Perceive the frame of ``camera`` (the wrist camera where the arm put it).

        vlm_sim gets that frame's own object-id mask, so it reports only what this view
        shows. The re-perception policy is bypassed (its kept answer belongs to the fixed
        camera); the call is a real VLM call and is counted as one. The oracle has no
        camera: it answers as for the fixed camera.
        """
        if self.mode == "oracle":
            return self.perceive(instruction)
        objects = self.sim.objects()
        frame = render_view(objects, camera)
        self.frame, self.frame_camera = (frame, objects), camera
        result = self.policy.backend.perceive(frame.rgb, frame.depth, camera, instruction)
        self.vlm_calls += 1
        self.vlm_s += self.latency.seconds(result.completion_tokens)
        self.last = result
        return result

    def crop(self, target) -> Optional[np.ndarray]:
        """The camera crop at the perceived box of ``target`` (None when there is none)."""
        last = self.last
        if last is None:
            return None
        perceived = None
        for obj in ([last.target] if last.target is not None else []) + list(last.objects):
            if obj.id == target.id:
                perceived = obj
                break
        if self.frame is None:                      # the oracle: render the scene once
            self.render()
            if perceived is not None and perceived.bbox is None:
                return None
        if perceived is None or perceived.bbox is None:
            return None
        try:
            rgb = self.frame[0].rgb
            if not self._covers(self.frame[0].depth, perceived.bbox):
                rgb = self._crop_frame().rgb
            return crop_box(rgb, perceived.bbox, size=self.crop_size)
        except Exception:  # noqa: BLE001 - a degenerate box just has no visual query
            return None

    @staticmethod
    def _covers(depth: np.ndarray, box) -> bool:
        """Whether the rendered regions of ``depth`` hold all of the crop window at ``box``.

        render_view ray casts only around the objects; outside, depth reads 0 (no return),
        which a full camera frame never has (table or floor everywhere). A square crop of a
        tall object reaches past those regions, where the real camera (the sim node's frame,
        which the perception node crops in the graph) shows the table.
        """
        u0, v0, u1, v1 = (int(b) for b in box)
        side = max(u1 - u0 + 1, v1 - v0 + 1) * (1.0 + 2.0 * CROP_PAD)
        half = max(1, int(round(side / 2.0)))
        cu, cv = (u0 + u1 + 1) // 2, (v0 + v1 + 1) // 2
        h, w = depth.shape[:2]
        window = depth[max(0, cv - half):min(h, cv + half), max(0, cu - half):min(w, cu + half)]
        return bool(np.all(window > 0.0))

    def _crop_frame(self):
        """The scene rendered with regions wide enough for any square crop: a crop of side
        s = (1 + 2 pad) x the larger box side reaches (0.5 + pad) s past the box centre.
        From the camera of the last frame: after a wrist view, the wrist camera's (the box
        is in its pixels), as the graph's perception node crops its wrist capture."""
        return render_view(self.sim.objects(), self.frame_camera,
                           margin=0.5 + CROP_PAD + 0.05)


@lru_cache(maxsize=1)
def _default_retriever():
    return build_retriever()


_RETRIEVERS: Dict[int, Any] = {}
#: This process's episodic memories (memory.MemoryLifetime: kept across trials when
#: ``memory_scope`` is "session", fresh per trial otherwise).
_MEMORIES = MemoryLifetime()


def retriever_for(knowledge_base=None):
    """HAA-RAG over ``knowledge_base`` (the configured one when None), built once."""
    if knowledge_base is None:
        return _default_retriever()
    key = id(knowledge_base)
    cached = _RETRIEVERS.get(key)
    if cached is None or cached[0] is not knowledge_base:
        cached = (knowledge_base, HAARAG(knowledge_base, RetrievalConfig.from_config()))
        _RETRIEVERS[key] = cached
    return cached[1]


@lru_cache(maxsize=1)
def _default_simulator():
    return Simulator.from_config()


@lru_cache(maxsize=1)
def _reasoner() -> SceneGraphReasoner:
    """The task plan's graph and the constraints: one configuration and camera (one graph
    per perception, as the scene-graph node builds it in the node graph)."""
    return SceneGraphReasoner(_scene_graph_config(), Camera().position)


def _render_query(crop_size: int = 64):
    def query(obj):
        try:
            return render_object_crop(obj, size=crop_size)
        except Exception:  # noqa: BLE001 - an object out of view just has no visual query
            return None

    return query


# ------------------------------------------------------------------ scoring
def _violations(task: TaskOutcome, fragile: Dict[str, float], threshold: float) -> List[str]:
    found: List[str] = []
    for goal in task.goals:
        for attempt in goal.attempts:
            if attempt.outcome is None:
                continue
            for event in attempt.outcome.events:
                other = event.other_id or ""
                if event.kind in _VIOLATION_EVENTS:
                    found.append(f"{goal.target_id} attempt {attempt.index}: {event.kind} "
                                 f"({event.detail})")
                elif (event.kind in _FRAGILE_EVENTS and other and other != goal.target_id
                      and fragile.get(other, 0.0) >= threshold):
                    found.append(f"{goal.target_id} attempt {attempt.index}: {event.kind} "
                                 f"with fragile {other}")
    return found


def _in_order(grasped: List[str], targets: List[str]) -> bool:
    """The targets appear in ``grasped`` in the spec's order (others may be interleaved)."""
    positions = [grasped.index(t) for t in targets if t in grasped]
    return positions == sorted(positions)


# ------------------------------------------------------------------ the trial
def run_trial(task_id: str, configuration: str = "full", seed: int = 0, simulator=None,
              knowledge_base=None, planner_config: Optional[PlannerConfig] = None,
              memory: Optional[EpisodicMemory] = None, perception: str = "oracle",
              visual_query: Optional[str] = None, retriever=None,
              attempt_sink=None) -> TrialResult:
    """Run one trial of ``task_id`` under a Table II configuration (module docstring).

    ``perception``: one of :data:`PERCEPTION_MODES`; ``visual_query``: none | render |
    camera (None = config/planner.yaml ``episode_visual_query``). ``retriever``: a
    retriever to use instead of the knowledge base's (a LiveRetriever that grows; a core
    HAA-RAG is wrapped in peers.HaaRagRetriever, a ports.Retriever used as it is);
    ``attempt_sink``: the planner's experience-acquisition hook (core/retrieval/acquisition).

    ``simulator`` defaults to one shared ``Simulator.from_config()``; ``knowledge_base`` to
    the configured knowledge base (HAA-RAG is built once per knowledge base). ``memory``:
    the episodic memory to use; by default a fresh one per trial (``memory_scope: trial``)
    or one per configuration kept for the process's lifetime (``memory_scope: session``).
    """
    start = time.perf_counter()
    cfg = (planner_config or _planner_config()).with_configuration(configuration)
    conf = get_configuration(configuration)
    sim = simulator if simulator is not None else _default_simulator()
    spec = sim.load_task(task_id, trial_seed=int(seed))
    truth = {o.id: o.fragility for o in sim.objects()}
    if retriever is None or not conf.retrieval:
        retriever = retriever_for(knowledge_base) if conf.retrieval else None
    eyes = CameraPerception(sim, perception, int(seed), _crop_size())
    query = visual_query if visual_query is not None else cfg.episode_visual_query
    visual = None
    if conf.retrieval and query == "render":
        visual = _render_query()
    elif conf.retrieval and query == "camera":
        visual = eyes.crop
    planner = ReflectivePlanner(cfg, as_retriever(retriever), _reasoner(),
                                visual_query=visual, camera_position=eyes.camera.position,
                                scene_graph_config=_scene_graph_config())
    planner.attempt_sink = attempt_sink      # experience acquisition (bench learning)
    planner.reseed(trial_rng_seed(seed))

    if memory is None:
        memory = _MEMORIES.memory_for(conf.name, conf.memory, cfg.memory_scope)
    arm = InProcessSimArm(sim)
    task = planner.run_task(spec.instruction, eyes, arm, memory,
                            after_success=lambda _oid: sim.place_held_object())
    sim.place_held_object()
    # what was really taken: the objects the robot put in the bin, in order (the planner's
    # belief, task.grasped, comes from its diagnosis of what the sensors reported)
    grasped = [o.id for o in sim.binned()]
    all_grasped = all(t in grasped for t in spec.targets)
    order_ok = _in_order(grasped, list(spec.targets))
    needs_order = task.plan is not None and task.plan.order_matters
    success = all_grasped and (order_ok or not needs_order)
    violations = _violations(task, truth, _scene_graph_config().fragile_threshold)
    attempts = task.attempts
    failure_types = [a.failure_type for a in attempts if a.failure_type]
    compute = task.compute_s
    motion = task.motion_s
    return TrialResult(
        task_id=spec.task_id, category=spec.category, configuration=conf.name, seed=int(seed),
        success=success, targets=list(spec.targets), grasped=grasped, order_ok=order_ok,
        constraint_satisfied=not violations, violations=violations,
        n_attempts=len(attempts), failure_types=failure_types,
        retry_levels=[a.retry_level for a in attempts],
        recovered=success and bool(failure_types),
        first_attempt_success=success and all(g.n_attempts == 1 for g in task.goals
                                              if g.success),
        motion_s=motion, compute_s=compute, sim_time_s=motion + compute + eyes.vlm_s,
        wall_s=time.perf_counter() - start, task=task, perception=perception,
        perception_calls=task.total_perception_calls, vlm_calls=eyes.vlm_calls,
        vlm_s=eyes.vlm_s, refusals=[f"{g.target_id}: {g.message}" for g in task.goals
                                    if g.status == STATUS_BEYOND_HAND],
        diagnoses=true_and_diagnosed(task, sim.truth_log))


def true_failure(outcome) -> str:
    """The simulator's mechanism of one attempt: its first failure event, "none" when the
    attempt succeeded."""
    if outcome.success:
        return "none"
    names = {f.value for f in FailureType}
    kinds = [e.kind for e in outcome.events if e.kind in names]
    return kinds[0] if kinds else FailureType.UNKNOWN.value


def true_and_diagnosed(task: TaskOutcome, truth_log) -> List[List[str]]:
    """Pairs [true, diagnosed] for every attempt the arm ran, in order: the simulator
    logs one truth per finished attempt, the planner one record per attempt run."""
    ran = [a for a in task.attempts if a.observation is not None
           and a.arm_error == ArmError.NONE]
    pairs = []
    for attempt, truth in zip(ran, truth_log):
        diagnosed = "none" if attempt.success else (attempt.failure_type or "unknown")
        pairs.append([true_failure(truth), diagnosed])
    return pairs


__all__ = ["CameraPerception", "PERCEPTION_MODES", "TrialResult", "retriever_for",
           "run_trial"]
