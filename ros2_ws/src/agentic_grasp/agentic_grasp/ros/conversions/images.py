"""Camera frames: sensor_msgs Image and CameraInfo <-> numpy arrays and the
core Camera (the perception node's input, the simulator's output).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ValidationError


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
