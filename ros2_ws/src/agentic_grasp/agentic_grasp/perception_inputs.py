"""What the perception node is fed: camera messages paired by stamp, and ground truth.

Colour and depth images are paired by header stamp (the newest colour image whose depth
image is within ``max_skew_s``), so a depth image from another instant is never read at the
colour image's pixels. Messages are kept raw; decoding them is
:func:`agentic_grasp.conversions.rgbd_frame_from_msgs`.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Any, Deque, List, Optional, Tuple

import numpy as np

from builtin_interfaces.msg import Time
from sensor_msgs.msg import CameraInfo, Image

from agentic_grasp.core.camera import look_at
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.types import ObjectInstance

#: Colour and depth images kept for pairing by stamp (the simulator re-sends at 2 Hz).
FRAME_HISTORY = 4


def _seconds(stamp: Time) -> float:
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)



class FrameStore:
    """The last few colour and depth images and the last CameraInfo, thread-safe.

    Pairing by stamp happens when a frame is asked for, and decoding too: the camera sends
    frames far more often than perception is asked, so only the frame used is decoded.
    """

    def __init__(self, max_skew_s: float, history: int = FRAME_HISTORY) -> None:
        self.max_skew_s = max_skew_s
        self._rgb: Deque[Image] = deque(maxlen=history)
        self._depth: Deque[Image] = deque(maxlen=history)
        self._info: Optional[CameraInfo] = None
        self._cond = threading.Condition()

    def add_rgb(self, msg: Image) -> None:
        with self._cond:
            self._rgb.append(msg)
            self._cond.notify_all()

    def add_depth(self, msg: Image) -> None:
        with self._cond:
            self._depth.append(msg)
            self._cond.notify_all()

    def set_info(self, msg: CameraInfo) -> None:
        with self._cond:
            self._info = msg
            self._cond.notify_all()

    @property
    def condition(self) -> threading.Condition:
        """Notified on every message; wait on it to see a frame arrive."""
        return self._cond

    def newest_rgb_stamp(self) -> Optional[float]:
        """Stamp (s) of the newest colour image, None before the first one."""
        with self._cond:
            return _seconds(self._rgb[-1].header.stamp) if self._rgb else None

    def latest_messages(self, topics: Tuple[str, str, str]
                        ) -> Tuple[Optional[Tuple[Image, Image, CameraInfo]], str]:
        """((rgb, depth, info), "") for the newest pairable frame, else (None, why not)."""
        rgb_topic, depth_topic, info_topic = topics
        with self._cond:
            rgbs, depths, info = list(self._rgb), list(self._depth), self._info
        if not rgbs:
            return None, f"no camera frame yet on {rgb_topic}"
        if not depths:
            return None, f"no depth image yet on {depth_topic}"
        if info is None:
            return None, f"no camera_info yet on {info_topic}"
        for rgb in reversed(rgbs):
            t_rgb = _seconds(rgb.header.stamp)
            depth = min(depths, key=lambda d: abs(_seconds(d.header.stamp) - t_rgb))
            if abs(_seconds(depth.header.stamp) - t_rgb) <= self.max_skew_s:
                return (rgb, depth, info), ""
        return None, (f"no depth image within max_frame_skew_s={self.max_skew_s:g} s of a "
                      f"colour image (newest colour {_seconds(rgbs[-1].header.stamp):.3f} s, "
                      f"newest depth {_seconds(depths[-1].header.stamp):.3f} s)")



class GroundTruthStore:
    """The latest ground-truth scene (oracle and vlm_sim backends), thread-safe.

    An update notifies ``condition`` (the FrameStore's), so one wait sees frames and truth.
    """

    def __init__(self, condition: threading.Condition, topic: str = "") -> None:
        self.topic = topic
        self._cond = condition
        self._lock = threading.Lock()
        self._objects: Optional[List[ObjectInstance]] = None
        self._problem = ""

    def set(self, objects: Optional[List[ObjectInstance]], problem: str = "") -> None:
        """The new truth; None (with the reason) clears it, e.g. after an invalid update."""
        with self._cond:
            with self._lock:
                self._objects, self._problem = objects, problem
            self._cond.notify_all()

    def objects(self) -> List[ObjectInstance]:
        """A copy of the latest ground truth (the oracle's provider); RuntimeError if none."""
        with self._lock:
            if self._objects is None:
                raise RuntimeError(f"no ground truth yet on {self.topic}")
            return [o.copy() for o in self._objects]

    def problem(self) -> str:
        """Why there is no ground truth ("" when there is)."""
        with self._lock:
            if self._objects is None:
                return self._problem or f"no ground truth yet on {self.topic}"
            return ""


def camera_pose(eye: Any, target: Any) -> np.ndarray:
    """T_world_cam of a camera at ``eye`` looking at ``target`` (parameters); ConfigError."""
    eye_a = np.asarray(eye, dtype=float)
    target_a = np.asarray(target, dtype=float)
    if eye_a.shape != (3,) or target_a.shape != (3,) or not np.all(np.isfinite(eye_a)) \
            or not np.all(np.isfinite(target_a)):
        raise ConfigError(f"camera.eye and camera.target must be 3 finite numbers each, got "
                          f"{list(eye)} and {list(target)}")
    if np.linalg.norm(target_a - eye_a) < 1e-6:
        raise ConfigError("camera.eye and camera.target must differ")
    try:
        return look_at(eye_a, target_a)
    except ValidationError as exc:
        raise ConfigError(f"camera.eye/camera.target: {exc}") from None


__all__ = ["FRAME_HISTORY", "FrameStore", "GroundTruthStore", "camera_pose"]
