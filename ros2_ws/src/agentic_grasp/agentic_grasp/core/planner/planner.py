"""Agentic self-reflective grasp planning: Algorithm 1 of the paper (Sec. IV-A, Fig. 4).

Per sub-goal (:meth:`ReflectivePlanner.plan_and_execute`):

1. {e_1..e_k} <- HAA-RAG(category, affordance of the perceived target);
2. G <- BuildSceneGraph(perceived objects); 3. C <- InferConstraints(G, v_t);
4. g0 <- InitGrasp(e_1, C, M): the top *successful* strategy among the k (failed experiences
   are negative examples, not plans; e_1 when all k failed), placed on the perceived object
   (object frame -> world with its centre and yaw), or the category's grasp from episodic
   memory M when it has one (memory wins, Sec. IV-C); then g0 = g (+) Delta g (constraints);
5. for r = 0 .. Rmax: Thought (what is tried and why, with the numbers), Action (the arm
   backend executes g_r), Observation (y_r, Q_r, phi_r, events). Success stores (c, g_r) in
   M and returns. Failure: F_r = ClassifyFailure (recovery/failure.py), the target is
   re-perceived (when a perceive callback is given) and the grasps follow it if it moved, then
   g_{r+1} = ApplyCorrection(g_r, GetCorrection(F_r, level), level) (recovery/).

Levels: with ``level_by = "failed_attempt"`` (the paper's indexing, default) the correction
computed after attempt r has level(r) (r <= 1 -> 1, r = 2 -> 2, r = 3 -> 3) and is applied
to attempt r + 1, so with Rmax = 3 the four attempts run g0, L1, L1, L2 and the level-3
correction computed after the last attempt is recorded but not executed. ``"next_attempt"``
gives attempt r the correction of level(r): g0, L1, L2, L3. Every attempt record carries the
level of the correction that produced its grasp (0 for g0) and its diagnosis carries the
level of the correction computed from it.

A Table II configuration (configurations.py) switches mechanisms off; the loop is the same.
:meth:`ReflectivePlanner.run_task` runs a whole instruction (instruction/run.py): sub-goals
(instruction/tasks.py), a fresh perception per sub-goal, support dependencies discovered at
run time inserted first. Both report their progress as the typed events of events.py (the
attempt events carry the attempt's AttemptRecord of outcomes.py, as observed and then with
its Diagnosis and its Correction, built once, when the planner is done with the attempt).
The planner's peers (perception, HAA-RAG, the scene-graph reasoning, the arm) are the ports
of ports.py.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.arm.backend import ArmError, CancelCheck
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.scene_graph.constraints import (ConstraintSet, ConstraintType,
                                                        apply_constraints)
from agentic_grasp.core.grasping.config import HeuristicConfig
from agentic_grasp.core.grasping.heuristic import strip_semantics
from agentic_grasp.core.perception.backend import PerceivedObject, PerceptionResult
from agentic_grasp.core.planner.configurations import (Configuration, PlannerConfig,
                                                       get_configuration)
from agentic_grasp.core.planner.events import (EventSink, MemoryEvent, ObservationEvent,
                                               PhaseEvent, PlanEvent, ReflectionEvent,
                                               ResultEvent, ThoughtEvent)
from agentic_grasp.core.planner.initial import InitialGrasp
from agentic_grasp.core.planner.instruction.run import TaskRunner
from agentic_grasp.core.planner.instruction.uncover import poorly_located
from agentic_grasp.core.planner.memory import EpisodicMemory, LearnedCorrections, Recall
from agentic_grasp.core.planner.outcomes import (STATUS_BLOCKED, STATUS_CANCELED,
                                                 STATUS_FAILED, STATUS_NOT_PERCEIVED,
                                                 STATUS_SUCCEEDED, AttemptRecord, GoalOutcome,
                                                 describe_grasp)
from agentic_grasp.core.planner.peers import SceneGraphReasoner
from agentic_grasp.core.planner.ports import Arm, ConstraintReasoner, Retriever, require_port
from agentic_grasp.core.planner.recovery import (Correction, CorrectionContext,
                                                 NextCandidates, clamp_grasp, get_correction,
                                                 rebase_grasp, same_grasp, with_approach,
                                                 wrap_angle)
from agentic_grasp.core.planner.recovery import correction_level as recovery_correction_level
from agentic_grasp.core.planner.recovery.diagnosis import assess
from agentic_grasp.core.planner.recovery.failure import Diagnosis
from agentic_grasp.core.grasping import clearance as grasp_clearance
from agentic_grasp.core.grasping.fit import handle_yaw_of
from agentic_grasp.core.grasping.hand import HandModel
from agentic_grasp.core.grasping.limits import STATUS_BEYOND_HAND, check_hand_limits
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.types import GraspParameters, ObjectInstance, Phase

_LOG = logging.getLogger(__name__)

VisualQuery = Callable[[ObjectInstance], Optional[np.ndarray]]


def _result_event(goal: GoalOutcome) -> ResultEvent:
    return ResultEvent(goal.target_id, goal.success, goal.status, goal.n_attempts,
                       tuple(goal.failure_types), tuple(goal.prerequisites), goal.message)


def _find_perceived(perception: PerceptionResult, target_id: str) -> Optional[PerceivedObject]:
    if perception.target is not None and perception.target.id == target_id:
        return perception.target
    for obj in perception.objects:
        if obj.id == target_id:
            return obj
    return None


class ReflectivePlanner(InitialGrasp, TaskRunner):
    """Algorithm 1 with Table II switches (module docstring)."""

    def __init__(self, config: Optional[PlannerConfig] = None,
                 retriever: Optional[Retriever] = None,
                 reasoner: Optional[ConstraintReasoner] = None,
                 configuration: Optional[str] = None,
                 visual_query: Optional[VisualQuery] = None,
                 heuristic_config: Optional[HeuristicConfig] = None,
                 camera_position: Optional[Sequence[float]] = None,
                 scene_graph_config: Optional[SceneGraphConfig] = None) -> None:
        """``retriever`` and ``reasoner`` implement the ports of ports.py (TypeError
        otherwise): HAA-RAG, and the scene-graph reasoning that gives both the task plan's
        graph and each sub-goal's constraints (peers.SceneGraphReasoner in process, the
        scene-graph node's service in the graph); no reasoner = one in process with the
        default SceneGraphConfig."""
        require_port(retriever, Retriever, "retriever", optional=True)
        require_port(reasoner, ConstraintReasoner, "constraint reasoner", optional=True)
        self.config = config if config is not None else PlannerConfig()
        #: The fixed camera's position and the scene graph's thresholds, for uncovering a
        #: hidden target (the same the constraint function's scene graph uses).
        self.camera_position = np.asarray(
            camera_position if camera_position is not None else Camera().position,
            dtype=float)
        self.scene_graph_config = scene_graph_config or SceneGraphConfig()
        self.configuration: Configuration = get_configuration(
            configuration if configuration is not None else self.config.configuration)
        self.retriever = retriever
        self.reasoner = reasoner if reasoner is not None else SceneGraphReasoner()
        self.visual_query = visual_query
        self.heuristic_config = heuristic_config or HeuristicConfig()
        self.rng = np.random.default_rng(self.config.seed)
        self.hand = HandModel(self.config.grasp_synthesis.hand)
        self._handle_yaw: Optional[float] = None
        self._rim_z: Optional[float] = None
        self._yaw_known = True
        self._perception_backend = ""
        #: Experience acquisition (core/retrieval/acquisition.Acquirer): called with
        #: (AttemptRecord, perceived target, GoalOutcome) once an attempt's outcome and
        #: diagnosis are known. None = the robot does not learn from its attempts.
        self.attempt_sink: Optional[Callable[[AttemptRecord, ObjectInstance, GoalOutcome],
                                             Any]] = None
        if self.configuration.retrieval and retriever is None:
            _LOG.warning("configuration %s uses HAA-RAG but no retriever was given: the "
                         "default grasp will be used", self.configuration.name)

    # ------------------------------------------------------------------ settings
    def reseed(self, seed: Any) -> None:
        """Restart the level-3 perturbation generator (per trial / per sub-goal)."""
        self.rng = np.random.default_rng(seed)

    @property
    def max_attempts(self) -> int:
        return 1 + self.config.max_retries if self.configuration.recovery else 1

    def correction_level(self, failed_index: int) -> int:
        """Level of the correction computed after failed attempt ``failed_index``
        (:func:`.recovery.correction_level`, the one home of the escalation rule)."""
        return recovery_correction_level(failed_index, self.config)

    # ------------------------------------------------------------------ Algorithm 1
    def plan_and_execute(self, perception: PerceptionResult, target_id: str,
                         arm: Arm, memory: Optional[EpisodicMemory] = None,
                         cancel: Optional[CancelCheck] = None,
                         on_event: Optional[EventSink] = None,
                         reperceive: Optional[Callable[[], PerceptionResult]] = None,
                         enforce_prerequisites: bool = True) -> GoalOutcome:
        """Plan and execute one sub-goal: grasp ``target_id`` (Algorithm 1).

        ``cancel`` is polled before every attempt and during it (through the arm);
        ``on_event`` receives the typed events of events.py (Plan, Thought, Phase,
        Observation, Reflection, Memory, Result). ``reperceive`` refreshes the scene after a failed
        attempt. With ``enforce_prerequisites`` a target that supports other objects is not
        attempted: the outcome's status is ``blocked_by_prerequisites`` and
        ``prerequisites`` lists what to remove first.
        """
        require_port(arm, Arm, "arm")
        start = time.perf_counter()
        cancel = cancel or (lambda: False)
        emit = on_event or (lambda _event: None)
        tm = self.config.time_model
        cfg = self.configuration
        perceived = _find_perceived(perception, target_id) if perception.ok else None
        target = perceived.to_object_instance() if perceived is not None else None
        self._handle_yaw = handle_yaw_of(getattr(perceived, "handle_yaw", None))
        self._rim_z = getattr(perceived, "rim_z", None)
        # the oracle reports the true yaw; depth geometry says whether its yaw is defined
        self._yaw_known = perception.backend == "oracle" or bool(
            getattr(perceived, "yaw_known", True))
        goal = GoalOutcome(target_id, "" if perceived is None else perceived.category, False,
                           STATUS_FAILED, cfg.name, perception_backend=perception.backend)
        self._perception_backend = perception.backend
        if target is None:
            goal.status = STATUS_NOT_PERCEIVED
            goal.message = (f"perception failed: {perception.error}" if not perception.ok
                            else f"{target_id} was not perceived with a 3-D position")
            goal.wall_s = time.perf_counter() - start
            emit(_result_event(goal))
            return goal
        beyond = check_hand_limits(perceived, target, self.config.grasp_synthesis.hand,
                                   self.config.grasp_synthesis.hand_limits,
                                   self.config.grasp_synthesis.finger_clearance_m)
        if beyond is not None:              # refused at planning: zero attempts
            goal.status, goal.message = STATUS_BEYOND_HAND, f"beyond the hand: {beyond}"
            goal.wall_s = time.perf_counter() - start
            emit(_result_event(goal))
            return goal
        objects = perception.to_object_instances()
        if target_id not in {o.id for o in objects}:
            objects = [target] + objects
        if not cfg.semantics:          # the heuristic: depth geometry only (heuristic.py)
            target, objects = strip_semantics(target), [strip_semantics(o) for o in objects]

        # Lines 1-4: scene graph and constraints, retrieval, initial grasp.
        if cfg.scene_graph:
            constraints = self.reasoner.constraints(objects, target_id)
            if not cfg.constraint_inference:        # Table V "+ scene graph": graph only
                constraints = ConstraintSet(target_id, constraints.of_type(
                    ConstraintType.SUPPORT_DEPENDENCY))
            goal.compute_s += tm.scene_graph_s
        else:
            constraints = ConstraintSet(target_id)
        goal.constraints = constraints
        goal.prerequisites = list(constraints.prerequisites)
        init = self.initial_grasp(target, memory, constraints)
        goal.retrieval = init.retrieval
        if init.retrieval.get("used"):
            goal.compute_s += tm.retrieval_s

        synth = self.config.grasp_synthesis
        clearance_mode = cfg.scene_graph and synth.constraint_mode == "clearance"
        scene = grasp_clearance.SceneGeometry.build(perception, target, objects, synth,
                                                    constraints) if clearance_mode else None
        pending = NextCandidates()
        # clearance mode: the candidates generated so far and their labels, to name the one
        # each attempt executes in its record
        generated: List[Tuple[GraspParameters, str]] = []

        def constrain(grasp: GraspParameters) -> GraspParameters:
            """g (+) Delta g, keeping the finger line when the approach turns."""
            grasp, rim_note = self._rim_over_part(grasp, target)
            grasp, pivot_note = self._pivot_grip(grasp, target)
            pivot_note = "; ".join(n for n in (rim_note, pivot_note) if n)
            if scene is not None:
                chosen, ranked, summary, labels = grasp_clearance.choose(
                    grasp, scene, synth, self.hand, constraints, self.config.limits)
                if pivot_note:
                    summary["notes"] = [pivot_note] + list(summary.get("notes", []))
                pending.grasps = ranked
                goal.candidates = summary
                best = (summary.get("chosen") or {}).get("label") or "strategy unchanged"
                generated[:0] = [(chosen, best)] + list(zip(ranked, labels))
                return chosen
            if not cfg.scene_graph or not len(constraints):
                return grasp.copy()
            adjusted = apply_constraints(grasp, constraints)
            adjusted = with_approach(adjusted.copy(approach=grasp.approach,
                                                   wrist_yaw=grasp.wrist_yaw),
                                     adjusted.approach)
            return clamp_grasp(adjusted, self.config.limits)

        if scene is not None and scene.neighbours and init.alternatives \
                and init.source in ("retrieval", "heuristic"):
            # clearance mode: the strategy whose best candidate clears the neighbours most
            # only strategies that succeeded before compete (they are ranked first)
            n_ok = max(1, int(init.retrieval.get("n_successful_grasps", 1)))
            bases = ([init.base] + list(init.alternatives))[:n_ok]
            names = (["retrieved " + init.detail] + list(init.names))[:n_ok]
            keys = []
            for b in bases:
                constrain(b)
                keys.append(grasp_clearance.rank_key(goal.candidates, synth))
            pick = min(range(len(bases)), key=lambda i: (keys[i], i))
            if pick > 0:
                rest_b = list(init.alternatives)[n_ok - 1:]
                rest_n = list(init.names)[n_ok - 1:]
                init = replace(init, base=bases[pick],
                               alternatives=bases[:pick] + bases[pick + 1:] + rest_b,
                               names=names[:pick] + names[pick + 1:] + rest_n,
                               detail=(f"retrieved strategy {names[pick]} (its best "
                                       "candidate clears the perceived neighbours most)"))
        b0 = init.base
        g0 = constrain(b0)
        goal.g0, goal.initial_source, goal.initial_detail = g0, init.source, init.detail
        goal.memory_recalled = init.memory_recalled
        recall: Optional[Recall] = init.memory
        goal.memory_level = recall.level if recall is not None else 0
        emit(PlanEvent(target_id, target.category, cfg.name, goal.initial_source,
                       goal.initial_detail, goal.retrieval, constraints,
                       tuple(goal.prerequisites), g0))
        if enforce_prerequisites and goal.prerequisites:
            goal.status = STATUS_BLOCKED
            goal.message = (f"{target_id} supports {', '.join(goal.prerequisites)}: remove "
                            "them first")
            goal.wall_s = time.perf_counter() - start
            emit(_result_event(goal))
            return goal

        ctx = CorrectionContext(target=target, g0=g0, b0=b0, constrain=constrain, rng=self.rng,
                                alternatives=[g.copy() for g in init.alternatives],
                                alternative_names=list(init.names),
                                objects={o.id: o for o in objects}, rim_z=self._rim_z)
        ctx.candidates = pending
        grasp, base = g0, b0
        level_used = 0
        last_correction: Optional[Correction] = None
        last_diagnosis: Optional[Diagnosis] = None
        n = self.max_attempts

        # Line 5: the ReAct loop.
        for r in range(n):
            if cancel():
                goal.status = STATUS_CANCELED
                goal.message = f"canceled before attempt {r + 1}"
                break
            thought = self._thought(r, n, level_used, grasp, goal, constraints, last_diagnosis,
                                    last_correction)
            goal.compute_s += tm.thought_s
            candidate = None
            if scene is not None:
                label = next((name for g, name in generated if same_grasp(g, grasp)),
                             f"not a generated candidate (level-{level_used} correction)")
                candidate = grasp_clearance.executed_candidate(grasp, scene, synth, self.hand,
                                                               label)
            emit(ThoughtEvent(target_id, r, level_used, thought, grasp, candidate))

            def on_phase(phase: Phase, index: int, count: int, _r: int = r) -> None:
                emit(PhaseEvent(target_id, _r, getattr(phase, "value", str(phase)), index,
                                count))

            t0 = time.perf_counter()
            result = arm.execute(target_id, grasp, on_phase, cancel)
            elapsed = time.perf_counter() - t0
            # the planner's reading of what the arm's sensors reported (one diagnosis for
            # every arm: recovery/diagnosis.py), against the target and neighbours perceived
            assessment = assess(result, grasp, self.hand, ctx.target,
                                list(ctx.objects.values()), elapsed,
                                self.config.classification)
            outcome = assessment.outcome
            success = bool(result.ran and assessment.success)
            seen = AttemptRecord(r, level_used, thought, grasp, success, outcome,
                                 ArmError(result.error), result.message,
                                 duration_s=float(outcome.duration_s) if outcome else 0.0,
                                 wall_s=elapsed, candidate=candidate,
                                 memory=recall.text if (r == 0 and recall) else "",
                                 observation=result.observation)
            goal.motion_s += seen.duration_s
            record = None
            if success or result.error == ArmError.CANCELED:    # no reflection follows
                record = seen
                goal.attempts.append(record)
            emit(ObservationEvent(target_id, seen, record))
            if result.error == ArmError.CANCELED:
                goal.status = STATUS_CANCELED
                goal.message = f"canceled during attempt {r + 1}"
                break
            if success:
                self._acquire(record, ctx.target, goal)
                goal.success, goal.status, goal.grasp = True, STATUS_SUCCEEDED, grasp
                if cfg.memory and memory is not None and memory.enabled:
                    # M keeps the base (constraints re-apply to the next scene), except after
                    # a next-best clearance candidate: the candidate is what was learned, and
                    # the base would make the chooser pick the candidate that failed again
                    kept = grasp if (last_correction is not None
                                     and last_correction.ops.get("next_candidate")) else base
                    memory.store(target.category, kept, ctx.target, attempts=r + 1,
                                 corrections=LearnedCorrections.from_attempts(goal.attempts),
                                 handle_yaw=self._handle_yaw, yaw_known=self._yaw_known)
                    goal.memory_stored = True
                    emit(MemoryEvent(target_id, target.category))
                break

            if r == 0 and recall is not None and memory is not None:
                memory.mark_failed(recall, target_id)   # never proposed for it again
            # Lines 13-16: reflect, correct, escalate.
            diagnosis = assessment.diagnosis
            attempted_on = ctx.target       # what the attempt ran against (before a refresh)
            goal.compute_s += tm.reflection_s
            if reperceive is not None and r + 1 < n:       # only when another attempt follows
                goal.perception_calls += 1
                goal.compute_s += tm.perception_s
                moved_from = self._refresh(reperceive, target_id, ctx)
                if moved_from is not None:
                    grasp = rebase_grasp(grasp, moved_from, ctx.target)
                    base = rebase_grasp(base, moved_from, ctx.target)
            level = self.correction_level(r)
            correction = get_correction(diagnosis, level, grasp, base, ctx, self.config)
            # the attempt's record, built once now that it is reflected on
            record = seen.reflected(diagnosis, correction, r + 1 < n)
            goal.attempts.append(record)
            self._acquire(record, attempted_on, goal)
            emit(ReflectionEvent(target_id, record, diagnosis, correction,
                                 record.correction_executed))
            grasp, base = correction.grasp, correction.base
            level_used = correction.level
            last_correction, last_diagnosis = correction, diagnosis
        else:
            goal.message = f"no success within {n} attempt(s)"
        if goal.success:
            goal.message = f"grasped {target_id} on attempt {len(goal.attempts)}"
        goal.wall_s = time.perf_counter() - start
        emit(_result_event(goal))
        return goal

    # ------------------------------------------------------------------ helpers
    def _acquire(self, record: AttemptRecord, target: ObjectInstance,
                 goal: GoalOutcome) -> None:
        if self.attempt_sink is None:
            return
        try:
            self.attempt_sink(record, target, goal)
        except Exception as exc:  # noqa: BLE001 - learning must never fail a grasp
            _LOG.warning("experience acquisition failed: %r", exc)

    def _refresh(self, reperceive: Callable[[], PerceptionResult], target_id: str,
                 ctx: CorrectionContext) -> Optional[ObjectInstance]:
        """Re-perceive the scene; when the target moved, carry g0, b0 and the alternatives
        along and return its previous pose (None when it stayed or was not seen)."""
        fresh = reperceive()
        perceived = _find_perceived(fresh, target_id) if fresh.ok else None
        new = perceived.to_object_instance() if perceived is not None else None
        if new is None or poorly_located(perceived, fresh.objects):
            return None         # not seen, or depth measured another surface: keep the last
        old = ctx.target
        shift = float(np.linalg.norm(new.position - old.position))
        turn = abs(wrap_angle(new.yaw - old.yaw))
        if shift < self.config.rebase_min_shift_m and turn < self.config.rebase_min_yaw_rad:
            return None
        ctx.target = new
        ctx.g0 = rebase_grasp(ctx.g0, old, new)
        ctx.b0 = rebase_grasp(ctx.b0, old, new)
        ctx.alternatives = [rebase_grasp(g, old, new) for g in ctx.alternatives]
        return old

    def _thought(self, r: int, n: int, level: int, grasp: GraspParameters, goal: GoalOutcome,
                 constraints: ConstraintSet, diagnosis: Optional[Diagnosis],
                 correction: Optional[Correction]) -> str:
        """Thought_r: what is tried and why, from the actual numbers."""
        head = f"Attempt {r + 1}/{n}"
        if r == 0 or diagnosis is None or correction is None:
            why = goal.initial_detail
            if len(constraints):
                why += "; constraints: " + ", ".join(
                    f"{c.type.value} ({c.source_id})" for c in constraints.constraints)
            relaxed = (goal.candidates or {}).get("relaxed")
            if relaxed:         # grasping/clearance.RELAXATION_ORDER
                why += "; relaxed, in order: " + "; ".join(relaxed)
            return f"{head}: {describe_grasp(grasp)}, from {why}."
        return (f"{head} (retry level {level}): attempt {r} failed with "
                f"{diagnosis.failure_type.value} ({diagnosis.evidence}); {correction.text}. "
                f"Now a {describe_grasp(grasp)}.")


__all__ = ["ReflectivePlanner", "VisualQuery"]
