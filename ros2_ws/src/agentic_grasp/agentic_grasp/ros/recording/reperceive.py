"""``--recompute perception``: today's perception backend on the recorded camera frames.

Each recorded perception answer names the capture it was computed from (``capture_stamp``);
the bag holds that capture (colour, depth, camera info and, for the simulator, its ground
truth, on the fixed camera's or the wrist camera's topics). Replay gives it to a perception
backend built as the perception node builds it (config/perception.yaml: ``create_backend``,
behind the re-perception policy for a VLM), with the node's per-goal state: re-perception
starts afresh at each goal and the simulated VLM restarts its noise from the capture's trial
seed at the goal's first call (ros/perception/node.py). The answer goes through the
message the node would send, serialized and read back, so the planner gets what it would
have got live.

What cannot be recomputed is said, never guessed: a capture the bag lacks, and the real VLM
(``backend: vlm``: a served model's answer is not reproducible offline) are divergences.
"""
from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from builtin_interfaces.msg import Time
from std_msgs.msg import Header

from agentic_grasp.ros.recording import codec
from agentic_grasp.ros.recording.compare import Divergence, Exchanges, data_diff
from agentic_grasp.core.camera import fixed_camera_spec
from agentic_grasp.core.perception import create_backend, load_params
from agentic_grasp.core.perception.config import ReperceptionConfig
from agentic_grasp.core.perception.reperception import ReperceivingPerception
from agentic_grasp.core.render.views import render_view
from agentic_grasp.ros.conversions.images import rgbd_frame_from_msgs
from agentic_grasp.ros.conversions.perception import perception_result_to_msg
from agentic_grasp.ros.conversions.scene import scene_objects_from_msg
from agentic_grasp.ros.conversions.wrist_view import pose_to_msg
from agentic_grasp.ros.perception.inputs import camera_pose
from agentic_grasp.ros.recording.bag.reader import BagReader
from agentic_grasp_interfaces.srv import Perceive

#: (colour, depth, camera info, ground truth) topics of each camera, as the node reads them.
CAMERAS = {"fixed": ("/camera/color/image_raw", "/camera/depth/image_raw",
                     "/camera/color/camera_info", "/sim/ground_truth"),
           "wrist": ("/wrist_camera/color/image_raw", "/wrist_camera/depth/image_raw",
                     "/wrist_camera/color/camera_info", "/wrist_camera/ground_truth")}
#: The node's ``max_frame_skew_s`` default: depth and truth paired with a colour image.
SKEW_NS = 50_000_000


def _ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


class RecordedFrames:
    """The bag's camera messages by stamp (read once, when first needed)."""

    def __init__(self, path: Union[str, Path]) -> None:
        self._path = path
        self._by: Optional[Dict[str, List[Tuple[int, Any]]]] = None

    def _load(self) -> Dict[str, List[Tuple[int, Any]]]:
        if self._by is None:
            topics = [t for cam in CAMERAS.values() for t in cam]
            by = BagReader(self._path).by_topic(topics)
            self._by = {t: sorted(((_ns(m.header.stamp), m) for _, m in by.get(t, [])),
                                  key=lambda x: x[0]) for t in topics}
        return self._by

    def _near(self, topic: str, ns: int, exact: bool = False) -> Any:
        items = self._load()[topic]
        if not items:
            return None
        stamps = [s for s, _ in items]
        i = bisect.bisect_left(stamps, ns)
        near = min((j for j in (i - 1, i) if 0 <= j < len(items)),
                   key=lambda j: abs(stamps[j] - ns))
        gap = abs(stamps[near] - ns)
        return items[near][1] if (gap == 0 if exact else gap <= SKEW_NS) else None

    def capture(self, camera: str, capture_ns: int) -> Tuple[Any, Any, Any, Any]:
        """(rgb, depth, info, truth) of the capture at ``capture_ns`` (None where missing)."""
        rgb_t, depth_t, info_t, truth_t = CAMERAS[camera]
        info = self._near(info_t, capture_ns)
        if info is None:                            # camera_info: the latest before it
            before = [m for s, m in self._load()[info_t] if s <= capture_ns]
            info = before[-1] if before else None
        return (self._near(rgb_t, capture_ns, exact=True), self._near(depth_t, capture_ns),
                info, self._near(truth_t, capture_ns))


class RecomputedPerception:
    """PerceptionService.perceive recomputed on the recorded capture of each answer (module
    docstring); one per goal, as the node's per-goal state."""

    def __init__(self, exchanges: Exchanges, frames: RecordedFrames,
                 params: Optional[Mapping[str, Any]] = None) -> None:
        self._ex, self._frames = exchanges, frames
        params = dict(params if params is not None else load_params())
        self._truth: Any = None
        self.backend = create_backend(params, ground_truth_provider=self._truth_objects,
                                      segmentation_provider=self._segmentation)
        self.serving = self.backend
        reperception = ReperceptionConfig.from_params(params.get("reperception"))
        if self.backend.name in ("vlm", "vlm_sim") and reperception.enabled:
            self.serving = ReperceivingPerception(self.backend, reperception)
        self._first = True

    def _truth_objects(self) -> List[Any]:
        if self._truth is None:
            raise RuntimeError("no ground truth recorded for this capture")
        return [o.copy() for o in self._truth]

    def _segmentation(self, camera: Any) -> Any:
        objects = self._truth_objects()
        return render_view(objects, camera).instance, objects

    def perceive(self, instruction: str, signal: Any = None, not_before: Any = None,
                 goal_id: str = "", camera: Any = None) -> Any:
        # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
        from agentic_grasp.ros.planner.peers.perception import perception_answer

        which = "wrist" if camera is not None else "fixed"
        mine: Dict[str, Any] = {"instruction": instruction, "camera": which}
        if camera is not None:
            mine["camera_pose"] = codec.msg_to_data(pose_to_msg(camera.T_world_cam))

        def compare(doc: Mapping[str, Any]) -> Dict[str, Any]:
            return data_diff(mine, {k: doc["request"].get(k) for k in mine})

        doc = self._ex.take("perceive", compare)        # the world as recorded, its capture
        if self.backend.name == "vlm":
            raise Divergence("perceive", self._ex.attempts, "the real VLM's answer cannot be "
                             "recomputed offline (a served model's sampling)")
        stamp = doc["response"]["result"]["capture_stamp"]
        capture_ns = int(stamp["sec"]) * 1_000_000_000 + int(stamp["nanosec"])
        rgb, depth, info, truth = self._frames.capture(which, capture_ns)
        if capture_ns == 0 or rgb is None or depth is None or info is None:
            raise Divergence("perceive", self._ex.attempts, "the recorded capture "
                             f"({capture_ns} ns, {which} camera) is not in the bag")
        T = (camera.T_world_cam if camera is not None else
             camera_pose(fixed_camera_spec()["eye"], fixed_camera_spec()["target"]))
        frame = rgbd_frame_from_msgs(rgb, depth, info, T)
        self._truth = scene_objects_from_msg(truth) if truth is not None else None
        if self._first and truth is not None and hasattr(self.backend, "reseed"):
            self.backend.reseed(int(truth.trial_seed))
        self._first = False
        serving = self.serving if camera is None else self.backend
        result = serving.perceive(frame.rgb, frame.depth, frame.camera, instruction)
        return perception_answer(_as_received(result, instruction, rgb,
                                              int(truth.world_version) if truth else 0))


def _as_received(result: Any, instruction: str, rgb: Any, world_version: int) -> Any:
    """The Perceive response the node would send for ``result``, serialized and read back
    (float32 fields rounded as on the wire)."""
    # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
    from rclpy.serialization import deserialize_message, serialize_message


    stamp = Time(sec=int(rgb.header.stamp.sec), nanosec=int(rgb.header.stamp.nanosec))
    msg = perception_result_to_msg(result, instruction, Header(stamp=stamp, frame_id="world"))
    msg.capture_stamp = stamp
    msg.world_version = world_version
    response = Perceive.Response(result=msg)
    return deserialize_message(serialize_message(response), Perceive.Response)


__all__ = ["RecomputedPerception", "RecordedFrames"]
