"""Perception node: serves ``perceive`` (Perceive.srv) on the latest RGB-D frame.

Per request: latest camera frame (message) -> numpy images and a core Camera -> the
configured backend (Qwen3-VL through vLLM, the simulated VLM, or the simulator's ground
truth) -> a
PerceptionResult message, returned and published latched on ``perception/result``. The
perception itself lives in agentic_grasp.core.perception; this node converts and keeps
serving whatever happens.

Topics (relative names; remap them for another camera):

- in: ``camera/color/image_raw`` (rgb8, bgr8, rgba8, bgra8 or mono8),
  ``camera/depth/image_raw`` (32FC1 metres or 16UC1 millimetres, registered to the colour
  camera: same size), ``camera/color/camera_info`` (intrinsics), all latched; with the
  oracle and vlm_sim backends also ``sim/ground_truth`` (SceneGraph, latched): the oracle
  answers from it, vlm_sim renders the frame's object-id mask from it (the stand-in for a
  VLM's implicit segmentation; it reads labels, never poses, from the message);
- out: ``perception/result`` (PerceptionResult, latched: the last answer) and
  ``perception/target_crop`` (rgb8 Image, latched): the camera frame cropped at the
  perceived target's box (square, padded, ``target_crop_px`` a side, cut as the knowledge
  base's crops are), header.frame_id = the target's id, stamp = the frame's. The planner
  sends it to retrieve_strategies as the visual query (s_vis of HAA-RAG).

Frames: colour and depth are paired by stamp within ``max_frame_skew_s``
(agentic_grasp.perception_inputs). Intrinsics come from CameraInfo. The extrinsic
pose T_world_cam comes from ``camera.eye`` / ``camera.target`` (the simulator's fixed
camera, as in Camera.from_config); on a real robot it would be looked up in TF (world ->
the CameraInfo frame) at the image stamp, which this node does not do yet.

Failures never take the node down and never raise into the executor: no frame yet, no
ground truth yet, an empty instruction, an undecodable image, a backend error or an
unreachable VLM all come back as a result with ``error`` set (and are published like any
other result). Backend parameters are read once at start-up; a bad one (ConfigError) stops
the node there, with the reason.

Re-perception (vlm and vlm_sim, ``reperception.enabled``): a request whose instruction was
answered before is served from that answer, located again in the fresh depth image, unless
the depth changed around the target (core/perception/reperception.py); ``requests`` = 0 in
the result says so.

Concurrency: the service runs in its own mutually exclusive callback group, the camera and
ground-truth subscriptions in another, under a MultiThreadedExecutor, so a VLM call of
several seconds never delays the frames it will be given next. Perception requests are
served one at a time (one GPU; the oracle's noise RNG is not thread-safe). A VLM request
can take up to ``VlmConfig.call_budget_s()`` (``max_attempts * timeout_s`` plus backoff delays,
twice that when the answer needs its one repair; logged at start-up); clients set their
timeouts accordingly.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from agentic_grasp import qos
from agentic_grasp.conversions import (RgbdFrame, perception_result_to_msg, rgb_to_msg,
                                       rgbd_frame_from_msgs, scene_objects_from_msg)
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.perception import (BACKENDS, DepthConfig, OracleConfig,
                                           PerceptionBackend, PerceptionResult, VlmConfig,
                                           create_backend)
from agentic_grasp.core.perception.oracle import DEFAULT_CONFUSION_MAP
from agentic_grasp.core.perception.reperception import (ReperceivingPerception,
                                                        ReperceptionConfig)
from agentic_grasp.core.perception.vlm_client import DEFAULT_FRAGILITY_PRIORS
from agentic_grasp.core.perception.vlm_sim import VlmLatencyModel, VlmSimConfig
from agentic_grasp.core.render import crop_box, render_view
from agentic_grasp.core.types import ObjectInstance
from agentic_grasp.perception_inputs import FrameStore, GroundTruthStore, camera_pose
from agentic_grasp.nodes.runner import spin_node
from agentic_grasp.params import declare, declare_fields, declare_map, warn_undeclared
from agentic_grasp_interfaces.msg import PerceptionResult as PerceptionResultMsg
from agentic_grasp_interfaces.msg import SceneGraph as SceneGraphMsg
from agentic_grasp_interfaces.srv import Perceive

NODE_NAME = "perception"
RGB_TOPIC = "camera/color/image_raw"
DEPTH_TOPIC = "camera/depth/image_raw"
INFO_TOPIC = "camera/color/camera_info"
TRUTH_TOPIC = "sim/ground_truth"
RESULT_TOPIC = "perception/result"
CROP_TOPIC = "perception/target_crop"
SERVICE = "perceive"

FRAGILITY_PREFIX = "vlm.fragility_priors."
CONFUSION_PREFIX = "oracle.confusion_map."
SIM_CONFUSION_PREFIX = "vlm_sim.confusion_map."
#: Parameter namespaces of this node; an override under them that is not declared is a typo.
_OWN_PREFIXES = ("vlm.", "depth.", "oracle.", "camera.", "vlm_sim.", "reperception.")


class PerceptionNode(Node):
    """Serves ``perceive`` with the backend named by the ``backend`` parameter."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        backend_kind = str(declare(self, "backend", "vlm_sim",
                                   "Perception backend: vlm_sim (the simulated VLM, from "
                                   "pixels; default), vlm (Qwen3-VL served by vLLM at "
                                   "vlm.url) or oracle (simulator ground truth plus "
                                   "configured noise, only when asked)")).strip().lower()
        self.world_frame = declare(self, "world_frame", "world",
                                   "Frame of the perceived poses (panda_link0 world)")
        skew = float(declare(self, "max_frame_skew_s", 0.05,
                             "Largest stamp difference between the colour and the depth "
                             "image used together (s)"))
        self.crop_px = int(declare(self, "target_crop_px", 64,
                                   "Side of the target crop published for the visual query "
                                   "(px; = retrieval embedding.crop_size_px)"))
        if self.crop_px < 8:
            raise ConfigError(f"target_crop_px must be >= 8, got {self.crop_px}")
        eye = declare(self, "camera.eye", [1.15, 0.0, 0.75],
                      "Camera position in world (m); with camera.target it gives T_world_cam "
                      "(a real robot would read it from TF)")
        target = declare(self, "camera.target", [0.5, 0.0, 0.0],
                         "Point in world the camera looks at (m)")
        params = self._declare_backend_params(backend_kind)
        warn_undeclared(self, "perception", _OWN_PREFIXES)

        if backend_kind not in BACKENDS:
            raise ConfigError(f"parameter backend must be one of {', '.join(BACKENDS)}, "
                              f"got {backend_kind!r}")
        if skew < 0.0:
            raise ConfigError(f"max_frame_skew_s must be >= 0, got {skew}")
        self.T_world_cam = camera_pose(eye, target)
        self._warned_distortion = False
        self.frames = FrameStore(skew)
        self.truth = GroundTruthStore(self.frames.condition)
        self.backend: PerceptionBackend = create_backend(
            params, ground_truth_provider=self.truth.objects,
            segmentation_provider=self._segmentation)
        reperception = ReperceptionConfig.from_params(params["reperception"])
        #: What serves requests: the backend, behind the re-perception policy for a VLM.
        self.serving: PerceptionBackend = self.backend
        if self.backend.name in ("vlm", "vlm_sim") and reperception.enabled:
            self.serving = ReperceivingPerception(self.backend, reperception)

        sensors = MutuallyExclusiveCallbackGroup()
        self._subs = [
            self.create_subscription(Image, RGB_TOPIC, self.frames.add_rgb, qos.LATCHED,
                                     callback_group=sensors),
            self.create_subscription(Image, DEPTH_TOPIC, self.frames.add_depth, qos.LATCHED,
                                     callback_group=sensors),
            self.create_subscription(CameraInfo, INFO_TOPIC, self._on_info,
                                     qos.LATCHED, callback_group=sensors),
        ]
        self._topics = tuple(sub.topic_name for sub in self._subs)
        if self.backend.name in ("oracle", "vlm_sim"):
            truth_sub = self.create_subscription(SceneGraphMsg, TRUTH_TOPIC, self._on_truth,
                                                 qos.LATCHED, callback_group=sensors)
            self.truth.topic = truth_sub.topic_name
        self.pub_result = self.create_publisher(PerceptionResultMsg, RESULT_TOPIC, qos.LATCHED)
        self.pub_crop = self.create_publisher(Image, CROP_TOPIC, qos.LATCHED)
        self.create_service(Perceive, SERVICE, self._on_perceive,
                            callback_group=MutuallyExclusiveCallbackGroup())
        detail = ""
        if isinstance(self.backend.config, VlmConfig):
            detail = (f" at {self.backend.config.url}; one call takes up to "
                      f"{self.backend.config.call_budget_s():.1f} s")
        self.get_logger().info(f"perception ready (backend: {self.backend.name}{detail})")
        if self.backend.name == "oracle":       # never silently: ground truth was asked for
            self.get_logger().warning("oracle perception, as asked: every answer is simulator "
                                      "ground truth, not what the camera shows")

    # ---- parameters ---------------------------------------------------------------------------
    def _declare_backend_params(self, backend_kind: str) -> Dict[str, Any]:
        """Declare every vlm.*, depth.* and oracle.* parameter; their values, nested."""
        # Descriptions (and the fields that are parameters) come from the configs' metadata.
        vlm = declare_fields(self, "vlm", VlmConfig)      # scalars; maps and depth below
        vlm["fragility_priors"] = declare_map(
            self, FRAGILITY_PREFIX, DEFAULT_FRAGILITY_PRIORS,
            "Fragility prior of category '{}' in [0, 1] (Table I), used when the model's "
            "value is unusable")
        depth = declare_fields(self, "depth", DepthConfig, fallback=(
            "Depth geometry parameter '{name}' (see DepthConfig in core/perception/depth.py)"))
        oracle = {"seed": declare(self, "oracle.seed", 0, "Seed of the oracle's noise")}
        oracle.update(declare_fields(self, "oracle", OracleConfig))
        oracle["confusion_map"] = declare_map(
            self, CONFUSION_PREFIX, DEFAULT_CONFUSION_MAP,
            "Categories the oracle may report instead of '{}' (string list)")
        vlm_sim = declare_fields(self, "vlm_sim", VlmSimConfig)
        vlm_sim["latency"] = declare_fields(self, "vlm_sim.latency", VlmLatencyModel)
        vlm_sim["confusion_map"] = declare_map(
            self, SIM_CONFUSION_PREFIX, DEFAULT_CONFUSION_MAP,
            "Categories the simulated VLM may report instead of '{}' (string list)")
        reperception = declare_fields(self, "reperception", ReperceptionConfig)
        return {"backend": backend_kind, "vlm": vlm, "depth": depth, "oracle": oracle,
                "vlm_sim": vlm_sim, "reperception": reperception}

    # ---- inputs -------------------------------------------------------------------------------
    def _on_info(self, msg: CameraInfo) -> None:
        if not self._warned_distortion and any(abs(float(v)) > 0.0 for v in msg.d):
            self._warned_distortion = True
            self.get_logger().warning("camera_info has non-zero distortion, which perception "
                                      "ignores; feed it rectified images (image_proc)")
        self.frames.set_info(msg)

    def _on_truth(self, msg: SceneGraphMsg) -> None:
        # An invalid update clears the truth rather than keep the previous scene: the oracle
        # must not answer about objects that may have moved since.
        try:
            objects: Optional[List[ObjectInstance]] = scene_objects_from_msg(msg)
            problem = ""
        except ValidationError as exc:
            objects, problem = None, f"ground truth on {self.truth.topic} is invalid: {exc}"
            self.get_logger().warning(problem)
        if msg.source and msg.source != "simulator_ground_truth":
            self.get_logger().warning(f"ground truth from source {msg.source!r}; the oracle "
                                      "expects 'simulator_ground_truth'")
        self.truth.set(objects, problem)

    def _segmentation(self, camera: Camera):
        """vlm_sim's view of the frame: the object-id mask rendered from the latest ground
        truth with the frame's camera, and the objects' labels."""
        objects = self.truth.objects()
        return render_view(objects, camera).instance, objects

    def inputs_problem(self) -> str:
        """Why a perception call cannot run now ("" when it can)."""
        _, problem = self.frames.latest_messages(self._topics)
        if problem:
            return problem
        if self.backend.name in ("oracle", "vlm_sim"):
            return self.truth.problem()
        return ""

    def wait_for_inputs(self, timeout_s: float) -> bool:
        """Block until a frame (and, for the oracle, ground truth) is in; for in-process users.

        The service itself never waits: without inputs it answers with an error at once.
        """
        with self.frames.condition:
            return self.frames.condition.wait_for(lambda: not self.inputs_problem(),
                                                  timeout=timeout_s)

    # ---- service ------------------------------------------------------------------------------
    def _on_perceive(self, request: Perceive.Request, response: Perceive.Response
                     ) -> Perceive.Response:
        instruction = request.instruction.strip()
        header = Header(stamp=self.get_clock().now().to_msg(), frame_id=self.world_frame)
        started = time.perf_counter()
        result = self._perceive(instruction, header)
        msg = perception_result_to_msg(result, instruction, header)
        self.pub_result.publish(msg)
        response.result = msg
        line = f"perceive {instruction!r}: {result.summary()}"
        if result.ok:
            self.get_logger().info(line)
        else:
            self.get_logger().warning(line)
        self.get_logger().debug(f"raw answer: {result.raw!r}; service time "
                                f"{time.perf_counter() - started:.3f} s")
        return response

    def _perceive(self, instruction: str, header: Header) -> PerceptionResult:
        """Run the backend on the latest frame; every failure becomes an error result."""
        name = self.backend.name
        if not instruction:
            return PerceptionResult.failure(name, "empty instruction: say what to perceive")
        messages, problem = self.frames.latest_messages(self._topics)
        if messages is None:
            return PerceptionResult.failure(name, problem)
        if name in ("oracle", "vlm_sim"):
            problem = self.inputs_problem()
            if problem:
                return PerceptionResult.failure(name, problem)
        try:
            frame = rgbd_frame_from_msgs(*messages, self.T_world_cam)
        except ValidationError as exc:
            return PerceptionResult.failure(name, f"bad camera frame: {exc}")
        header.stamp = frame.stamp
        start = time.perf_counter()
        try:
            result = self.serving.perceive(frame.rgb, frame.depth, frame.camera, instruction)
            self._publish_crop(result, frame)
            return result
        except Exception as exc:  # noqa: BLE001 - the contract says never; the node survives
            self.get_logger().error(f"{name} backend raised: {exc!r}")
            return PerceptionResult.failure(name, f"perception failed: {type(exc).__name__}: "
                                                  f"{exc}", latency_s=time.perf_counter() - start)


    def _publish_crop(self, result: PerceptionResult, frame: RgbdFrame) -> None:
        """The camera crop at the perceived target's box (nothing without a box)."""
        target = result.target
        if target is None or target.bbox is None or frame.rgb.shape[:2] != frame.depth.shape:
            return
        crop = crop_box(frame.rgb, target.bbox, size=self.crop_px)
        header = Header(stamp=frame.stamp, frame_id=target.id)
        self.pub_crop.publish(rgb_to_msg(crop, header))


def main(args=None) -> None:
    spin_node(PerceptionNode, num_threads=4, args=args)


if __name__ == "__main__":
    main()
