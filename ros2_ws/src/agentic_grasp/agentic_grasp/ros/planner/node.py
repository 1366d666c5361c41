"""Planner node: GraspObject on ``planner/grasp_object``, paper Sec. IV. Clients use
``grasp_object``: the front node (ros/front/node.py) forwards it here, goal id unchanged.

Per goal: instruction -> ReflectivePlanner.run_task (Algorithm 1 per sub-goal; the loop lives
in agentic_grasp.core.planner) with its four peers reached over ROS:

- perceive: the perception node's ``perceive`` service, before the task, before every
  sub-goal (a long-horizon task re-perceives: the grasped object has left the table) and
  after every failed attempt, each time for a capture taken at or after the goal's start
  or the end of its last arm motion (``not_before``; goal_peers.WorldClock) and with the
  goal's id (re-perception is per goal); an answer with an error (e.g. no capture in time)
  is asked again ``perceive_retries`` times after ``perceive_retry_delay_s``;
- HAA-RAG: the retrieval node's ``retrieve_strategies`` service, once per sub-goal, with
  the camera crop at the perceived target box that came in the same Perceive response
  (cut from that answer's capture) as ``target_crop`` when ``visual_query`` is camera (the
  default), so s_vis is computed by the retrieval node's configured embedding model;
- scene graph + constraints: the scene-graph node's ``infer_constraints`` service, once per
  sub-goal (the node also publishes G and its markers for RViz);
- the arm: the executor's ``execute_grasp`` action, one goal per attempt.

Goal policy:

- one goal at a time: a goal arriving while one runs is rejected (GoalResponse.REJECT, the
  only answer rclpy's goal callback can give, so the reason is logged here);
- a malformed goal (empty or over-long instruction, unknown configuration) is *accepted
  and aborted at once* with ERROR_INVALID_GOAL and why (a rejection carries no text);
- ``configuration`` "" runs the ``configuration`` parameter, any other Table II name that;
- cancel is honoured between sub-goals, between attempts and during an attempt: the running
  ExecuteGrasp goal is canceled too (the arm stops before its next phase), and a wait on
  perception, retrieval or the scene graph is abandoned at once;
- every peer call has a timeout (``timeouts.*``); a peer that does not answer ends the goal
  with ERROR_DEPENDENCY_TIMEOUT and a message naming the node that did not answer. An
  executor whose arm is unavailable ends it the same way (see ExecutorArmBackend);
- every peer call is one common.peer_call.PeerCall, watched by liveness (``PEERS``): a
  restarting peer is waited for, out of the budget ``timeouts.restart_wait_s``, a query
  whose peer died is sent again once it is back; an executor or sim that dies during an
  attempt, or a peer not back in time, ends the goal with ERROR_PEER_LOST naming it;
- the result lists every attempt (AttemptRecord) and the ids grasped; a failed grasp is
  aborted with ERROR_GRASP_FAILED, perception errors with ERROR_PERCEPTION_FAILED, an
  instruction naming nothing perceived with ERROR_TARGET_NOT_FOUND, a cancel ends CANCELED
  with ERROR_CANCELED.

Feedback: one message per step (``stage`` perceive | retrieve | reason | plan | execute |
reflect | done; goal_session.GoalSession): the sub-goal, target, attempt, retry level, and
``thought``: the Thought at ``plan``, the phase at ``execute``, the evidence at ``reflect``.

Topics: ``planner/attempts`` (AttemptRecord, every attempt as it ends, with the GraspOutcome
exactly as the executor returned it; the last 50 kept for late subscribers, qos.EVENT_HISTORY),
``planner/goal_log`` (GoalLog, one per goal when it ends; latched with a history, goal_log),
``planner/decision_inputs`` (every answer that decides, for replay: recording/inputs.py) and
``planner/markers`` (MarkerArray, latched: the grasp about to be executed, planner.markers).

Episodic memory (Sec. IV-C): one per Table II configuration, kept across goals
(``memory_lifetime: goal`` empties it per goal; memory.MemoryLifetime). The level-3
generator is reseeded per goal from its ``seed`` ([seed, 7919], as in process), or the
``seed`` parameter when the goal has none (-1).

Parameters (settings.py): config/planner.yaml, PlannerConfig by dotted names and
``timeouts.*``. The node only wires: goal_session maps events to feedback, records and
result; goal_peers binds the peers to a goal.
"""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any, Callable, Mapping, Optional

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_msgs.msg import Header, String
from visualization_msgs.msg import MarkerArray

from agentic_grasp.ros.planner import goal_log
from agentic_grasp.ros.common import qos
from agentic_grasp.ros.common.dependencies import GoalSignal
from agentic_grasp.ros.planner.peers.executor_arm import ExecutorArmBackend
from agentic_grasp.ros.planner.peers.perception import PerceptionService
from agentic_grasp.ros.planner.peers.retrieval import RetrievalService
from agentic_grasp.ros.planner.peers.scene_graph import SceneGraphService
from agentic_grasp.core.planner import ReflectivePlanner, TaskOutcome, get_configuration
from agentic_grasp.core.planner.configurations import trial_rng_seed
from agentic_grasp.core.planner.memory import MemoryLifetime
from agentic_grasp.core.types import GraspParameters
from agentic_grasp.ros.planner.goal_peers import (BoundArm, BoundPerception, BoundRetriever,
                                                  BoundSceneGraph, TargetCrops, WorldClock)
from agentic_grasp.ros.planner.goal_session import (GoalSession, end_goal, exception_error, guarded,
                                                    task_error)
from agentic_grasp.ros.common.liveness import PeerMonitor
from agentic_grasp.ros.planner.markers import grasp_markers
from agentic_grasp.ros.recording import inputs
from agentic_grasp.ros.common.runner import spin_node
from agentic_grasp.ros.planner.settings import (FATAL_AT_START, declare_acquisition,
                                                declare_node_settings, declare_planner_config,
                                                validate_goal, warn_undeclared)
from agentic_grasp_interfaces.action import GraspObject
from agentic_grasp_interfaces.msg import AttemptRecord as AttemptRecordMsg, GoalLog

NODE_NAME = "planner"
ACTION = "planner/grasp_object"      # the front's grasp_object forwards here
ATTEMPTS_TOPIC = "planner/attempts"
MARKERS_TOPIC = "planner/markers"
#: Executor threads: the goal's, the peers' answers and feedback, a second client, spare.
EXECUTOR_THREADS = 6
#: Nodes the planner's calls need (the executor's simulated arm is never seen alive with
#: arm:=moveit), and the front node: its death cancels the goal it forwarded (no one waits).
PEERS = ("perception", "retrieval", "scene_graph", "executor", "sim", "grasp_front")

Result = GraspObject.Result


class PlannerNode(Node):
    """Serves ``grasp_object``; one goal at a time (module docstring)."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        self.planner_config = declare_planner_config(self)
        self.settings = s = declare_node_settings(self)
        self._acquirer = declare_acquisition(self)
        warn_undeclared(self)
        t = s.timeouts
        peers = ReentrantCallbackGroup()
        self.perception = PerceptionService(self, t.perceive_s, peers)
        self.retrieval = RetrievalService(self, t.retrieve_s, peers)
        self.scene_graph = SceneGraphService(self, t.constraints_s, peers,
                                             frame_id=s.world_frame, source="planner")
        self.arm = ExecutorArmBackend(self, t.execute_s, peers)
        self.pub_attempts = self.create_publisher(AttemptRecordMsg, ATTEMPTS_TOPIC,
                                                  qos.EVENT_HISTORY)
        self.pub_markers = self.create_publisher(MarkerArray, MARKERS_TOPIC, qos.LATCHED)
        self.pub_goal_log = self.create_publisher(GoalLog, goal_log.TOPIC, goal_log.QOS)
        self.pub_inputs = self.create_publisher(String, inputs.TOPIC, inputs.qos())
        self.inputs = inputs.DecisionTap(self._guarded(
            lambda text: self.pub_inputs.publish(String(data=text))), self._acquirer)
        self.crops = TargetCrops()              # from each Perceive response
        self._memories = MemoryLifetime()
        self._lock = threading.Lock()
        self._busy = False
        self._signal: Optional[GoalSignal] = None
        self.peers = PeerMonitor(self, PEERS, on_lost=self._on_peer_lost)
        startup_until = time.monotonic() + t.startup_s
        for port in (self.perception, self.retrieval, self.scene_graph, self.arm):
            port.caller.watch = self.peers    # PeerCall: lost and restarting peers
            port.caller.startup_until = startup_until   # goals sent as the graph comes up
        for service in (self.perception, self.retrieval, self.scene_graph):
            service.tap = self.inputs         # decision inputs (recording/inputs.py)
        self._server = ActionServer(
            self, GraspObject, ACTION, execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=self._on_cancel,
            callback_group=ReentrantCallbackGroup(), result_timeout=int(s.result_timeout_s))
        self.get_logger().info(
            f"planner ready: configuration {self.planner_config.configuration}, Rmax "
            f"{self.planner_config.max_retries}, memory per {s.memory_lifetime}; timeouts "
            f"perceive {t.perceive_s:g} s, retrieve {t.retrieve_s:g} s, "
            f"constraints {t.constraints_s:g} s, execute {t.execute_s:g} s")

    # ---- action callbacks -------------------------------------------------------------------
    def _on_goal(self, goal: GraspObject.Goal) -> GoalResponse:
        with self._lock:
            if self._busy:
                self.get_logger().warning(
                    f"rejecting GraspObject goal {goal.instruction[:80]!r}: another goal is "
                    "running (one goal at a time)")
                return GoalResponse.REJECT
            self._busy = True
            self._signal = GoalSignal(self.settings.timeouts.restart_wait_s)
        return GoalResponse.ACCEPT

    def _on_cancel(self, _goal_handle) -> CancelResponse:
        with self._lock:
            signal = self._signal
        if signal is not None:
            signal.cancel()
        self.get_logger().info("cancel requested")
        return CancelResponse.ACCEPT

    def _on_peer_lost(self, peer: str) -> None:
        with self._lock:
            signal = self._signal
        why = self.peers.describe_loss(peer)
        if signal is None:                  # nothing to wake (the graph may be stopping)
            return self.get_logger().warning(why)
        if peer == PEERS[-1]:               # the front: nobody waits for this goal's result
            self.get_logger().error(why + "; canceling the goal it forwarded")
            return signal.cancel()
        self.get_logger().warning(why + "; the running goal waits for it if it needs it")
        signal.poke()                       # a call waiting on that peer decides (PeerCall)

    def _execute(self, goal_handle) -> GraspObject.Result:
        try:
            with self._lock:
                signal = self._signal or GoalSignal(self.settings.timeouts.restart_wait_s)
            return self._run_goal(goal_handle, signal)
        finally:
            with self._lock:
                self._busy = False
                self._signal = None

    # ---- one goal ---------------------------------------------------------------------------
    def _header(self) -> Header:
        return Header(stamp=self.get_clock().now().to_msg(), frame_id=self.settings.world_frame)

    def _run_goal(self, goal_handle, signal: GoalSignal) -> GraspObject.Result:
        """Run the goal (or refuse a malformed one), publish its GoalLog, then end it (so a
        client holding the result knows the log is out)."""
        start_stamp = self.get_clock().now().to_msg()
        request = goal_handle.request
        goal_id = bytes(goal_handle.goal_id.uuid).hex()
        reason, configuration = validate_goal(request.instruction, request.configuration,
                                              self.planner_config.configuration,
                                              self.settings.max_instruction_chars)
        if reason:                  # accepted and aborted at once, with the reason
            self.get_logger().warning(f"goal {goal_id[:8]} refused: {reason}")
            goal_handle.publish_feedback(GraspObject.Feedback(stage="done", thought=reason))
            goal_handle.abort()
            result = Result(success=False, error_code=Result.ERROR_INVALID_GOAL, message=reason)
        else:
            result = self._plan(goal_handle, goal_id, configuration, signal)
        self._guarded(self.pub_goal_log.publish)(goal_log.goal_log_msg(
            goal_id, request.instruction.strip(), request.configuration,
            configuration or request.configuration, start_stamp,
            self.get_clock().now().to_msg(), result))
        if not reason and self.context.ok():
            end_goal(goal_handle, result, self.get_logger())
        return result

    def _plan(self, goal_handle, goal_id: str, configuration: str,
              signal: GoalSignal) -> GraspObject.Result:
        """ReflectivePlanner.run_task for one valid goal, with its peers bound to the goal."""
        started, s = time.perf_counter(), self.settings
        instruction = goal_handle.request.instruction.strip()
        self.get_logger().info(f"goal {goal_id[:8]}: {instruction!r} ({configuration})")
        session = GoalSession(goal_id, self._guarded(goal_handle.publish_feedback),
                              self._guarded(self.pub_attempts.publish),
                              self._guarded(self._publish_grasp), self._header)
        config = self.planner_config.with_configuration(configuration)
        conf = get_configuration(configuration)
        memory = self._memories.memory_for(configuration, conf.memory, s.memory_lifetime)
        visual = self.crops.visual_query() if s.visual_query == "camera" else None
        retriever = BoundRetriever(self.retrieval, signal, lambda text: session.stage(
            "retrieve", text, upcoming=True)) if conf.retrieval else None
        constraints = BoundSceneGraph(self.scene_graph, signal, session)
        planner = ReflectivePlanner(config, retriever, constraints, visual_query=visual)
        seed = int(goal_handle.request.seed)    # a trial seed, as in process; -1: the node's
        rng_seed = trial_rng_seed(seed) if seed >= 0 else config.seed
        planner.reseed(rng_seed)
        if self._acquirer is not None:          # one goal at a time: the context is this goal's
            self._acquirer.context = replace(self._acquirer.context, goal_id=goal_id,
                                             configuration=configuration)
            planner.attempt_sink = self._acquirer
        world = WorldClock(lambda: self.get_clock().now().to_msg())
        perceive = BoundPerception(self.perception, signal, self.crops, s.perceive_retries,
                                   s.perceive_retry_delay_s, lambda text: session.stage(
                                       "perceive", text, upcoming=True),
                                   self.get_logger().warning, world, goal_id)

        def canceled_by_client() -> bool:
            return signal.canceled or goal_handle.is_cancel_requested

        def canceled() -> bool:            # the core also stops between steps for a lost peer
            return canceled_by_client() or signal.lost is not None

        task: Optional[TaskOutcome] = None
        self.inputs.begin(goal_id, inputs.goal_header(
            instruction, goal_handle.request.configuration, configuration, seed, rng_seed,
            memory, self))
        try:
            task = planner.run_task(instruction, perceive,
                                    BoundArm(self.arm, signal, world, self.inputs),
                                    memory, cancel=canceled, on_event=session.on_event)
            code, message = task_error(task)
        except Exception as exc:  # noqa: BLE001 - a planner bug must not take the node down
            error = exception_error(exc)
            if error is None:
                self.get_logger().error(f"goal {goal_id[:8]} failed: {exc!r}")
                error = Result.ERROR_INTERNAL, f"internal error: {type(exc).__name__}: {exc}"
            code, message = error
        self.inputs.end()
        return session.result(task, code, message, signal, canceled_by_client, started)

    def _guarded(self, publish: Callable[..., None]) -> Callable[..., None]:
        return guarded(publish, self.context.ok, self.get_logger().debug)

    def _publish_grasp(self, grasp: GraspParameters, label: str,
                       candidate: Optional[Mapping[str, Any]] = None) -> None:
        self.pub_markers.publish(grasp_markers(grasp, self._header(), label, candidate))

    def destroy_node(self) -> None:
        with self._lock:
            signal = self._signal
        if signal is not None:
            signal.cancel()             # a running goal stops waiting on its peers
        super().destroy_node()


def main(args=None) -> None:
    spin_node(PlannerNode, num_threads=EXECUTOR_THREADS, args=args, fatal=FATAL_AT_START)


if __name__ == "__main__":
    main()
