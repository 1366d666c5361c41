"""What Algorithm 1 returns: one record per attempt, per sub-goal and per instruction.

:class:`AttemptRecord` is one Thought -> Action -> Observation cycle with its reflection,
:class:`ViewRecord` one wrist-camera view while uncovering a hidden target,
:class:`GoalOutcome` g* or the failure report of a sub-goal, :class:`TaskOutcome` a whole
instruction; the benchmark, the goal log and the node graph read these. Split out of
``planner``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional

import numpy as np

from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.scene_graph.constraints import ConstraintSet
from agentic_grasp.core.planner.instruction.tasks import TaskPlan
from agentic_grasp.core.planner.recovery.correction import Correction
from agentic_grasp.core.planner.recovery.failure import Diagnosis
from agentic_grasp.core.types import AttemptOutcome, GraspParameters

STATUS_SUCCEEDED = "succeeded"
STATUS_FAILED = "failed"
STATUS_CANCELED = "canceled"
STATUS_NOT_PERCEIVED = "target_not_perceived"
STATUS_BLOCKED = "blocked_by_prerequisites"
#: STATUS_BEYOND_HAND ("beyond_hand_limits", grasping/limits.py): refused at planning.


def outcome_dict(outcome: Optional[AttemptOutcome]) -> Optional[Dict[str, Any]]:
    """An observation y_r as JSON (4 decimals), as the attempt records store it."""
    if outcome is None:
        return None
    return {"success": bool(outcome.success), "quality": round(float(outcome.quality), 4),
            "phi": [round(float(v), 4) for v in np.asarray(outcome.phi).reshape(-1)],
            "events": [{"kind": e.kind, "phase": getattr(e.phase, "value", str(e.phase)),
                        "detail": e.detail, "other_id": e.other_id} for e in outcome.events],
            "phase_reached": getattr(outcome.phase_reached, "value", str(outcome.phase_reached)),
            "duration_s": round(float(outcome.duration_s), 4)}


def describe_grasp(g: GraspParameters) -> str:
    """One phrase with the grasp's numbers, for thoughts and logs."""
    tilt = math.degrees(math.acos(float(np.clip(-g.approach[2], -1.0, 1.0))))
    if tilt < 1.0:
        approach = "top-down"
    elif tilt > 89.0:
        approach = "horizontal"
    else:
        approach = f"tilted {tilt:.0f} deg"
    return (f"{g.grasp_type.value} grasp at ({g.position[0]:.3f}, {g.position[1]:.3f}, "
            f"{g.position[2]:.3f}) m, {approach}, width {g.width * 1e3:.0f} mm, force "
            f"{g.force:.1f} N, wrist {math.degrees(g.wrist_yaw):.0f} deg")


@dataclass(frozen=True)
class AttemptRecord:
    """One Thought -> Action -> Observation cycle and the reflection on it (frozen).

    The ObservationEvent carries the attempt as observed, before any reflection (no
    diagnosis, no correction); :meth:`reflected` gives the record with its reflection, built
    once, when the planner is done with the attempt."""

    index: int
    retry_level: int                      # level of the correction behind this grasp; 0 = g0
    thought: str
    grasp: GraspParameters
    success: bool
    outcome: Optional[AttemptOutcome]
    arm_error: ArmError = ArmError.NONE
    arm_message: str = ""
    diagnosis: Optional[Diagnosis] = None
    correction: Optional[Correction] = None   # computed from this attempt's diagnosis
    correction_executed: bool = False
    duration_s: float = 0.0                   # simulated / measured motion time
    wall_s: float = 0.0
    # constraint_mode clearance: the executed grasp as a candidate (label, clearance_m,
    # nearest, collision_free); None when no clearance reasoning ran
    candidate: Optional[Dict[str, Any]] = None
    #: what episodic memory transferred into this attempt's grasp and why ("" = nothing)
    memory: str = ""
    #: what the arm's sensors reported (core.arm.observation.ArmObservation); None when
    #: the arm ran nothing
    observation: Any = None

    def reflected(self, diagnosis: Diagnosis, correction: Correction,
                  correction_executed: bool) -> "AttemptRecord":
        """This observed attempt with its reflection: diagnosis F_r and the correction."""
        return replace(self, diagnosis=diagnosis, correction=correction,
                       correction_executed=correction_executed)

    @property
    def failure_type(self) -> Optional[str]:
        return None if self.diagnosis is None else self.diagnosis.failure_type.value

    def to_dict(self) -> Dict[str, Any]:
        diagnosis = None
        if self.diagnosis is not None:
            diagnosis = self.diagnosis.to_dict()
            diagnosis["correction"] = (None if self.correction is None
                                       else self.correction.text)
            diagnosis["correction_level"] = (None if self.correction is None
                                             else self.correction.level)
            diagnosis["correction_executed"] = self.correction_executed
        return {"attempt": self.index, "retry_level": self.retry_level,
                "thought": self.thought, "grasp": self.grasp.to_dict(),
                "success": self.success, "outcome": outcome_dict(self.outcome),
                "arm_error": ArmError(self.arm_error).name, "arm_message": self.arm_message,
                "diagnosis": diagnosis,
                "next_grasp": (None if self.correction is None
                               else self.correction.grasp.to_dict()),
                "candidate": None if self.candidate is None else dict(self.candidate),
                "memory": self.memory,
                "observation": (None if self.observation is None
                                else self.observation.to_dict()),
                "duration_s": round(self.duration_s, 4),
                "wall_s": round(self.wall_s, 6)}


@dataclass
class ViewRecord:
    """One view request, recorded like an attempt (AttemptRecords, goal log, markers)."""

    index: int
    occluder_id: str
    side: str
    thought: str
    pose: GraspParameters            # the TCP-free camera pose as a marker-able pose
    camera_pose: np.ndarray
    reached: bool
    target_seen: bool = False
    error: ArmError = ArmError.NONE
    message: str = ""
    duration_s: float = 0.0
    clearance_m: float = float("nan")
    seen_ids: List[str] = field(default_factory=list)

    def summary(self) -> str:
        what = f"view request {self.index + 1} ({self.occluder_id}, {self.side}): "
        if not self.reached:
            return what + f"not reached ({self.message})"
        if self.target_seen:
            return what + "target seen"
        if self.message.startswith(tuple(self.seen_ids)) and self.seen_ids:
            return what + self.message
        # once each: the target named as a landmark is reported as target and as object
        seen = ", ".join(dict.fromkeys(self.seen_ids)) or "nothing"
        return what + f"target not in view (saw {seen})"

    def to_dict(self) -> Dict[str, Any]:
        return {"view": self.index, "occluder": self.occluder_id, "side": self.side,
                "thought": self.thought, "reached": self.reached,
                "target_seen": self.target_seen, "error": ArmError(self.error).name,
                "message": self.message, "duration_s": round(self.duration_s, 4),
                "clearance_m": (None if not math.isfinite(self.clearance_m)
                                else round(self.clearance_m, 4)),
                "camera_position": [round(float(v), 4) for v in self.camera_pose[:3, 3]],
                "seen": list(self.seen_ids)}


@dataclass
class GoalOutcome:
    """Result of one sub-goal: g* or the failure report of Algorithm 1."""

    target_id: str
    category: str
    success: bool
    status: str
    configuration: str
    attempts: List[AttemptRecord] = field(default_factory=list)
    initial_source: str = ""
    initial_detail: str = ""
    g0: Optional[GraspParameters] = None
    grasp: Optional[GraspParameters] = None
    retrieval: Dict[str, Any] = field(default_factory=dict)
    constraints: Optional[ConstraintSet] = None
    prerequisites: List[str] = field(default_factory=list)
    memory_recalled: bool = False
    memory_level: int = 0          # memory.py's level of the recall (0: none)
    candidates: Dict[str, Any] = field(default_factory=dict)   # clearance mode: last choice
    memory_stored: bool = False
    motion_s: float = 0.0
    compute_s: float = 0.0
    wall_s: float = 0.0
    perception_calls: int = 0
    message: str = ""
    perception_backend: str = ""            # what perceived the target (acquisition provenance)

    @property
    def n_attempts(self) -> int:
        return len(self.attempts)

    @property
    def failure_types(self) -> List[str]:
        return [a.failure_type for a in self.attempts if a.failure_type]

    @property
    def levels(self) -> List[int]:
        return [a.retry_level for a in self.attempts]

    @property
    def recovered(self) -> bool:
        """Succeeded after at least one failed attempt."""
        return self.success and len(self.attempts) > 1

    def to_dict(self) -> Dict[str, Any]:
        return {"target_id": self.target_id, "category": self.category,
                "success": self.success, "status": self.status,
                "configuration": self.configuration,
                "initial_source": self.initial_source, "initial_detail": self.initial_detail,
                "g0": None if self.g0 is None else self.g0.to_dict(),
                "grasp": None if self.grasp is None else self.grasp.to_dict(),
                "retrieval": self.retrieval,
                "constraints": None if self.constraints is None else self.constraints.to_dict(),
                "candidates": dict(self.candidates),
                "prerequisites": list(self.prerequisites),
                "memory_recalled": self.memory_recalled, "memory_level": self.memory_level,
                "memory_stored": self.memory_stored,
                "attempts": [a.to_dict() for a in self.attempts],
                "motion_s": round(self.motion_s, 4), "compute_s": round(self.compute_s, 4),
                "wall_s": round(self.wall_s, 6), "perception_calls": self.perception_calls,
                "message": self.message}


@dataclass
class TaskOutcome:
    """Result of one instruction: its plan and one GoalOutcome per executed sub-goal."""

    instruction: str
    plan: Optional[TaskPlan]
    goals: List[GoalOutcome] = field(default_factory=list)
    status: str = STATUS_FAILED
    message: str = ""
    perception_calls: int = 0
    wall_s: float = 0.0
    overhead_s: float = 0.0               # modelled compute outside any sub-goal
    views: List[ViewRecord] = field(default_factory=list)   # uncover: wrist-camera views

    @property
    def grasped(self) -> List[str]:
        """Ids grasped, in the order they were grasped."""
        return [g.target_id for g in self.goals if g.success]

    @property
    def success(self) -> bool:
        return self.status == STATUS_SUCCEEDED

    @property
    def total_perception_calls(self) -> int:
        """Task-level looks plus the re-perceptions inside the sub-goals."""
        return self.perception_calls + sum(g.perception_calls for g in self.goals)

    @property
    def attempts(self) -> List[AttemptRecord]:
        return [a for g in self.goals for a in g.attempts]

    @property
    def motion_s(self) -> float:
        return sum(g.motion_s for g in self.goals) + sum(v.duration_s for v in self.views)

    @property
    def compute_s(self) -> float:
        return self.overhead_s + sum(g.compute_s for g in self.goals)

    def to_dict(self) -> Dict[str, Any]:
        return {"instruction": self.instruction, "status": self.status,
                "success": self.success, "message": self.message,
                "plan": None if self.plan is None else self.plan.to_dict(),
                "grasped": self.grasped, "goals": [g.to_dict() for g in self.goals],
                "views": [v.to_dict() for v in self.views],
                "perception_calls": self.total_perception_calls,
                "wall_s": round(self.wall_s, 6)}
