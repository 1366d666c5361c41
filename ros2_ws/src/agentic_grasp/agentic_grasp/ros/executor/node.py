"""Executor node: serves ExecuteGrasp on the selected arm backend (simulator or MoveIt), and
the wrist camera's views (MoveCamera, WristCamera: ros/executor/view_server.py) on the same arm.

A client that vanishes mid-goal (the planner's process died; agentic_grasp.ros.common.liveness) is
treated like a cancel: the backend stops the arm at its next check (the simulator before the
next phase, MoveIt's trajectory through stop_execution), nobody being left to want the
grasp.
"""
from __future__ import annotations

import threading

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from agentic_grasp.ros.executor.view_server import ViewServer, accept_when_free
from agentic_grasp.ros.conversions.grasp import grasp_from_msg, observation_to_msg
from agentic_grasp.core.arm.backend import (ArmBackend, ArmError, ArmResult, ExecutorLimits,
                                            check_request)
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.ros.common.liveness import PeerMonitor
from agentic_grasp.ros.common.runner import spin_node
from agentic_grasp.ros.common.params import declare, declare_config
from agentic_grasp_interfaces.action import ExecuteGrasp


def make_backend(node: Node, kind: str) -> ArmBackend:
    """Import and build the backend chosen by the ``arm_backend`` parameter."""
    if kind == "sim":
        # on use: only the backend that arm_backend names is imported
        from agentic_grasp.ros.executor.sim_arm import SimArmBackend

        return SimArmBackend(node, declare(node, "sim.arm_service", "/sim/arm",
                                           "Service of the simulator's arm (SimArmPhase)"),
                             declare(node, "sim.timeout_s", 5.0,
                                     "Timeout of each simulator phase call (s)"),
                             declare(node, "sim.whole_attempt", True,
                                     "One sim/arm call per attempt (ATTEMPT) instead of one "
                                     "per phase: two hops fewer, phase feedback after the "
                                     "fact (ros/executor/sim_arm.py)"))
    if kind == "moveit":
        from agentic_grasp.ros.executor.moveit.arm import MoveItArmBackend  # needs moveit_py

        return MoveItArmBackend(node)
    raise ValueError(f"arm_backend must be 'sim' or 'moveit', got {kind!r}")


class ExecutorNode(Node):
    """One grasp at a time; rejects a second goal while busy; cancel stops between phases."""

    def __init__(self) -> None:
        super().__init__("executor")
        backend_kind = declare(self, "arm_backend", "sim", "Arm backend: sim or moveit")
        result_timeout = declare(self, "result_timeout_s", 30,
                                 "How long a finished goal's result is kept for late clients (s). "
                                 "rclpy's default (900 s) keeps every goal in each status message, "
                                 "which slows every round trip as goals accumulate")
        self.limits = declare_config(self, "limits", ExecutorLimits)
        self.backend = make_backend(self, backend_kind)
        self._busy = threading.Lock()
        client = declare(self, "client_node", "planner",
                         "Node whose death cancels the running goal (the planner)")
        self._client_watch = PeerMonitor(
            self, [client], on_lost=lambda peer: self.get_logger().warning(
                f"{peer} lost its liveliness; a running grasp is canceled"))
        self._client_name = client
        self._server = ActionServer(
            self, ExecuteGrasp, "execute_grasp", execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=lambda _: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup(), result_timeout=int(result_timeout))
        self.views = ViewServer(self, self.backend, self._busy,
                                lambda: self._client_watch.losses(client), int(result_timeout))
        self.get_logger().info(f"executor ready (arm backend: {self.backend.name})")

    def destroy_node(self) -> None:
        """Close the backend first (the MoveIt backend shuts MoveItPy down explicitly; left
        to garbage collection at exit it can crash, moveit2#3721), then the node."""
        try:
            backend = getattr(self, "backend", None)
            if backend is not None:
                backend.close()
        except Exception as exc:  # noqa: BLE001 - the node must still be destroyed
            self.get_logger().error(f"closing the arm backend failed: {exc!r}")
        super().destroy_node()

    def _on_goal(self, _goal) -> GoalResponse:
        return accept_when_free(self._busy, self.get_logger(),
                                "rejecting ExecuteGrasp goal: another grasp is running")

    def _execute(self, goal_handle):
        try:
            result = self._run(goal_handle)
        finally:
            self._busy.release()
        msg = ExecuteGrasp.Result(error_code=int(result.error), message=result.message)
        msg.observation = observation_to_msg(result.observation)
        if result.error == ArmError.CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        elif result.error == ArmError.NONE:
            goal_handle.succeed()
        else:
            self.get_logger().warning(f"ExecuteGrasp aborted: {result.message}")
            goal_handle.abort()
        return msg

    def _run(self, goal_handle) -> ArmResult:
        request = goal_handle.request
        try:
            grasp = grasp_from_msg(request.grasp)
        except ValidationError as exc:
            return ArmResult(ArmError.INVALID_PARAMETERS, str(exc))
        rejection = check_request(request.target_id, grasp, self.limits)
        if rejection is not None:
            return rejection

        def on_phase(phase, index, count):
            goal_handle.publish_feedback(ExecuteGrasp.Feedback(
                phase=phase.value, phase_index=index, phase_count=count))

        losses = self._client_watch.losses(self._client_name)

        def canceled() -> bool:
            return (goal_handle.is_cancel_requested
                    or self._client_watch.losses(self._client_name) != losses)

        try:
            return self.backend.execute(request.target_id, grasp, on_phase, canceled)
        except Exception as exc:  # noqa: BLE001 - a backend bug must not kill the node
            self.get_logger().error(f"arm backend raised: {exc!r}")
            return ArmResult(ArmError.BACKEND_FAILURE, f"{type(exc).__name__}: {exc}")


def main(args=None) -> None:
    # A ConfigError (e.g. MoveIt backend: bad moveit.* parameters, Pilz limits that disagree,
    # a robot model MoveItCpp cannot build) ends the process with a FATAL line and status 1.
    spin_node(ExecutorNode, num_threads=4, args=args, fatal=(ConfigError,))


if __name__ == "__main__":
    main()
