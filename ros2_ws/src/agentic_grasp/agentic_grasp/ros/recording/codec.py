"""ROS messages and the planner's peer answers <-> JSON-able data, exactly (decision inputs).

The planner node records every answer its peers gave it (recording/inputs.py) and replay
hands the same answers back; a decision can only be reproduced if the answer comes back bit
for bit. Two kinds of answer are kept:

- *messages* as the planner received them (Perceive, RetrieveStrategies and InferConstraints
  responses): :func:`msg_to_data` walks any rclpy message by its declared fields, and
  :func:`data_to_msg` builds the same message again. A received float32 field holds a Python
  float that is exactly a float32 value; JSON writes a float's shortest exact repr, so the
  message that comes back converts (ros/conversions) to the same domain object the live
  planner got. Byte sequences (image data) travel base64-encoded.
- *domain answers* of the arm (ArmResult, ViewResult, WristCameraInfo), which the planner
  gets from the executor's action through arm-side code with no one message to keep: their
  fields are written with full float precision (:func:`arm_result_data` and friends).
"""
from __future__ import annotations

import array
import base64
import importlib
import re
from typing import Any, Dict, Mapping, Optional

import numpy as np

from agentic_grasp.core.arm.backend import ArmError, ArmResult, ViewResult, WristCameraInfo
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.types import GraspParameters, GraspType
from agentic_grasp.ros.conversions.grasp import observation_from_msg, observation_to_msg
from agentic_grasp_interfaces.msg import ArmObservation as ArmObservationMsg

_B64 = "__b64__"
_MSG_TYPE = re.compile(r"^(?:sequence<)?([A-Za-z0-9_]+)/([A-Za-z0-9_]+)(?:\[\d+\])?"
                       r"(?:,\s*\d+)?>?$")


# ---- messages --------------------------------------------------------------------------------

def msg_to_data(msg: Any) -> Any:
    """Any rclpy message (or field value) as JSON-able data, losslessly."""
    if hasattr(msg, "get_fields_and_field_types"):
        return {name: msg_to_data(getattr(msg, name))
                for name in msg.get_fields_and_field_types()}
    if isinstance(msg, (bytes, bytearray)):
        return {_B64: base64.b64encode(bytes(msg)).decode("ascii")}
    if isinstance(msg, array.array):
        if msg.typecode == "B":
            return {_B64: base64.b64encode(msg.tobytes()).decode("ascii")}
        return [float(v) if isinstance(v, float) else int(v) for v in msg]
    if isinstance(msg, np.ndarray):
        if msg.dtype == np.uint8:
            return {_B64: base64.b64encode(msg.tobytes()).decode("ascii")}
        return msg.tolist()
    if isinstance(msg, (list, tuple)):
        return [msg_to_data(v) for v in msg]
    if isinstance(msg, np.generic):
        return msg.item()
    return msg


def _message_class(type_name: str) -> Optional[type]:
    match = _MSG_TYPE.match(type_name.strip())
    if match is None:
        return None
    package, name = match.groups()
    for kind in ("msg", "srv", "action"):
        try:
            module = importlib.import_module(f"{package}.{kind}")
        except ImportError:
            continue
        cls = getattr(module, name, None)
        if cls is not None:
            return cls
    raise ValueError(f"unknown message type {type_name!r}")


def data_to_msg(cls: type, data: Mapping[str, Any]) -> Any:
    """The message ``cls`` with the fields of ``data`` (:func:`msg_to_data`'s output); a
    field ``data`` lacks keeps its default, a key ``cls`` lacks is a ValueError (a layout
    the reader does not know)."""
    msg = cls()
    fields = cls.get_fields_and_field_types()
    unknown = set(data) - set(fields)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    for name, type_name in fields.items():
        if name not in data:
            continue
        value = data[name]
        if value is None:                   # left out when recorded (a perceive's crop)
            continue
        sub = _message_class(type_name)
        if sub is not None:
            value = ([data_to_msg(sub, v) for v in value] if isinstance(value, list)
                     else data_to_msg(sub, value))
        elif isinstance(value, dict) and _B64 in value:
            raw = base64.b64decode(value[_B64])
            value = array.array("B", raw) if type_name.startswith("sequence") else raw
            if "[" in type_name:                    # a fixed uint8 array: numpy
                value = np.frombuffer(raw, dtype=np.uint8).copy()
        setattr(msg, name, value)
    return msg


# ---- the arm's answers -------------------------------------------------------------------------

def _floats(values: Any) -> list:
    return [float(v) for v in np.asarray(values, dtype=float).reshape(-1)]


def grasp_data(grasp: GraspParameters) -> Dict[str, Any]:
    """A grasp with full precision (GraspParameters.to_dict rounds its vectors)."""
    return {"position": _floats(grasp.position), "approach": _floats(grasp.approach),
            "width": float(grasp.width), "force": float(grasp.force),
            "grasp_type": grasp.grasp_type.value,
            "approach_height": float(grasp.approach_height), "speed": float(grasp.speed),
            "wrist_yaw": float(grasp.wrist_yaw)}


def grasp_from_data(data: Mapping[str, Any]) -> GraspParameters:
    return GraspParameters(position=np.asarray(data["position"], dtype=float),
                           approach=np.asarray(data["approach"], dtype=float),
                           width=float(data["width"]), force=float(data["force"]),
                           grasp_type=GraspType.parse(str(data["grasp_type"])),
                           approach_height=float(data["approach_height"]),
                           speed=float(data["speed"]), wrist_yaw=float(data["wrist_yaw"]))


def camera_data(camera: Optional[Camera]) -> Optional[Dict[str, Any]]:
    if camera is None:
        return None
    return {"width": int(camera.width), "height": int(camera.height), "fx": float(camera.fx),
            "fy": float(camera.fy), "cx": float(camera.cx), "cy": float(camera.cy),
            "T_world_cam": np.asarray(camera.T_world_cam, dtype=float).tolist(),
            "frame_id": str(camera.frame_id)}


def camera_from_data(data: Optional[Mapping[str, Any]]) -> Optional[Camera]:
    if data is None:
        return None
    return Camera(width=int(data["width"]), height=int(data["height"]), fx=float(data["fx"]),
                  fy=float(data["fy"]), cx=float(data["cx"]), cy=float(data["cy"]),
                  T_world_cam=np.asarray(data["T_world_cam"], dtype=float),
                  frame_id=str(data["frame_id"]))


def arm_result_data(result: ArmResult) -> Dict[str, Any]:
    """An ArmResult; its observation as the ArmObservation message the executor sent (full
    precision, so a replay's diagnosis reads what the live one read)."""
    return {"error": int(result.error), "message": str(result.message),
            "observation": (None if result.observation is None
                            else msg_to_data(observation_to_msg(result.observation)))}


def arm_result_from_data(data: Mapping[str, Any]) -> ArmResult:
    observation = data.get("observation")
    return ArmResult(ArmError(int(data["error"])), str(data["message"]),
                     None if observation is None
                     else observation_from_msg(data_to_msg(ArmObservationMsg, observation)))


def view_result_data(result: ViewResult) -> Dict[str, Any]:
    return {"error": int(result.error), "message": str(result.message),
            "camera": camera_data(result.camera), "duration_s": float(result.duration_s),
            "clearance_m": float(result.clearance_m), "nearest": str(result.nearest),
            "reached_ns": int(result.reached_ns)}


def view_result_from_data(data: Mapping[str, Any]) -> ViewResult:
    return ViewResult(ArmError(int(data["error"])), str(data["message"]),
                      camera_from_data(data["camera"]), float(data["duration_s"]),
                      float(data["clearance_m"]), str(data["nearest"]),
                      int(data["reached_ns"]))


def wrist_camera_data(info: Optional[WristCameraInfo]) -> Optional[Dict[str, Any]]:
    if info is None:
        return None
    return {"camera": camera_data(info.camera), "min_range_m": float(info.min_range_m),
            "T_tcp_cam": (None if info.T_tcp_cam is None
                          else np.asarray(info.T_tcp_cam, dtype=float).tolist())}


def wrist_camera_from_data(data: Optional[Mapping[str, Any]]) -> Optional[WristCameraInfo]:
    if data is None:
        return None
    mount = data.get("T_tcp_cam")
    return WristCameraInfo(camera_from_data(data["camera"]), float(data["min_range_m"]),
                           None if mount is None else np.asarray(mount, dtype=float))


__all__ = ["arm_result_data", "arm_result_from_data", "camera_data", "camera_from_data",
           "data_to_msg", "grasp_data", "grasp_from_data", "msg_to_data",
           "view_result_data", "view_result_from_data", "wrist_camera_data",
           "wrist_camera_from_data"]
