"""The agentic self-reflective planner (paper Sec. IV, Algorithm 1, Fig. 4; Table II).

Public API::

    from agentic_grasp.core.planner import (
        ReflectivePlanner, GoalOutcome, TaskOutcome, AttemptRecord,  # Algorithm 1
        PlannerConfig, Configuration, CONFIGURATIONS,                 # constants, Table II
        EpisodicMemory, MemoryLifetime,                               # Sec. IV-C
        ThoughtEvent, ObservationEvent, ReflectionEvent, ...          # what the loop reports
        assess, Diagnosis, get_correction, Correction,      # Sec. IV-B
        plan_subgoals, TaskPlan, SubGoal,                             # long-horizon tasks
        Perceiver, Retriever, ConstraintReasoner, Arm,                # the ports (ports.py)
        HaaRagRetriever, SceneGraphReasoner, FunctionPerceiver,       # in process (peers.py)
        run_trial, TrialResult)                                       # one benchmark trial

Typical use (in process)::

    planner = ReflectivePlanner(PlannerConfig.from_config(), HaaRagRetriever(build_retriever()))
    goal = planner.plan_and_execute(perception, "cup_1", arm, EpisodicMemory())
    print(goal.success, [a.to_dict()["thought"] for a in goal.attempts])

Modules: configurations (PlannerConfig and the Table II switches), sections (the sections of
config/planner.yaml), events (the typed events), recovery/ (failure: taxonomy
classification; the three correction levels and the escalation rule), memory (episodic
memory and its lifetime), instruction/ (tasks: instruction -> sub-goals; uncover: a hidden
target; run: a whole instruction), initial (InitGrasp: memory, retrieval or a
configuration's proposal), outcomes (the attempt, view, goal and task records), planner (the
loop), ports (the planner's peers as abstract classes), peers (their in-process
implementations), episode (one simulated trial).
"""
from agentic_grasp.core.planner.configurations import (CONFIGURATIONS, TABLE_II_ORDER,
                                                       Configuration, PlannerConfig,
                                                       get_configuration)
from agentic_grasp.core.planner.events import (MemoryEvent, ObservationEvent, PhaseEvent,
                                               PlanEvent, PlannerEvent, ReflectionEvent,
                                               ResultEvent, TaskPlanEvent, TaskResultEvent,
                                               ThoughtEvent)
from agentic_grasp.core.planner.instruction.run import subgoal_instruction
from agentic_grasp.core.planner.instruction.tasks import (SubGoal, TaskPlan, instruction_kind,
                                                          plan_subgoals)
from agentic_grasp.core.planner.memory import EpisodicMemory, MemoryEntry, MemoryLifetime
from agentic_grasp.core.planner.outcomes import (STATUS_BLOCKED, STATUS_CANCELED,
                                                 STATUS_FAILED, STATUS_NOT_PERCEIVED,
                                                 STATUS_SUCCEEDED, AttemptRecord, GoalOutcome,
                                                 TaskOutcome)
from agentic_grasp.core.planner.peers import (FunctionPerceiver, HaaRagRetriever,
                                              SceneGraphReasoner)
from agentic_grasp.core.planner.planner import ReflectivePlanner
from agentic_grasp.core.planner.ports import (Arm, ConstraintReasoner, Perceiver,
                                              RetrievalRequest, Retriever)
from agentic_grasp.core.planner.recovery import (CORRECTION_RULES, Correction,
                                                 CorrectionContext, CorrectionOps, clamp_grasp,
                                                 correction_level, get_correction,
                                                 level1_adjustment, level1_ops)
from agentic_grasp.core.planner.recovery.diagnosis import assess
from agentic_grasp.core.planner.recovery.failure import Diagnosis


def run_trial(*args, **kwargs):
    """Lazy alias of :func:`agentic_grasp.core.planner.episode.run_trial` (loads the
    simulator only when a trial is run)."""
    # heavy: the simulator, the renderer (OpenCV) and the perception backends load only when
    # a trial runs, not with every import of the planner (the ROS nodes import it)
    from agentic_grasp.core.planner.episode import run_trial as _run_trial

    return _run_trial(*args, **kwargs)


__all__ = [
    "Arm", "AttemptRecord", "CONFIGURATIONS", "ConstraintReasoner", "FunctionPerceiver",
    "HaaRagRetriever", "Perceiver", "RetrievalRequest", "Retriever", "SceneGraphReasoner",
    "CORRECTION_RULES", "Configuration",
    "Correction", "CorrectionContext", "CorrectionOps", "Diagnosis", "EpisodicMemory",
    "GoalOutcome", "MemoryEntry", "MemoryEvent", "MemoryLifetime", "ObservationEvent",
    "PhaseEvent", "PlanEvent", "PlannerEvent", "ReflectionEvent", "ResultEvent",
    "TaskPlanEvent", "TaskResultEvent", "ThoughtEvent", "PlannerConfig", "ReflectivePlanner",
    "STATUS_BLOCKED",
    "STATUS_CANCELED", "STATUS_FAILED", "STATUS_NOT_PERCEIVED", "STATUS_SUCCEEDED", "SubGoal",
    "TABLE_II_ORDER", "TaskOutcome", "TaskPlan", "clamp_grasp", "assess",
    "correction_level", "get_configuration", "get_correction", "instruction_kind",
    "level1_adjustment", "level1_ops",
    "plan_subgoals", "run_trial", "subgoal_instruction",
]
