"""The grasp g (GraspParameters), its affordance descriptor and its outcome
(GraspOutcome with its GraspEvents) <-> the core types.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from agentic_grasp.core.types import (AffordanceDescriptor, AffordanceType, AttemptOutcome,
                                      GraspParameters, Phase, PhysicalEvent, event_from_text,
                                      event_to_text)
from agentic_grasp_interfaces.msg import (AffordanceDescriptor as AffordanceMsg, GraspEvent,
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
