"""Message <-> domain conversion, in one place for the whole package.

Nodes call these at their boundary: message in -> domain object -> core -> domain -> message.
Bad messages raise ``ValidationError`` with a message that names the field.
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np
from geometry_msgs.msg import Point, Pose, Quaternion, Vector3
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from agentic_grasp.core import geometry
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ValidationError
# ROS-free field readers, shared with bag reading (ros/recording/replay.py); re-exported here.
from agentic_grasp.ros.msg_fields import event_from_msg, float32_decimal, from_xyz  # noqa: F401
from agentic_grasp.core.types import (
    AffordanceDescriptor, AffordanceType, AttemptOutcome, GraspParameters, GraspType,
    ObjectInstance, ObjectState, Phase, PhysicalEvent, Shape, event_from_text, event_to_text)
from agentic_grasp_interfaces.msg import (
    AffordanceDescriptor as AffordanceMsg, GraspOutcome as GraspOutcomeMsg,
    GraspParameters as GraspMsg, ObjectObservation as ObjectMsg)
from agentic_grasp_interfaces.msg import (
    Constraint as ConstraintMsg, SceneGraph as SceneGraphMsg, SpatialRelation as RelationMsg)
from agentic_grasp_interfaces.msg import PerceptionResult as PerceptionResultMsg
from agentic_grasp_interfaces.msg import (
    Experience as ExperienceMsg, RetrievedStrategy as RetrievedStrategyMsg)

if TYPE_CHECKING:  # scene_graph pulls in networkx (~0.3 s): imported where it is used
    from agentic_grasp.core.constraints import Constraint, ConstraintSet
    from agentic_grasp.core.perception import PerceivedObject, PerceptionResult
    from agentic_grasp.core.planner.failure import Diagnosis
    from agentic_grasp.core.planner.outcomes import AttemptRecord as CoreAttemptRecord
    from agentic_grasp.core.planner.recovery import Correction
    from agentic_grasp.core.retrieval import Experience, ScoredStrategy
    from agentic_grasp.core.scene_graph import Relation, SceneGraph

_GRASP_TYPES = {GraspType.POWER: GraspMsg.GRASP_POWER, GraspType.PINCH: GraspMsg.GRASP_PINCH,
                GraspType.SIDE: GraspMsg.GRASP_SIDE}
_GRASP_TYPES_INV = {v: k for k, v in _GRASP_TYPES.items()}
_STATES = {ObjectState.EMPTY: ObjectMsg.STATE_EMPTY, ObjectState.FILLED: ObjectMsg.STATE_FILLED,
           ObjectState.STACKED: ObjectMsg.STATE_STACKED}
_STATES_INV = {v: k for k, v in _STATES.items()}


def vec3(values: Sequence[float]) -> Vector3:
    return Vector3(x=float(values[0]), y=float(values[1]), z=float(values[2]))


def point(values: Sequence[float]) -> Point:
    return Point(x=float(values[0]), y=float(values[1]), z=float(values[2]))


def yaw_quaternion(yaw: float) -> Quaternion:
    x, y, z, w = geometry.yaw_quaternion(yaw)
    return Quaternion(x=x, y=y, z=z, w=w)


def quaternion_yaw(q: Quaternion) -> float:
    return geometry.quaternion_yaw(q.x, q.y, q.z, q.w)


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
                    grasp_type=_GRASP_TYPES[grasp.grasp_type],
                    approach_height=float(grasp.approach_height), speed=float(grasp.speed),
                    wrist_yaw=float(grasp.wrist_yaw))


def grasp_from_msg(msg: GraspMsg) -> GraspParameters:
    if msg.grasp_type not in _GRASP_TYPES_INV:
        raise ValidationError(f"grasp.grasp_type {msg.grasp_type} is not 0 (power), 1 (pinch) "
                              "or 2 (side)")
    return GraspParameters(position=from_xyz(msg.position),
                           approach=from_xyz(msg.approach_direction),
                           width=msg.gripper_width, force=msg.grip_force,
                           grasp_type=_GRASP_TYPES_INV[msg.grasp_type],
                           approach_height=msg.approach_height, speed=msg.speed,
                           wrist_yaw=msg.wrist_yaw)


# ---- objects ------------------------------------------------------------------------------

def object_to_msg(obj: ObjectInstance, pixel: Optional[Sequence[float]] = None,
                  confidence: float = 1.0) -> ObjectMsg:
    msg = ObjectMsg(id=obj.id, category=obj.category, name=obj.name,
                    pose=Pose(position=point(obj.position), orientation=yaw_quaternion(obj.yaw)),
                    size=vec3(obj.size), state=_STATES[obj.state],
                    fragility=float(obj.fragility), mass=float(obj.mass),
                    affordance=affordance_to_msg(obj.affordance), confidence=float(confidence),
                    upright=bool(obj.upright), damaged=bool(obj.damaged),
                    shape=_SHAPES.get(obj.shape, ObjectMsg.SHAPE_UNKNOWN), yaw_known=True,
                    handle_known=False, handle_yaw=0.0, rim_height=math.nan,
                    interior_depth=math.nan)
    msg.pixel_u, msg.pixel_v = ((float(pixel[0]), float(pixel[1])) if pixel is not None
                                else (-1.0, -1.0))
    return msg


_SHAPES = {Shape.BOX: ObjectMsg.SHAPE_BOX, Shape.CYLINDER: ObjectMsg.SHAPE_CYLINDER,
           Shape.SPHERE: ObjectMsg.SHAPE_SPHERE}
_SHAPES_INV = {v: k for k, v in _SHAPES.items()}


def shape_from_msg(msg: ObjectMsg) -> Optional[Shape]:
    """The primitive an observation names; None for SHAPE_UNKNOWN (or a value we lack)."""
    return _SHAPES_INV.get(int(msg.shape))


def object_from_msg(msg: ObjectMsg) -> ObjectInstance:
    """Domain object from an observation; shape as the message says (a box when unknown)."""
    if msg.state not in _STATES_INV:
        raise ValidationError(f"object {msg.id!r}: state {msg.state} is not 0, 1 or 2")
    return ObjectInstance(id=msg.id, category=msg.category,
                          shape=shape_from_msg(msg) or Shape.BOX,
                          position=from_xyz(msg.pose.position), size=from_xyz(msg.size),
                          yaw=quaternion_yaw(msg.pose.orientation), fragility=msg.fragility,
                          mass=msg.mass if msg.mass > 0 else 0.1, state=_STATES_INV[msg.state],
                          affordance=affordance_from_msg(msg.affordance),
                          material=msg.affordance.material or "unknown", name=msg.name,
                          upright=msg.upright, damaged=msg.damaged)


def objects_from_msgs(msgs: Iterable[ObjectMsg]) -> List[ObjectInstance]:
    return [object_from_msg(m) for m in msgs]


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
    from agentic_grasp_interfaces.msg import GraspEvent

    return GraspEvent(kind=event.kind, phase=event.phase.value, other_id=event.other_id,
                      detail=event.detail)


def outcome_from_msg(msg: GraspOutcomeMsg) -> AttemptOutcome:
    """The details win when present; a message from an older sender has only the texts."""
    events = ([event_from_msg(e) for e in msg.event_details]
              if len(msg.event_details) == len(msg.events) and len(msg.events)
              else [event_from_text(text) for text in msg.events])
    return AttemptOutcome(
        success=msg.success, quality=msg.quality, phi=np.asarray(msg.phi, dtype=float),
        events=events,
        phase_reached=Phase(msg.phase_reached) if msg.phase_reached else Phase.APPROACH,
        measurements=dict(zip(msg.measurement_names, msg.measurement_values)),
        duration_s=msg.duration_s)


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


def relation_to_msg(relation: "Relation") -> RelationMsg:
    return RelationMsg(subject_id=relation.subject, relation=relation.relation,
                       object_id=relation.object, distance=float(relation.distance))


def relations_to_msgs(relations: Iterable["Relation"]) -> List[RelationMsg]:
    return [relation_to_msg(r) for r in relations]


def relation_from_msg(msg: RelationMsg) -> "Relation":
    """ValidationError for a relation name outside the 16 types or a bad distance."""
    from agentic_grasp.core.scene_graph import RELATION_TYPES, Relation  # networkx: lazy

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
    from agentic_grasp.core.constraints import Constraint, ConstraintType  # networkx: lazy

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
    from agentic_grasp.core.constraints import ConstraintSet  # networkx: lazy

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


# ---- perception: camera frames in, PerceptionResult out -----------------------------------

#: sensor_msgs/Image encodings the perception node reads: (numpy dtype, channels).
IMAGE_ENCODINGS = {
    "rgb8": (np.uint8, 3), "bgr8": (np.uint8, 3), "rgba8": (np.uint8, 4),
    "bgra8": (np.uint8, 4), "mono8": (np.uint8, 1), "32FC1": (np.float32, 1),
    "16UC1": (np.uint16, 1), "mono16": (np.uint16, 1),
}


def image_to_array(msg: Image) -> np.ndarray:
    """The pixels of an Image as a native-endian (H, W) or (H, W, C) array (a copy).

    Honours row padding (``step`` larger than a row) and ``is_bigendian``, which cameras
    other than the simulator do use; there is no cv_bridge in the PyPI ROS wheels.
    """
    spec = IMAGE_ENCODINGS.get(msg.encoding)
    if spec is None:
        raise ValidationError(f"image encoding {msg.encoding!r} is not supported (one of "
                              f"{', '.join(IMAGE_ENCODINGS)})")
    dtype, channels = spec
    height, width = int(msg.height), int(msg.width)
    if height <= 0 or width <= 0:
        raise ValidationError(f"image is empty ({width}x{height})")
    wire = np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<")
    row = width * channels * wire.itemsize
    data = np.frombuffer(msg.data, dtype=np.uint8)
    if msg.step < row or data.size < msg.step * height:
        raise ValidationError(f"image {width}x{height} {msg.encoding}: step {msg.step} and "
                              f"{data.size} data bytes do not hold {row}-byte rows")
    rows = data[:msg.step * height].reshape(height, msg.step)[:, :row]
    pixels = np.ascontiguousarray(rows).view(wire).astype(wire.newbyteorder("="))
    return pixels.reshape(height, width, channels) if channels > 1 else \
        pixels.reshape(height, width)


def rgb_from_msg(msg: Image) -> np.ndarray:
    """HxWx3 uint8 in RGB order, whatever colour encoding the camera publishes."""
    pixels = image_to_array(msg)
    if msg.encoding in ("rgb8", "rgba8"):
        return np.ascontiguousarray(pixels[..., :3])
    if msg.encoding in ("bgr8", "bgra8"):
        return np.ascontiguousarray(pixels[..., 2::-1])
    if msg.encoding == "mono8":
        return np.repeat(pixels[..., None], 3, axis=2)
    raise ValidationError(f"colour image has depth encoding {msg.encoding!r}")


def depth_from_msg(msg: Image) -> np.ndarray:
    """HxW float32 metres along the optical axis, 0 or NaN where invalid (REP 118).

    32FC1 is metres already; 16UC1 (and mono16) is millimetres with 0 = no return.
    """
    pixels = image_to_array(msg)
    if msg.encoding == "32FC1":
        return pixels.astype(np.float32, copy=False)
    if msg.encoding in ("16UC1", "mono16"):
        return pixels.astype(np.float32) / np.float32(1000.0)
    raise ValidationError(f"depth image must be 32FC1 or 16UC1, got {msg.encoding!r}")


def camera_from_info(msg: CameraInfo, T_world_cam: np.ndarray) -> Camera:
    """The pinhole Camera of a CameraInfo (intrinsics from K) placed at ``T_world_cam``.

    CameraInfo carries no extrinsics: the pose comes from the caller (TF on a real robot,
    parameters in the simulator). Distortion is not applied (the core model is
    distortion-free); callers that care check ``msg.d`` themselves.
    """
    k = [float(v) for v in msg.k]
    if len(k) != 9 or msg.width <= 0 or msg.height <= 0:
        raise ValidationError(f"camera_info: need a 3x3 K and a size, got K of {len(k)} "
                              f"values and {msg.width}x{msg.height}")
    fx, fy, cx, cy = k[0], k[4], k[2], k[5]
    if not all(math.isfinite(v) for v in (fx, fy, cx, cy)) or fx <= 0.0 or fy <= 0.0:
        raise ValidationError(f"camera_info: K has no valid focal lengths (fx={fx}, fy={fy}); "
                              "is the camera calibrated?")
    return Camera(width=int(msg.width), height=int(msg.height), fx=fx, fy=fy, cx=cx, cy=cy,
                  T_world_cam=np.asarray(T_world_cam, dtype=float).copy(),
                  frame_id=msg.header.frame_id or "camera_color_optical_frame")


def image_to_msg(array: np.ndarray, encoding: str, header: Optional[Header] = None) -> Image:
    """sensor_msgs/Image of a contiguous HxW or HxWxC array (rows tightly packed)."""
    array = np.ascontiguousarray(array)
    channels = 1 if array.ndim == 2 else array.shape[2]
    return Image(header=header if header is not None else Header(), height=array.shape[0],
                 width=array.shape[1], encoding=encoding, is_bigendian=0,
                 step=array.shape[1] * channels * array.itemsize, data=array.tobytes())


def camera_info_to_msg(camera: Camera, header: Optional[Header] = None) -> CameraInfo:
    """The CameraInfo of a core Camera: K and P from the intrinsics, no distortion."""
    k = camera.K
    return CameraInfo(header=header if header is not None else Header(),
                      height=camera.height, width=camera.width,
                      distortion_model="plumb_bob", d=[0.0] * 5, k=k.reshape(-1).tolist(),
                      r=np.eye(3).reshape(-1).tolist(),
                      p=np.hstack([k, np.zeros((3, 1))]).reshape(-1).tolist())


@dataclasses.dataclass
class RgbdFrame:
    """One RGB-D frame as a perception backend takes it: numpy images and a core Camera."""

    rgb: np.ndarray
    depth: np.ndarray
    camera: Camera
    stamp: Any      # builtin_interfaces/Time of the colour image


def rgbd_frame_from_msgs(rgb_msg: Image, depth_msg: Image, info: CameraInfo,
                         T_world_cam: np.ndarray) -> RgbdFrame:
    """Colour, registered depth and CameraInfo -> RgbdFrame; ValidationError names what
    does not fit (the depth must be registered to the colour camera: same size)."""
    camera = camera_from_info(info, T_world_cam)
    rgb = rgb_from_msg(rgb_msg)
    depth = depth_from_msg(depth_msg)
    if depth.shape != (camera.height, camera.width):
        raise ValidationError(f"depth image is {depth.shape[1]}x{depth.shape[0]} but "
                              f"camera_info is {camera.width}x{camera.height}; the depth "
                              "image must be registered to the colour camera")
    if rgb.shape[:2] != (camera.height, camera.width):
        raise ValidationError(f"colour image is {rgb.shape[1]}x{rgb.shape[0]} but "
                              f"camera_info is {camera.width}x{camera.height}")
    return RgbdFrame(rgb=rgb, depth=depth, camera=camera, stamp=rgb_msg.header.stamp)


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
    msg.shape = _SHAPES.get(obj.shape, ObjectMsg.SHAPE_UNKNOWN) if obj.shape is not None \
        else ObjectMsg.SHAPE_UNKNOWN
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


# ---- retrieval (HAA-RAG) -------------------------------------------------------------------

#: Colour encodings a RetrieveStrategies target_crop may use (turned into RGB for embedding).
CROP_ENCODINGS = ("rgb8", "bgr8", "rgba8", "bgra8")


def rgb_to_msg(rgb: np.ndarray, header: Optional[Header] = None) -> Image:
    """An rgb8 Image (tightly packed rows) of an HxWx3 uint8 array, e.g. a query crop."""
    pixels = np.ascontiguousarray(rgb)
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValidationError(f"an rgb8 image needs an (H, W, 3) uint8 array, got "
                              f"{pixels.dtype} {pixels.shape}")
    height, width = int(pixels.shape[0]), int(pixels.shape[1])
    return Image(header=header if header is not None else Header(), height=height,
                 width=width, encoding="rgb8", is_bigendian=0, step=3 * width,
                 data=pixels.tobytes())


def experience_to_msg(experience: "Experience") -> ExperienceMsg:
    """A knowledge-base experience; its grasp stays in the OBJECT frame (see Experience.msg),
    with the object it was recorded on and its fit record, which grasp fitting needs."""
    spec = experience.render_spec or {}
    fit = experience.fit or {}
    return ExperienceMsg(id=experience.id, category=experience.category,
                         affordance=affordance_to_msg(experience.affordance),
                         grasp=grasp_to_msg(experience.grasp_parameters()),
                         success=bool(experience.success), provenance=experience.provenance,
                         embedding_model=experience.embedding_model,
                         object_shape=str(spec.get("shape", "")),
                         object_size=[float(v) for v in spec.get("size", ())],
                         object_color=[int(min(max(int(c), 0), 255))
                                       for c in spec.get("color", ())],
                         object_material=str(spec.get("material", "")),
                         fit_offset_rel=[float(v) for v in fit.get("offset_rel", ())],
                         fit_opening=str(fit.get("opening", "")),
                         fit_margin_m=float(fit.get("margin_m", 0.0)),
                         fit_yaw_ref=str(fit.get("yaw_ref", "")))


def retrieved_strategy_to_msg(strategy: "ScoredStrategy",
                              weights: Mapping[str, float]) -> RetrievedStrategyMsg:
    """One HAA-RAG strategy with its breakdown, in the message's conventions.

    The core keeps the four raw terms of Eq. 1 and the fraction the failure penalty removes;
    RetrievedStrategy.msg carries the weighted terms (they add up to s_aff) and the multiplier
    (0.7 for a failed experience, 1.0 otherwise). ``weights`` are the retriever's Eq. 1
    weights keyed "type", "material", "fragility", "region".
    """
    terms = strategy.s_aff_terms
    return RetrievedStrategyMsg(
        experience=experience_to_msg(strategy.experience), rank=int(strategy.rank),
        s_cat=float(strategy.s_cat), s_aff=float(strategy.s_aff),
        s_aff_type=float(weights["type"] * terms["type"]),
        s_aff_material=float(weights["material"] * terms["material"]),
        s_aff_fragility=float(weights["fragility"] * terms["fragility"]),
        s_aff_region=float(weights["region"] * terms["region"]),
        s_vis=float(strategy.s_vis), penalty=float(1.0 - strategy.penalty),
        s_final=float(strategy.s_final), explanation=strategy.explanation)


def retrieval_query_from_msg(request: Any) -> Dict[str, Any]:
    """Keyword arguments of ``HAARAG.retrieve`` for a RetrieveStrategies request.

    Checks only what the message itself can get wrong and leaves the rest (fragility range,
    mode, embedding model and size, crop size, embedding and crop together) to the core:

    - category and affordance must be given (an all-empty affordance is an error here,
      not a query without affordance: level 2 needs one); its fragility is read as the
      shortest decimal of the float32 (:func:`float32_decimal`);
    - a ``visual_embedding`` needs its ``embedding_model``: cosines are only meaningful
      between vectors of one model, so the caller must say which one made it;
    - ``target_crop`` counts as given when any of its fields is set, and must then be a
      colour image in one of CROP_ENCODINGS;
    - k = 0 and mode = "" become None: the retriever's configured values;
    - ``size`` is empty (not known) or 3 finite extents > 0 (m); ``perception_backend`` ""
      becomes None (not said: no ground-truth experience is served).
    """
    category = str(request.category).strip()
    if not category:
        raise ValidationError("category is empty: name the object's category (e.g. 'mug')")
    try:
        affordance = affordance_from_msg(request.affordance)
    except ValidationError as exc:
        raise ValidationError(f"affordance: {exc}") from None
    if affordance is None:
        raise ValidationError("affordance is empty: type, material, fragility and "
                              "graspable_region are needed for level 2")
    # The float32 field turns 0.3 into 0.30000001; score the decimal the client wrote, so a
    # query scores the same through the service as in-process.
    affordance = dataclasses.replace(
        affordance, fragility=float32_decimal(request.affordance.fragility))
    embedding = None
    if len(request.visual_embedding):
        if not request.embedding_model:
            raise ValidationError("visual_embedding given without embedding_model: name the "
                                  "model that made it")
        embedding = np.asarray(request.visual_embedding, dtype=np.float32)
    crop = None
    image = request.target_crop
    if image.height or image.width or image.encoding or len(image.data):
        if image.encoding not in CROP_ENCODINGS:
            raise ValidationError(f"target_crop encoding {image.encoding!r} is not a colour "
                                  f"image (one of {', '.join(CROP_ENCODINGS)})")
        try:
            crop = rgb_from_msg(image)
        except ValidationError as exc:
            raise ValidationError(f"target_crop is not a valid image: {exc}") from None
    size = None
    if len(request.size):
        size = np.asarray(request.size, dtype=np.float64)
        if size.shape != (3,) or not np.all(np.isfinite(size)) or not np.all(size > 0.0):
            raise ValidationError(f"size must be 3 finite extents > 0 (m) or empty, got "
                                  f"{size.tolist()}")
    return {"category": category, "affordance": affordance, "embedding": embedding,
            "embedding_model": request.embedding_model or None, "crop": crop,
            "k": int(request.k) or None, "mode": request.mode or None, "size": size,
            "perception_backend": str(request.perception_backend).strip() or None}


# ---- planner: peer answers back into the domain, attempt records out ----------------------

if TYPE_CHECKING:
    from agentic_grasp.core.retrieval.haa_rag import RetrievalResult


def perceived_object_from_msg(msg: ObjectMsg) -> "PerceivedObject":
    """A PerceivedObject of an ObjectObservation (the inverse of perceived_object_to_msg).

    SHAPE_UNKNOWN becomes shape None, so PerceivedObject.to_object_instance guesses it from
    the category. No pixel box travels.
    """
    from agentic_grasp.core.perception import PerceivedObject

    if msg.state not in _STATES_INV:
        raise ValidationError(f"object {msg.id!r}: state {msg.state} is not 0, 1 or 2")
    try:
        affordance = affordance_from_msg(msg.affordance)
    except (ValidationError, ValueError) as exc:
        raise ValidationError(f"object {msg.id!r}: affordance: {exc}") from None
    if affordance is not None:
        affordance = dataclasses.replace(
            affordance, fragility=float32_decimal(msg.affordance.fragility))
    size = from_xyz(msg.size)
    return PerceivedObject(
        id=msg.id, category=msg.category, pixel=(float(msg.pixel_u), float(msg.pixel_v)),
        bbox=None, position=from_xyz(msg.pose.position),
        size=size if np.all(np.isfinite(size)) and np.all(size > 0.0) else None,
        state=_STATES_INV[msg.state], fragility=float32_decimal(msg.fragility),
        affordance=affordance, confidence=float(msg.confidence), name=msg.name,
        shape=shape_from_msg(msg), yaw=quaternion_yaw(msg.pose.orientation),
        yaw_known=bool(msg.yaw_known), upright=bool(msg.upright),
        handle_yaw=float(msg.handle_yaw) if msg.handle_known else None,
        rim_z=float(msg.rim_height) if math.isfinite(msg.rim_height) else None,
        interior_depth=(float(msg.interior_depth) if math.isfinite(msg.interior_depth)
                        and math.isfinite(msg.rim_height) else None),
        warnings=list(msg.warnings))


def perception_result_from_msg(msg: PerceptionResultMsg) -> "PerceptionResult":
    """The core PerceptionResult of a Perceive answer (the planner's input).

    ``target`` is the object whose id is ``target_id`` (None when the message carries none
    with a 3-D position). A malformed object becomes an error result naming it, the way a
    backend reports a bad answer, rather than an exception.
    """
    from agentic_grasp.core.perception import PerceptionResult

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


def experience_from_msg(msg: ExperienceMsg) -> "Experience":
    """A knowledge-base experience of a RetrievedStrategy; its grasp stays in the object frame.

    The message carries the object the grasp was recorded on (render_spec) and the fit
    record, so the planner fits the strategy as it does in process; no embedding (the
    planner needs none).
    """
    from agentic_grasp.core.retrieval.knowledge_base import Experience

    affordance = affordance_from_msg(msg.affordance)
    if affordance is None:
        raise ValidationError(f"experience {msg.id!r} has no affordance")
    affordance = dataclasses.replace(affordance,
                                     fragility=float32_decimal(msg.affordance.fragility))
    grasp = grasp_from_msg(msg.grasp).to_dict()
    for name in ("width", "force", "approach_height", "speed", "wrist_yaw"):
        grasp[name] = float32_decimal(grasp[name])      # the KB's decimals, not float32 noise
    spec: Dict[str, Any] = {}
    if msg.object_shape:
        spec = {"shape": msg.object_shape, "size": [float(v) for v in msg.object_size],
                "color": [int(c) for c in msg.object_color]}
        if msg.object_material:
            spec["material"] = msg.object_material
    fit = None
    if msg.fit_opening:
        fit = {"offset_rel": [float(v) for v in msg.fit_offset_rel],
               "opening": msg.fit_opening, "margin_m": float(msg.fit_margin_m),
               "yaw_ref": msg.fit_yaw_ref or "principal"}
    return Experience(id=msg.id, category=msg.category, affordance=affordance, grasp=grasp,
                      success=bool(msg.success), provenance=msg.provenance, render_spec=spec,
                      embedding_model=msg.embedding_model, fit=fit)


def retrieved_strategy_from_msg(msg: RetrievedStrategyMsg,
                                weights: Optional[Mapping[str, float]] = None
                                ) -> "ScoredStrategy":
    """A ScoredStrategy of a RetrievedStrategy (inverse of retrieved_strategy_to_msg).

    The message carries the weighted Eq. 1 terms; the raw terms of ScoredStrategy come back
    only when the retriever's ``weights`` are given (else ``s_aff_terms`` is empty). The
    penalty goes back from the multiplier to the fraction removed (0.7 -> 0.3).
    """
    from agentic_grasp.core.retrieval.haa_rag import ScoredStrategy

    terms: Dict[str, float] = {}
    if weights:
        weighted = {"type": msg.s_aff_type, "material": msg.s_aff_material,
                    "fragility": msg.s_aff_fragility, "region": msg.s_aff_region}
        terms = {k: (float(v) / float(weights[k]) if weights.get(k) else 0.0)
                 for k, v in weighted.items()}
    return ScoredStrategy(experience=experience_from_msg(msg.experience),
                          s_cat=float(msg.s_cat), s_aff=float(msg.s_aff), s_aff_terms=terms,
                          s_vis=float(msg.s_vis), penalty=float(1.0 - msg.penalty),
                          s_final=float(msg.s_final), rank=int(msg.rank),
                          explanation=msg.explanation)


def retrieval_result_from_msg(response: Any) -> "RetrievalResult":
    """The core RetrievalResult of a RetrieveStrategies response.

    A response with success=false becomes an empty result whose reason is the node's
    message, which is what the planner reports when it falls back to its default grasp.
    """
    from agentic_grasp.core.retrieval.haa_rag import RetrievalResult

    if not response.success:
        return RetrievalResult([], f"retrieval refused the query: {response.message}", 0, 0)
    return RetrievalResult([retrieved_strategy_from_msg(s) for s in response.strategies],
                           response.message, int(response.candidates_level1),
                           int(response.candidates_level2))


def scene_to_msg(objects: Sequence[ObjectInstance], header: Optional[Header] = None,
                 source: str = "") -> SceneGraphMsg:
    """A SceneGraph request of domain objects (no relations: the service computes them)."""
    return SceneGraphMsg(header=header if header is not None else Header(), source=source,
                         objects=[object_to_msg(o) for o in objects])


def failure_diagnosis_to_msg(diagnosis: Optional["Diagnosis"],
                             correction: Optional["Correction"] = None) -> Any:
    """FailureDiagnosis of the planner's diagnosis F_r and the correction computed from it.

    None (a successful attempt, or one not reflected on) is failure_type "none"; retry_level
    is the level of the correction computed from this failure (0 when there is none).
    """
    from agentic_grasp_interfaces.msg import FailureDiagnosis

    if diagnosis is None:
        return FailureDiagnosis(failure_type=FailureDiagnosis.NONE)
    return FailureDiagnosis(failure_type=diagnosis.failure_type.value,
                            group=diagnosis.group.value,
                            retry_level=int(correction.level) if correction else 0,
                            evidence=str(diagnosis.evidence),
                            correction=str(correction.text) if correction else "")


def recorded_grasp(grasp: GraspParameters) -> GraspParameters:
    """``grasp`` as the attempt records store it (``to_dict``: position and approach to 6
    decimals), so an AttemptRecord message, its marker and its JSON record agree."""
    return GraspParameters.from_dict(grasp.to_dict())


def attempt_record_to_msg(record: "CoreAttemptRecord", goal_id: str, subgoal_index: int,
                          target_id: str, outcome: Optional[GraspOutcomeMsg],
                          duration_s: float, header: Optional[Header] = None) -> Any:
    """The AttemptRecord message of the planner's core record of one attempt (Thought ->
    Action -> Observation, and the reflection on it when ``record`` has one).

    ``outcome`` is the GraspOutcome exactly as the executor returned it (measurements and
    events intact); an attempt the arm never ran has an empty one. ``duration_s`` is the
    attempt's time as the node saw it (Thought to Observation). ``record.candidate`` is the
    planner's clearance report of the executed grasp (None: no clearance reasoning ran).
    """
    from agentic_grasp_interfaces.msg import AttemptRecord as AttemptRecordMsg

    msg = AttemptRecordMsg(header=header if header is not None else Header(),
                           goal_id=goal_id, subgoal_index=int(subgoal_index),
                           target_id=target_id, attempt=int(record.index),
                           retry_level=int(record.retry_level), thought=record.thought,
                           diagnosis=failure_diagnosis_to_msg(record.diagnosis,
                                                              record.correction),
                           duration_s=float(duration_s))
    if record.grasp is not None:
        msg.grasp = grasp_to_msg(recorded_grasp(record.grasp))
    if outcome is not None:
        msg.outcome = outcome
    msg.clearance_m = math.nan
    candidate = record.candidate
    if candidate:
        clear = candidate.get("clearance_m")
        msg.candidate = str(candidate.get("label", ""))
        msg.clearance_m = math.inf if clear is None else float(clear)
        msg.clearance_nearest = str(candidate.get("nearest", ""))
        msg.collision_free = bool(candidate.get("collision_free", False))
    msg.memory_transfer = str(getattr(record, "memory", "") or "")
    return msg
