"""How the MoveIt backend plans and runs a motion: its planning scene (the table and the
perceived neighbours of the target as collision objects, in MoveItPy's scene, where OMPL and
Pilz plan, and with ``cartesian_method: service`` in move_group's, whose
/compute_cartesian_path checks its own scene), the start state of every plan (the current
one at rest), a plan to a pose (OMPL or Pilz through a plan request), a straight segment
(Pilz LIN or /compute_cartesian_path) and a trajectory's execution, stopped on a cancel.

What each attempt does with these (its phases, the gripper, the outcome) is arm.py's. Which
collision objects, the scene diff and the start velocities come from translation.py.
Imported by arm.py after its check that MoveIt is installed.
"""
from __future__ import annotations

import copy
import threading
from typing import Optional, Sequence

from geometry_msgs.msg import Pose as PoseMsg, PoseStamped
from moveit.core.robot_trajectory import RobotTrajectory
from moveit.planning import PlanRequestParameters
from moveit_msgs.msg import CollisionObject
from moveit_msgs.srv import ApplyPlanningScene, GetCartesianPath
from shape_msgs.msg import SolidPrimitive

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.ros.conversions.perception import object_from_msg
from agentic_grasp.ros.executor.moveit.gripper import _Canceled, _POLL_S, _wait
from agentic_grasp.ros.executor.moveit.translation import (COLLISION_ADD, SOLID_BOX,
                                                           SOLID_CYLINDER, SOLID_SPHERE,
                                                           CollisionObjectSpec, Pose,
                                                           rest_start_velocities,
                                                           scene_collision_objects, scene_diff)
from agentic_grasp_interfaces.msg import PerceptionResult as PerceptionResultMsg

_SHAPE_TYPES = {SOLID_BOX: SolidPrimitive.BOX, SOLID_CYLINDER: SolidPrimitive.CYLINDER,
                SOLID_SPHERE: SolidPrimitive.SPHERE}


def pose_msg(pose: Pose) -> PoseMsg:
    msg = PoseMsg()
    msg.position.x, msg.position.y, msg.position.z = pose.position
    (msg.orientation.x, msg.orientation.y, msg.orientation.z,
     msg.orientation.w) = pose.orientation
    return msg


def collision_msg(spec: CollisionObjectSpec, operation: int) -> CollisionObject:
    obj = CollisionObject()
    obj.header.frame_id = spec.frame_id
    obj.id = spec.id
    obj.operation = operation
    if operation == CollisionObject.ADD:
        obj.primitives = [SolidPrimitive(type=_SHAPE_TYPES[spec.primitive_type],
                                         dimensions=list(spec.dimensions))]
        obj.primitive_poses = [pose_msg(spec.pose)]
        obj.pose = pose_msg(Pose((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
    return obj


class MoveItPlanningMixin:
    """Planning and execution for MoveItArmBackend. Uses the backend's ``cfg``, ``_log``,
    ``_moveit`` (MoveItPy), ``_arm`` (its planning component), ``_psm`` (the planning scene
    monitor), ``_tem`` (the trajectory execution manager), ``_cartesian`` and
    ``_apply_scene`` (move_group's clients, or None), and keeps the perceived objects
    (``_objects``) and the collision objects last applied (``_scene_ids``)."""

    def _on_perception(self, msg: PerceptionResultMsg) -> None:
        objects = []
        for obs in msg.objects:
            try:
                objects.append(object_from_msg(obs))
            except ValidationError as exc:
                self._log.warning(f"perceived object ignored: {exc}")
        self._objects = objects

    def _update_scene(self, target_id: str, is_canceled) -> None:
        """Table and perceived neighbours into MoveItPy's scene (OMPL and Pilz plan there)
        and, for cartesian_method service, into move_group's (its Cartesian service checks
        collisions against its own scene only)."""
        specs = scene_collision_objects(self._objects, target_id, self.cfg)
        messages = []
        for operation, object_id, spec in scene_diff(self._scene_ids, specs):
            if operation == COLLISION_ADD:
                messages.append(collision_msg(spec, CollisionObject.ADD))
            else:
                gone = CollisionObject(id=object_id, operation=CollisionObject.REMOVE)
                gone.header.frame_id = self.cfg.planning_frame
                messages.append(gone)
        with self._psm.read_write() as scene:
            for message in messages:
                scene.apply_collision_object(message)
            scene.current_state.update()
        self._scene_ids = [s.id for s in specs]
        if self._apply_scene is not None:
            self._send_scene_to_move_group(messages, is_canceled)

    def _send_scene_to_move_group(self, messages, is_canceled) -> None:
        service = self.cfg.apply_planning_scene_service
        request = ApplyPlanningScene.Request()
        # As PlanningSceneInterface::applyCollisionObjects builds it (moveit2 2.12.4
        # planning_scene_interface.cpp:371-378): a diff that leaves the robot state alone.
        request.scene.is_diff = True
        request.scene.robot_state.is_diff = True
        request.scene.world.collision_objects = list(messages)
        if not self._apply_scene.wait_for_service(timeout_sec=2.0):
            raise ConnectionError(f"{service} is not available (is move_group running?); "
                                  "/compute_cartesian_path would not see the table")
        state, response = _wait(self._apply_scene.call_async(request),
                                self.cfg.action_timeout_s, is_canceled)
        if state == "canceled":
            raise _Canceled()
        if state == "timeout":
            raise TimeoutError(f"{service} did not answer")
        if not response.success:
            raise RuntimeError(f"move_group did not apply the planning scene ({service})")

    def _start_state(self):
        """The current state with zero velocities: Pilz refuses a start state that moves
        (see rest_start_velocities); every plan starts after the last motion ended."""
        with self._psm.read_only() as scene:
            state = copy.copy(scene.current_state)
        velocities, fastest = rest_start_velocities(state.joint_velocities)
        if fastest > self.cfg.at_rest_velocity_radps:
            self._log.warning(f"planning from a moving arm: a joint moves at {fastest:.3f} "
                              f"rad/s (> {self.cfg.at_rest_velocity_radps:g}); the plan starts "
                              "from its position at rest")
        state.joint_velocities = velocities
        return state

    def _execute(self, trajectory, is_canceled) -> str:
        """Run a trajectory; "" on success, else the ExecutionStatus text. A cancel stops it."""
        finished = threading.Event()

        def watch() -> None:
            while not finished.wait(_POLL_S):
                if is_canceled():
                    self._tem.stop_execution()
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            status = self._moveit.execute(trajectory, controllers=[])
        finally:
            finished.set()
            watcher.join()
        if is_canceled():
            raise _Canceled()
        if bool(status):
            return ""
        return str(getattr(status, "status", status) or "execution failed")

    def _plan_to(self, pose: Pose, request: str, scaling: Optional[float]):
        """Plan to an ik_link pose; (trajectory, None) or (None, MoveItErrorCodes value)."""
        goal = PoseStamped()
        goal.header.frame_id = self.cfg.planning_frame
        goal.pose = pose_msg(pose)
        self._arm.set_start_state(robot_state=self._start_state())
        self._arm.set_goal_state(pose_stamped_msg=goal, pose_link=self.cfg.ik_link)
        params = PlanRequestParameters(self._moveit, request)
        if scaling is not None:
            params.max_velocity_scaling_factor = scaling
            params.max_acceleration_scaling_factor = scaling
        result = self._arm.plan(single_plan_parameters=params)
        if result:
            return result.trajectory, None
        return None, int(result.error_code.val)

    def _plan_straight(self, waypoints: Sequence[Pose], scaling: float, is_canceled):
        """A straight segment: (trajectory, None, 1.0) or (None, error code, fraction)."""
        if self.cfg.cartesian_method == "pilz_lin":
            trajectory, code = self._plan_to(waypoints[-1], self.cfg.cartesian_request, scaling)
            return trajectory, code, (1.0 if trajectory is not None else 0.0)
        request = GetCartesianPath.Request()
        request.header.frame_id = self.cfg.planning_frame
        request.start_state.is_diff = True
        request.group_name = self.cfg.planning_group
        request.link_name = self.cfg.ik_link
        request.waypoints = [pose_msg(p) for p in waypoints]
        request.max_step = self.cfg.cartesian_max_step_m
        request.avoid_collisions = True
        request.max_velocity_scaling_factor = scaling
        request.max_acceleration_scaling_factor = scaling
        if hasattr(request, "max_cartesian_speed"):      # moveit_msgs >= 2.6
            request.cartesian_speed_limited_link = self.cfg.ik_link
            request.max_cartesian_speed = scaling * self.cfg.max_trans_vel_mps
        if not self._cartesian.wait_for_service(timeout_sec=2.0):
            raise ConnectionError(f"{self.cfg.cartesian_service} is not available "
                                  "(is move_group running?)")
        state, response = _wait(self._cartesian.call_async(request),
                                self.cfg.action_timeout_s, is_canceled)
        if state == "canceled":
            raise _Canceled()
        if state == "timeout":
            raise TimeoutError(f"{self.cfg.cartesian_service} did not answer")
        if response.fraction < self.cfg.min_cartesian_fraction:
            code = response.error_code.val
            return None, (code if code != 1 else -1), float(response.fraction)
        trajectory = RobotTrajectory(self._moveit.get_robot_model())
        with self._psm.read_only() as scene:
            trajectory.set_robot_trajectory_msg(scene.current_state, response.solution)
        trajectory.joint_model_group_name = self.cfg.planning_group
        return trajectory, None, float(response.fraction)


__all__ = ["MoveItPlanningMixin", "collision_msg", "pose_msg"]
