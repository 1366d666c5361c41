"""One camera as the perception node sees it: its topics, its captures, its capture requests.

The node keeps a feed per camera (the fixed scene camera under ``camera/``, the wrist camera
under ``wrist_camera/``) and answers a Perceive request from the one it names, so a capture
of one camera is never perceived as the other's. Each feed pairs its own colour, depth,
camera_info and (for vlm_sim and the oracle) ground truth by stamp (inputs.py), and
asks its own camera for a capture at or after a time on ``<prefix>/capture_request``. A
camera whose world has not changed since its last capture may answer on
``<prefix>/capture_current`` (CaptureCurrent) that the capture still shows the world, which
then counts as taken at that instant (FrameStore.add_current).
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from builtin_interfaces.msg import Time
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from agentic_grasp.ros.common import qos
from agentic_grasp.ros.conversions.scene import scene_objects_from_msg
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.types import ObjectInstance
from agentic_grasp.ros.perception.inputs import Capture, FrameStore, Truth, ns_to_time, stamp_ns
from agentic_grasp_interfaces.msg import CaptureCurrent
from agentic_grasp_interfaces.msg import SceneGraph as SceneGraphMsg


class CameraFeed:
    """``<prefix>/color/image_raw``, ``<prefix>/depth/image_raw``,
    ``<prefix>/color/camera_info`` and ``truth_topic`` ("" = none needed) into a FrameStore.

    ``warn`` logs a problem once per kind (distortion, a bad or foreign ground truth).
    """

    def __init__(self, node: Node, prefix: str, truth_topic: str, max_skew_s: float,
                 group: Any, warn: Callable[[str], None]) -> None:
        self._node, self._warn = node, warn
        self.frames = FrameStore(max_skew_s)
        self._warned_distortion = False
        subs = [node.create_subscription(Image, f"{prefix}/color/image_raw",
                                         self.frames.add_rgb, qos.LATCHED, callback_group=group),
                node.create_subscription(Image, f"{prefix}/depth/image_raw",
                                         self.frames.add_depth, qos.LATCHED,
                                         callback_group=group),
                node.create_subscription(CameraInfo, f"{prefix}/color/camera_info",
                                         self._on_info, qos.LATCHED, callback_group=group)]
        self.topics: Tuple[str, str, str] = tuple(s.topic_name for s in subs)
        self.truth_topic = ""
        if truth_topic:
            truth = node.create_subscription(SceneGraphMsg, truth_topic, self._on_truth,
                                             qos.LATCHED, callback_group=group)
            self.truth_topic = truth.topic_name
        subs.append(node.create_subscription(
            CaptureCurrent, f"{prefix}/capture_current", self._on_current, qos.REQUEST,
            callback_group=group))
        self._subs = subs
        self._pub_request = node.create_publisher(Time, f"{prefix}/capture_request", qos.REQUEST)

    def _on_info(self, msg: CameraInfo) -> None:
        if not self._warned_distortion and any(abs(float(v)) > 0.0 for v in msg.d):
            self._warned_distortion = True
            self._warn(f"{self.topics[2]} has non-zero distortion, which perception ignores; "
                       "feed it rectified images (image_proc)")
        self.frames.set_info(msg)

    def _on_current(self, msg: CaptureCurrent) -> None:
        self.frames.add_current(stamp_ns(msg.capture_stamp), stamp_ns(msg.current_at),
                                int(msg.world_version))

    def _on_truth(self, msg: SceneGraphMsg) -> None:
        # An invalid truth makes its capture unusable: the oracle never answers from another.
        try:
            objects: Optional[List[ObjectInstance]] = scene_objects_from_msg(msg)
            problem = ""
        except ValidationError as exc:
            objects, problem = None, f"ground truth on {self.truth_topic} is invalid: {exc}"
            self._warn(problem)
        if msg.source and msg.source != "simulator_ground_truth":
            self._warn(f"ground truth from source {msg.source!r}; the oracle expects "
                       "'simulator_ground_truth'")
        self.frames.add_truth(Truth(stamp_ns(msg.header.stamp), int(msg.world_version),
                                    objects, problem, int(msg.trial_seed)))

    def problem(self) -> str:
        """Why no capture could be perceived now, at any age ("" when one could)."""
        return self.frames.find(self.topics, 0, self.truth_topic)[1]

    def request(self, not_before_ns: int) -> None:
        if self._node.context.ok():                         # not while shutting down
            self._pub_request.publish(ns_to_time(not_before_ns))

    def wait(self, not_before_ns: int, timeout_s: float) -> Tuple[Optional[Capture], str]:
        """The newest capture at or after ``not_before_ns``, waited for (inputs.py)."""
        return self.frames.wait_capture(self.topics, not_before_ns, timeout_s,
                                        self.truth_topic, self.request)


__all__ = ["CameraFeed"]
