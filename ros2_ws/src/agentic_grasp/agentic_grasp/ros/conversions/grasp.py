"""The grasp g (GraspParameters), its affordance descriptor, the arm's observation
(ArmObservation) and the planner's reading of it (GraspOutcome with its GraspEvents) <-> the
core types.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
from geometry_msgs.msg import Wrench as WrenchMsg

from agentic_grasp.core.arm.observation import ArmObservation, Reflex, Wrench
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.types import (AffordanceDescriptor, AffordanceType, AttemptOutcome,
                                      GraspParameters, Phase, PhysicalEvent, event_from_text,
                                      event_to_text)
from agentic_grasp_interfaces.msg import (AffordanceDescriptor as AffordanceMsg,
                                          ArmObservation as ArmObservationMsg,
                                          ArmReflex as ArmReflexMsg, GraspEvent,
                                          GraspOutcome as GraspOutcomeMsg,
                                          GraspParameters as GraspMsg)
from agentic_grasp.ros.conversions.fields import (GRASP_TYPE_NAMES, enum_code, enum_value,
                                                  event_from_msg, from_xyz, point, vec3)


# ---- affordance ------------------------------------------------------------------------------

def affordance_to_msg(aff: Optional[AffordanceDescriptor]) -> AffordanceMsg:
    if aff is None:
        return AffordanceMsg()
    return AffordanceMsg(type=aff.type.value, material=aff.material,
                         fragility=float(aff.fragility), graspable_region=aff.region)


def affordance_from_msg(msg: AffordanceMsg) -> Optional[AffordanceDescriptor]:
    """None for an all-empty message; ValidationError for a partly filled or bad one."""
    if not msg.type and not msg.material and not msg.graspable_region:
        return None
    return AffordanceDescriptor(type=AffordanceType.parse(msg.type), material=msg.material,
                                fragility=float(msg.fragility), region=msg.graspable_region)


# ---- grasp parameters ---------------------------------------------------------------------

def grasp_to_msg(grasp: GraspParameters) -> GraspMsg:
    return GraspMsg(position=point(grasp.position), approach_direction=vec3(grasp.approach),
                    gripper_width=float(grasp.width), grip_force=float(grasp.force),
                    grasp_type=enum_code(GraspMsg, GRASP_TYPE_NAMES, grasp.grasp_type),
                    approach_height=float(grasp.approach_height), speed=float(grasp.speed),
                    wrist_yaw=float(grasp.wrist_yaw))


def grasp_from_msg(msg: GraspMsg) -> GraspParameters:
    grasp_type = enum_value(msg, GRASP_TYPE_NAMES, msg.grasp_type, "grasp.grasp_type")
    return GraspParameters(position=from_xyz(msg.position),
                           approach=from_xyz(msg.approach_direction),
                           width=float(msg.gripper_width), force=float(msg.grip_force),
                           grasp_type=grasp_type, approach_height=float(msg.approach_height),
                           speed=float(msg.speed), wrist_yaw=float(msg.wrist_yaw))


# ---- outcomes -----------------------------------------------------------------------------

def outcome_to_msg(outcome: AttemptOutcome) -> GraspOutcomeMsg:
    names = sorted(outcome.measurements)
    return GraspOutcomeMsg(
        success=bool(outcome.success), quality=float(outcome.quality),
        phi=[float(v) for v in outcome.phi],
        events=[event_to_text(e) for e in outcome.events],
        event_details=[event_to_msg(e) for e in outcome.events],
        phase_reached=outcome.phase_reached.value,
        measurement_names=names,
        measurement_values=[float(outcome.measurements[n]) for n in names],
        duration_s=float(outcome.duration_s))


def event_to_msg(event: PhysicalEvent) -> Any:
    return GraspEvent(kind=event.kind, phase=event.phase.value, other_id=event.other_id,
                      detail=event.detail)


def outcome_from_msg(msg: GraspOutcomeMsg) -> AttemptOutcome:
    """The details win when present; a message from an older sender (or a bag recorded
    before GraspEvent) has only the texts."""
    details = list(getattr(msg, "event_details", []) or [])
    events = ([event_from_msg(e) for e in details]
              if len(details) == len(msg.events) and len(msg.events)
              else [event_from_text(text) for text in msg.events])
    return AttemptOutcome(
        success=bool(msg.success), quality=float(msg.quality),
        phi=np.asarray(msg.phi, dtype=float), events=events,
        phase_reached=Phase(msg.phase_reached) if msg.phase_reached else Phase.APPROACH,
        measurements=dict(zip(list(msg.measurement_names),
                              [float(v) for v in msg.measurement_values])),
        duration_s=float(msg.duration_s))


# ---- the arm's observation ----------------------------------------------------------------

_GRASP_RESULT = {None: 0, False: 1, True: 2}


def _wrench_to_msg(w: Wrench) -> Any:
    out = WrenchMsg()
    out.force.x, out.force.y, out.force.z = (float(v) for v in w.force)
    out.torque.x, out.torque.y, out.torque.z = (float(v) for v in w.torque)
    return out


def _wrench_from_msg(msg: Any) -> Wrench:
    return Wrench(np.array([msg.force.x, msg.force.y, msg.force.z], dtype=float),
                  np.array([msg.torque.x, msg.torque.y, msg.torque.z], dtype=float))


def observation_to_msg(obs: Optional[ArmObservation]) -> ArmObservationMsg:
    """An empty message (phase_reached "") when the arm ran nothing."""
    if obs is None:
        nan = _wrench_to_msg(Wrench())
        return ArmObservationMsg(commanded_width_m=math.nan, commanded_speed_mps=math.nan,
                                 commanded_force_n=math.nan, width_at_contact_m=math.nan,
                                 width_after_close_m=math.nan, width_at_liftoff_m=math.nan,
                                 width_after_lift_m=math.nan, wrench_free=nan,
                                 wrench_gripped=nan, wrench_liftoff=nan, wrench_lifted=nan)
    return ArmObservationMsg(
        commanded_width_m=float(obs.commanded_width_m),
        commanded_speed_mps=float(obs.commanded_speed_mps),
        commanded_force_n=float(obs.commanded_force_n),
        phase_reached=obs.phase_reached.value, planning_error=obs.planning_error,
        execution_error=obs.execution_error,
        reflexes=[ArmReflexMsg(phase=r.phase.value, ee_position=point(r.ee_position),
                               wrench=_wrench_to_msg(r.wrench)) for r in obs.reflexes],
        width_at_contact_m=float(obs.width_at_contact_m),
        width_after_close_m=float(obs.width_after_close_m),
        width_at_liftoff_m=float(obs.width_at_liftoff_m),
        width_after_lift_m=float(obs.width_after_lift_m),
        close_trace_m=[float(v) for v in obs.close_trace_m],
        grasp_result=_GRASP_RESULT[obs.is_grasped],
        wrench_free=_wrench_to_msg(obs.wrench_free),
        wrench_gripped=_wrench_to_msg(obs.wrench_gripped),
        wrench_liftoff=_wrench_to_msg(obs.wrench_liftoff),
        wrench_lifted=_wrench_to_msg(obs.wrench_lifted),
        duration_s=float(obs.duration_s))


def observation_from_msg(msg: ArmObservationMsg) -> Optional[ArmObservation]:
    """None for the empty message (the arm ran nothing); ValidationError for a bad phase."""
    if not msg.phase_reached:
        return None
    if msg.phase_reached not in Phase._value2member_map_:
        raise ValidationError(f"observation.phase_reached {msg.phase_reached!r}: expected "
                              "approach, close or lift")
    reflexes = []
    for r in msg.reflexes:
        if r.phase not in Phase._value2member_map_:
            raise ValidationError(f"reflex phase {r.phase!r}: expected approach, close or lift")
        reflexes.append(Reflex(Phase(r.phase), from_xyz(r.ee_position),
                               _wrench_from_msg(r.wrench)))
    return ArmObservation(
        commanded_width_m=float(msg.commanded_width_m),
        commanded_speed_mps=float(msg.commanded_speed_mps),
        commanded_force_n=float(msg.commanded_force_n),
        phase_reached=Phase(msg.phase_reached), planning_error=msg.planning_error,
        execution_error=msg.execution_error, reflexes=reflexes,
        width_at_contact_m=float(msg.width_at_contact_m),
        width_after_close_m=float(msg.width_after_close_m),
        width_at_liftoff_m=float(msg.width_at_liftoff_m),
        width_after_lift_m=float(msg.width_after_lift_m),
        close_trace_m=[float(v) for v in msg.close_trace_m],
        is_grasped={0: None, 1: False, 2: True}.get(int(msg.grasp_result)),
        wrench_free=_wrench_from_msg(msg.wrench_free),
        wrench_gripped=_wrench_from_msg(msg.wrench_gripped),
        wrench_liftoff=_wrench_from_msg(msg.wrench_liftoff),
        wrench_lifted=_wrench_from_msg(msg.wrench_lifted),
        duration_s=float(msg.duration_s))
