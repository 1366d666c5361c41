"""The simulator's wrist camera (in the node graph), for the sim node.

The camera on the hand (core/sim/view.py's mount) is pointed by ``sim/move_camera``
(SimMoveCamera): the pose is turned into joints by the arm's inverse kinematics and checked
against the scene exactly as the in-process arm does (Simulator.move_camera_to); when reached,
joint_states follow the arm there and the wrist camera is captured from the pose that the
reached joints give (forward kinematics times the mount), before the answer goes out.
``sim/wrist_camera`` (WristCamera) tells the camera model: intrinsics, minimum range and
mount, from config/sim.yaml ``wrist_camera``, never anything of the scene.

A wrist capture follows the fixed camera's rules (:func:`capture_messages`, shared with
the sim node): the world is copied and stamped under the simulator's lock; colour, depth,
camera_info and the ground truth (SceneGraph, world_version, trial seed; for vlm_sim and
the oracle) carry that stamp, on ``wrist_camera/color/image_raw``,
``wrist_camera/depth/image_raw``, ``wrist_camera/color/camera_info`` (and depth/), and
``wrist_camera/ground_truth``. A request on ``wrist_camera/capture_request`` (Time) is
answered while the arm is still at the view (its joints unchanged): the last capture again
when it is at or after the time and shows this world, a new one otherwise; once the arm
has moved on (a grasp, a scene load) there is no view to capture and nothing is sent.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional, Tuple

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.time import Time as RclpyTime
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from agentic_grasp.ros.common import qos
from agentic_grasp.ros.conversions.wrist_view import (fill_view_result, fill_wrist_camera,
                                                      pose_from_msg)
from agentic_grasp.ros.conversions.images import camera_info_to_msg, image_to_msg
from agentic_grasp.ros.conversions.perception import object_to_msg
from agentic_grasp.core.arm.backend import ArmError, ViewResult, WristCameraInfo
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.render.raycast import render_scene
from agentic_grasp_interfaces.msg import SceneGraph
from agentic_grasp_interfaces.srv import SimMoveCamera, WristCamera

PREFIX = "wrist_camera"
#: World state of a capture: (world version, changes since the load, trial seed).
WorldState = Callable[[], Tuple[int, int, int]]


def capture_messages(objects, camera: Camera, stamp: Time, world_frame: str, version: int,
                     seed: int, noise_std: float, rng: Optional[np.random.Generator]):
    """(rgb, depth, camera_info, ground truth) of one capture, all stamped ``stamp``."""
    frame = render_scene(objects, camera, depth_noise_std=noise_std, rng=rng)
    header = Header(stamp=stamp, frame_id=camera.frame_id)
    truth = SceneGraph(header=Header(stamp=stamp, frame_id=world_frame),
                       world_version=version, trial_seed=seed, source="simulator_ground_truth")
    if objects:
        pixels, _ = camera.project(np.array([o.position for o in objects]))
        truth.objects = [object_to_msg(o, pixel=p) for o, p in zip(objects, pixels)]
    return (image_to_msg(frame.rgb, "rgb8", header),
            image_to_msg(frame.depth.astype(np.float32), "32FC1", header),
            camera_info_to_msg(camera, header), truth)


class WristCameraStation:
    """The wrist camera's services, topics and captures on the sim node (module docstring).

    ``arm`` is the node's SimArmSession (its lock guards the simulator), ``world`` gives the
    world state under that lock, ``noise_std`` and ``delay_s`` the node's depth noise and
    motion time per phase (one transit per view).
    """

    def __init__(self, node: Node, arm: Any, world: WorldState, world_frame: str,
                 noise_std: float, delay_s: float) -> None:
        self._node, self.arm, self._world = node, arm, world
        self._world_frame, self._noise, self._delay = world_frame, float(noise_std), delay_s
        self._camera: Optional[Camera] = None        # where the last view put it
        self._q: Optional[np.ndarray] = None         # the joints of that view
        self._frame = None
        self._captured = (-1, -1)                    # (world version, stamp ns)
        latched = qos.LATCHED
        self._pubs = [node.create_publisher(Image, f"{PREFIX}/color/image_raw", latched),
                      node.create_publisher(Image, f"{PREFIX}/depth/image_raw", latched),
                      node.create_publisher(CameraInfo, f"{PREFIX}/color/camera_info",
                                            latched),
                      node.create_publisher(SceneGraph, f"{PREFIX}/ground_truth", latched)]
        self._pub_depth_info = node.create_publisher(CameraInfo, f"{PREFIX}/depth/camera_info",
                                                     latched)
        group = MutuallyExclusiveCallbackGroup()     # one view or capture at a time
        node.create_service(SimMoveCamera, "sim/move_camera", self._on_move,
                            callback_group=group)
        node.create_service(WristCamera, "sim/wrist_camera", self._on_describe,
                            callback_group=MutuallyExclusiveCallbackGroup())
        node.create_subscription(Time, f"{PREFIX}/capture_request", self._on_request,
                                 qos.REQUEST, callback_group=group)

    def _on_describe(self, _request, response):
        mount = self.arm.sim.wrist_camera
        return fill_wrist_camera(response, WristCameraInfo(mount.intrinsics(),
                                                           mount.min_range_m, mount.T_tcp_cam))

    def _on_move(self, request, response):
        """One view motion: IK, the hand checked against the scene, then a wrist capture."""
        try:
            T = pose_from_msg(request.camera_pose)
        except ValidationError as exc:
            response.ok = False
            return fill_view_result(response, ViewResult(ArmError.INVALID_PARAMETERS, str(exc)))
        self.arm.abort_open()                    # the executor runs one motion at a time
        with self.arm.lock:
            motion = self.arm.sim.move_camera_to(T)
            if motion.ok:
                self.arm.q = np.asarray(motion.q, dtype=float)
                self._camera, self._q = motion.camera, self.arm.q.copy()
        if not motion.ok:
            error = (ArmError.OUT_OF_WORKSPACE if motion.q is None
                     else ArmError.INVALID_PARAMETERS)
            response.ok = False
            return fill_view_result(response, ViewResult(error, motion.message,
                                                         clearance_m=motion.clearance_m,
                                                         nearest=motion.nearest))
        if self._delay > 0.0:
            time.sleep(self._delay)
        stamp_ns = self._capture()
        response.ok = True
        return fill_view_result(response, ViewResult(
            ArmError.NONE, motion.message, motion.camera, motion.duration_s,
            motion.clearance_m, motion.nearest, stamp_ns))

    def _at_view(self) -> bool:
        return self._camera is not None and self._q is not None \
            and np.array_equal(self.arm.q, self._q)

    def _on_request(self, msg: Time) -> None:
        if not self._at_view():
            return
        with self.arm.lock:
            version = self._world()[0]
        if self._captured[0] == version and \
                self._captured[1] >= RclpyTime.from_msg(msg).nanoseconds:
            self._publish()
            return
        self._capture()

    def _capture(self) -> int:
        """Render the wrist camera now and publish the capture; its stamp (ns)."""
        with self.arm.lock:
            objects = [o.copy() for o in self.arm.sim.objects()]
            version, changes, seed = self._world()
            camera = self._camera
            now = self._node.get_clock().now()
        rng = None
        if self._noise > 0:          # the same scene state and view draw the same noise
            rng = np.random.default_rng([seed, changes, 1])
        self._frame = capture_messages(objects, camera, now.to_msg(), self._world_frame,
                                       version, seed, self._noise, rng)
        self._captured = (version, now.nanoseconds)
        self._publish()
        return now.nanoseconds

    def _publish(self) -> None:
        if self._frame is None or not self._node.context.ok():
            return
        rgb, depth, info, truth = self._frame
        for pub, msg in zip(self._pubs[:3], (rgb, depth, info)):
            pub.publish(msg)
        self._pub_depth_info.publish(info)
        self._pubs[3].publish(truth)            # truth last, as the fixed camera's


__all__ = ["PREFIX", "WristCameraStation", "capture_messages"]
