"""RViz view of the scene graph G and the constraints C_vt (visualization_msgs).

Built for the scene-graph service's ``scene_graph/markers``; styling only, nothing here
decides anything. Constraint arrows show the approach that apply_constraints gives a
top-down grasp, so the picture is the rule the planner applies.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from geometry_msgs.msg import Pose, Vector3
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from agentic_grasp.ros.conversions.fields import point, yaw_quaternion
from agentic_grasp.core.scene_graph.constraints import ConstraintSet, apply_constraints
from agentic_grasp.core.scene_graph.relations import (ADJACENT_TO, CONTAINS, CONVERSE, FAR_FROM,
                                                      IN_FRONT_OF, INSIDE, LEANING_ON, OCCLUDES,
                                                      ON_TOP_OF, RIGHT_OF, STACKED_ON, SUPPORTS,
                                                      TOUCHING, UNDER, Relation)
from agentic_grasp.core.scene_graph.graph import SceneGraph
from agentic_grasp.core.types import GraspParameters

#: The grasp whose adjusted approach the arrows show: top-down, d = [0, 0, -1].
_TOP_DOWN = GraspParameters(position=np.zeros(3))

#: Length of a constraint arrow ending at the target's top centre (m).
ARROW_LENGTH = 0.15
_TEXT_HEIGHT = 0.02
_ALPHA_OBJECT = 0.55
#: Converse relations drawn once through their primary (On_Top_Of for Supports, ...).
_SECONDARY = frozenset({SUPPORTS, CONTAINS, IN_FRONT_OF, RIGHT_OF})
_VERTICAL = frozenset({ON_TOP_OF, SUPPORTS, STACKED_ON, UNDER, INSIDE, CONTAINS, LEANING_ON})
_CONTACT = frozenset({TOUCHING, ADJACENT_TO})
_CONSTRAINT_COLOURS = {
    "collision_avoidance": (1.0, 0.25, 0.2),
    "occlusion": (0.65, 0.35, 0.95),
    "content_preservation": (0.2, 0.8, 0.95),
    "support_dependency": (0.95, 0.8, 0.2),
}


def _rgba(rgb: Sequence[float], alpha: float = 1.0) -> ColorRGBA:
    return ColorRGBA(r=float(rgb[0]), g=float(rgb[1]), b=float(rgb[2]), a=float(alpha))


def _relation_colour(relations: Sequence[str]) -> ColorRGBA:
    names = set(relations)
    if names & _VERTICAL:
        return _rgba((0.25, 0.45, 1.0))
    if OCCLUDES in names:
        return _rgba((0.65, 0.35, 0.95))
    if names & _CONTACT:
        return _rgba((1.0, 0.6, 0.1))
    return _rgba((0.6, 0.6, 0.6), 0.8)


def _text(header: Header, ns: str, marker_id: int, position: Sequence[float], text: str,
          height: float = _TEXT_HEIGHT) -> Marker:
    return Marker(header=header, ns=ns, id=marker_id, type=Marker.TEXT_VIEW_FACING,
                  action=Marker.ADD, pose=Pose(position=point(position)),
                  scale=Vector3(z=height), color=_rgba((1.0, 1.0, 1.0)), text=text)


def _arrow(header: Header, ns: str, marker_id: int, tip: np.ndarray, direction: np.ndarray,
           rgb: Sequence[float], shaft: float = 0.008) -> Marker:
    """An arrow of ARROW_LENGTH along ``direction`` (the approach) ending at ``tip``."""
    start = tip - ARROW_LENGTH * direction
    return Marker(header=header, ns=ns, id=marker_id, type=Marker.ARROW, action=Marker.ADD,
                  pose=Pose(), points=[point(start), point(tip)],
                  scale=Vector3(x=shaft, y=2.0 * shaft, z=0.03), color=_rgba(rgb))


def _approach(constraints: ConstraintSet) -> np.ndarray:
    """The approach a top-down default d = [0, 0, -1] becomes under ``constraints``."""
    return apply_constraints(_TOP_DOWN, constraints).approach


def relation_edges(graph: SceneGraph) -> Dict[Tuple[str, str], List[Relation]]:
    """Relations to draw, per unordered pair: each fact once, Far_From left out.

    A converse pair (On_Top_Of / Supports) is drawn through its primary and a symmetric
    relation once (subject < object), so every label states one fact.
    """
    pairs: Dict[Tuple[str, str], List[Relation]] = {}
    for rel in graph.relations():
        if rel.relation == FAR_FROM or rel.relation in _SECONDARY:
            continue
        if CONVERSE.get(rel.relation) == rel.relation and rel.subject > rel.object:
            continue
        pairs.setdefault(tuple(sorted((rel.subject, rel.object))), []).append(rel)
    return pairs


def relation_label(rel: Relation) -> str:
    """Label of one edge: "a On_Top_Of b"; a symmetric relation by its name alone."""
    if CONVERSE.get(rel.relation) == rel.relation:
        return rel.relation
    return f"{rel.subject} {rel.relation} {rel.object}"


def scene_markers(graph: SceneGraph, constraints: Optional[ConstraintSet],
                  header: Header) -> MarkerArray:
    """RViz view of G and C_vt: DELETEALL, then objects, labels, relations, constraint arrows.

    Namespaces: objects (CUBE / CYLINDER / SPHERE), object_labels, relations (one LINE_LIST),
    relation_labels (at each pair's midpoint), constraints (one ARROW per directional
    constraint, ending at the target's top centre, and its type as text at the tail),
    approach (the composed approach) and constraint_labels (one summary above the target).
    """
    markers: List[Marker] = [Marker(header=header, action=Marker.DELETEALL)]
    target = constraints.target_id if constraints is not None else ""
    fragile = graph.config.fragile_threshold
    shapes = {"box": Marker.CUBE, "cylinder": Marker.CYLINDER, "sphere": Marker.SPHERE}
    centres: Dict[str, np.ndarray] = {}
    for k, oid in enumerate(graph.ids):
        node = graph.node(oid)
        centre, size = np.asarray(node["position"]), np.asarray(node["size"])
        centres[oid] = centre
        if oid == target:
            rgb = (1.0, 0.55, 0.0)
        elif node["fragility"] >= fragile:
            rgb = (0.9, 0.3, 0.35)
        else:
            rgb = (0.6, 0.65, 0.75)
        markers.append(Marker(
            header=header, ns="objects", id=k, type=shapes.get(node["shape"], Marker.CUBE),
            action=Marker.ADD,
            pose=Pose(position=point(centre), orientation=yaw_quaternion(node["yaw"])),
            scale=Vector3(x=float(size[0]), y=float(size[1]), z=float(size[2])),
            color=_rgba(rgb, _ALPHA_OBJECT)))
        label = oid if node["state"] == "empty" else f"{oid} [{node['state']}]"
        markers.append(_text(header, "object_labels", k,
                             centre + [0.0, 0.0, size[2] / 2.0 + 0.025], label))

    pairs = relation_edges(graph)
    if pairs:
        lines = Marker(header=header, ns="relations", id=0, type=Marker.LINE_LIST,
                       action=Marker.ADD, pose=Pose(), scale=Vector3(x=0.004),
                       color=_rgba((0.6, 0.6, 0.6)))
        for k, ((a, b), rels) in enumerate(sorted(pairs.items())):
            colour = _relation_colour([r.relation for r in rels])
            lines.points += [point(centres[a]), point(centres[b])]
            lines.colors += [colour, colour]
            midpoint = 0.5 * (centres[a] + centres[b]) + [0.0, 0.0, 0.02]
            markers.append(_text(header, "relation_labels", k, midpoint,
                                 "\n".join(relation_label(r) for r in rels),
                                 0.75 * _TEXT_HEIGHT))
        markers.append(lines)

    if constraints is not None and len(constraints):
        node = graph.node(target)
        tip = np.asarray(node["position"]) + [0.0, 0.0, float(node["size"][2]) / 2.0]
        summary = []
        arrow_id = 0
        for c in constraints.constraints:
            summary.append(f"{c.type.value} ({c.source_id})")
            if c.direction_override is None and c.direction_bias is None:
                continue
            d = _approach(ConstraintSet(target, [c]))
            markers.append(_arrow(header, "constraints", arrow_id, tip, d,
                                  _CONSTRAINT_COLOURS[c.type.value]))
            markers.append(_text(header, "constraints", 1000 + arrow_id,
                                 tip - ARROW_LENGTH * d + [0.0, 0.0, 0.015], c.type.value,
                                 0.75 * _TEXT_HEIGHT))
            arrow_id += 1
        adj = constraints.adjustment
        if arrow_id:
            d = _approach(constraints)
            markers.append(_arrow(header, "approach", 0, tip, d, (0.2, 0.9, 0.3), 0.012))
        summary.append(f"force x{adj['force_scale']:.2f}, height +{adj['delta_h'] * 1e3:.0f} mm"
                     + (f", speed <= {adj['speed_cap']:.2f} m/s" if adj["speed_cap"] else ""))
        if adj["prerequisites"]:
            summary.append(f"remove first: {', '.join(adj['prerequisites'])}")
        markers.append(_text(header, "constraint_labels", 0,
                             tip + [0.0, 0.0, ARROW_LENGTH + 0.06], "\n".join(summary)))
    return MarkerArray(markers=markers)


__all__ = ["ARROW_LENGTH", "relation_edges", "relation_label", "scene_markers"]
