"""Observed objects (ObjectObservation) and PerceptionResult <-> the core's
ObjectInstance, PerceivedObject and PerceptionResult: what perception reports.
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Iterable, List, Optional, Sequence

import numpy as np
from geometry_msgs.msg import Pose
from std_msgs.msg import Header

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.types import ObjectInstance, Shape
from agentic_grasp_interfaces.msg import ObjectObservation as ObjectMsg
from agentic_grasp_interfaces.msg import SceneGraph as SceneGraphMsg
from agentic_grasp_interfaces.msg import PerceptionResult as PerceptionResultMsg
from agentic_grasp.ros.conversions.fields import (SHAPE_NAMES, STATE_NAMES, enum_code, enum_value,
                                                  float32_decimal, from_xyz, point,
                                                  quaternion_yaw, vec3, yaw_quaternion)
from agentic_grasp.ros.conversions.grasp import affordance_from_msg, affordance_to_msg

if TYPE_CHECKING:  # core.perception (OpenCV) on use: the sim and scene-graph nodes carry
    # perception messages without ever loading it
    from agentic_grasp.core.perception import PerceivedObject, PerceptionResult


# ---- objects ------------------------------------------------------------------------------

def object_to_msg(obj: ObjectInstance, pixel: Optional[Sequence[float]] = None,
                  confidence: float = 1.0) -> ObjectMsg:
    msg = ObjectMsg(id=obj.id, category=obj.category, name=obj.name,
                    pose=Pose(position=point(obj.position), orientation=yaw_quaternion(obj.yaw)),
                    size=vec3(obj.size), state=enum_code(ObjectMsg, STATE_NAMES, obj.state),
                    fragility=float(obj.fragility), mass=float(obj.mass),
                    affordance=affordance_to_msg(obj.affordance), confidence=float(confidence),
                    upright=bool(obj.upright), damaged=bool(obj.damaged),
                    shape=shape_code(obj.shape), yaw_known=True,
                    handle_known=False, handle_yaw=0.0, rim_height=math.nan,
                    interior_depth=math.nan)
    msg.pixel_u, msg.pixel_v = ((float(pixel[0]), float(pixel[1])) if pixel is not None
                                else (-1.0, -1.0))
    return msg


def shape_code(shape: Optional[Shape]) -> int:
    """ObjectObservation.shape of a core shape (SHAPE_UNKNOWN for None)."""
    return enum_code(ObjectMsg, SHAPE_NAMES, shape) if shape is not None \
        else int(ObjectMsg.SHAPE_UNKNOWN)


def shape_from_msg(msg: ObjectMsg) -> Optional[Shape]:
    """The primitive an observation names; None for SHAPE_UNKNOWN (or a value we lack), and
    for a bag recorded before the shape field (or with its older textual one)."""
    code = getattr(msg, "shape", None)
    if not isinstance(code, int):
        return None
    by_code = {int(getattr(type(msg), name)): shape for shape, name in SHAPE_NAMES.items()}
    return by_code.get(code)


def object_from_msg(msg: ObjectMsg) -> ObjectInstance:
    """Domain object from an observation; shape as the message says (a box when unknown)."""
    state = enum_value(msg, STATE_NAMES, msg.state, f"object {msg.id!r}: state")
    return ObjectInstance(id=msg.id, category=msg.category,
                          shape=shape_from_msg(msg) or Shape.BOX,
                          position=from_xyz(msg.pose.position), size=from_xyz(msg.size),
                          yaw=quaternion_yaw(msg.pose.orientation), fragility=msg.fragility,
                          mass=msg.mass if msg.mass > 0 else 0.1, state=state,
                          affordance=affordance_from_msg(msg.affordance),
                          material=msg.affordance.material or "unknown", name=msg.name,
                          upright=msg.upright, damaged=msg.damaged)


def objects_from_msgs(msgs: Iterable[ObjectMsg]) -> List[ObjectInstance]:
    return [object_from_msg(m) for m in msgs]


def perceived_object_to_msg(obj: "PerceivedObject") -> Optional[ObjectMsg]:
    """An ObjectObservation of a perceived object; None when it has no 3-D position.

    Size falls back to PerceivedObject's default cube and the shape to its category hint
    (see PerceivedObject.to_object_instance). Mass is 0 = unknown: perception does not weigh.
    """
    instance = obj.to_object_instance()
    if instance is None:
        return None
    msg = object_to_msg(instance, pixel=obj.pixel,
                        confidence=min(1.0, max(0.0, float(obj.confidence))))
    msg.mass = 0.0
    msg.shape = shape_code(obj.shape)
    msg.yaw_known = bool(obj.yaw_known)
    msg.handle_known = obj.handle_yaw is not None and math.isfinite(obj.handle_yaw)
    msg.handle_yaw = float(obj.handle_yaw) if msg.handle_known else 0.0
    open_top = obj.rim_z is not None and obj.interior_depth is not None
    msg.rim_height = float(obj.rim_z) if open_top else math.nan
    msg.interior_depth = float(obj.interior_depth) if open_top else math.nan
    msg.warnings = [str(w) for w in obj.warnings]
    return msg


def perception_result_to_msg(result: "PerceptionResult", instruction: str = "",
                             header: Optional[Header] = None) -> PerceptionResultMsg:
    """A core PerceptionResult as the message the perception node returns and publishes.

    ``objects`` holds every perceived object with a 3-D position, target first; one left out
    (no depth, or an estimate the domain types reject) gets a warning naming it, so the
    message never carries NaN poses. ``target_id`` is the target's id whenever the backend
    located one, even if its position is missing (``error`` then says why).
    """
    warnings = list(result.warnings)
    ordered = list(result.objects)
    if result.target is not None:
        ordered = [result.target] + [o for o in ordered if o.id != result.target.id]
    objects: List[ObjectMsg] = []
    for obj in ordered:
        try:
            converted = perceived_object_to_msg(obj)
        except ValidationError as exc:
            warnings.append(f"'{obj.id}' left out of objects: {exc}")
            continue
        if converted is None:
            warnings.append(f"'{obj.id}' has no 3-D position; left out of objects")
            continue
        objects.append(converted)
    return PerceptionResultMsg(
        header=header if header is not None else Header(), backend=result.backend,
        instruction=instruction, target_found=bool(result.target_found),
        target_id=result.target.id if result.target is not None else "",
        objects=objects, warnings=warnings, error=result.error,
        latency_s=float(result.latency_s), prompt_tokens=max(0, int(result.prompt_tokens)),
        completion_tokens=max(0, int(result.completion_tokens)),
        requests=max(0, int(result.requests)))


def perceived_object_from_msg(msg: ObjectMsg) -> "PerceivedObject":
    """A PerceivedObject of an ObjectObservation (the inverse of perceived_object_to_msg).

    SHAPE_UNKNOWN becomes shape None, so PerceivedObject.to_object_instance guesses it from
    the category. No pixel box travels. The planner node and bag replay both read with it: a
    field an older bag's layout lacks (the geometry fields, yaw_known, warnings) reads as
    PerceivedObject's default, what that bag's planner knew.
    """
    from agentic_grasp.core.perception import PerceivedObject  # on use, as above

    state = enum_value(msg, STATE_NAMES, msg.state, f"object {msg.id!r}: state")
    try:
        affordance = affordance_from_msg(msg.affordance)
    except (ValidationError, ValueError) as exc:
        raise ValidationError(f"object {msg.id!r}: affordance: {exc}") from None
    if affordance is not None:
        affordance = dataclasses.replace(
            affordance, fragility=float32_decimal(msg.affordance.fragility))
    size = from_xyz(msg.size)
    rim = float(getattr(msg, "rim_height", math.nan))
    depth = float(getattr(msg, "interior_depth", math.nan))
    return PerceivedObject(
        id=msg.id, category=msg.category, pixel=(float(msg.pixel_u), float(msg.pixel_v)),
        bbox=None, position=from_xyz(msg.pose.position),
        size=size if np.all(np.isfinite(size)) and np.all(size > 0.0) else None,
        state=state, fragility=float32_decimal(msg.fragility),
        affordance=affordance, confidence=float(msg.confidence), name=msg.name,
        shape=shape_from_msg(msg), yaw=quaternion_yaw(msg.pose.orientation),
        yaw_known=bool(getattr(msg, "yaw_known", False)),
        upright=bool(getattr(msg, "upright", True)),
        handle_yaw=float(msg.handle_yaw) if getattr(msg, "handle_known", False) else None,
        rim_z=float(rim) if math.isfinite(rim) else None,
        interior_depth=(float(depth) if math.isfinite(depth) and math.isfinite(rim)
                        else None),
        warnings=list(getattr(msg, "warnings", [])))


def perception_result_from_msg(msg: PerceptionResultMsg) -> "PerceptionResult":
    """The core PerceptionResult of a Perceive answer (the planner's input).

    ``target`` is the object whose id is ``target_id`` (None when the message carries none
    with a 3-D position). A malformed object becomes an error result naming it, the way a
    backend reports a bad answer, rather than an exception.
    """
    from agentic_grasp.core.perception import PerceptionResult  # on use, as above

    try:
        objects = [perceived_object_from_msg(m) for m in msg.objects]
    except ValidationError as exc:
        return PerceptionResult.failure(msg.backend, f"invalid perception answer: {exc}",
                                        latency_s=float(msg.latency_s),
                                        requests=int(msg.requests),
                                        warnings=list(msg.warnings))
    target = next((o for o in objects if msg.target_id and o.id == msg.target_id), None)
    return PerceptionResult(
        backend=msg.backend, target_found=bool(msg.target_found), target=target,
        objects=objects, warnings=list(msg.warnings), error=msg.error,
        latency_s=float(msg.latency_s), prompt_tokens=int(msg.prompt_tokens),
        completion_tokens=int(msg.completion_tokens), requests=int(msg.requests))


def scene_to_msg(objects: Sequence[ObjectInstance], header: Optional[Header] = None,
                 source: str = "") -> SceneGraphMsg:
    """A SceneGraph request of domain objects (no relations: the service computes them)."""
    return SceneGraphMsg(header=header if header is not None else Header(), source=source,
                         objects=[object_to_msg(o) for o in objects])
