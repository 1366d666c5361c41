"""What the perception node is fed: captures (camera messages and ground truth, by stamp).

A capture is what one camera exposure gives: a colour image, the registered depth image and
the camera_info, all stamped with the capture time (a camera driver's stamp; the simulator's
is the instant it copied the world), and with the simulator the ground truth of that instant
(SceneGraph with the same stamp and the world version it shows). Colour and depth are paired
by stamp (within ``max_skew_s``), ground truth to the colour image's stamp (within the same
skew), so a depth image or a truth from another instant is never read with the colour image.
The pairing waits for the capture's own messages: until a topic has sent one stamped at or
after the colour image, its nearest within the skew may be an earlier instant's (``_settled``).
Re-sent messages keep their stamp, so a repeat replaces nothing newer.

A camera that knows the world has not changed since a capture (the simulator: it is the world)
may say so instead of rendering and sending the same frames again (CaptureCurrent: that
capture, its world version, and an instant up to which it still shows the world). Such a
capture then counts as taken at that instant for ``not_before``; the answer still names its
real stamp. A real camera never says it, so every answer there waits for a new frame.

:meth:`FrameStore.wait_capture` gives the newest complete capture taken at or after a
not-before time, waiting (bounded) for one and asking the camera for it meanwhile (the
simulator captures on request: ``camera/capture_request``); it never returns an older one.
Messages are kept raw; decoding them is
:func:`agentic_grasp.ros.conversions.images.rgbd_frame_from_msgs`.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import numpy as np

from builtin_interfaces.msg import Time
from sensor_msgs.msg import CameraInfo, Image

from agentic_grasp.core.camera import look_at
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.types import ObjectInstance

#: Captures kept for pairing by stamp (a capture per world change, re-sent at 2 Hz).
FRAME_HISTORY = 4
#: While waiting for a capture, the camera is asked again this often (s): a request sent
#: before DDS matched the camera's subscription is lost, and a capture may be in flight.
REQUEST_INTERVAL_S = 0.2


def stamp_ns(stamp: Time) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _seconds(stamp: Time) -> float:
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def ns_to_time(ns: int) -> Time:
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


@dataclass
class Truth:
    """The ground truth of one capture (None objects: an invalid message, ``problem`` why)."""

    stamp_ns: int
    world_version: int
    objects: Optional[List[ObjectInstance]]
    problem: str = ""
    trial_seed: int = 0


@dataclass
class Capture:
    """One complete capture: its messages, stamp and (with ground truth) its world version."""

    rgb: Image
    depth: Image
    info: CameraInfo
    truth: Optional[Truth]
    frame: Any = None                        # its decoded RgbdFrame, once decoded

    @property
    def stamp_ns(self) -> int:
        return stamp_ns(self.rgb.header.stamp)

    @property
    def world_version(self) -> int:
        return self.truth.world_version if self.truth is not None else 0


def _add(history: Deque[Any], item: Any, ns: int, key: Callable[[Any], int]) -> None:
    """Keep ``history`` in stamp order, one entry per stamp (a re-send replaces its copy)."""
    for i, old in enumerate(history):
        if key(old) == ns:
            history[i] = item
            return
    if history and ns < key(history[-1]):
        return                               # older than what we have: a stale re-send
    history.append(item)


def _settled(nearest_ns: int, newest_ns: int, t_rgb: int) -> bool:
    """Whether the message nearest a colour image's stamp can still be beaten by one to come.

    A topic delivers in stamp order (``_add`` drops older re-sends), so once it has sent a
    message stamped at or after the colour image, no later one is nearer: the pairing is
    settled. Before that, the nearest is an earlier message within the skew, possibly of
    another world instant (the simulator sends a capture per world change, which can be
    closer together than the skew), while the capture's own depth or truth is still on
    its way: read with it, the colour image would be answered with the old world's truth.
    """
    return nearest_ns == t_rgb or newest_ns >= t_rgb


class FrameStore:
    """The last few colour, depth and ground-truth messages and the last CameraInfo.

    Thread-safe; pairing by stamp happens when a capture is asked for, and decoding later:
    the camera sends frames far more often than perception is asked.
    """

    def __init__(self, max_skew_s: float, history: int = FRAME_HISTORY) -> None:
        self.max_skew_s = max_skew_s
        self._rgb: Deque[Image] = deque(maxlen=history)
        self._depth: Deque[Image] = deque(maxlen=history)
        self._truth: Deque[Truth] = deque(maxlen=history)
        self._info: Optional[CameraInfo] = None
        #: capture stamp -> (instant up to which it still shows the world, its world version)
        self._current: Dict[int, Tuple[int, int]] = {}
        self._history = history
        self._cond = threading.Condition()
        #: messages heard so far: colour images and CaptureCurrent (a wait's error says how
        #: many came while it waited, so a silent camera and a lost answer tell apart)
        self._heard = {"rgb": 0, "current": 0}

    def add_rgb(self, msg: Image) -> None:
        with self._cond:
            _add(self._rgb, msg, stamp_ns(msg.header.stamp), lambda m: stamp_ns(m.header.stamp))
            self._heard["rgb"] += 1
            self._cond.notify_all()

    def add_depth(self, msg: Image) -> None:
        with self._cond:
            _add(self._depth, msg, stamp_ns(msg.header.stamp),
                 lambda m: stamp_ns(m.header.stamp))
            self._cond.notify_all()

    def set_info(self, msg: CameraInfo) -> None:
        with self._cond:
            self._info = msg
            self._cond.notify_all()

    def add_truth(self, truth: Truth) -> None:
        with self._cond:
            _add(self._truth, truth, truth.stamp_ns, lambda t: t.stamp_ns)
            self._cond.notify_all()

    def add_current(self, capture_ns: int, current_at_ns: int, world_version: int) -> None:
        """The camera says the capture at ``capture_ns`` (world ``world_version``) still
        showed the world at ``current_at_ns``."""
        with self._cond:
            self._heard["current"] += 1
            at, _ = self._current.get(capture_ns, (capture_ns, world_version))
            self._current[capture_ns] = (max(at, current_at_ns), world_version)
            while len(self._current) > 2 * self._history:     # the oldest captures go
                del self._current[min(self._current)]
            self._cond.notify_all()

    @property
    def condition(self) -> threading.Condition:
        """Notified on every message; wait on it to see a frame arrive."""
        return self._cond

    def newest_rgb_stamp(self) -> Optional[float]:
        """Stamp (s) of the newest colour image, None before the first one."""
        with self._cond:
            return _seconds(self._rgb[-1].header.stamp) if self._rgb else None

    def newest_truth(self) -> Optional[Truth]:
        with self._cond:
            return self._truth[-1] if self._truth else None

    def find(self, topics: Tuple[str, str, str], not_before_ns: int = 0,
             truth_topic: str = "") -> Tuple[Optional[Capture], str]:
        """(capture, "") for the newest complete capture at or after ``not_before_ns``, else
        (None, why not). ``truth_topic`` non-empty: the capture needs its ground truth."""
        rgb_topic, depth_topic, info_topic = topics
        skew_ns = int(self.max_skew_s * 1e9)
        with self._cond:
            rgbs, depths, info = list(self._rgb), list(self._depth), self._info
            truths, current = list(self._truth), dict(self._current)
        if not rgbs:
            return None, f"no camera frame yet on {rgb_topic}"
        if not depths:
            return None, f"no depth image yet on {depth_topic}"
        if info is None:
            return None, f"no camera_info yet on {info_topic}"

        def shows_world_at(rgb: Image) -> int:
            """The latest instant the capture is known to show the world at."""
            ns = stamp_ns(rgb.header.stamp)
            return max(ns, current.get(ns, (ns, 0))[0])

        fresh = [m for m in rgbs if shows_world_at(m) >= not_before_ns]
        if not fresh:
            return None, (f"no camera frame taken at or after {not_before_ns * 1e-9:.3f} s on "
                          f"{rgb_topic} (newest {_seconds(rgbs[-1].header.stamp):.3f} s)")
        why = ""
        for rgb in reversed(fresh):
            t_rgb = stamp_ns(rgb.header.stamp)
            depth = min(depths, key=lambda d: abs(stamp_ns(d.header.stamp) - t_rgb))
            if abs(stamp_ns(depth.header.stamp) - t_rgb) > skew_ns:
                why = why or (f"no depth image within max_frame_skew_s={self.max_skew_s:g} s "
                              f"of a colour image (newest colour "
                              f"{_seconds(rgbs[-1].header.stamp):.3f} s, newest depth "
                              f"{_seconds(depths[-1].header.stamp):.3f} s)")
                continue
            if not _settled(stamp_ns(depth.header.stamp), stamp_ns(depths[-1].header.stamp),
                            t_rgb):
                why = why or (f"the depth image of the capture at {t_rgb * 1e-9:.3f} s has "
                              f"not come yet (newest depth "
                              f"{_seconds(depths[-1].header.stamp):.3f} s)")
                continue
            truth = None
            if truth_topic:
                truth = min(truths, key=lambda t: abs(t.stamp_ns - t_rgb), default=None)
                if truth is None:
                    why = why or f"no ground truth yet on {truth_topic}"
                    continue
                if abs(truth.stamp_ns - t_rgb) > skew_ns:
                    why = why or (f"no ground truth on {truth_topic} for the capture at "
                                  f"{t_rgb * 1e-9:.3f} s (newest truth at "
                                  f"{truths[-1].stamp_ns * 1e-9:.3f} s, world version "
                                  f"{truths[-1].world_version})")
                    continue
                if not _settled(truth.stamp_ns, truths[-1].stamp_ns, t_rgb):
                    why = why or (f"the ground truth of the capture at {t_rgb * 1e-9:.3f} s "
                                  f"has not come yet on {truth_topic} (newest truth at "
                                  f"{truths[-1].stamp_ns * 1e-9:.3f} s)")
                    continue
                if truth.objects is None:
                    return None, truth.problem or f"ground truth on {truth_topic} is invalid"
                if t_rgb < not_before_ns and truth.world_version != current[t_rgb][1]:
                    why = why or (f"the capture at {t_rgb * 1e-9:.3f} s was declared current "
                                  f"for world version {current[t_rgb][1]}, its ground truth "
                                  f"shows {truth.world_version}")
                    continue
            return Capture(rgb, depth, info, truth), ""
        return None, why

    def wait_capture(self, topics: Tuple[str, str, str], not_before_ns: int, timeout_s: float,
                     truth_topic: str = "", request: Optional[Callable[[int], None]] = None
                     ) -> Tuple[Optional[Capture], str]:
        """:meth:`find`, waiting up to ``timeout_s`` for a capture at or after
        ``not_before_ns``; ``request(not_before_ns)`` asks the camera for one (at once and
        every REQUEST_INTERVAL_S while none has come). On timeout the last reason, with the
        time waited."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        asked, requests = -1.0, 0
        with self._cond:
            heard = dict(self._heard)
        while True:
            capture, why = self.find(topics, not_before_ns, truth_topic)
            now = time.monotonic()
            if capture is not None or now >= deadline:
                break
            if request is not None and now - asked >= REQUEST_INTERVAL_S:
                request(not_before_ns)
                asked, requests = now, requests + 1
            with self._cond:
                self._cond.wait(min(deadline - now, REQUEST_INTERVAL_S))
        if capture is None and timeout_s > 0.0:
            with self._cond:
                rgbs, currents = (self._heard[k] - heard[k] for k in ("rgb", "current"))
            asks = f"; asked {requests} times" if request is not None else ""
            why = (f"{why} (waited {timeout_s:.2f} s{asks}; heard {rgbs} colour images and "
                   f"{currents} capture_current meanwhile)")
        return capture, why


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


__all__ = ["FRAME_HISTORY", "REQUEST_INTERVAL_S", "Capture", "FrameStore", "Truth",
           "camera_pose", "ns_to_time", "stamp_ns"]
