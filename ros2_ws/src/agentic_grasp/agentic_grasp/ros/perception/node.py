"""Perception node: serves ``perceive`` (Perceive.srv) on a fresh RGB-D capture.

Per request: the newest capture taken at or after the request's ``not_before`` (its arrival
when zero), waited for up to ``capture_wait_s`` and asked of the camera meanwhile
(inputs.py) -> numpy images and a core Camera -> the configured backend (Qwen3-VL
through vLLM, the simulated VLM, or the simulator's ground truth) -> a PerceptionResult
message, returned and published latched on ``perception/result``. The perception itself
lives in agentic_grasp.core.perception; this node converts and keeps serving whatever
happens. Parameters: agentic_grasp.ros.perception.params.

Topics (relative names; remap them for another camera):

- in: ``camera/color/image_raw`` (rgb8, bgr8, rgba8, bgra8 or mono8),
  ``camera/depth/image_raw`` (32FC1 metres or 16UC1 millimetres, registered to the colour
  camera: same size), ``camera/color/camera_info`` (intrinsics), all latched; with the
  oracle and vlm_sim backends also ``sim/ground_truth`` (SceneGraph, latched): the oracle
  answers from it, vlm_sim renders the frame's object-id mask from it (the stand-in for a
  VLM's implicit segmentation; it reads labels, never poses, from the message), the truth
  of the capture used (same stamp); ``camera/capture_current`` (CaptureCurrent: the
  simulator's word that a capture still shows the world; inputs.py);
- out: ``camera/capture_request`` (builtin_interfaces/Time: "a capture at or after this,
  please"; the simulator answers it, a real camera streams anyway), ``perception/result``
  (PerceptionResult, latched: the last answer, naming its capture: stamp and world
  version) and ``perception/target_crop`` (rgb8 Image, latched): the capture's colour image
  cropped at the perceived target's box (square, padded, ``target_crop_px`` a side, cut as
  the knowledge base's crops are), header.frame_id = the target's id, stamp = the capture's.
  The same crop travels in the Perceive response, which is where the planner takes it for
  the visual query (s_vis of HAA-RAG): it belongs to that answer, never to an earlier one.

The wrist camera (Perceive ``camera`` = wrist; view behind an occluder): the same
topics under ``wrist_camera/`` (its truth on ``wrist_camera/ground_truth``), kept apart from
the fixed camera's (feeds.py), placed at the request's ``camera_pose`` (the arm's
forward kinematics at the view) and perceived by the backend itself, as in process.

A ``not_before`` further ahead than ``capture_wait_s``, no capture at or after it in time,
or frames whose ground truth does not come in time are error answers saying which.

Frames: colour, depth and ground truth are paired by stamp within ``max_frame_skew_s``
(agentic_grasp.ros.perception.inputs). Intrinsics come from CameraInfo, T_world_cam from
``camera.eye`` / ``camera.target`` (the simulator's fixed camera); on a real robot it would
be looked up in TF at the image stamp, which this node does not do yet. At a goal's first
call vlm_sim restarts its noise from the capture's trial seed (SceneGraph.trial_seed).

Failures never take the node down and never raise into the executor: no capture in time,
an empty instruction, an undecodable image, a backend error or an unreachable VLM all come
back as a result with ``error`` set (and are published like any other result). Parameters
are read once at start-up; a bad one (ConfigError) stops the node there, with the reason.

Re-perception (vlm and vlm_sim, ``reperception.enabled``): a request whose instruction was
answered before in the same goal (Perceive ``goal_id``; another id resets it) is served from
that answer, located again in the fresh depth image, unless the depth changed around the
target (core/perception/reperception.py); ``requests`` = 0 in the result says so.

Concurrency: the service runs in its own mutually exclusive callback group, the camera and
ground-truth subscriptions in another, under a MultiThreadedExecutor, so a VLM call of
several seconds never delays the frames it will be given next. Requests are served one at
a time (one GPU; the oracle's noise RNG is not thread-safe). A VLM request can take up to
``capture_wait_s`` + ``VlmConfig.call_budget_s()`` (``max_attempts * timeout_s`` plus
backoff, twice that with its one repair; logged at start-up); clients time out above it.
"""
from __future__ import annotations

import time
from typing import Any, List, Optional

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from agentic_grasp.ros.common import qos
from agentic_grasp.ros.conversions.images import RgbdFrame, rgb_to_msg, rgbd_frame_from_msgs
from agentic_grasp.ros.conversions.perception import perception_result_to_msg
from agentic_grasp.core.camera import Camera, fixed_camera_spec
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.perception import (BACKENDS, PerceptionBackend, PerceptionResult,
                                           VlmConfig, create_backend)
from agentic_grasp.core.perception.reperception import ReperceivingPerception
from agentic_grasp.core.perception.config import ReperceptionConfig
from agentic_grasp.core.render.crops import crop_box
from agentic_grasp.core.render.views import render_view
from agentic_grasp.core.types import ObjectInstance
from agentic_grasp.ros.conversions.wrist_view import pose_from_msg
from agentic_grasp.ros.perception.feeds import CameraFeed
from agentic_grasp.ros.perception.inputs import Capture, Truth, camera_pose, stamp_ns
from agentic_grasp.ros.common.runner import spin_node
from agentic_grasp.ros.common.params import declare, warn_undeclared
from agentic_grasp.ros.perception.params import declare_backend_params, declare_capture_wait
from agentic_grasp_interfaces.msg import PerceptionResult as PerceptionResultMsg
from agentic_grasp_interfaces.srv import Perceive

NODE_NAME = "perception"
RGB_TOPIC = "camera/color/image_raw"
DEPTH_TOPIC = "camera/depth/image_raw"
INFO_TOPIC = "camera/color/camera_info"
TRUTH_TOPIC = "sim/ground_truth"
RESULT_TOPIC = "perception/result"
CROP_TOPIC = "perception/target_crop"
WRIST_PREFIX = "wrist_camera"
SERVICE = "perceive"

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
        self.capture_wait_s = declare_capture_wait(self)
        self.crop_px = int(declare(self, "target_crop_px", 64,
                                   "Side of the target crop published for the visual query "
                                   "(px; = retrieval embedding.crop_size_px)"))
        if self.crop_px < 8:
            raise ConfigError(f"target_crop_px must be >= 8, got {self.crop_px}")
        eye = declare(self, "camera.eye", fixed_camera_spec()["eye"],
                      "Camera position in world (m); with camera.target it gives T_world_cam "
                      "(a real robot would read it from TF)")
        target = declare(self, "camera.target", fixed_camera_spec()["target"],
                         "Point in world the camera looks at (m)")
        params = declare_backend_params(self, backend_kind)
        warn_undeclared(self, "perception", _OWN_PREFIXES)

        if backend_kind not in BACKENDS:
            raise ConfigError(f"parameter backend must be one of {', '.join(BACKENDS)}, "
                              f"got {backend_kind!r}")
        if skew < 0.0:
            raise ConfigError(f"max_frame_skew_s must be >= 0, got {skew}")
        self.T_world_cam = camera_pose(eye, target)
        self._truth: Optional[Truth] = None      # that of the capture being perceived
        self._goal_id, self._new_goal = "", False
        self.backend: PerceptionBackend = create_backend(
            params, ground_truth_provider=self._truth_objects,
            segmentation_provider=self._segmentation)
        reperception = ReperceptionConfig.from_params(params["reperception"])
        #: What serves requests: the backend, behind the re-perception policy for a VLM.
        self.serving: PerceptionBackend = self.backend
        if self.backend.name in ("vlm", "vlm_sim") and reperception.enabled:
            self.serving = ReperceivingPerception(self.backend, reperception)

        sensors = MutuallyExclusiveCallbackGroup()
        truth = self.backend.name in ("oracle", "vlm_sim")  # captures need their truth
        warn = self.get_logger().warning
        self.fixed = CameraFeed(self, "camera", TRUTH_TOPIC if truth else "", skew, sensors, warn)
        self.wrist = CameraFeed(self, WRIST_PREFIX, f"{WRIST_PREFIX}/ground_truth" if truth
                                else "", skew, sensors, warn)
        self.frames, self.truth_topic = self.fixed.frames, self.fixed.truth_topic
        self.pub_result = self.create_publisher(PerceptionResultMsg, RESULT_TOPIC, qos.LATCHED)
        self.pub_crop = self.create_publisher(Image, CROP_TOPIC, qos.LATCHED)
        self.create_service(Perceive, SERVICE, self._on_perceive,
                            callback_group=MutuallyExclusiveCallbackGroup())
        detail = (f" at {self.backend.config.url}; one call takes up to "
                  f"{self.backend.config.call_budget_s():.1f} s"
                  if isinstance(self.backend.config, VlmConfig) else "")
        self.get_logger().info(f"perception ready (backend: {self.backend.name}{detail})")
        if self.backend.name == "oracle":       # never silently: ground truth was asked for
            self.get_logger().warning("oracle perception, as asked: every answer is simulator "
                                      "ground truth, not what the camera shows")

    def _truth_objects(self) -> List[ObjectInstance]:
        """The ground truth of the capture being perceived (oracle and vlm_sim provider)."""
        truth = self._truth
        if truth is None or truth.objects is None:
            raise RuntimeError(f"no ground truth for this capture on {self.truth_topic}")
        return [o.copy() for o in truth.objects]

    def _segmentation(self, camera: Camera):
        """vlm_sim's view of the frame: the object-id mask rendered from the capture's ground
        truth with the frame's camera, and the objects' labels."""
        objects = self._truth_objects()
        return render_view(objects, camera).instance, objects

    def inputs_problem(self) -> str:
        """Why no fixed-camera capture could be perceived now, at any age ("" when one could)."""
        return self.fixed.problem()

    def wait_for_inputs(self, timeout_s: float) -> bool:
        """Block until some capture (of any age) is in; for in-process users (tests)."""
        with self.frames.condition:
            return self.frames.condition.wait_for(lambda: not self.inputs_problem(), timeout_s)

    # ---- service ------------------------------------------------------------------------------
    def _on_perceive(self, request: Perceive.Request, response: Perceive.Response
                     ) -> Perceive.Response:
        instruction = request.instruction.strip()
        now = self.get_clock().now()
        header = Header(stamp=now.to_msg(), frame_id=self.world_frame)
        not_before = stamp_ns(request.not_before) or now.nanoseconds
        if request.goal_id != self._goal_id:            # re-perception is per goal
            self._goal_id, self._new_goal = request.goal_id, True
            getattr(self.serving, "reset", lambda: None)()
        result, capture = self._perceive(instruction, not_before,
                                         (not_before - now.nanoseconds) * 1e-9, request)
        msg = perception_result_to_msg(result, instruction, header)
        if capture is not None:
            msg.header.stamp = msg.capture_stamp = capture.rgb.header.stamp
            msg.world_version = capture.world_version
            response.target_crop = self._crop(result, capture, msg.header)
        self.pub_result.publish(msg)
        response.result = msg
        line = f"perceive {instruction!r}: {result.summary()}"
        if result.ok:     # one call site per severity: rclpy refuses a site that changes it
            self.get_logger().info(line)
        else:
            self.get_logger().warning(line)
        self.get_logger().debug(f"raw answer: {result.raw!r}")
        return response

    def _perceive(self, instruction: str, not_before_ns: int, ahead_s: float, request):
        """(result, capture): the backend on the newest capture of the requested camera at
        or after ``not_before_ns`` (``ahead_s`` from now); every failure is an error result
        (capture None: none used). The wrist camera is placed where the request says the
        arm put it, and its frame goes to the backend itself, past the re-perception policy
        (whose kept answer belongs to the fixed camera), as in process."""
        name = self.backend.name
        if not instruction:
            return PerceptionResult.failure(name, "empty instruction: say what to perceive"), None
        try:
            feed, T_world_cam, serving = self._camera(request)
        except ValidationError as exc:
            return PerceptionResult.failure(name, str(exc)), None
        if ahead_s > self.capture_wait_s:
            return PerceptionResult.failure(name, f"not_before is {ahead_s:.2f} s in the future,"
                                                  f" beyond capture_wait_s="
                                                  f"{self.capture_wait_s:g} s"), None
        capture, problem = feed.wait(not_before_ns, self.capture_wait_s)
        if capture is None:
            return PerceptionResult.failure(name, problem), None
        try:
            frame = rgbd_frame_from_msgs(capture.rgb, capture.depth, capture.info, T_world_cam)
        except ValidationError as exc:
            return PerceptionResult.failure(name, f"bad camera frame: {exc}"), None
        self._truth, capture.frame, start = capture.truth, frame, time.perf_counter()
        if self._new_goal and capture.truth is not None and hasattr(self.backend, "reseed"):
            self.backend.reseed(capture.truth.trial_seed)    # vlm_sim: noise from the trial
        self._new_goal = False
        try:
            return serving.perceive(frame.rgb, frame.depth, frame.camera, instruction), capture
        except Exception as exc:  # noqa: BLE001 - the contract says never; the node survives
            self.get_logger().error(f"{name} backend raised: {exc!r}")
            return PerceptionResult.failure(name, f"perception failed: {type(exc).__name__}: "
                                                  f"{exc}", latency_s=time.perf_counter() - start
                                            ), capture
        finally:
            self._truth = None

    def _camera(self, request: Perceive.Request):
        """(feed, T_world_cam, backend) of the camera a request names; ValidationError."""
        which = request.camera or Perceive.Request.CAMERA_FIXED
        if which == Perceive.Request.CAMERA_FIXED:
            return self.fixed, self.T_world_cam, self.serving
        if which == Perceive.Request.CAMERA_WRIST:
            return self.wrist, pose_from_msg(request.camera_pose), self.backend
        raise ValidationError(f"camera must be {Perceive.Request.CAMERA_FIXED!r} or "
                              f"{Perceive.Request.CAMERA_WRIST!r}, got {which!r}")

    def _crop(self, result: PerceptionResult, capture: Capture, header: Header) -> Image:
        """The capture's crop at the perceived target's box, also published (empty: no box)."""
        frame: RgbdFrame = capture.frame
        target = result.target
        if target is None or target.bbox is None or frame.rgb.shape[:2] != frame.depth.shape:
            return Image()
        crop = crop_box(frame.rgb, target.bbox, size=self.crop_px)
        msg = rgb_to_msg(crop, Header(stamp=header.stamp, frame_id=target.id))
        self.pub_crop.publish(msg)
        return msg


def main(args=None) -> None:
    spin_node(PerceptionNode, num_threads=4, args=args)


if __name__ == "__main__":
    main()
