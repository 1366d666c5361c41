"""What the planner reports while it runs Algorithm 1: one frozen dataclass per event.

:meth:`ReflectivePlanner.run_task` and :meth:`~ReflectivePlanner.plan_and_execute` hand these
to their ``on_event`` sink in this order per sub-goal::

    TaskPlan                                  (run_task, once)
    Plan, then per attempt r: Thought, Phase..., Observation, [Memory | Reflection]
    Result                                    (per sub-goal; also alone when not perceived)
    TaskResult                                (run_task, once)

The attempt events carry the core
:class:`~agentic_grasp.core.planner.outcomes.AttemptRecord` itself, its :class:`Diagnosis`
and its :class:`Correction`, so a consumer (the planner node's goal session) reads typed
values instead of rebuilding them from text. ``to_dict()`` gives the plain-dict form these
events had before they were typed (``event`` names the kind), for logs and JSON.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, Mapping, Optional, Tuple, Union

from agentic_grasp.core.scene_graph.constraints import ConstraintSet
from agentic_grasp.core.planner.instruction.tasks import TaskPlan
from agentic_grasp.core.planner.outcomes import AttemptRecord, ViewRecord, outcome_dict
from agentic_grasp.core.planner.recovery.correction import Correction
from agentic_grasp.core.planner.recovery.failure import Diagnosis
from agentic_grasp.core.types import GraspParameters


@dataclass(frozen=True)
class TaskPlanEvent:
    """The sub-goals an instruction was decomposed into (instruction/tasks.py)."""

    kind: ClassVar[str] = "task_plan"
    plan: TaskPlan

    def to_dict(self) -> Dict[str, Any]:
        return {"event": self.kind, **self.plan.to_dict()}


@dataclass(frozen=True)
class PlanEvent:
    """Lines 1-4 of Algorithm 1 for one sub-goal: constraints, retrieval and g0."""

    kind: ClassVar[str] = "plan"
    target_id: str
    category: str
    configuration: str
    initial_source: str
    detail: str
    retrieval: Mapping[str, Any]
    constraints: ConstraintSet
    prerequisites: Tuple[str, ...]
    g0: GraspParameters

    def to_dict(self) -> Dict[str, Any]:
        return {"event": self.kind, "target_id": self.target_id, "category": self.category,
                "configuration": self.configuration, "initial_source": self.initial_source,
                "detail": self.detail, "retrieval": self.retrieval,
                "constraints": self.constraints.explanations(),
                "prerequisites": list(self.prerequisites), "g0": self.g0.to_dict()}


@dataclass(frozen=True)
class ThoughtEvent:
    """Thought_r: the grasp about to be executed and why (before the arm moves)."""

    kind: ClassVar[str] = "thought"
    target_id: str
    attempt: int
    retry_level: int
    text: str
    grasp: GraspParameters
    #: constraint_mode clearance: the grasp as a candidate (label, clearance_m, nearest,
    #: collision_free); None when no clearance reasoning ran
    candidate: Optional[Mapping[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"event": self.kind, "target_id": self.target_id, "attempt": self.attempt,
                "retry_level": self.retry_level, "text": self.text,
                "grasp": self.grasp.to_dict(), "candidate": self.candidate}


@dataclass(frozen=True)
class PhaseEvent:
    """The arm entered motion phase ``index`` of ``count`` during attempt r."""

    kind: ClassVar[str] = "phase"
    target_id: str
    attempt: int
    phase: str                       # Phase value ("approach", ...)
    index: int
    count: int

    def to_dict(self) -> Dict[str, Any]:
        return {"event": self.kind, "target_id": self.target_id, "attempt": self.attempt,
                "phase": self.phase, "index": self.index, "count": self.count}


@dataclass(frozen=True)
class ObservationEvent:
    """Observation_r: the attempt has run (or could not). ``observation`` is the attempt as
    observed, before any reflection; ``record`` is its final AttemptRecord when no reflection
    follows (a success, a cancel); None when the planner reflects on it next, and the
    ReflectionEvent carries the record."""

    kind: ClassVar[str] = "observation"
    target_id: str
    observation: AttemptRecord
    record: Optional[AttemptRecord] = None

    @property
    def attempt(self) -> int:
        return self.observation.index

    def to_dict(self) -> Dict[str, Any]:
        seen = self.observation
        return {"event": self.kind, "target_id": self.target_id, "attempt": self.attempt,
                "success": seen.success, "arm_error": seen.arm_error.name,
                "outcome": outcome_dict(seen.outcome)}


@dataclass(frozen=True)
class MemoryEvent:
    """A success stored in episodic memory M (Sec. IV-C)."""

    kind: ClassVar[str] = "memory"
    target_id: str
    category: str

    def to_dict(self) -> Dict[str, Any]:
        return {"event": self.kind, "target_id": self.target_id, "stored": True,
                "category": self.category}


@dataclass(frozen=True)
class ReflectionEvent:
    """Lines 13-16 on a failed attempt: its diagnosis F_r and the correction computed from it
    (``executed``: whether another attempt runs it); ``record`` is the attempt's
    AttemptRecord, complete."""

    kind: ClassVar[str] = "reflection"
    target_id: str
    record: AttemptRecord
    diagnosis: Diagnosis
    correction: Correction
    executed: bool

    @property
    def attempt(self) -> int:
        return self.record.index

    def to_dict(self) -> Dict[str, Any]:
        return {"event": self.kind, "target_id": self.target_id, "attempt": self.attempt,
                "diagnosis": self.diagnosis.to_dict(), "correction": self.correction.to_dict(),
                "executed": self.executed}


@dataclass(frozen=True)
class ResultEvent:
    """One sub-goal has ended (GoalOutcome in brief)."""

    kind: ClassVar[str] = "result"
    target_id: str
    success: bool
    status: str
    attempts: int
    failure_types: Tuple[str, ...]
    prerequisites: Tuple[str, ...]
    message: str

    def to_dict(self) -> Dict[str, Any]:
        return {"event": self.kind, "target_id": self.target_id, "success": self.success,
                "status": self.status, "attempts": self.attempts,
                "failure_types": list(self.failure_types),
                "prerequisites": list(self.prerequisites), "message": self.message}


@dataclass(frozen=True)
class TaskResultEvent:
    """The whole instruction has ended."""

    kind: ClassVar[str] = "task_result"
    instruction: str
    status: str
    grasped: Tuple[str, ...]
    message: str

    def to_dict(self) -> Dict[str, Any]:
        return {"event": self.kind, "instruction": self.instruction, "status": self.status,
                "grasped": list(self.grasped), "message": self.message}


@dataclass(frozen=True)
class UncoverEvent:
    """One wrist-camera view while uncovering a hidden target
    (core/planner/instruction/uncover.py): ``done`` False before the motion (its thought),
    True once it ended (reached or not, the target seen or not). ``record`` is the view's
    outcomes.ViewRecord."""

    kind: ClassVar[str] = "uncover"
    record: ViewRecord
    done: bool

    def to_dict(self) -> Dict[str, Any]:
        return {"event": self.kind, "done": self.done, **self.record.to_dict()}


PlannerEvent = Union[TaskPlanEvent, PlanEvent, ThoughtEvent, PhaseEvent, ObservationEvent,
                     MemoryEvent, ReflectionEvent, ResultEvent, TaskResultEvent, UncoverEvent]
EventSink = Callable[[PlannerEvent], None]

__all__ = ["EventSink", "MemoryEvent", "ObservationEvent", "PhaseEvent", "PlanEvent",
           "PlannerEvent", "ReflectionEvent", "ResultEvent", "TaskPlanEvent",
           "TaskResultEvent", "ThoughtEvent", "UncoverEvent", "outcome_dict"]
