"""Fakes shared by the planner tests: a scripted arm, a fixed retriever, perception builders.

No tests here; the planner test modules import these helpers (pytest puts this folder on
sys.path because test/core has no __init__.py).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Union

import numpy as np

from agentic_grasp.core.arm.backend import ArmBackend, ArmError, ArmResult, PHASES
from agentic_grasp.core.perception.backend import PerceivedObject, PerceptionResult
from agentic_grasp.core.planner.ports import RetrievalRequest, Retriever
from agentic_grasp.core.retrieval import Experience, RetrievalResult, ScoredStrategy
from agentic_grasp.core.types import (AffordanceDescriptor, AttemptOutcome, GraspParameters,
                                      ObjectInstance, ObjectState, Phase, PhysicalEvent,
                                      Shape)


def make_object(oid: str, category: str, xy=(0.5, 0.0), size=(0.06, 0.06, 0.10), yaw=0.0,
                fragility: float = 0.1, shape: Shape = Shape.BOX, aff_type="Graspable_Body",
                material="plastic", region="body", state=ObjectState.EMPTY, z=None,
                name: str = "") -> ObjectInstance:
    """An object standing on the table (or at height z), with an affordance."""
    size = np.asarray(size, dtype=float)
    centre_z = size[2] / 2.0 if z is None else z
    return ObjectInstance(
        id=oid, category=category, shape=shape, position=np.array([xy[0], xy[1], centre_z]),
        size=size, yaw=yaw, material=material, fragility=fragility, state=state,
        affordance=AffordanceDescriptor(aff_type, material, fragility, region),
        name=name or category)


def perceived(obj: ObjectInstance) -> PerceivedObject:
    return PerceivedObject(id=obj.id, category=obj.category, pixel=(320.0, 240.0),
                           bbox=(300, 220, 340, 260), position=obj.position.copy(),
                           size=obj.size.copy(), state=obj.state, fragility=obj.fragility,
                           affordance=obj.affordance, confidence=1.0, name=obj.name,
                           shape=obj.shape, yaw=obj.yaw)


def perception_of(objects: Sequence[ObjectInstance], target_id: str) -> PerceptionResult:
    """What the oracle would report for ``objects`` with ``target_id`` as the target."""
    items = [perceived(o) for o in objects]
    target = next((p for p in items if p.id == target_id), None)
    return PerceptionResult(backend="test", target_found=target is not None, target=target,
                            objects=items)


def outcome(success: bool = False, events: Sequence = (), phi=None, measurements=None,
            duration: float = 1.0, phase: Phase = Phase.LIFT) -> AttemptOutcome:
    """An AttemptOutcome; ``events`` are (kind, phase) or (kind, phase, other_id) tuples."""
    evs = []
    for e in events:
        kind, ph = e[0], e[1]
        other = e[2] if len(e) > 2 else ""
        detail = e[3] if len(e) > 3 else f"{kind} observed"
        evs.append(PhysicalEvent(kind, Phase(ph), detail, other))
    phi = np.full(7, 0.9) if phi is None else np.asarray(phi, dtype=float)
    return AttemptOutcome(success=success, quality=float(np.mean(phi)), phi=phi, events=evs,
                          phase_reached=phase, measurements=dict(measurements or {}),
                          duration_s=duration)


def slip(**kw) -> AttemptOutcome:
    return outcome(events=[("slip", "lift")], **kw)


def ok(**kw) -> AttemptOutcome:
    return outcome(success=True, **kw)


class ScriptedArm(ArmBackend):
    """Returns the scripted results in order and remembers every grasp it was given.

    A script item is an AttemptOutcome (executed), an ArmResult (returned as is) or an
    ArmError (returned with no outcome). ``cancel_at`` makes the arm report CANCELED when
    is_canceled() is true before a phase, like InProcessSimArm.
    """

    name = "scripted"

    def __init__(self, script: Sequence[Union[AttemptOutcome, ArmResult, ArmError]]) -> None:
        self.script = list(script)
        self.grasps: List[GraspParameters] = []
        self.targets: List[str] = []
        self.phases: List[Phase] = []

    def execute(self, target_id, grasp, on_phase, is_canceled) -> ArmResult:
        self.grasps.append(grasp.copy())
        self.targets.append(target_id)
        item = self.script.pop(0) if self.script else outcome(success=True)
        for index, phase in enumerate(PHASES, start=1):
            if is_canceled():
                return ArmResult(ArmError.CANCELED, f"canceled before {phase.value}")
            on_phase(phase, index, len(PHASES))
            self.phases.append(phase)
        if isinstance(item, ArmResult):
            return item
        if isinstance(item, ArmError):
            return ArmResult(item, f"scripted {item.name}")
        return ArmResult(ArmError.NONE, "attempt executed", item)


def experience(eid: str, category: str, grasp: Dict, success: bool = True,
               aff_type="Graspable_Body", material="plastic", fragility=0.1,
               region="body") -> Experience:
    full = GraspParameters.from_dict({"position": [0.0, 0.0, 0.0], **grasp}).to_dict()
    return Experience(id=eid, category=category,
                      affordance=AffordanceDescriptor(aff_type, material, fragility, region),
                      grasp=full, success=success, provenance="test",
                      render_spec={"shape": "box", "size": [0.05, 0.05, 0.05],
                                   "color": [1, 2, 3]},
                      failure_mode=None if success else "slip")


class FixedRetriever(Retriever):
    """Returns the same strategies (in the given rank order) for any query; counts calls
    (``requests``: every RetrievalRequest, in order)."""

    def __init__(self, experiences: Sequence[Experience], reason: str = "fixed") -> None:
        self.experiences = list(experiences)
        self.reason = reason
        self.calls: List[tuple] = []
        self.requests: List[RetrievalRequest] = []

    def retrieve(self, request: RetrievalRequest) -> RetrievalResult:
        self.calls.append((request.category, request.affordance))
        self.requests.append(request)
        strategies = [ScoredStrategy(experience=e, s_cat=1.0, s_aff=1.0, s_aff_terms={},
                                     s_vis=0.0, penalty=0.0 if e.success else 0.3,
                                     s_final=0.6 - 0.01 * i, rank=i + 1,
                                     explanation=f"#{i + 1} {e.id}")
                      for i, e in enumerate(self.experiences)]
        return RetrievalResult(strategies, self.reason, len(strategies), len(strategies))


def never() -> bool:
    return False


__all__ = ["FixedRetriever", "ScriptedArm", "experience", "make_object", "never", "ok",
           "outcome", "perceived", "perception_of", "slip"]
