"""The rclpy side of ``agentic-grasp mcp``: the graph as a ROS client sees it.

One :class:`GraphBridge` per server process. It owns a
:class:`~agentic_grasp.ros.client.graph_client.GraphClient` (its node spins in its own thread)
and a :class:`~agentic_grasp.ros.client.planner.PlannerClient`, the same client code as
``agentic-grasp grasp``; every call here blocks with a timeout and ends in a
:class:`~agentic_grasp.ros.client.graph_client.GraphError` whose message the agent reads, never
in a hang. The MCP side (commands/mcp.py) runs these calls in
worker threads.

``show_last_attempt`` draws with the recording's own picture code (ros/recording/show.py, views.py),
from what this node has received since it started: the planner's attempt records (the
planner keeps its last ones for late subscribers), the perception answers, the camera
frames, the scene graph and its constraint summary, each kept with its arrival order, so an
attempt is drawn on the perception answer and frame that came before it (as ``show`` picks
them from a bag). ``describe_scene`` draws the same way before any attempt
(recording/show.scene_picture): the frame of the perception answer's capture (same stamp).

The goals this server sends hold a lease on motion (PlannerClient ``lease``): the node
announces its liveliness on a topic of its own and names it in each goal, so a server that
dies (SIGKILL included) has its goal canceled by the front about 1.2 s later. ``stop`` and
``status`` see every client's goals (graph_watch.GraphWatch).
"""
from __future__ import annotations

import os
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import cv2
from action_msgs.msg import GoalStatus
from sensor_msgs.msg import CameraInfo, Image
from visualization_msgs.msg import MarkerArray

from agentic_grasp.ros.planner import goal_log
from agentic_grasp.ros.common import qos
from agentic_grasp.ros.client.graph_client import GraphClient, GraphError
from agentic_grasp.ros.client.planner import PlannerClient, _wait_for_oracle, load_scene
from agentic_grasp_interfaces.msg import (AffordanceDescriptor, AttemptRecord, GoalLog,
                                          PerceptionResult, SceneGraph)
from agentic_grasp_interfaces.srv import InferConstraints, Perceive, RetrieveStrategies
from agentic_grasp.ros.client.grasp_report import result_report
from agentic_grasp.ros.client.retrieval import strategy_from_msg
from agentic_grasp.ros.client.graph_watch import GRASP_ACTION, GraphWatch
from agentic_grasp.ros.conversions.perception import objects_from_msgs
from agentic_grasp.ros.recording.show import attempt_picture, scene_picture
from agentic_grasp.core.planner.instruction.tasks import plan_subgoals
from agentic_grasp.ros.recording.views import (AttemptView, camera_of, constraint_summary,
                                               default_extrinsics, rgb_image)

#: Pause after a scene load for the perception node to take the new ground truth (s), as
#: ``agentic-grasp grasp --task`` does.
SCENE_SETTLE_S = 0.5
#: How long after the server's start a peer may still be undiscovered (s): DDS discovery of a
#: whole graph by a new process took seconds on a loaded 2-core machine (the node harness
#: allows up to 60 s), so until then a missing peer is waited for this long, not only
#: ``server_timeout_s``.
DISCOVERY_S = 30.0
#: Messages of each picture topic kept (arrival order); the planner re-perceives after each
#: failed attempt, so a goal of a few attempts needs a few of each.
PICTURE_HISTORY = 16
#: How long a grasp waits for this server's previous goal to end when that goal is already
#: canceled or ended (s): its result travels front -> here after its status, and the planner
#: ends a canceled goal after the phase under way (a few hundred ms); a grasp sent right
#: after a cancel or a stop waits for that instead of being refused as "still running".
ENDING_WAIT_S = 3.0


def feedback_fields(fb: Any) -> Dict[str, Any]:
    """GraspObject feedback as plain values (core.mcp_tools.feedback_text reads them)."""
    return {"stage": fb.stage, "subgoal_index": int(fb.subgoal_index),
            "subgoal_count": int(fb.subgoal_count), "target_id": fb.target_id,
            "attempt": int(fb.attempt), "retry_level": int(fb.retry_level),
            "failure_type": fb.failure_type, "correction": fb.correction,
            "thought": fb.thought}


def perception_fields(msg: Any) -> Dict[str, Any]:
    """A PerceptionResult as plain values (core.mcp_tools.scene_summary reads them)."""
    objects = []
    for o in msg.objects:
        p, s = o.pose.position, o.size
        objects.append({"id": o.id, "category": o.category, "name": o.name,
                        "position": [float(p.x), float(p.y), float(p.z)],
                        "size": [float(s.x), float(s.y), float(s.z)],
                        "affordance": o.affordance.type, "material": o.affordance.material,
                        "region": o.affordance.graspable_region,
                        "fragility": float(o.affordance.fragility),
                        "confidence": float(o.confidence), "warnings": list(o.warnings)})
    return {"backend": msg.backend, "error": msg.error, "warnings": list(msg.warnings),
            "target_found": bool(msg.target_found), "objects": objects}


class _Pictures:
    """The recent messages an attempt picture needs, each with its arrival number."""

    TOPICS = {"attempt": ("planner/attempts", AttemptRecord, qos.EVENT_HISTORY),
              "perception": ("perception/result", PerceptionResult, qos.LATCHED),
              "graph": ("scene_graph/graph", SceneGraph, qos.LATCHED)}

    def __init__(self, node: Any) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self.history: Dict[str, Deque[Tuple[int, Any]]] = {}
        topics = dict(self.TOPICS)
        topics["frame"] = ("camera/color/image_raw", Image, qos.LATCHED)
        topics["info"] = ("camera/color/camera_info", CameraInfo, qos.LATCHED)
        topics["markers"] = ("scene_graph/markers", MarkerArray, qos.LATCHED)
        topics["goal_log"] = (goal_log.TOPIC, GoalLog, goal_log.QOS)
        for key, (topic, kind, profile) in topics.items():
            self.history[key] = deque(maxlen=PICTURE_HISTORY if key != "goal_log" else 64)
            node.create_subscription(kind, topic, self._keeper(key), profile)

    def _keeper(self, key: str) -> Callable[[Any], None]:
        def keep(msg: Any) -> None:
            with self._lock:
                self._count += 1
                self.history[key].append((self._count, msg))
        return keep

    def _last_before(self, key: str, order: int) -> Any:
        best = None
        for n, msg in self.history[key]:
            if n <= order:
                best = msg
        return best

    def frame_and_camera(self, stamp: Any) -> Tuple[Any, Any]:
        """(RGB image or None, Camera) of the capture stamped ``stamp`` (else the latest)."""
        with self._lock:
            frames = [m for _, m in self.history["frame"]]
            info = self.history["info"][-1][1] if self.history["info"] else None
        key = (stamp.sec, stamp.nanosec)
        frame = next((f for f in reversed(frames)
                      if (f.header.stamp.sec, f.header.stamp.nanosec) == key),
                     frames[-1] if frames else None)
        return (rgb_image(frame) if frame is not None else None,
                camera_of(info, default_extrinsics()))

    def last_attempt_png(self) -> Tuple[bytes, str]:
        """(PNG bytes, caption) of the last attempt record received; GraphError when none."""
        with self._lock:
            if not self.history["attempt"]:
                raise GraphError("no grasp attempt seen since this server started (the "
                                 "planner keeps its last attempts for new clients: none yet)")
            order, record = self.history["attempt"][-1]
            perception = self._last_before("perception", order)
            p_order = next((n for n, m in self.history["perception"] if m is perception), order)
            frame = self._last_before("frame", p_order) or self._last_before("frame", order)
            info = self._last_before("info", order) or (
                self.history["info"][-1][1] if self.history["info"] else None)
            graph = self._last_before("graph", order)
            markers = self._last_before("markers", order)
            log = next((m for _, m in reversed(self.history["goal_log"])
                        if m.goal_id == record.goal_id), None)
        view = AttemptView(
            record.goal_id, log.instruction if log is not None else
            (perception.instruction if perception is not None else ""),
            log.configuration if log is not None else "?", int(record.attempt), record,
            perception, rgb_image(frame) if frame is not None else None,
            camera_of(info, default_extrinsics()),
            [(r.subject_id, r.relation, r.object_id) for r in graph.relations]
            if graph is not None else [], constraint_summary(markers))
        result = ""
        if log is not None:
            result = ("succeeded" if log.success else f"failed (error {log.error_code})") + \
                f": {log.message}"
        ok, png = cv2.imencode(".png", attempt_picture(view, result),
                               [cv2.IMWRITE_PNG_COMPRESSION, 6])
        if not ok:
            raise GraphError("the attempt picture could not be encoded as PNG")
        caption = (f"goal {record.goal_id[:8]} attempt {int(record.attempt) + 1} on "
                   f"{record.target_id}: {'success' if record.outcome.success else 'failed'}"
                   + (f", {record.diagnosis.failure_type}" if record.diagnosis.failure_type
                      not in ("", "none") else "")
                   + ("" if frame is not None else " (no camera frame received: drawn on a "
                      "blank image)"))
        return png.tobytes(), caption


class GraphBridge:
    """The graph's services and the planner's action for the MCP tools (blocking calls)."""

    def __init__(self, node_name: str = "agentic_grasp_mcp", server_timeout_s: float = 10.0,
                 goal_timeout_s: float = 300.0, call_timeout_s: float = 30.0) -> None:
        self.server_timeout_s = float(server_timeout_s)
        self._started = time.monotonic()
        self.goal_timeout_s = float(goal_timeout_s)
        self.call_timeout_s = float(call_timeout_s)
        self.graph = GraphClient(node_name)
        node = self.graph.node
        self.planner = PlannerClient(self.graph, lease=True)
        self.watch = GraphWatch(node)
        self._perceive = node.create_client(Perceive, "perceive")
        self._infer = node.create_client(InferConstraints, "infer_constraints")
        self._retrieve = node.create_client(RetrieveStrategies, "retrieve_strategies")
        self.pictures = _Pictures(node)
        self._goal_lock = threading.Lock()
        self._active: Optional[Any] = None
        self._canceled_by_us = False

    def peer_wait_s(self) -> float:
        """How long to wait for a peer now: ``server_timeout_s``, or longer while this
        server's discovery of the graph may still be under way (DISCOVERY_S)."""
        return max(self.server_timeout_s,
                   DISCOVERY_S - (time.monotonic() - self._started))

    def close(self) -> None:
        self.cancel_active()
        self.planner.close()
        self.graph.close()

    # ---- the planner's action ---------------------------------------------------------------
    def start_goal(self, instruction: str, configuration: str, seed: Optional[int],
                   on_feedback: Callable[[Dict[str, Any]], None]) -> Tuple[Any, Future]:
        """Send one GraspObject goal (one at a time per server): its accepted handle and a
        future of its result report (ros/grasp_report.result_report), or of the GraphError
        that ended the wait: the goal timeout (the goal is canceled) or the planner's death.

        The wait runs in a thread of its own that frees the goal slot when the goal has
        ended, whoever (or nobody) still waits for the future: a caller that gives up
        cancels the goal (:meth:`cancel`) and the slot frees once the planner ends it."""
        if not self._goal_lock.acquire(blocking=False) and not (
                self._ending() and self._goal_lock.acquire(timeout=ENDING_WAIT_S)):
            raise GraphError("a grasp from this server is still running (one at a time)")
        try:
            handle = self.planner.send(instruction, configuration,
                                       lambda fb: on_feedback(feedback_fields(fb)),
                                       self.peer_wait_s(), seed)
            if not handle.accepted:
                raise GraphError("grasp_object goal rejected: the planner is busy with "
                                 "another goal (one at a time)")
        except BaseException:
            self._goal_lock.release()
            raise
        self._active = handle
        self._canceled_by_us = False
        future: Future = Future()
        threading.Thread(target=self._wait_result, args=(handle, future),
                         name="mcp_goal_wait", daemon=True).start()
        return handle, future

    def _wait_result(self, handle: Any, future: Future) -> None:
        try:
            outcome: Any = result_report(self.planner.result(handle, self.goal_timeout_s))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
            outcome = exc
        finally:
            self._active = None
            self._goal_lock.release()
        if future.set_running_or_notify_cancel():        # False: nobody waits any more
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def _ending(self) -> bool:
        """Whether this server's goal is on its way out: canceled by this server, or canceled
        or ended as any watcher of the action sees it (a stop from another client) while its
        result is still on its way here."""
        handle = self._active
        if handle is None or self._canceled_by_us:
            return True
        status = self.watch.statuses[GRASP_ACTION].get(bytes(handle.goal_id.uuid).hex())
        return status is not None and status not in (GoalStatus.STATUS_ACCEPTED,
                                                     GoalStatus.STATUS_EXECUTING)

    def cancel(self, handle: Any) -> bool:
        """Ask the planner to cancel ``handle``; whether it answered."""
        self._canceled_by_us = True
        try:
            return self.planner.cancel(handle, timeout_s=5.0)
        except Exception:  # noqa: BLE001 - a dead planner cannot cancel; nothing is left
            return False

    def cancel_active(self) -> None:
        handle = self._active
        if handle is not None:
            self.cancel(handle)

    def goal_running(self) -> bool:
        return self._active is not None

    # ---- the simulator ------------------------------------------------------------------------
    def is_simulator(self) -> bool:
        """Whether a simulator serves sim/load_scene (the arm is the simulator)."""
        return self.graph._load.wait_for_service(timeout_sec=self.peer_wait_s())

    def load_scene(self, task: str, seed: int) -> Dict[str, Any]:
        """Load a task scene and wait until perception can see it."""
        if not self.is_simulator():
            raise GraphError("load_scene is for the simulator only: no sim/load_scene service "
                             "answers (the arm is not the simulator, or it is not running)")
        loaded = load_scene(self.graph, task, seed, self.call_timeout_s,
                            settle_s=SCENE_SETTLE_S)
        _wait_for_oracle(self.graph, loaded.object_ids, self.call_timeout_s)
        return {"task": loaded.task_id, "seed": int(seed), "instruction": loaded.instruction,
                "object_ids": list(loaded.object_ids), "target_ids": list(loaded.target_ids)}

    # ---- perception and the scene graph --------------------------------------------------------
    def _service(self, client: Any, request: Any, what: str) -> Any:
        wait_s = self.peer_wait_s()
        if not client.wait_for_service(timeout_sec=wait_s):
            raise GraphError(f"{what} is not available within {wait_s:.0f} s "
                             "(is its node running?)")
        future = client.call_async(request)
        self.graph.wait_future(future, self.call_timeout_s)
        if not future.done():
            future.cancel()
            raise GraphError(f"{what}: no answer within {self.call_timeout_s:.0f} s")
        if future.exception() is not None:
            raise GraphError(f"{what}: {future.exception()}")
        return future.result()

    def describe_scene(self, picture: bool = True
                       ) -> Tuple[Dict[str, Any], List[Dict[str, Any]], str, bytes]:
        """(perception fields, relations, note, PNG): a fresh perception of the whole table,
        the scene graph's relations between what it reports, and the camera image of that
        capture with both drawn on it (b"" when ``picture`` is False)."""
        answer = self._service(self._perceive, Perceive.Request(instruction="clear the table"),
                               "perceive")
        self._last_perception = answer.result
        perception = perception_fields(answer.result)
        relations: List[Dict[str, Any]] = []
        note = ""
        if answer.result.objects:
            inferred = self._service(
                self._infer, InferConstraints.Request(
                    scene=SceneGraph(header=answer.result.header,
                                     objects=list(answer.result.objects))),
                "infer_constraints")
            if inferred.success:
                relations = [{"subject": r.subject_id, "relation": r.relation,
                              "object": r.object_id, "distance_m": float(r.distance)}
                             for r in inferred.relations]
            else:
                note = f"relations not available: {inferred.message}"
        png = b""
        if picture:
            image, camera = self.pictures.frame_and_camera(answer.result.header.stamp)
            ok, encoded = cv2.imencode(".png", scene_picture(
                answer.result, image, camera,
                [(r["subject"], r["relation"], r["object"]) for r in relations]),
                [cv2.IMWRITE_PNG_COMPRESSION, 6])
            if not ok:
                raise GraphError("the scene picture could not be encoded as PNG")
            png = encoded.tobytes()
        return perception, relations, note, png

    def preview_targets(self, instruction: str) -> List[Dict[str, str]]:
        """The sub-goals the planner would make of ``instruction`` now: its own parse
        (core/planner/instruction/tasks.plan_subgoals) over a fresh perception of the table;
        the planner perceives again when the goal starts, so this is what the user is asked
        to confirm, not a promise."""
        answer = self._service(self._perceive, Perceive.Request(instruction=instruction),
                               "perceive")
        plan = plan_subgoals(instruction, objects_from_msgs(answer.result.objects))
        return [s.to_dict() for s in plan.subgoals]

    # ---- stop and status (any client's goals) ---------------------------------------------------
    def stop(self, timeout_s: float = 10.0) -> Dict[str, Any]:
        return self.watch.stop(timeout_s)

    def status(self) -> Dict[str, Any]:
        report = self.watch.status()
        report["this_server"] = {"goal_running": self.goal_running(), "pid": os.getpid(),
                                 "lease_topic": self.planner.lease_topic}
        return report

    def grasp_running_elsewhere(self) -> List[str]:
        """Goal ids of grasp_object that run (any client's)."""
        return self.watch.running()

    # ---- retrieval ------------------------------------------------------------------------------
    def retrieve(self, query: Dict[str, Any]) -> Dict[str, Any]:
        """One RetrieveStrategies call: ros/client/retrieval.py's JSON report."""
        request = RetrieveStrategies.Request(
            category=query["category"], k=int(query["k"]),
            affordance=AffordanceDescriptor(type=query["type"], material=query["material"],
                                            fragility=float(query["fragility"]),
                                            graspable_region=query["region"]))
        response = self._service(self._retrieve, request, "retrieve_strategies")
        return {"success": bool(response.success), "message": response.message,
                "candidates_level1": int(response.candidates_level1),
                "candidates_level2": int(response.candidates_level2),
                "strategies": [strategy_from_msg(s) for s in response.strategies]}

    # ---- pictures -------------------------------------------------------------------------------
    def last_attempt_png(self) -> Tuple[bytes, str]:
        return self.pictures.last_attempt_png()
