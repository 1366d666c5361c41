"""Scene graph, spatial relations and constraints (InferConstraints) <-> the
core's SceneGraph, Relation and ConstraintSet (paper Sec. III-B).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Sequence

import numpy as np
from std_msgs.msg import Header

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.scene_graph.relations import RELATION_TYPES, Relation
from agentic_grasp.core.types import ObjectInstance
from agentic_grasp_interfaces.msg import ObjectObservation as ObjectMsg
from agentic_grasp_interfaces.msg import (Constraint as ConstraintMsg, SceneGraph as SceneGraphMsg,
                                          SpatialRelation as RelationMsg)
from agentic_grasp.ros.conversions.fields import float32_decimal, from_xyz, vec3
from agentic_grasp.ros.conversions.perception import object_from_msg

if TYPE_CHECKING:  # constraints and graph pull in networkx (~0.2 s), which the nodes that
    # convert no constraints (perception, retrieval, executor, sim, front) never load
    from agentic_grasp.core.scene_graph.constraints import Constraint, ConstraintSet
    from agentic_grasp.core.scene_graph.graph import SceneGraph


# ---- scene graph, relations and constraints (InferConstraints) ----------------------------

def scene_objects_from_msg(scene: SceneGraphMsg) -> List[ObjectInstance]:
    """Domain objects of a SceneGraph message; a bad one is named by index and id.

    Per-object checks (finite pose, positive size, state code, fragility range) happen here;
    duplicate ids are a property of the whole scene and are left to build_scene_graph.
    """
    out: List[ObjectInstance] = []
    for index, msg in enumerate(scene.objects):
        try:
            out.append(object_from_msg(msg))
        except ValidationError as exc:
            raise ValidationError(f"scene.objects[{index}] (id {msg.id!r}): {exc}") from None
    return out


def relation_to_msg(relation: Relation) -> RelationMsg:
    return RelationMsg(subject_id=relation.subject, relation=relation.relation,
                       object_id=relation.object, distance=float(relation.distance))


def relations_to_msgs(relations: Iterable[Relation]) -> List[RelationMsg]:
    return [relation_to_msg(r) for r in relations]


def relation_from_msg(msg: RelationMsg) -> Relation:
    """ValidationError for a relation name outside the 16 types or a bad distance."""
    if msg.relation not in RELATION_TYPES:
        raise ValidationError(f"relation {msg.relation!r} ({msg.subject_id} -> "
                              f"{msg.object_id}) is not one of {', '.join(RELATION_TYPES)}")
    if not msg.subject_id or not msg.object_id:
        raise ValidationError(f"relation {msg.relation!r} needs subject_id and object_id")
    if not math.isfinite(msg.distance) or msg.distance < 0.0:
        raise ValidationError(f"relation {msg.subject_id} {msg.relation} {msg.object_id}: "
                              f"distance must be finite and >= 0, got {msg.distance}")
    return Relation(msg.subject_id, msg.relation, msg.object_id, float(msg.distance))


def scene_graph_to_msg(graph: "SceneGraph", objects: Sequence[ObjectMsg],
                       header: Optional[Header] = None, source: str = "") -> SceneGraphMsg:
    """G as a message: the given object observations (kept as received, so pixels,
    confidences and affordances survive) plus the graph's relations."""
    return SceneGraphMsg(header=header if header is not None else Header(), source=source,
                         objects=list(objects), relations=relations_to_msgs(graph.relations()))


def constraint_to_msg(constraint: "Constraint") -> ConstraintMsg:
    """Optional fields become the message's neutral values: zero bias, speed_cap 0 = no cap."""
    msg = ConstraintMsg(type=constraint.type.value, source_id=constraint.source_id,
                        force_scale=float(constraint.force_scale),
                        height_delta=float(constraint.height_delta),
                        speed_cap=float(constraint.speed_cap or 0.0),
                        prerequisite_ids=list(constraint.prerequisite_ids),
                        explanation=constraint.explanation)
    if constraint.direction_override is not None:
        msg.has_direction_override = True
        msg.direction_override = vec3(constraint.direction_override)
    if constraint.direction_bias is not None:
        msg.direction_bias = vec3(constraint.direction_bias)
    return msg


def constraint_from_msg(msg: ConstraintMsg) -> "Constraint":
    """Inverse of constraint_to_msg, so a client can re-compose Delta g (apply_constraints).

    force_scale must be in (0, 1]: a default-constructed message has 0, which would zero the
    grip force, so it is rejected rather than read as "unchanged".
    """
    from agentic_grasp.core.scene_graph.constraints import (  # networkx: lazy
        Constraint, ConstraintType)

    try:
        kind = ConstraintType(msg.type)
    except ValueError:
        raise ValidationError(f"constraint type {msg.type!r} is not one of "
                              f"{', '.join(t.value for t in ConstraintType)}") from None
    where = f"constraint {msg.type} ({msg.source_id!r})"
    for name in ("force_scale", "height_delta", "speed_cap"):
        if not math.isfinite(getattr(msg, name)):
            raise ValidationError(f"{where}: {name} must be finite")
    if not 0.0 < msg.force_scale <= 1.0:
        raise ValidationError(f"{where}: force_scale must be in (0, 1], got {msg.force_scale}")
    if msg.speed_cap < 0.0:
        raise ValidationError(f"{where}: speed_cap must be >= 0 (0 = no cap)")
    bias = from_xyz(msg.direction_bias)
    override = from_xyz(msg.direction_override) if msg.has_direction_override else None
    for name, vec in (("direction_bias", bias), ("direction_override", override)):
        if vec is not None and not np.all(np.isfinite(vec)):
            raise ValidationError(f"{where}: {name} must be finite")
    # the float32 fields turn 0.8 into 0.800000011920929: read the decimal the node wrote, so
    # the planner applies the same Delta g through ROS as in process
    return Constraint(type=kind, source_id=msg.source_id, explanation=msg.explanation,
                      direction_override=override,
                      direction_bias=bias if np.any(bias != 0.0) else None,
                      force_scale=float32_decimal(msg.force_scale),
                      height_delta=float32_decimal(msg.height_delta),
                      speed_cap=float32_decimal(msg.speed_cap) if msg.speed_cap > 0.0 else None,
                      prerequisite_ids=list(msg.prerequisite_ids))


def constraint_set_from_msgs(target_id: str, msgs: Iterable[ConstraintMsg]) -> "ConstraintSet":
    """C_vt from an InferConstraints response, ready for apply_constraints."""
    from agentic_grasp.core.scene_graph.constraints import ConstraintSet  # networkx: lazy

    return ConstraintSet(target_id, [constraint_from_msg(m) for m in msgs])


def fill_adjustment(response: Any, constraints: "ConstraintSet") -> Any:
    """Write the composed Delta g of ``constraints`` into an InferConstraints response.

    ``direction`` carries the override d = [0, 0, -1] when has_direction_override is true,
    else the composed bias Delta d (added to d before normalising; zero when none), exactly
    as apply_constraints uses them. speed_cap 0 means no cap.
    """
    adj = constraints.adjustment
    override = adj["direction_override"]
    response.has_direction_override = override is not None
    response.direction = vec3(override if override is not None else adj["delta_d"])
    response.force_scale = float(adj["force_scale"])
    response.height_delta = float(adj["delta_h"])
    response.speed_cap = float(adj["speed_cap"] or 0.0)
    response.prerequisite_ids = list(adj["prerequisites"])
    return response
