"""Scene-graph node: serves InferConstraints (paper Sec. III-B) and shows G in RViz.

Per request: objects (message) -> build_scene_graph -> infer_constraints -> relations,
constraints and the composed Delta g (message). The geometry and the rules live in
agentic_grasp.core.scene_graph / core.constraints; this node converts, publishes and keeps
serving whatever a request contains.

Request semantics:

- a bad scene (NaN or inf pose, zero or negative size, bad state code, fragility outside
  [0, 1], duplicate or empty ids) or a target_id that is not in the scene gives
  success=false and a message naming the object and the field; nothing is published;
- an empty target_id asks for the graph only: success=true with the relations and no
  constraints (also for an empty scene, which then has no relations either);
- every successful request publishes the graph (``scene_graph/graph``, latched) and its
  markers (``scene_graph/markers``, latched, DELETEALL first), in the scene header's frame or
  ``default_frame`` when the header has none.

Every threshold of SceneGraphConfig is a parameter (names as in config/scene_graph.yaml,
no prefix); they and ``camera_position`` may be changed at run time, and a combination the
config rejects is refused as a whole with the reason.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, fields
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from geometry_msgs.msg import Pose, Vector3
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from agentic_grasp import qos
from agentic_grasp.conversions import (
    constraint_to_msg, fill_adjustment, point, relations_to_msgs, scene_graph_to_msg,
    scene_objects_from_msg, yaw_quaternion)
from agentic_grasp.core.constraints import ConstraintSet, infer_constraints
from agentic_grasp.core.errors import ConfigError, UnknownTargetError, ValidationError
from agentic_grasp.core.scene_graph import (
    ADJACENT_TO, CONTAINS, CONVERSE, FAR_FROM, IN_FRONT_OF, INSIDE, LEANING_ON, OCCLUDES,
    ON_TOP_OF, RIGHT_OF, STACKED_ON, SUPPORTS, TOUCHING, UNDER, Relation, SceneGraph,
    SceneGraphConfig, build_scene_graph)
from agentic_grasp.nodes.runner import spin_node
from agentic_grasp.params import declare
from agentic_grasp_interfaces.msg import SceneGraph as SceneGraphMsg
from agentic_grasp_interfaces.srv import InferConstraints

#: Description of every SceneGraphConfig field, declared as a parameter of the same name.
CONFIG_DESCRIPTIONS: Dict[str, str] = {
    "contact_tolerance": "Resting contact (m): |bottom_a - top_b| for On_Top_Of, and the gap "
                         "for Leaning_On",
    "touch_tolerance": "Touching band upper edge and Under's footprint overlap depth (m)",
    "adjacent_gap": "Adjacent_To band upper edge, surface gap (m)",
    "near_gap": "Near band upper edge, surface gap (m); equal to delta_check",
    "far_gap": "Far_From lower edge, surface gap (m)",
    "far_from_max_objects": "Far_From edges (O(n^2)) are only materialised up to this many "
                            "objects",
    "directional_max_gap": "Behind / In_Front_Of / Left_Of / Right_Of only between objects "
                           "at most this far apart (m)",
    "directional_margin": "Minimum centre offset for a directional relation (m)",
    "containment_tolerance": "How far a's footprint may exceed b's for Inside (m)",
    "container_categories": "Category words that make an object a container (Inside/Contains)",
    "occlusion_min_fraction": "Share of the target's 6 line-of-sight samples an object must "
                              "block to Occlude it, in (0, 1]",
    "delta_check": "Neighbourhood radius around the target, surface gap (m) (paper)",
    "delta_safe": "Fragile-neighbour radius for collision avoidance, surface gap (m) (paper)",
    "fragile_threshold": "Fragility at or above which a neighbour counts as fragile",
    "collision_force_scale": "Grip force multiplier near a fragile neighbour (paper: 0.8)",
    "collision_height_delta": "Approach height added near a fragile neighbour (m) "
                              "(paper: 0.03)",
    "collision_tilt_angle": "Tilt of the approach away from a fragile neighbour (rad)",
    "content_speed_cap": "Speed cap for a filled target (m/s)",
    "occlusion_tilt_angle": "Tilt of the lateral approach away from an occluder (rad)",
}

#: Camera eye of the default Camera(), world frame (m); keep equal to the sim's camera.eye.
DEFAULT_CAMERA_POSITION = [1.15, 0.0, 0.75]

# ---- marker styling (RViz only; no effect on the reasoning) --------------------------------
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


def _approach(bias: Optional[np.ndarray], override: Optional[np.ndarray]) -> np.ndarray:
    """The approach a top-down default d = [0, 0, -1] becomes (apply_constraints' rule)."""
    d = np.array([0.0, 0.0, -1.0])
    if override is not None:
        return np.asarray(override, dtype=float)
    if bias is not None and np.linalg.norm(d + bias) > 1e-6:
        d = d + bias
    return d / np.linalg.norm(d)


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
            d = _approach(c.direction_bias, c.direction_override)
            markers.append(_arrow(header, "constraints", arrow_id, tip, d,
                                  _CONSTRAINT_COLOURS[c.type.value]))
            markers.append(_text(header, "constraints", 1000 + arrow_id,
                                 tip - ARROW_LENGTH * d + [0.0, 0.0, 0.015], c.type.value,
                                 0.75 * _TEXT_HEIGHT))
            arrow_id += 1
        adj = constraints.adjustment
        if arrow_id:
            d = _approach(adj["delta_d"], adj["direction_override"])
            markers.append(_arrow(header, "approach", 0, tip, d, (0.2, 0.9, 0.3), 0.012))
        summary.append(f"force x{adj['force_scale']:.2f}, height +{adj['delta_h'] * 1e3:.0f} mm"
                     + (f", speed <= {adj['speed_cap']:.2f} m/s" if adj["speed_cap"] else ""))
        if adj["prerequisites"]:
            summary.append(f"remove first: {', '.join(adj['prerequisites'])}")
        markers.append(_text(header, "constraint_labels", 0,
                             tip + [0.0, 0.0, ARROW_LENGTH + 0.06], "\n".join(summary)))
    return MarkerArray(markers=markers)


@dataclass(frozen=True)
class _Settings:
    """What one request reads, swapped as a whole when parameters change."""

    config: SceneGraphConfig
    camera_position: Tuple[float, float, float]
    default_frame: str


def _camera_position(value: Any) -> Tuple[float, float, float]:
    try:
        cam = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        cam = ()
    if len(cam) != 3 or not all(math.isfinite(v) for v in cam):
        raise ValidationError(f"camera_position must be 3 finite numbers (m), got {value!r}")
    return cam  # type: ignore[return-value]


class SceneGraphNode(Node):
    """Builds G and C_vt per request; keeps the last graph latched for late subscribers."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("scene_graph", **kwargs)
        self._config_names = [f.name for f in fields(SceneGraphConfig)]
        defaults = SceneGraphConfig()
        for name in self._config_names:
            default = getattr(defaults, name)
            declare(self, name, list(default) if isinstance(default, tuple) else default,
                    CONFIG_DESCRIPTIONS.get(name, f"SceneGraphConfig.{name}"))
        declare(self, "camera_position", DEFAULT_CAMERA_POSITION,
                "Camera eye in the world frame (m), for Occludes and the directional "
                "relations; keep equal to the simulator's camera.eye")
        declare(self, "default_frame", "world",
                "Frame of markers and of the published graph when the request's scene "
                "header has no frame_id")
        self._settings = self._read_settings({})       # ConfigError here stops the node
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

        self._publish_lock = threading.Lock()           # DELETEALL + markers + graph together
        self.pub_markers = self.create_publisher(MarkerArray, "scene_graph/markers",
                                                 qos.LATCHED)
        self.pub_graph = self.create_publisher(SceneGraphMsg, "scene_graph/graph", qos.LATCHED)
        self.create_service(InferConstraints, "infer_constraints", self._on_infer)
        cam = self._settings.camera_position
        self.get_logger().info(f"scene graph ready (camera at {list(cam)})")

    # ---- parameters ---------------------------------------------------------------------------
    def _read_settings(self, changes: Dict[str, Any]) -> _Settings:
        """Settings from the current parameter values with ``changes`` applied; raises
        ConfigError / ValidationError for a combination the core rejects."""
        values = {name: self.get_parameter(name).value
                  for name in self._config_names + ["camera_position", "default_frame"]}
        values.update(changes)
        config = SceneGraphConfig.from_params(
            {name: (tuple(values[name]) if isinstance(values[name], list) else values[name])
             for name in self._config_names}, source="scene_graph parameters")
        frame = str(values["default_frame"])
        if not frame:
            raise ValidationError("default_frame must not be empty")
        return _Settings(config, _camera_position(values["camera_position"]), frame)

    def _check_parameters(self, params: List[Parameter]) -> SetParametersResult:
        try:
            self._read_settings({p.name: p.value for p in params})
        except (ConfigError, ValidationError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _apply_parameters(self, _params: List[Parameter]) -> None:
        self._settings = self._read_settings({})
        self.get_logger().info("scene graph parameters updated")

    # ---- service ------------------------------------------------------------------------------
    def _on_infer(self, request: InferConstraints.Request,
                  response: InferConstraints.Response) -> InferConstraints.Response:
        settings = self._settings
        try:
            graph, constraints = self._infer(request, settings)
        except (ValidationError, UnknownTargetError, ConfigError) as exc:
            return self._fail(response, str(exc))
        except Exception as exc:  # noqa: BLE001 - a core bug must not take the node down
            self.get_logger().error(f"infer_constraints raised: {exc!r}")
            return self._fail(response, f"internal error: {type(exc).__name__}: {exc}")

        response.success = True
        response.relations = relations_to_msgs(graph.relations())
        if constraints is not None:
            response.constraints = [constraint_to_msg(c) for c in constraints.constraints]
            fill_adjustment(response, constraints)
            kinds = ", ".join(c.type.value for c in constraints.constraints) or "none"
            response.message = (f"{len(graph)} objects, {len(response.relations)} relations; "
                                f"constraints on {request.target_id}: {kinds}")
        else:
            fill_adjustment(response, ConstraintSet(""))
            response.message = (f"{len(graph)} objects, {len(response.relations)} relations; "
                                "no target_id: no constraints inferred")
        try:
            self._publish(request, graph, constraints, settings)
        except Exception as exc:  # noqa: BLE001 - the answer stands even if RViz output fails
            self.get_logger().error(f"publishing the scene graph failed: {exc!r}")
        return response

    def _infer(self, request: InferConstraints.Request, settings: _Settings
               ) -> Tuple[SceneGraph, Optional[ConstraintSet]]:
        objects = scene_objects_from_msg(request.scene)
        graph = build_scene_graph(objects, settings.camera_position, settings.config)
        target = request.target_id
        if not target:
            return graph, None
        if target not in graph:
            if not len(graph):
                raise UnknownTargetError(f"target_id {target!r} is not in the scene: the "
                                         "scene is empty")
            ids = graph.ids
            shown = ", ".join(sorted(ids)[:20]) + (f", ... ({len(ids)} in all)"
                                                   if len(ids) > 20 else "")
            raise UnknownTargetError(f"target_id {target!r} is not in the scene (objects: "
                                     f"{shown})")
        return graph, infer_constraints(graph, target, settings.config)

    def _fail(self, response: InferConstraints.Response,
              message: str) -> InferConstraints.Response:
        response.success = False
        response.message = message
        self.get_logger().warning(f"infer_constraints rejected: {message}")
        return response

    def _publish(self, request: InferConstraints.Request, graph: SceneGraph,
                 constraints: Optional[ConstraintSet], settings: _Settings) -> None:
        header = Header(stamp=request.scene.header.stamp,
                        frame_id=request.scene.header.frame_id or settings.default_frame)
        markers = scene_markers(graph, constraints, header)
        msg = scene_graph_to_msg(graph, request.scene.objects, header, request.scene.source)
        with self._publish_lock:
            self.pub_markers.publish(markers)
            self.pub_graph.publish(msg)


def main(args=None) -> None:
    spin_node(SceneGraphNode, num_threads=2, args=args)


if __name__ == "__main__":
    main()
