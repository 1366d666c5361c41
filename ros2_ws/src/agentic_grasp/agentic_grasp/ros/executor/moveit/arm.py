"""Arm backend for a real (or mock-hardware) Franka arm: MoveIt 2 through moveit_py, plus the
Franka Hand through franka_ros2's franka_gripper actions (or a GripperCommand controller).

Selected by the executor's ``arm_backend: moveit``; imported only then, so the simulator path
never needs MoveIt. The poses, goals, scene objects and the outcome mapping come from
:mod:`agentic_grasp.ros.executor.moveit.translation` (unit-tested without MoveIt); this module
and planning.py (MoveItPlanningMixin: the planning scene, the start state, plans and their
execution) only talk to the robot:

APPROACH  open the fingers (Move), plan to the pre-grasp pose (OMPL via the ``transit`` plan
          request), descend in a straight line (Pilz LIN, or move_group's
          /compute_cartesian_path);
CLOSE     Grasp (width from the perceived target, epsilon, speed, force), read the finger width;
LIFT      lift-off segment, width check (slip), rest of the lift, width check (drop).

A cancel stops the trajectory (TrajectoryExecutionManager.stop_execution) and cancels a
running gripper goal; the fingers are opened only when nothing can be in the hand.

Checked against the upstream sources (moveit2 2.12.4, franka_ros2 v3.4.0); the line
references are in translation.py and config/moveit/*.yaml:
- Pilz Cartesian limits come from this package (franka_fr3_moveit_config has none, and
  MoveItConfigsBuilder.to_moveit_configs() fails without them once Pilz is enabled);
- every plan starts from the current state with its velocities zeroed (Pilz rejects any
  start velocity >= 1e-8 rad/s), passed with ``set_start_state(robot_state=...)``;
- with ``cartesian_method: service`` the scene also goes to move_group
  (/apply_planning_scene), whose /compute_cartesian_path checks its own scene;
- a MoveItPy start-up failure (no complete joint state in time) is reported and retried
  instead of ending the executor;
- ``close()`` (called by the executor node's destroy_node) shuts MoveItPy down and deletes
  it while the process is still intact (moveit2#3721: a segfault while deleting MoveItCpp).

APIs used (names as documented upstream; see docker/ros/README.md for the sources):
``moveit.planning.MoveItPy(node_name, config_dict)``, ``.get_planning_component``,
``.get_planning_scene_monitor``, ``.get_trajectory_execution_manager``, ``.execute``;
``PlanningComponent.set_start_state(robot_state) / set_goal_state(pose_stamped_msg,
pose_link) / plan(single_plan_parameters)``; ``PlanRequestParameters(moveit_py, namespace)``;
``PlanningSceneMonitor.read_write() -> scene.apply_collision_object``;
``moveit.core.robot_trajectory.RobotTrajectory.set_robot_trajectory_msg``;
``moveit_configs_utils.MoveItConfigsBuilder``; ``moveit_msgs/srv/GetCartesianPath``;
``franka_msgs/action/{Grasp, Move, Homing}``; ``control_msgs/action/GripperCommand``.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import fields
from typing import List, Optional, Tuple

from ament_index_python.packages import get_package_share_directory
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from rclpy.wait_for_message import wait_for_message

from agentic_grasp.ros.common import qos
from agentic_grasp.ros.executor.moveit.translation import (PSM_START_FAILURE, JointStatesMissing,
                                                           cancel_plan, dropoff_pose,
                                                           finger_width, gripper_grasp_goal,
                                                           gripper_open_goal,
                                                           is_transient_start_failure,
                                                           plan_grasp_motion, start_with_retries)
from agentic_grasp.ros.executor.moveit.config import (MOVEIT_CONFIG_PARTS, MoveItBackendConfig,
                                                      cartesian_limits_from_yaml,
                                                      combine_moveit_params, resolve_path)
from agentic_grasp.core.arm.observation import MIN_OBJECT_WIDTH_M
from agentic_grasp.ros.executor.moveit.outcome import (MoveItObservation, arm_observation,
                                                       is_system_error,
                                                       moveit_error_name)
from agentic_grasp.ros.executor.moveit.view import MoveItViewMixin, MoveItWristCamera
from agentic_grasp.core.arm.backend import PHASES, ArmBackend, ArmError, ArmResult
from agentic_grasp.core.config import load_yaml
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.paths import config_dir
from agentic_grasp.core.sim.params import QualityParams
from agentic_grasp.core.types import GraspParameters, ObjectInstance, Phase
from agentic_grasp.ros.common.params import declare_config
from agentic_grasp_interfaces.msg import PerceptionResult as PerceptionResultMsg
from agentic_grasp.ros.executor.moveit.gripper import _Canceled, _Gripper


try:  # MoveIt 2's Python bindings: ros-jazzy-moveit-py and ros-jazzy-moveit-configs-utils
    from moveit.planning import MoveItPy
    from moveit_configs_utils import MoveItConfigsBuilder
    from moveit_msgs.srv import ApplyPlanningScene, GetCartesianPath

    # planning and execution (moveit.core, moveit.planning, moveit_msgs, shape_msgs)
    from agentic_grasp.ros.executor.moveit.planning import MoveItPlanningMixin
except ImportError as exc:  # pragma: no cover - exercised where MoveIt is absent
    raise ImportError(
        "arm_backend 'moveit' needs MoveIt 2's Python API moveit_py (apt: ros-jazzy-moveit-py, "
        "ros-jazzy-moveit-configs-utils, ros-jazzy-moveit-msgs); it is installed in the ROS "
        "image built from docker/ros/Dockerfile. Without it use arm_backend 'sim'. "
        f"(import failed: {exc})") from exc

#: QualityParams fields the MoveIt backend does not declare: all but the Eq. 2 weights.
_NOT_EQ2 = tuple(f.name for f in fields(QualityParams) if f.name != "weights")
_EQ2_TEXT = ("Eq. 2 weights w1..w7 of an attempt's Q (position accuracy, width, force, "
             "approach clearance, grasp type, difficulty, grip security); sum 1, as the sim "
             "node's quality.weights (config/sim.yaml)")



def declare_quality(node: Node) -> QualityParams:
    """The Eq. 2 weights every outcome's Q uses, declared as the sim node declares them.

    ``quality.weights`` (config/sim.yaml); the other quality constants model the
    simulator's factors and mean nothing on the arm, so they keep their defaults.
    """
    return declare_config(node, "quality", QualityParams, exclude=_NOT_EQ2,
                          build=QualityParams.from_mapping, fallback=_EQ2_TEXT)


class MoveItArmBackend(MoveItPlanningMixin, MoveItViewMixin, ArmBackend):
    """One grasp attempt on the arm through MoveIt, reported in the failure taxonomy; wrist
    camera views as camera-frame pose goals (ros/executor/moveit/view.py)."""

    name = "moveit"

    def __init__(self, node: Node) -> None:
        self._node = node
        try:
            self.cfg = declare_config(node, "moveit", MoveItBackendConfig,
                                      build=MoveItBackendConfig.from_dict)
        except ValidationError as exc:
            raise ConfigError(str(exc)) from exc
        self.quality = declare_quality(node)
        self.wrist_mount = declare_config(node, "wrist_camera", MoveItWristCamera).mount()
        self._log = node.get_logger()
        self._closed = False
        params = self._moveit_params()
        self._moveit = start_with_retries(lambda: self._start_moveit(params),
                                          int(self.cfg.startup_attempts),
                                          float(self.cfg.startup_retry_s),
                                          self._report_start_failure)
        self._arm = self._moveit.get_planning_component(self.cfg.planning_group)
        self._psm = self._moveit.get_planning_scene_monitor()
        tem_getter = (getattr(self._moveit, "get_trajectory_execution_manager", None)
                      or getattr(self._moveit, "get_trajactory_execution_manager"))
        self._tem = tem_getter()
        group = ReentrantCallbackGroup()
        self._gripper = _Gripper(node, self.cfg, group)
        self._cartesian = (node.create_client(GetCartesianPath, self.cfg.cartesian_service,
                                              callback_group=group)
                           if self.cfg.cartesian_method == "service" else None)
        self._apply_scene = (node.create_client(ApplyPlanningScene,
                                                self.cfg.apply_planning_scene_service,
                                                callback_group=group)
                             if self.cfg.cartesian_method == "service" else None)
        self._width_lock = threading.Condition()
        self._width: Tuple[float, float] = (math.nan, 0.0)     # (width m, monotonic time)
        self._objects: List[ObjectInstance] = []
        node.create_subscription(JointState, self.cfg.gripper_joint_states, self._on_joints,
                                 qos_profile_sensor_data, callback_group=group)
        node.create_subscription(PerceptionResultMsg, self.cfg.perception_topic,
                                 self._on_perception, qos.LATCHED, callback_group=group)
        self._scene_ids: List[str] = []
        self._holding = False
        self._homed = self.cfg.gripper_interface != "franka" or not self.cfg.homing_on_start
        self._log.info(f"MoveIt backend ready: group {self.cfg.planning_group}, link "
                       f"{self.cfg.ik_link}, gripper {self.cfg.gripper_interface}")

    # ------------------------------------------------------------------ set-up
    def _start_moveit(self, params: dict):
        """One attempt: wait for the robot's joint states, then build MoveItPy.

        Waiting here first keeps a missing driver from costing a MoveItPy attempt: a failed
        MoveItCpp constructor leaves the rclcpp node and executor thread MoveItPy made
        behind (moveit_py/src/moveit/moveit_ros/moveit_cpp/moveit_cpp.cpp:124-142, 2.12.4), and it
        holds the GIL for the whole wait_for_initial_state_timeout."""
        topic = self.cfg.joint_state_topic
        received, _ = wait_for_message(JointState, self._node, topic,
                                       qos_profile=qos_profile_sensor_data,
                                       time_to_wait=float(self.cfg.startup_retry_s))
        if not received:
            raise JointStatesMissing(f"no JointState on {topic} within "
                                     f"{self.cfg.startup_retry_s:g} s (is the robot driver / "
                                     "joint_state_broadcaster running?)")
        # No planning scene service: MoveItPy would serve get_planning_scene in the root
        # namespace (moveit_py .../moveit_cpp.cpp:144-146; the monitor's private node shares
        # the node's namespace, planning_scene_monitor.cpp:116-119), the name move_group's
        # default GetPlanningSceneService capability serves; RViz would ask either one.
        kwargs = {"provide_planning_service": False}
        if topic.strip("/") != "joint_states":      # MoveItCpp's fixed topic, moveit_cpp.hpp:61
            kwargs["remappings"] = {"joint_states": topic}
        return MoveItPy(node_name=self.cfg.node_name, config_dict=params, **kwargs)

    def _report_start_failure(self, attempt: int, exc: BaseException) -> None:
        hint = ""
        if PSM_START_FAILURE in str(exc):
            hint = (" (MoveItCpp received no complete robot state on "
                    f"{self.cfg.joint_state_topic} within wait_for_initial_state_timeout, "
                    "config/moveit/moveit_py.yaml; every joint of the robot model needs one)")
        limit = f"/{self.cfg.startup_attempts}" if self.cfg.startup_attempts else ""
        then = (f"retrying in {self.cfg.startup_retry_s:g} s" if is_transient_start_failure(exc)
                else "not retried: a configuration error")
        self._log.error(f"MoveIt backend not started, attempt {attempt}{limit}: {exc}{hint}; "
                        f"{then}")

    def _moveit_params(self) -> dict:
        """MoveItConfigsBuilder for the robot, then config/moveit/moveit_py.yaml on top.

        The parts are merged deeply (see combine_moveit_params) instead of ``to_dict()``."""
        cfg = self.cfg
        share = get_package_share_directory(cfg.moveit_config_package)

        def path(spec: str) -> str:
            return resolve_path(spec, share, get_package_share_directory)

        builder = MoveItConfigsBuilder(cfg.robot_name, package_name=cfg.moveit_config_package)
        builder.robot_description(file_path=path(cfg.urdf_file),
                                  mappings=cfg.mapping_dict("urdf_mappings") or None)
        builder.robot_description_semantic(file_path=path(cfg.srdf_file),
                                           mappings=cfg.mapping_dict("srdf_mappings") or None)
        builder.robot_description_kinematics(file_path=path(cfg.kinematics_file))
        builder.joint_limits(file_path=path(cfg.joint_limits_file))
        builder.trajectory_execution(file_path=path(cfg.controllers_file))
        builder.planning_pipelines(default_planning_pipeline="ompl",
                                   pipelines=["ompl", "pilz_industrial_motion_planner"])
        # With Pilz enabled, to_moveit_configs() loads <config pkg>/config/
        # pilz_cartesian_limits.yaml unless a file is given (moveit_configs_builder.py:530-532);
        # franka_fr3_moveit_config has none, so this package ships one.
        limits_file = path(cfg.pilz_cartesian_limits_file)
        cartesian_limits_from_yaml(load_yaml(limits_file), cfg)
        builder.pilz_cartesian_limits(file_path=limits_file)
        configs = builder.to_moveit_configs()
        parts = [getattr(configs, name, None) for name in MOVEIT_CONFIG_PARTS]
        return combine_moveit_params([p for p in parts if isinstance(p, dict) and p],
                                     load_yaml(config_dir() / cfg.moveit_py_file))

    def _on_joints(self, msg: JointState) -> None:
        width = finger_width(msg.name, msg.position, self.cfg.gripper_joint_names)
        if width is not None:
            with self._width_lock:
                self._width = (width, time.monotonic())
                self._width_lock.notify_all()

    def _fresh_width(self, timeout_s: float = 1.0) -> float:
        """Finger width from a joint state received after this call (NaN if none came)."""
        since = time.monotonic()
        with self._width_lock:
            self._width_lock.wait_for(lambda: self._width[1] > since, timeout=timeout_s)
            return self._width[0] if self._width[1] > since else math.nan

    # ------------------------------------------------------------------ motion
    def _move(self, obs: MoveItObservation, stage: str, trajectory_or_code, is_canceled,
              fraction: float = math.nan) -> bool:
        """Execute a planned motion or record why there is none; True when it ran through."""
        trajectory, code = trajectory_or_code
        if trajectory is None:
            if is_system_error(code):
                raise RuntimeError(f"MoveIt cannot plan the {stage} motion: "
                                   f"{moveit_error_name(code)}")
            obs.planning_error, obs.planning_stage = code, stage
            obs.cartesian_fraction = fraction
            return False
        failure = self._execute(trajectory, is_canceled)
        if failure:
            obs.execution_failure, obs.execution_stage = failure, stage
            return False
        return True

    def _release_held_object(self, is_canceled) -> Optional[str]:
        """Put a held object down at the drop-off pose; None or why it failed."""
        trajectory, code = self._plan_to(dropoff_pose(self.cfg), self.cfg.transit_request,
                                         self.cfg.transit_velocity_scaling)
        if trajectory is None:
            return f"no plan to the drop-off pose ({moveit_error_name(code)})"
        failure = self._execute(trajectory, is_canceled)
        if failure:
            return f"drop-off motion failed: {failure}"
        if not self._gripper.move(0.08, self.cfg.gripper_open_speed_mps, is_canceled):
            return "gripper did not open at the drop-off"
        self._holding = False
        return None

    def _retreat(self, motion, opening_m: float, is_canceled) -> None:
        """After a failed close: open the fingers and back out along the approach, so the
        next attempt does not start with the hand around the object (best effort)."""
        if not self._gripper.move(opening_m, self.cfg.gripper_open_speed_mps, is_canceled):
            self._log.warning("gripper did not reopen after the failed grasp")
            return
        trajectory, code, _ = self._plan_straight([motion.pre_grasp],
                                                  motion.descent_velocity_scaling, is_canceled)
        failure = (f"no plan ({moveit_error_name(code)})" if trajectory is None
                   else self._execute(trajectory, is_canceled))
        if failure:
            self._log.warning(f"retreat to the pre-grasp pose failed: {failure}")

    # ------------------------------------------------------------------ the attempt
    def execute(self, target_id: str, grasp: GraspParameters, on_phase, is_canceled) -> ArmResult:
        if not self._gripper.ready(timeout_s=2.0):
            return ArmResult(ArmError.BACKEND_UNAVAILABLE, "gripper action server(s) not "
                             f"available ({self.cfg.gripper_interface})")
        obs = MoveItObservation()
        start = time.monotonic()
        try:
            return self._attempt(target_id, grasp, on_phase, is_canceled, obs, start)
        except _Canceled:
            plan = cancel_plan(self._holding, self._gripper.goal_active)
            if plan.cancel_gripper_goal:
                self._gripper.cancel()
            if plan.open_gripper:
                self._gripper.move(grasp.width, self.cfg.gripper_open_speed_mps, lambda: False)
            obs.duration_s = time.monotonic() - start
            return ArmResult(ArmError.CANCELED,
                             f"canceled during {obs.phase_reached.value}; motion stopped"
                             + ("; object kept in the hand" if self._holding else ""),
                             arm_observation(obs, grasp))
        except (ConnectionError, TimeoutError) as exc:
            return ArmResult(ArmError.BACKEND_UNAVAILABLE, str(exc))
        except (RuntimeError, ValidationError) as exc:
            self._log.error(f"MoveIt backend failed: {exc}")
            return ArmResult(ArmError.BACKEND_FAILURE, str(exc))

    def _attempt(self, target_id, grasp, on_phase, is_canceled, obs, start) -> ArmResult:
        def check() -> None:
            if is_canceled():
                raise _Canceled()

        def finish(message: str) -> ArmResult:
            obs.duration_s = time.monotonic() - start
            return ArmResult(ArmError.NONE, message, arm_observation(obs, grasp))

        if not self._homed:
            if not self._gripper.homing(is_canceled):
                return ArmResult(ArmError.BACKEND_FAILURE, "Franka Hand homing failed")
            self._homed = True
        if self._holding:
            why = self._release_held_object(is_canceled)
            if why is not None:
                return ArmResult(ArmError.BACKEND_FAILURE, f"cannot release the held object: {why}")
        known = {o.id for o in self._objects}
        target = next((o for o in self._objects if o.id == target_id), None)
        if target is None:
            self._log.warning(f"target {target_id!r} is not in the last perception result "
                              f"({sorted(known)}); grasping without its width or scene")
        self._update_scene(target_id, is_canceled)
        motion = plan_grasp_motion(grasp, self.cfg)
        count = len(PHASES)

        # APPROACH: open, free motion to the pre-grasp, straight descent.
        on_phase(Phase.APPROACH, 1, count)
        opening = gripper_open_goal(grasp, self.cfg)
        if not self._gripper.move(opening.width, opening.speed, is_canceled):
            return ArmResult(ArmError.BACKEND_FAILURE, "gripper did not open")
        obs.opening_m = self._fresh_width()
        check()
        planned = self._plan_to(motion.pre_grasp, self.cfg.transit_request,
                                self.cfg.transit_velocity_scaling)
        if not self._move(obs, "pre-grasp", planned, is_canceled):
            return finish("pre-grasp not reached")
        check()
        trajectory, code, fraction = self._plan_straight(motion.descent,
                                                         motion.descent_velocity_scaling,
                                                         is_canceled)
        if not self._move(obs, "descent", (trajectory, code), is_canceled, fraction):
            return finish("descent not completed")

        # CLOSE
        check()
        on_phase(Phase.CLOSE, 2, count)
        obs.phase_reached = Phase.CLOSE
        obs.grasp_goal = gripper_grasp_goal(grasp, target, self.cfg)
        answered = self._gripper.grasp(obs.grasp_goal, is_canceled)
        if answered is None:
            raise TimeoutError("gripper grasp action did not answer")
        obs.width_after_close_m = self._fresh_width()
        lo, hi = obs.grasp_goal.window
        # franka_gripper's Grasp judges the window itself; a GripperCommand controller only
        # reports that the fingers stopped, so the measured width decides.
        obs.grasp_action_ok = (answered if self.cfg.gripper_interface == "franka"
                               else lo < obs.width_after_close_m < hi)
        if not obs.grasp_action_ok:
            self._retreat(motion, opening.width, is_canceled)
            return finish("grasp failed")
        self._holding = True

        # LIFT: lift-off (slip check), then the rest (drop check).
        check()
        on_phase(Phase.LIFT, 3, count)
        obs.phase_reached = Phase.LIFT
        if motion.liftoff:
            trajectory, code, fraction = self._plan_straight(
                motion.liftoff, motion.lift_velocity_scaling, is_canceled)
            if not self._move(obs, "lift-off", (trajectory, code), is_canceled, fraction):
                return finish("lift-off not completed")
            obs.width_after_liftoff_m = self._fresh_width()
        check()
        trajectory, code, fraction = self._plan_straight(motion.lift, motion.lift_velocity_scaling,
                                                         is_canceled)
        if not self._move(obs, "lift", (trajectory, code), is_canceled, fraction):
            return finish("lift not completed")
        obs.width_after_lift_m = self._fresh_width()
        # the hand still closes on something: what the robot itself can tell (the planner
        # reads the rest of the observation)
        self._holding = not math.isnan(obs.width_after_lift_m) \
            and obs.width_after_lift_m >= MIN_OBJECT_WIDTH_M
        obs.duration_s = time.monotonic() - start
        return ArmResult(ArmError.NONE, "object lifted" if self._holding else "object lost",
                         arm_observation(obs, grasp))

    def close(self) -> None:
        """Release the clients, then shut MoveItPy down and delete it now, while rclpy and
        the interpreter are intact, rather than whenever Python collects it at exit.

        MoveItPy.shutdown() only calls rclcpp::shutdown() (moveit_py/src/moveit/moveit_ros/
        moveit_cpp/moveit_cpp.cpp:176-177); the object's deleter then cancels its executor and
        deletes MoveItCpp (lines 136-142). moveit2#3721 (open, Jazzy 2.12.4): that deletion
        can segfault even after shutdown(). A crash after "deleting MoveItCpp" in the log is
        that bug, not this backend."""
        if self._closed:
            return
        self._closed = True
        self._gripper.destroy()
        for client in (self._cartesian, self._apply_scene):
            if client is not None:
                self._node.destroy_client(client)
        moveit, self._moveit = self._moveit, None
        self._arm = self._psm = self._tem = None      # they keep MoveItCpp alive
        moveit.shutdown()
        self._log.info("MoveItPy shut down; deleting MoveItCpp")
        del moveit
        self._log.info("MoveIt backend closed")


__all__ = ["MoveItArmBackend"]
