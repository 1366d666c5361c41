"""Simulator node: the analytical Panda standing in for hardware.

Publishes the camera (RGB, depth, CameraInfo), joint states and the ground-truth scene, and
serves the simulated arm (/sim/arm, one motion phase per call) and scene loading
(/sim/load_scene). Physics lives in agentic_grasp.core.sim, the arm's phase protocol and
bin policy in agentic_grasp.core.arm_session; this node only converts.

The executor's liveliness is watched (agentic_grasp.liveness): when its process dies with an
attempt open, that attempt is aborted as if ABORT had come (nothing more moves, the gripper
opens), like a robot whose controller stops on losing its commanding node.
"""
from __future__ import annotations

from pathlib import Path
import time

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Header

from agentic_grasp import qos
from agentic_grasp.conversions import (camera_info_to_msg, grasp_from_msg, image_to_msg,
                                       object_to_msg, outcome_to_msg)
from agentic_grasp.core.arm import ArmError
from agentic_grasp.core.arm_session import SimArmSession
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.render import render_scene
from agentic_grasp.core import paths
from agentic_grasp.core.sim.objects import load_catalogue
from agentic_grasp.core.sim.simulator import PhysicsParams, QualityParams, Simulator
from agentic_grasp.core.types import Phase
from agentic_grasp.liveness import PeerMonitor
from agentic_grasp.nodes.runner import spin_node
from agentic_grasp.params import declare, declare_config
from agentic_grasp_interfaces.msg import SceneGraph
from agentic_grasp_interfaces.srv import LoadScene, SimArmPhase

JOINT_NAMES = [f"fer_joint{i}" for i in range(1, 8)] + ["fer_finger_joint1", "fer_finger_joint2"]
_PHASES = {SimArmPhase.Request.APPROACH: Phase.APPROACH, SimArmPhase.Request.CLOSE: Phase.CLOSE,
           SimArmPhase.Request.LIFT: Phase.LIFT}


class SimNode(Node):
    """Owns one Simulator; every state change is followed by a fresh render and ground truth."""

    def __init__(self) -> None:
        super().__init__("sim")
        self.task = declare(self, "task", "sg_banana", "Task scene loaded at start (config/scenes)")
        seed = declare(self, "seed", 0, "Trial seed of the initial scene")
        rate = declare(self, "camera_rate_hz", 2.0, "Rate at which the last frame is re-sent")
        self.depth_noise = declare(self, "depth_noise_std_m", 0.0,
                                   "Gaussian noise added to rendered depth (m)")
        self.phase_delay = declare(self, "phase_delay_s", 0.0,
                                   "Wall-clock time each arm phase takes (s); 0 = as fast as "
                                   "possible. Emulates motion time so cancel can land mid-attempt")
        self.world_frame = declare(self, "world_frame", "world", "Frame of poses (panda_link0)")
        physics = declare_config(self, "physics", PhysicsParams, build=PhysicsParams.from_mapping)
        quality = declare_config(self, "quality", QualityParams, build=QualityParams.from_mapping)
        catalogue_file = declare(self, "catalogue_file", "objects.yaml",
                                 "Object catalogue, relative to config/ or absolute")
        self.camera = Camera.from_config({
            k: declare(self, f"camera.{k}", v, f"Camera {k}") for k, v in
            dict(width=640, height=480, fx=554.26, fy=554.26, cx=319.5, cy=239.5,
                 eye=[1.15, 0.0, 0.75], target=[0.5, 0.0, 0.0]).items()})

        catalogue_path = Path(catalogue_file)
        if not catalogue_path.is_absolute():
            catalogue_path = paths.config_dir() / catalogue_path
        self.sim = Simulator(params=physics, seed=seed, quality=quality,
                             catalogue=load_catalogue(catalogue_path))
        #: The phase protocol; its lock guards the simulator (not thread-safe).
        self.arm = SimArmSession(self.sim)
        self._lock = self.arm.lock
        self._frame = None
        self._version = 0
        self._arm_quiet_at = 0.0
        self._rendered_version = -1

        self.pub_rgb = self.create_publisher(Image, "camera/color/image_raw", qos.LATCHED)
        self.pub_depth = self.create_publisher(Image, "camera/depth/image_raw", qos.LATCHED)
        self.pub_info = self.create_publisher(CameraInfo, "camera/color/camera_info", qos.LATCHED)
        self.pub_depth_info = self.create_publisher(CameraInfo, "camera/depth/camera_info",
                                                    qos.LATCHED)
        self.pub_truth = self.create_publisher(SceneGraph, "sim/ground_truth", qos.LATCHED)
        self.pub_joints = self.create_publisher(JointState, "joint_states", qos.STATE)

        services = MutuallyExclusiveCallbackGroup()
        self.create_service(LoadScene, "sim/load_scene", self._on_load_scene,
                            callback_group=services)
        self.create_service(SimArmPhase, "sim/arm", self._on_arm, callback_group=services)
        self.create_service(SimArmPhase, "sim/arm_abort", self._on_abort,
                            callback_group=MutuallyExclusiveCallbackGroup())
        self.create_timer(1.0 / max(rate, 0.1), self._republish)
        self.create_timer(0.05, self._render_if_dirty,
                          callback_group=MutuallyExclusiveCallbackGroup())
        self.create_timer(0.05, self._publish_joints)
        commander = declare(self, "commander_node", "executor",
                            "Node whose death aborts the open attempt (the executor)")
        self._commander = PeerMonitor(self, [commander], on_lost=self._on_commander_lost)

        with self._lock:
            self.sim.load_task(self.task, trial_seed=seed)
        self._publish_scene()
        self.get_logger().info(f"simulator ready: task {self.task}, seed {seed}")

    # ---- publishing ---------------------------------------------------------------------------
    def _header(self, frame: str) -> Header:
        return Header(stamp=self.get_clock().now().to_msg(), frame_id=frame)

    def _publish_scene(self, render: bool = True) -> None:
        """Publish ground truth now; render now or leave it to the render timer.

        Rendering costs tens of milliseconds, so the arm phases only mark the frame dirty and
        the render timer (its own callback group) catches up; scene loads render at once so
        perception never sees a frame of the previous scene.
        """
        with self._lock:
            objects = [o.copy() for o in self.sim.objects()]
            self._version += 1
            version = self._version
        truth = SceneGraph(header=self._header(self.world_frame), source="simulator_ground_truth")
        if objects:
            pixels, _ = self.camera.project(np.array([o.position for o in objects]))
            truth.objects = [object_to_msg(o, pixel=p) for o, p in zip(objects, pixels)]
        self.pub_truth.publish(truth)
        if render:
            self._render(objects, version)

    def _render(self, objects, version: int) -> None:
        rng = np.random.default_rng() if self.depth_noise > 0 else None
        frame = render_scene(objects, self.camera, depth_noise_std=self.depth_noise, rng=rng)
        header = self._header(self.camera.frame_id)
        self._frame = (image_to_msg(frame.rgb, "rgb8", header),
                       image_to_msg(frame.depth.astype(np.float32), "32FC1", header),
                       camera_info_to_msg(self.camera, header))
        self._rendered_version = version
        self._republish()

    def _render_if_dirty(self) -> None:
        # Like a camera pipeline that refreshes once the arm has stopped: a render while the
        # executor is mid-attempt would hold the interpreter for tens of milliseconds and delay
        # the next phase.
        if time.monotonic() < self._arm_quiet_at:
            return
        with self._lock:
            if self._rendered_version == self._version:
                return
            objects = [o.copy() for o in self.sim.objects()]
            version = self._version
        self._render(objects, version)

    def _republish(self) -> None:
        # Timers can still fire while Ctrl-C shuts the context down: publish nothing then.
        if self._frame is None or not self.context.ok():
            return
        rgb, depth, info = self._frame
        stamp = self.get_clock().now().to_msg()
        for msg in (rgb, depth, info):
            msg.header.stamp = stamp
        self.pub_rgb.publish(rgb)
        self.pub_depth.publish(depth)
        self.pub_info.publish(info)
        self.pub_depth_info.publish(info)

    def _publish_joints(self) -> None:
        if not self.context.ok():
            return
        msg = JointState(header=self._header(""), name=JOINT_NAMES,
                         position=[float(v) for v in self.arm.q] + [self.arm.gripper] * 2)
        self.pub_joints.publish(msg)

    # ---- services -----------------------------------------------------------------------------
    def _on_load_scene(self, request, response):
        try:
            with self._lock:
                spec = self.sim.load_task(request.task or self.task, trial_seed=request.seed)
                ids = [o.id for o in self.sim.objects()]
            self.arm.reset_arm()
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            response.success = False
            response.message = f"cannot load scene {request.task!r}: {exc}"
            self.get_logger().warning(response.message)
            return response
        response.success, response.message = True, "loaded"
        response.task_id, response.instruction = spec.task_id, spec.instruction
        response.target_ids, response.object_ids = list(spec.targets), ids
        self._publish_scene()
        return response

    def _on_commander_lost(self, peer: str) -> None:
        attempt_id = self.arm.abort_open()
        if attempt_id:
            self.get_logger().warning(f"{peer} vanished during attempt {attempt_id}: aborted "
                                      "(arm stopped, gripper opened)")
            self._publish_scene(render=False)

    def _on_abort(self, request, response):
        """ABORT, also served on sim/arm_abort in its own callback group so it lands while a
        phase is still moving; the next phase of that attempt is then skipped."""
        self.arm.request_abort(request.attempt_id)
        response.ok, response.finished, response.message = True, True, "aborted"
        response.attempt_id = request.attempt_id
        return response

    def _on_arm(self, request, response):
        """One motion phase (APPROACH starts the attempt); each takes ``phase_delay_s``.

        Per-phase calls give the executor true phase feedback and a point to stop between
        phases. A single whole-attempt call measured no faster here: the cost is rclpy's
        executor overhead on both sides, not the number of DDS messages.
        """
        self._arm_quiet_at = time.monotonic() + 0.25
        if request.phase == SimArmPhase.Request.ABORT:
            return self._on_abort(request, response)
        if request.phase not in _PHASES:
            response.ok, response.error_code = False, int(ArmError.INVALID_PARAMETERS)
            response.message = f"unknown phase code {request.phase}"
            return response
        phase = _PHASES[request.phase]
        step = self.arm.step(request.attempt_id, phase, request.target_id,
                             lambda: grasp_from_msg(request.grasp))
        response.attempt_id = step.attempt_id
        if step.error is not None:
            response.ok, response.error_code = False, int(step.error.error)
            response.message = step.error.message
            return response
        if step.aborted:
            response.ok, response.finished = True, True
            response.message = f"aborted before {phase.value}"
            response.error_code = int(ArmError.CANCELED)
            return response
        if self.phase_delay > 0.0:
            time.sleep(self.phase_delay)
        response.outcome = outcome_to_msg(step.outcome)
        response.ok, response.error_code = True, int(ArmError.NONE)
        response.finished = step.finished
        response.message = f"{phase.value if not step.finished else 'attempt'} done"
        if step.finished or phase != Phase.APPROACH:
            self._publish_scene(render=False)
        return response


def main(args=None) -> None:
    spin_node(SimNode, num_threads=3, args=args)


if __name__ == "__main__":
    main()
