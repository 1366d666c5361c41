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
- ``every_target`` also answers the constraints on every object of the scene
  (``every_target`` of the response, in the scene's order), each exactly as a request naming
  that object would: the planner's task graph and the constraints of every sub-goal on the
  same perception then cost one call instead of two or more (fewer hops);
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
from typing import Any, Dict, List, Optional, Tuple

from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import Header
from visualization_msgs.msg import MarkerArray

from agentic_grasp.ros.common import qos
from agentic_grasp.ros.conversions.scene import (constraint_to_msg, fill_adjustment,
                                                 relations_to_msgs, scene_graph_to_msg,
                                                 scene_objects_from_msg)
from agentic_grasp.core.camera import fixed_camera_spec
from agentic_grasp.core.scene_graph.constraints import ConstraintSet, infer_constraints
from agentic_grasp.core.errors import ConfigError, UnknownTargetError, ValidationError
from agentic_grasp.core.scene_graph.graph import SceneGraph, build_scene_graph
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.ros.scene_graph.markers import scene_markers
from agentic_grasp.ros.common.runner import spin_node
from agentic_grasp.ros.common.params import declare, declare_fields
from agentic_grasp_interfaces.msg import SceneGraph as SceneGraphMsg
from agentic_grasp_interfaces.msg import TargetConstraints
from agentic_grasp_interfaces.srv import InferConstraints


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
        declare_fields(self, "", SceneGraphConfig)   # descriptions: field metadata
        declare(self, "camera_position", fixed_camera_spec()["eye"],
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
        if request.every_target:
            response.every_target = [
                TargetConstraints(target_id=o.id, constraints=[
                    constraint_to_msg(c) for c in infer_constraints(
                        graph, o.id, settings.config).constraints])
                for o in request.scene.objects]
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
