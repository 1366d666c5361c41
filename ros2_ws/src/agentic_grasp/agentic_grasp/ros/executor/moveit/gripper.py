"""The Franka Hand side of the MoveIt arm backend: franka_ros2's
franka_gripper actions (Homing, Move, Grasp) or a GripperCommand controller, each goal
waited for with a timeout and a cancel check (imported by arm.py only, so only where
MoveIt is selected).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional, Tuple

from rclpy.action import ActionClient
from rclpy.node import Node

from agentic_grasp.ros.executor.moveit.config import MoveItBackendConfig
from agentic_grasp.ros.common.futures import wait_done


_POLL_S = 0.02


class _Canceled(Exception):
    """The goal was canceled while a step ran; the step already stopped the robot."""


def _wait(future, timeout_s: float, is_canceled: Callable[[], bool]) -> Tuple[str, object]:
    """Wait for an rclpy future from a callback thread: ("done", result), ("timeout", None)
    or ("canceled", None). The node's executor completes the future on another thread."""
    deadline = time.monotonic() + timeout_s
    ended = ["done"]

    def poll(done: threading.Event, _timeout_s: float) -> None:
        while not done.wait(_POLL_S):
            if is_canceled():
                ended[0] = "canceled"
                return
            if time.monotonic() > deadline:
                ended[0] = "timeout"
                return

    wait_done(future, timeout_s, wait=poll)
    return (ended[0], None) if ended[0] != "done" else ("done", future.result())


class _Gripper:
    """The Franka Hand through franka_gripper's actions, or a GripperCommand controller."""

    def __init__(self, node: Node, cfg: MoveItBackendConfig, group) -> None:
        self._cfg = cfg
        self._active_goal = None
        if cfg.gripper_interface == "franka":
            try:    # franka_msgs: franka_ros2's messages, on the MoveIt image only
                from franka_msgs.action import Grasp, Homing, Move
            except ImportError as exc:
                raise ImportError("moveit.gripper_interface 'franka' needs franka_msgs "
                                  "(franka_ros2, built in docker/ros/Dockerfile)") from exc
            self._types = {"grasp": Grasp, "move": Move, "homing": Homing}
            ns = cfg.gripper_action_ns.rstrip("/")
            self._clients = {k: ActionClient(node, t, f"{ns}/{k}", callback_group=group)
                             for k, t in self._types.items()}
        else:
            # control_msgs: ros2_control's messages, on the MoveIt image only (like moveit_py)
            from control_msgs.action import GripperCommand
            self._types = {"command": GripperCommand}
            self._clients = {"command": ActionClient(node, GripperCommand,
                                                     cfg.gripper_command_action,
                                                     callback_group=group)}

    @property
    def goal_active(self) -> bool:
        return self._active_goal is not None

    def ready(self, timeout_s: float) -> bool:
        return all(c.wait_for_server(timeout_sec=timeout_s) for c in self._clients.values())

    def _send(self, kind: str, goal, is_canceled: Callable[[], bool]) -> Optional[bool]:
        """Run one goal; True/False = action succeeded/failed, None = no answer in time."""
        client = self._clients[kind]
        state, handle = _wait(client.send_goal_async(goal), self._cfg.action_timeout_s,
                              is_canceled)
        if state != "done" or handle is None or not handle.accepted:
            if state == "canceled":
                raise _Canceled()
            return None
        self._active_goal = handle
        try:
            state, wrapped = _wait(handle.get_result_async(), self._cfg.action_timeout_s,
                                   is_canceled)
            if state == "canceled":
                handle.cancel_goal_async()      # franka_gripper calls gripper->stop()
                raise _Canceled()
            if state == "timeout":
                handle.cancel_goal_async()
                return None
        finally:
            self._active_goal = None
        result = wrapped.result
        if kind == "command":
            return bool(result.reached_goal or result.stalled)
        return bool(result.success)

    def homing(self, is_canceled) -> Optional[bool]:
        if "homing" not in self._clients:
            return True
        return self._send("homing", self._types["homing"].Goal(), is_canceled)

    def move(self, width: float, speed: float, is_canceled) -> Optional[bool]:
        if "move" in self._clients:
            return self._send("move", self._types["move"].Goal(width=width, speed=speed),
                              is_canceled)
        goal = self._types["command"].Goal()
        goal.command.position, goal.command.max_effort = width / 2.0, 0.0
        return self._send("command", goal, is_canceled)

    def grasp(self, goal, is_canceled) -> Optional[bool]:
        if "grasp" in self._clients:
            msg = self._types["grasp"].Goal(width=goal.width, speed=goal.speed, force=goal.force)
            msg.epsilon.inner, msg.epsilon.outer = goal.epsilon_inner, goal.epsilon_outer
            return self._send("grasp", msg, is_canceled)
        msg = self._types["command"].Goal()      # close fully; the object stalls the fingers
        msg.command.position, msg.command.max_effort = 0.0, goal.force
        return self._send("command", msg, is_canceled)

    def cancel(self) -> None:
        handle = self._active_goal
        if handle is not None:
            handle.cancel_goal_async()

    def destroy(self) -> None:
        for client in self._clients.values():
            client.destroy()
