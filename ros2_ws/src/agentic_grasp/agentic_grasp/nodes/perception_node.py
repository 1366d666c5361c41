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

Frames: the colour and depth images are paired by header stamp (the newest colour image
whose depth image is within ``max_frame_skew_s``), so a depth image from another instant is
never read at the colour image's pixels. Intrinsics come from CameraInfo. The extrinsic
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
can take up to about ``max_attempts * timeout_s`` plus backoff delays, twice that when the
answer needs its one repair (logged at start-up); clients set their timeouts accordingly.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, fields
from typing import Any, Deque, Dict, List, Optional, Tuple

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from agentic_grasp import qos
from agentic_grasp.conversions import (camera_from_info, depth_from_msg,
                                       perception_result_to_msg, rgb_from_msg,
                                       rgb_to_msg, scene_objects_from_msg)
from agentic_grasp.core.camera import Camera, look_at
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
from agentic_grasp.nodes.runner import spin_node
from agentic_grasp.params import declare
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
#: Colour and depth images kept for pairing by stamp (the simulator re-sends at 2 Hz).
FRAME_HISTORY = 4

#: Description of every VlmConfig field with a scalar type, declared as ``vlm.<field>``.
VLM_DESCRIPTIONS: Dict[str, str] = {
    "url": "Base URL of the OpenAI-compatible server (vLLM), ending in /v1",
    "model": "Served model name; must equal --served-model-name of docker/vllm/serve.sh",
    "api_key_env": "Environment variable holding the API key ('EMPTY' is sent when unset)",
    "timeout_s": "Timeout of each HTTP request (s)",
    "max_attempts": "Tries per request on timeouts, connection errors, HTTP 429 and 5xx",
    "backoff_base_s": "Delay before retry k (k = 1, 2, ...) is backoff_base_s * 2^(k-1) (s)",
    "backoff_max_s": "Cap on any retry delay, Retry-After included (s)",
    "backoff_jitter": "Fraction of each retry delay drawn from a seeded RNG, in [0, 1)",
    "seed": "Seed of the retry-jitter RNG",
    "max_tokens": "Maximum length of the model's answer (tokens)",
    "temperature": "Sampling temperature (0 = greedy)",
    "image_max_side": "Longer side of the image sent to the model (px)",
    "image_format": "Encoding of the image sent: jpeg (fast, small) or png",
    "jpeg_quality": "JPEG quality of the image sent, 1..100",
    "coordinates": "Coordinates the model answers in: norm1000 (Qwen3-VL) or pixel",
    "use_env_proxy": "Honour http_proxy for the server (false: the server is local)",
    "default_fragility": "Fragility used when the model's value is outside [0, 1] and no "
                         "category prior matches",
}

#: Description of every DepthConfig field, declared as ``depth.<field>``.
DEPTH_DESCRIPTIONS: Dict[str, str] = {
    "window_radius_px": "Surface depth = median of the valid depths in a square window of "
                        "this radius around the pointed pixel (px)",
    "min_depth_m": "Depths below this are no return (m)",
    "max_depth_m": "Depths above this are no return (m)",
    "table_z": "Height of the table top in world (m)",
    "min_height_above_table_m": "Object points must be this far above the table (m)",
    "snap_to_table_m": "An object whose bottom is this close to the table stands on it (m)",
    "min_object_points": "With fewer object points the centre comes from the ray and the "
                         "height from the box (coarse)",
    "max_bbox_samples": "At most this many box pixels are back-projected",
    "default_extent_m": "Extent of an object the model gave no box for (m)",
}

#: Description of every scalar OracleConfig field (and the seed), declared as ``oracle.<f>``.
ORACLE_DESCRIPTIONS: Dict[str, str] = {
    "seed": "Seed of the oracle's noise",
    "category_confusion_prob": "Probability that an object's category is replaced by a "
                               "confusion partner (oracle.confusion_map)",
    "fragility_std": "Standard deviation of Gaussian noise on fragility (clipped to [0, 1])",
    "position_std": "Standard deviation of Gaussian noise on each world axis of a centre (m)",
    "affordance_confusion_prob": "Probability that the target's affordance type is replaced "
                                 "by another, uniformly",
}

#: Description of every scalar VlmSimConfig field, declared as ``vlm_sim.<field>``.
VLM_SIM_DESCRIPTIONS: Dict[str, str] = {
    "seed": "Seed of the simulated VLM's error draws",
    "point_std": "Gaussian noise on point_2d per axis (Qwen 0..1000 units)",
    "box_std": "Gaussian noise on each bbox_2d edge (Qwen 0..1000 units)",
    "category_confusion_prob": "Probability that a category is replaced by a partner "
                               "(vlm_sim.confusion_map)",
    "affordance_confusion_prob": "Probability that the target's affordance type is replaced "
                                 "by another, uniformly",
    "state_error_prob": "Probability that an object's state is replaced by another",
    "fragility_std": "Gaussian noise on fragility (clipped to [0, 1])",
    "miss_prob_small": "Probability of missing an object at or below miss_min_area_px",
    "miss_min_area_px": "Visible area (px) at or below which miss_prob_small applies",
    "miss_full_area_px": "Visible area (px) from which an object is never missed",
    "image_token_px": "Pixels per side of one image token (Qwen3-VL: 32)",
    "prompt_text_tokens": "Tokens of the prompt text (latency and token accounting)",
}
LATENCY_DESCRIPTIONS: Dict[str, str] = {
    "prefill_s": "Modelled prefill time of one VLM call (s)",
    "decode_tok_per_s": "Modelled decode rate (tokens/s; the paper's 155.5)",
}
REPERCEPTION_DESCRIPTIONS: Dict[str, str] = {
    "enabled": "Reuse the last VLM answer when the depth did not change around the target",
    "depth_noise_std_m": "Depth noise of the camera, 1 sigma (m)",
    "noise_sigmas": "A pixel changed when its depth moved by more than this many sigma",
    "min_shift_m": "The scene changed when the changed pixels cover the silhouette this "
                   "shift of the target sweeps (m)",
    "box_margin": "The target box is grown by this fraction on each side for the check",
}

FRAGILITY_PREFIX = "vlm.fragility_priors."
CONFUSION_PREFIX = "oracle.confusion_map."
SIM_CONFUSION_PREFIX = "vlm_sim.confusion_map."
#: Parameter namespaces of this node; an override under them that is not declared is a typo.
_OWN_PREFIXES = ("vlm.", "depth.", "oracle.", "camera.", "vlm_sim.", "reperception.")


def param_key(category: str) -> str:
    """Parameter-name form of a category ("wine glass" -> "wine_glass"); the core reverses it."""
    return "_".join(category.strip().lower().split())


def vlm_call_budget_s(cfg: VlmConfig) -> float:
    """Worst-case wall time of one VLM perception (both exchanges of a repair), jitter included.

    Each exchange is ``max_attempts`` requests of at most ``timeout_s`` with the backoff
    delays between them (ChatTransport); an invalid first answer adds one more exchange.
    """
    delays = sum(min(cfg.backoff_max_s, cfg.backoff_base_s * 2.0 ** k)
                 for k in range(cfg.max_attempts - 1))
    exchange = cfg.max_attempts * cfg.timeout_s + delays * (1.0 + cfg.backoff_jitter)
    return 2.0 * exchange


def _seconds(stamp: Time) -> float:
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


@dataclass
class Frame:
    """One RGB-D frame ready for a backend."""

    rgb: np.ndarray
    depth: np.ndarray
    camera: Camera
    stamp: Time


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


def decode_frame(rgb_msg: Image, depth_msg: Image, info: CameraInfo,
                 T_world_cam: np.ndarray) -> Frame:
    """Messages -> numpy images and Camera; ValidationError names what does not fit."""
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
    return Frame(rgb=rgb, depth=depth, camera=camera, stamp=rgb_msg.header.stamp)


class PerceptionNode(Node):
    """Serves ``perceive`` with the backend named by the ``backend`` parameter."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        backend_kind = str(declare(self, "backend", "oracle",
                                   "Perception backend: oracle (simulator ground truth plus "
                                   "configured noise), vlm (Qwen3-VL served by vLLM at "
                                   "vlm.url) or vlm_sim (the simulated VLM)")).strip().lower()
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
        self._warn_undeclared()

        if backend_kind not in BACKENDS:
            raise ConfigError(f"parameter backend must be one of {', '.join(BACKENDS)}, "
                              f"got {backend_kind!r}")
        if skew < 0.0:
            raise ConfigError(f"max_frame_skew_s must be >= 0, got {skew}")
        self.T_world_cam = _camera_pose(eye, target)
        self._truth_lock = threading.Lock()
        self._truth: Optional[List[ObjectInstance]] = None
        self._truth_problem = ""
        self._warned_distortion = False
        self.backend: PerceptionBackend = create_backend(
            params, ground_truth_provider=self._ground_truth,
            segmentation_provider=self._segmentation)
        reperception = ReperceptionConfig.from_params(params["reperception"])
        #: What serves requests: the backend, behind the re-perception policy for a VLM.
        self.serving: PerceptionBackend = self.backend
        if self.backend.name in ("vlm", "vlm_sim") and reperception.enabled:
            self.serving = ReperceivingPerception(self.backend, reperception)
        self.frames = FrameStore(skew)

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
        self._truth_topic = ""
        if self.backend.name in ("oracle", "vlm_sim"):
            truth_sub = self.create_subscription(SceneGraphMsg, TRUTH_TOPIC, self._on_truth,
                                                 qos.LATCHED, callback_group=sensors)
            self._truth_topic = truth_sub.topic_name
        self.pub_result = self.create_publisher(PerceptionResultMsg, RESULT_TOPIC, qos.LATCHED)
        self.pub_crop = self.create_publisher(Image, CROP_TOPIC, qos.LATCHED)
        self.create_service(Perceive, SERVICE, self._on_perceive,
                            callback_group=MutuallyExclusiveCallbackGroup())
        detail = ""
        if isinstance(self.backend.config, VlmConfig):
            detail = (f" at {self.backend.config.url}; one call takes up to "
                      f"{vlm_call_budget_s(self.backend.config):.1f} s")
        self.get_logger().info(f"perception ready (backend: {self.backend.name}{detail})")

    # ---- parameters ---------------------------------------------------------------------------
    def _declare_backend_params(self, backend_kind: str) -> Dict[str, Any]:
        """Declare every vlm.*, depth.* and oracle.* parameter; their values, nested."""
        vlm = {f.name: declare(self, f"vlm.{f.name}", f.default, VLM_DESCRIPTIONS[f.name])
               for f in fields(VlmConfig) if f.name not in ("fragility_priors", "depth")}
        vlm["fragility_priors"] = self._declare_map(
            FRAGILITY_PREFIX, DEFAULT_FRAGILITY_PRIORS,
            "Fragility prior of category '{}' in [0, 1] (Table I), used when the model's "
            "value is unusable")
        # A DepthConfig field without an entry here still gets a description that names
        # where it is documented (the geometry's parameters evolve with core/perception).
        depth = {f.name: declare(self, f"depth.{f.name}", f.default,
                                 DEPTH_DESCRIPTIONS.get(f.name, f"Depth geometry parameter "
                                                        f"'{f.name}' (see DepthConfig in "
                                                        "core/perception/depth.py)"))
                 for f in fields(DepthConfig)}
        oracle = {"seed": declare(self, "oracle.seed", 0, ORACLE_DESCRIPTIONS["seed"])}
        for f in fields(OracleConfig):
            if f.name != "confusion_map":
                oracle[f.name] = declare(self, f"oracle.{f.name}", f.default,
                                         ORACLE_DESCRIPTIONS[f.name])
        oracle["confusion_map"] = self._declare_map(
            CONFUSION_PREFIX, DEFAULT_CONFUSION_MAP,
            "Categories the oracle may report instead of '{}' (string list)")
        vlm_sim: Dict[str, Any] = {}
        for f in fields(VlmSimConfig):
            if f.name in VLM_SIM_DESCRIPTIONS:
                vlm_sim[f.name] = declare(self, f"vlm_sim.{f.name}", f.default,
                                          VLM_SIM_DESCRIPTIONS[f.name])
        vlm_sim["latency"] = {f.name: declare(self, f"vlm_sim.latency.{f.name}", f.default,
                                              LATENCY_DESCRIPTIONS[f.name])
                              for f in fields(VlmLatencyModel)}
        vlm_sim["confusion_map"] = self._declare_map(
            SIM_CONFUSION_PREFIX, DEFAULT_CONFUSION_MAP,
            "Categories the simulated VLM may report instead of '{}' (string list)")
        reperception = {f.name: declare(self, f"reperception.{f.name}", f.default,
                                        REPERCEPTION_DESCRIPTIONS[f.name])
                        for f in fields(ReperceptionConfig)}
        return {"backend": backend_kind, "vlm": vlm, "depth": depth, "oracle": oracle,
                "vlm_sim": vlm_sim, "reperception": reperception}

    def _declare_map(self, prefix: str, defaults: Dict[str, Any], description: str
                     ) -> Dict[str, Any]:
        """A category -> value map as one parameter per category.

        ROS parameters have no map type: the params file's nested mapping arrives as
        ``<prefix><category>``. The core's defaults are declared, plus every category the
        overrides (params file, command line) add under ``prefix``.
        """
        values = {param_key(k): v for k, v in defaults.items()}
        for name, value in self._overrides().items():
            key = name[len(prefix):] if name.startswith(prefix) else ""
            if key and key not in values:
                values[key] = value     # its own type; a wrong one is the core's ConfigError
        out: Dict[str, Any] = {}
        for key, default in values.items():
            if isinstance(default, (list, tuple)) and not default:
                self.get_logger().warning(f"parameter '{prefix}{key}' is an empty list; "
                                          "ignored")
                continue
            out[key] = declare(self, prefix + key, default, description.format(key))
        return out

    def _overrides(self) -> Dict[str, Any]:
        """Parameter name -> value of the node's overrides (params files, -p, kwargs)."""
        # rclpy keeps them in this attribute and offers no public accessor; without it,
        # categories added in a params file could not be declared.
        overrides = getattr(self, "_parameter_overrides", None) or {}
        return {name: param.value for name, param in overrides.items()}

    def _warn_undeclared(self) -> None:
        for name in sorted(self._overrides()):
            if name.startswith(_OWN_PREFIXES) and not self.has_parameter(name):
                self.get_logger().warning(f"parameter '{name}' is not a perception parameter "
                                          "(typo?); ignored")

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
            objects, problem = None, f"ground truth on {self._truth_topic} is invalid: {exc}"
            self.get_logger().warning(problem)
        if msg.source and msg.source != "simulator_ground_truth":
            self.get_logger().warning(f"ground truth from source {msg.source!r}; the oracle "
                                      "expects 'simulator_ground_truth'")
        with self.frames.condition:
            with self._truth_lock:
                self._truth, self._truth_problem = objects, problem
            self.frames.condition.notify_all()

    def _ground_truth(self) -> List[ObjectInstance]:
        """The oracle's provider: a copy of the latest ground truth."""
        with self._truth_lock:
            if self._truth is None:
                raise RuntimeError(f"no ground truth yet on {self._truth_topic}")
            return [o.copy() for o in self._truth]

    def _segmentation(self, camera: Camera):
        """vlm_sim's view of the frame: the object-id mask rendered from the latest ground
        truth with the frame's camera, and the objects' labels."""
        objects = self._ground_truth()
        return render_view(objects, camera).instance, objects

    def inputs_problem(self) -> str:
        """Why a perception call cannot run now ("" when it can)."""
        _, problem = self.frames.latest_messages(self._topics)
        if problem:
            return problem
        if self.backend.name in ("oracle", "vlm_sim"):
            with self._truth_lock:
                if self._truth is None:
                    return self._truth_problem or f"no ground truth yet on {self._truth_topic}"
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
            frame = decode_frame(*messages, self.T_world_cam)
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


    def _publish_crop(self, result: PerceptionResult, frame: Frame) -> None:
        """The camera crop at the perceived target's box (nothing without a box)."""
        target = result.target
        if target is None or target.bbox is None or frame.rgb.shape[:2] != frame.depth.shape:
            return
        crop = crop_box(frame.rgb, target.bbox, size=self.crop_px)
        header = Header(stamp=frame.stamp, frame_id=target.id)
        self.pub_crop.publish(rgb_to_msg(crop, header))


def _camera_pose(eye: Any, target: Any) -> np.ndarray:
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


def main(args=None) -> None:
    spin_node(PerceptionNode, num_threads=4, args=args)


if __name__ == "__main__":
    main()
