"""Simulator node: the analytical Panda standing in for hardware.

Publishes the camera (RGB, depth, CameraInfo), joint states and the ground-truth scene, and
serves the simulated arm (/sim/arm, one motion phase per call), scene loading
(/sim/load_scene) and the wrist camera's views and captures (ros/sim/wrist.py). Physics
lives in agentic_grasp.core.sim, the arm's phase protocol and bin policy in
agentic_grasp.core.arm_session; this node only converts.

Captures: a capture is one render of the world at one instant, stamped with that instant
(the world is copied, under the simulator's lock, at the stamp) and with the world version it
shows (bumped on every scene load and every arm phase that changes the world). Colour, depth,
both camera_info and the ground truth (SceneGraph.world_version) of one capture carry the same
stamp; re-sending them keeps it, like a camera driver's stamps. A scene load is captured at
once, an arm phase once the arm is quiet, and a request on ``camera/capture_request``
(builtin_interfaces/Time t: "I need a capture taken at or after t") at once when the last
capture shows an older world. When it shows this world, nothing is rendered: a capture at or
after t is sent again, and an older one is declared still current on ``camera/capture_current``
(CaptureCurrent: that capture, the world version, and an instant at or after t up to which the
world has not changed; no arm phase is under way). The render (tens of ms of CPU) and the
2 MB over DDS are then off the path of every perceive that follows a scene load or an
earlier perceive; the frames would be identical anyway (the noise below).
``camera_rate_hz`` > 0 also re-sends it periodically: off by default, since 2 MB re-sent at
2 Hz lengthened the perceive tail on the loaded machine. Depth noise is drawn from the trial
seed and the number of world changes since the load, so the same scene, seed and attempts
give the same frames however many captures are taken.

The world outlives the process: with ``world_state_file`` set (bringup and the launch file set it
to a file of their run's own folder), every change of the world is written there
(core/sim/world_state.py), and a sim started on an existing file (a respawn) restores that world
instead of loading ``task``: the objects where they were, the bin, the noise generator, the world
version. An attempt open at the death is not restored (the restarted arm has none).

The executor's liveliness is watched (agentic_grasp.ros.common.liveness): when its process
dies with an attempt open, that attempt is aborted as if ABORT had come (nothing more moves,
the gripper opens), like a robot whose controller stops on losing its commanding node.
"""
from __future__ import annotations

from pathlib import Path
import threading
import time

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from builtin_interfaces.msg import Time
from rclpy.node import Node
from rclpy.time import Time as RclpyTime
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Header

from agentic_grasp.ros.common import qos
from agentic_grasp.ros.sim.arm_service import SimArmServices
from agentic_grasp.ros.sim.world import SimWorldKeeping
from agentic_grasp.ros.sim.wrist import WristCameraStation, capture_messages
from agentic_grasp.core.arm.session import SimArmSession
from agentic_grasp.core.camera import Camera, fixed_camera_spec
from agentic_grasp.core import paths
from agentic_grasp.core.sim.objects import load_catalogue
from agentic_grasp.core.sim.simulator import PhysicsParams, QualityParams, Simulator
from agentic_grasp.core.sim.view import WristCameraMount
from agentic_grasp.ros.common.liveness import PeerMonitor
from agentic_grasp.ros.common.runner import spin_node
from agentic_grasp.ros.common.params import declare, declare_config
from agentic_grasp_interfaces.msg import CaptureCurrent, SceneGraph
from agentic_grasp_interfaces.srv import LoadScene, SimArmPhase

#: Topic on which a consumer asks for a capture taken at or after a time.
CAPTURE_REQUEST_TOPIC = "camera/capture_request"
#: Topic on which the simulator says that its last capture still shows the world.
CAPTURE_CURRENT_TOPIC = "camera/capture_current"
JOINT_NAMES = [f"fer_joint{i}" for i in range(1, 8)] + ["fer_finger_joint1", "fer_finger_joint2"]


class SimNode(SimArmServices, SimWorldKeeping, Node):
    """Owns one Simulator; every state change is followed by a fresh render and ground truth."""

    def __init__(self) -> None:
        super().__init__("sim")
        self.task = declare(self, "task", "sg_banana", "Task scene loaded at start (config/scenes)")
        seed = declare(self, "seed", 0, "Trial seed of the initial scene")
        rate = declare(self, "camera_rate_hz", 0.0, "Rate at which the last capture is re-sent "
                                                     "(its stamp kept); 0 = only when a "
                                                     "capture request finds it current")
        self.depth_noise = declare(self, "depth_noise_std_m", 0.0,
                                   "Gaussian noise added to rendered depth (m), drawn from "
                                   "the trial seed")
        self.phase_delay = declare(self, "phase_delay_s", 0.0,
                                   "Wall-clock time each arm phase takes (s); 0 = as fast as "
                                   "possible. Emulates motion time so cancel can land mid-attempt")
        self.world_frame = declare(self, "world_frame", "world", "Frame of poses (panda_link0)")
        kept = declare(self, "world_state_file", "",
                       "File the world is kept in on every change and restored from at start "
                       "(a respawn); '' = not kept (bringup and the launch file set one per run)")
        physics = declare_config(self, "physics", PhysicsParams, build=PhysicsParams.from_mapping)
        quality = declare_config(self, "quality", QualityParams, build=QualityParams.from_mapping)
        catalogue_file = declare(self, "catalogue_file", "objects.yaml",
                                 "Object catalogue, relative to config/ or absolute")
        self.camera = Camera.from_config({
            k: declare(self, f"camera.{k}", v, f"Camera {k}") for k, v in
            fixed_camera_spec().items() if k != "frame_id"})

        catalogue_path = Path(catalogue_file)
        if not catalogue_path.is_absolute():
            catalogue_path = paths.config_dir() / catalogue_path
        self.sim = Simulator(params=physics, seed=seed, quality=quality,
                             catalogue=load_catalogue(catalogue_path),
                             wrist_camera=declare_config(self, "wrist_camera", WristCameraMount,
                                                         build=WristCameraMount.from_mapping))
        #: The phase protocol; its lock guards the simulator (not thread-safe).
        self.arm = SimArmSession(self.sim)
        self._lock = self.arm.lock
        self._frame = None                   # the last capture's messages, truth last
        self._version = 0                    # world version (module docstring)
        self._loaded_version = 0             # world version of the last scene load
        self._trial_seed = int(seed)
        self._task_loaded = self.task        # what the world was loaded from (kept with it)
        self._world_file = self._world_file_at(kept)
        self._arm_quiet_at = 0.0
        self._rendered_version = -1
        self._captured_ns = -1               # stamp of the last capture (ns)
        self._moving = 0                     # arm phases under way (the world may change)
        self._asked_ns = -1                  # the last capture request's time
        self._capture_lock = threading.Lock()  # captures (load, timer, request) in stamp order

        self.pub_rgb = self.create_publisher(Image, "camera/color/image_raw", qos.LATCHED)
        self.pub_depth = self.create_publisher(Image, "camera/depth/image_raw", qos.LATCHED)
        self.pub_info = self.create_publisher(CameraInfo, "camera/color/camera_info", qos.LATCHED)
        self.pub_depth_info = self.create_publisher(CameraInfo, "camera/depth/camera_info",
                                                    qos.LATCHED)
        self.pub_truth = self.create_publisher(SceneGraph, "sim/ground_truth", qos.LATCHED)
        self.pub_joints = self.create_publisher(JointState, "joint_states", qos.STATE)
        self.pub_current = self.create_publisher(CaptureCurrent, CAPTURE_CURRENT_TOPIC,
                                                 qos.REQUEST)

        services = MutuallyExclusiveCallbackGroup()
        self.create_service(LoadScene, "sim/load_scene", self._on_load_scene,
                            callback_group=services)
        self.create_service(SimArmPhase, "sim/arm", self._on_arm, callback_group=services)
        self.create_service(SimArmPhase, "sim/arm_abort", self._on_abort,
                            callback_group=MutuallyExclusiveCallbackGroup())
        if rate > 0.0:
            self.create_timer(1.0 / rate, self._republish)
        camera_group = MutuallyExclusiveCallbackGroup()       # one capture at a time
        self.create_timer(0.05, self._render_if_dirty, callback_group=camera_group)
        self.create_subscription(Time, CAPTURE_REQUEST_TOPIC, self._on_capture_request,
                                 qos.REQUEST, callback_group=camera_group)
        self.create_timer(0.05, self._publish_joints)
        commander = declare(self, "commander_node", "executor",
                            "Node whose death aborts the open attempt (the executor)")
        self._commander = PeerMonitor(self, [commander], on_lost=self._on_commander_lost)
        self.wrist = WristCameraStation(self, self.arm, lambda: (
            self._version, self._version - self._loaded_version, self._trial_seed),
            self.world_frame, self.depth_noise, self.phase_delay)

        restored = self._restore_world()
        if restored is None:
            with self._lock:
                self.sim.load_task(self.task, trial_seed=seed)
            self._world_changed(loaded=True)
        self._capture()
        self.get_logger().info(f"simulator ready: task {self._task_loaded}, seed "
                               f"{self._trial_seed}{restored or ''}")

    # ---- publishing ---------------------------------------------------------------------------
    def _world_changed(self, loaded: bool = False, locked: bool = False) -> None:
        """A scene load or an arm phase changed the world: a new version, to be captured.
        ``locked``: the caller holds the simulator's lock (a load bumps under it)."""
        if not locked:
            with self._lock:
                return self._world_changed(loaded, locked=True)
        self._version += 1
        if loaded:
            self._loaded_version = self._version
        self._keep_world()

    def _capture(self) -> None:
        """Render the world now and publish the capture (images, camera_info, ground truth).

        The world is copied and stamped under the lock, so everything a capture shows
        happened before its stamp, and nothing after it.
        """
        with self._capture_lock:
            self._capture_locked()

    def _capture_locked(self) -> None:
        with self._lock:
            objects = [o.copy() for o in self.sim.objects()]
            version, changes = self._version, self._version - self._loaded_version
            seed = self._trial_seed
            now = self.get_clock().now()
        rng = None
        if self.depth_noise > 0:             # the same scene state draws the same noise
            rng = np.random.default_rng([seed, changes])
        messages = capture_messages(objects, self.camera, now.to_msg(), self.world_frame, version,
                                    seed, self.depth_noise, rng)
        with self._lock:        # read together by _on_capture_request
            self._frame = messages
            self._rendered_version, self._captured_ns = version, now.nanoseconds
        self._republish()

    def _render_if_dirty(self) -> None:
        # Like a camera pipeline that refreshes once the arm has stopped: a render while the
        # executor is mid-attempt would hold the interpreter for tens of milliseconds and delay
        # the next phase. A capture request does not wait for this.
        if time.monotonic() < self._arm_quiet_at or self._rendered_version == self._version:
            return
        self._capture()

    def _on_capture_request(self, msg: Time) -> None:
        """Capture now unless the last capture shows this world: then send it again when it
        was taken at or after ``msg``, else declare it still current (no render, no frames).
        A requester that asks again has not got it: on the loaded machine DDS loses a fragment
        of these 1-2 MB samples now and then, and a reliable writer repairs it only at its next
        heartbeat (seconds), while a re-sent sample supersedes the lost one at once."""
        with self._lock:        # the version, the capture and the instant together
            current = self._moving == 0 and self._rendered_version == self._version \
                and self._frame is not None
            now, version, captured_ns = self.get_clock().now(), self._version, self._captured_ns
            stamp = self._frame[0].header.stamp if current else None
        wanted = RclpyTime.from_msg(msg).nanoseconds
        asked_again, self._asked_ns = wanted == self._asked_ns, wanted
        if not current:
            self._capture()
            return
        if captured_ns >= wanted or asked_again:            # asked again: frames lost?
            self._republish()
        if captured_ns < wanted and self.context.ok():
            self.pub_current.publish(CaptureCurrent(capture_stamp=stamp,
                                                    current_at=now.to_msg(),
                                                    world_version=version))

    def _republish(self) -> None:
        """Send the last capture (again), stamps unchanged: a stamp is capture time."""
        # Timers can still fire while Ctrl-C shuts the context down: publish nothing then.
        if self._frame is None or not self.context.ok():
            return
        rgb, depth, info, truth = self._frame
        self.pub_rgb.publish(rgb)
        self.pub_depth.publish(depth)
        self.pub_info.publish(info)
        self.pub_depth_info.publish(info)
        self.pub_truth.publish(truth)

    def _publish_joints(self) -> None:
        if not self.context.ok():
            return
        msg = JointState(header=Header(stamp=self.get_clock().now().to_msg()), name=JOINT_NAMES,
                         position=[float(v) for v in self.arm.q] + [self.arm.gripper] * 2)
        self.pub_joints.publish(msg)

    # ---- services -----------------------------------------------------------------------------
    def _on_load_scene(self, request, response):
        try:
            with self._lock:
                spec = self.sim.load_task(request.task or self.task, trial_seed=request.seed)
                ids = [o.id for o in self.sim.objects()]
                self._trial_seed = int(request.seed)
                self._task_loaded = request.task or self.task
                self._world_changed(loaded=True, locked=True)
            self.arm.reset_arm()
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            response.success = False
            response.message = f"cannot load scene {request.task!r}: {exc}"
            self.get_logger().warning(response.message)
            return response
        response.success, response.message = True, "loaded"
        response.task_id, response.instruction = spec.task_id, spec.instruction
        response.target_ids, response.object_ids = list(spec.targets), ids
        self._capture()              # before answering: no one sees the old scene after it
        return response


def main(args=None) -> None:
    spin_node(SimNode, num_threads=3, args=args)


if __name__ == "__main__":
    main()
