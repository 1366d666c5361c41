"""Fakes shared by the planner tests: a scripted arm, a fixed retriever, perception builders.

No tests here; the planner test modules import these helpers (pytest puts this folder on
sys.path because test/core has no __init__.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from agentic_grasp.core.arm.backend import ArmBackend, ArmError, ArmResult, PHASES
from agentic_grasp.core.arm.kinematics import tcp_rotation
from agentic_grasp.core.arm.observation import (CLOSE_TRACE_SAMPLES, ArmObservation, Reflex,
                                                Wrench)
from agentic_grasp.core.grasping.config import HandConfig
from agentic_grasp.core.perception.backend import PerceivedObject, PerceptionResult
from agentic_grasp.core.planner.ports import RetrievalRequest, Retriever
from agentic_grasp.core.retrieval import Experience, RetrievalResult, ScoredStrategy
from agentic_grasp.core.types import (AffordanceDescriptor, FailureType, GraspParameters,
                                      ObjectInstance, ObjectState, Phase, Shape)


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
    """What the oracle would report for ``objects`` with ``target_id`` as the target (and
    the scene a ScriptedArm's sensor readings are built against)."""
    _SCENE.clear()
    _SCENE.update({o.id: o for o in objects})
    items = [perceived(o) for o in objects]
    target = next((p for p in items if p.id == target_id), None)
    return PerceptionResult(backend="test", target_found=target is not None, target=target,
                            objects=items)


#: The scene the last perception_of() reported: a scripted arm builds its sensor readings
#: against it (where a neighbour stands, how wide the target is), as the real sim would.
_SCENE: Dict[str, ObjectInstance] = {}


@dataclass
class Scripted:
    """What a scripted attempt does: held (``success``) or the failure ``kind`` (a taxonomy
    value) in ``phase``, against ``other_id`` (a neighbour hit); ``carried_n``: the load
    the pads carried before a slip (None: enough to rule out a turn out of the pads)."""

    success: bool = False
    kind: str = ""
    phase: str = ""
    other_id: str = ""
    carried_n: Optional[float] = None
    duration: float = 1.0


def outcome(success: bool = False, events: Sequence = (), duration: float = 1.0,
            carried_n: Optional[float] = None, **_ignored) -> Scripted:
    """A scripted attempt; ``events`` are (kind, phase) or (kind, phase, other_id) tuples,
    of which the first taxonomy one is what the arm's sensors will show."""
    names = {f.value for f in FailureType}
    for e in events:
        if e[0] in names:
            return Scripted(False, e[0], e[1], e[2] if len(e) > 2 else "", carried_n,
                            duration)
    return Scripted(success, "", "", "", carried_n, duration)


def slip(**kw) -> Scripted:
    return outcome(events=[("slip", "lift")], **kw)


def ok(**kw) -> Scripted:
    return outcome(success=True, **kw)


def _w(fz: float = 0.0, torque=(0.0, 0.0, 0.0)) -> Wrench:
    return Wrench(np.array([0.0, 0.0, fz]), np.asarray(torque, dtype=float))


def observation_for(item: Scripted, grasp: GraspParameters, target_id: str,
                    scene: Optional[Dict[str, ObjectInstance]] = None) -> ArmObservation:
    """The arm's sensor readings of a scripted attempt: what the simulator's sensor model
    reports for that mechanism (core/sim/sensors.py), noise-free."""
    scene = _SCENE if scene is None else scene
    hand = HandConfig()
    obs = ArmObservation(commanded_width_m=float(grasp.width),
                         commanded_speed_mps=float(grasp.speed),
                         commanded_force_n=float(grasp.force), duration_s=item.duration,
                         wrench_free=_w())
    kind = item.kind
    R = tcp_rotation(grasp.approach, grasp.wrist_yaw)
    z_tip = hand.pad_depth_m / 2.0
    if kind == "unreachable_pose":
        obs.planning_error = "NO_IK_SOLUTION at the grasp pose"
        return obs
    if kind in ("collision", "approach_angle", "width_mismatch", "orientation") or (
            kind == "position_error" and item.phase == "approach"):
        stop = np.asarray(grasp.position, dtype=float).copy()
        y = float(grasp.width) / 2.0 + hand.finger_thickness_m / 2.0
        other = scene.get(item.other_id) if item.other_id else None
        if kind == "collision" and other is not None and other.id != target_id:
            stop = np.array([other.position[0], other.position[1],
                             other.top_z + z_tip + 0.002])
        elif kind == "collision":
            stop[2] = z_tip - 0.002                        # the fingertips at the table
        if kind == "approach_angle":
            y = 0.0                                        # the palm: on the approach axis
        push = 12.0
        f = -np.asarray(grasp.approach, dtype=float) * push
        t = R @ np.array([-y * push, 0.0, 0.0])      # a push -F at y: tau_x = -y F
        obs.reflexes.append(Reflex(Phase.APPROACH, stop, Wrench(f, t)))
        obs.execution_error = "cartesian_reflex: motion stopped on contact"
        return obs
    if kind == "unknown":
        return obs
    obs.phase_reached = Phase.CLOSE
    w0 = min(0.04, max(float(grasp.width) - 0.01, 0.005))
    obs.wrench_gripped = _w()
    if kind == "position_error" or kind == "width_mismatch":
        obs.width_after_close_m, obs.is_grasped = 0.0, False
        obs.close_trace_m = [0.0] * CLOSE_TRACE_SAMPLES
        return obs
    obs.width_at_contact_m, obs.is_grasped = w0, True
    after = {"force_damage": w0 * 0.5, "deformation": w0 - 0.003}.get(kind, w0)
    obs.close_trace_m = [w0 if i < 3 or after == w0 else after
                         for i in range(CLOSE_TRACE_SAMPLES)]
    obs.width_after_close_m = after
    if kind in ("force_damage", "deformation"):
        return obs
    obs.phase_reached = Phase.LIFT
    weight = 1.0
    if kind == "slip":
        carried = item.carried_n if item.carried_n is not None \
            else 2.0 * 0.3 * float(grasp.force) + 5.0
        obs.wrench_liftoff = _w(-carried)
        obs.width_at_liftoff_m = obs.width_after_lift_m = 0.0
        obs.wrench_lifted = _w()
        return obs
    obs.wrench_liftoff = _w(-weight)
    obs.width_at_liftoff_m = w0
    if kind == "drop":
        obs.width_after_lift_m = 0.0
        obs.wrench_lifted = _w()
        return obs
    obs.width_after_lift_m = w0
    obs.wrench_lifted = _w(-(weight - 3.0) if kind == "constraint_violation" else -weight)
    return obs


class ScriptedArm(ArmBackend):
    """Returns the scripted results in order and remembers every grasp it was given.

    A script item is a :class:`Scripted` attempt (executed: the arm reports its sensor
    readings, :func:`observation_for`), an ArmObservation (reported as it is), an ArmResult
    (returned as is) or an ArmError (returned with no observation). ``cancel_at`` makes the
    arm report CANCELED when is_canceled() is true before a phase, like InProcessSimArm.
    """

    name = "scripted"

    def __init__(self, script: Sequence[Union[Scripted, ArmObservation, ArmResult, ArmError]],
                 scene: Optional[Sequence[ObjectInstance]] = None) -> None:
        self.script = list(script)
        self.grasps: List[GraspParameters] = []
        self.targets: List[str] = []
        self.phases: List[Phase] = []
        self.scene = None if scene is None else {o.id: o for o in scene}

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
        if isinstance(item, ArmObservation):
            return ArmResult(ArmError.NONE, "attempt executed", item)
        return ArmResult(ArmError.NONE, "attempt executed",
                         observation_for(item, grasp, target_id, self.scene))


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
