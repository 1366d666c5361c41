"""``agentic-grasp grasp "<instruction>"``: one GraspObject goal to the planner node.

Optionally loads a task scene first (``--task``, ``--seed``; the simulator's sim/load_scene),
sends the goal, prints the planner's feedback as it streams (stage, sub-goal, attempt, retry
level, failure type, correction, thought) and then the result: success, the ids grasped and
one line per attempt. Exit status: 0 success, 1 the grasp failed (ERROR_GRASP_FAILED), 2
anything else (goal refused or rejected, a peer timed out, no planner, no answer in time),
130 after Ctrl-C (the goal is canceled first).
"""
from __future__ import annotations

import argparse
import json
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

GRASP_FAILED_EXIT = 1
ERROR_EXIT = 2
#: Pause after a scene load before the goal, for the perception node to take the new
#: ground truth (s); see load_scene.
SCENE_SETTLE_S = 0.5
#: How long the result waits for the last feedback line ("done") to be printed (s).
FEEDBACK_GRACE_S = 0.2


class PlannerClient:
    """GraspObject over a GraphClient's node (composition: its node spins in GraphClient's
    thread, so every wait here blocks on a future with a timeout, never spins). Requests go
    through OrderedActionClient, so a fast reply (an invalid goal aborts at once) is never
    lost between sending and waiting.

    The planner's liveliness is watched (agentic_grasp.liveness): when its process dies while
    a goal runs, :meth:`wait` raises at once (within the one-second lease) instead of waiting
    out its timeout; a plain rclpy client without this would wait for a result that never
    comes (the action server vanishes from the graph only after DDS's 20 s participant lease).
    """

    def __init__(self, graph: Any, action: str = "grasp_object",
                 planner_node: str = "planner") -> None:
        from agentic_grasp.backends.dependencies import OrderedActionClient
        from agentic_grasp.liveness import PeerMonitor
        from agentic_grasp_interfaces.action import GraspObject

        self.graph = graph
        self._action = OrderedActionClient(graph.node, GraspObject, action)
        self._goal_type = GraspObject.Goal
        self._handle = None
        self._lock = threading.Lock()
        self._planner = planner_node
        self._waits: set = set()
        self.liveness = PeerMonitor(graph.node, [planner_node], on_lost=self._wake)
        self._losses_at_send = 0

    def _wake(self, _peer: str) -> None:
        with self._lock:
            waits = list(self._waits)
        for event in waits:
            event.set()

    def close(self) -> None:
        self._action.destroy()

    def wait_for_server(self, timeout_s: float) -> bool:
        return self._action.wait_for_server(timeout_sec=timeout_s)

    def send(self, instruction: str, configuration: str = "",
             on_feedback: Optional[Callable[[Any], None]] = None,
             timeout_s: float = 10.0) -> Any:
        """Send a goal; its ClientGoalHandle (check ``accepted``). GraphError when the planner
        is not there or does not answer."""
        from agentic_grasp.client import GraphError

        if not self.wait_for_server(timeout_s):
            raise GraphError(f"the planner's grasp_object action is not available within "
                             f"{timeout_s:.0f} s (is the planner node running?)")
        callback = (lambda fb: on_feedback(fb.feedback)) if on_feedback else None
        goal = self._goal_type(instruction=instruction, configuration=configuration)
        self._losses_at_send = self.liveness.losses(self._planner)
        future = self._action.send_goal_async(goal, feedback_callback=callback)
        self.graph.wait_future(future, timeout_s)
        if not future.done():
            raise GraphError(f"grasp_object: the planner did not answer the goal within "
                             f"{timeout_s:.0f} s")
        handle = future.result()
        with self._lock:
            self._handle = handle if handle.accepted else None
        return handle

    def wait(self, handle: Any, timeout_s: float) -> Tuple[int, Any]:
        """(goal status, GraspObject.Result) of an accepted goal; GraphError (after canceling
        it) when the result does not come within ``timeout_s``."""
        from agentic_grasp.client import GraphError, PeerLostError

        future = handle.get_result_async()
        done = threading.Event()
        with self._lock:
            self._waits.add(done)
        try:
            future.add_done_callback(lambda _f: done.set())
            if self.liveness.losses(self._planner) == self._losses_at_send:
                done.wait(timeout_s)
        finally:
            with self._lock:
                self._waits.discard(done)
        if not future.done() and self.liveness.losses(self._planner) != self._losses_at_send:
            with self._lock:
                self._handle = None
            raise PeerLostError(f"grasp_object: {self.liveness.describe_loss(self._planner)} "
                                "while the goal ran; its result is lost (bringup restarts "
                                "the planner: send the goal again)")
        if not future.done():
            self.cancel(handle)
            raise GraphError(f"grasp_object: no result within {timeout_s:.0f} s (goal "
                             "canceled)")
        with self._lock:
            if self._handle is handle:
                self._handle = None
        response = future.result()
        return int(response.status), response.result

    def result(self, handle: Any, timeout_s: float) -> Any:
        """The goal's GraspObject.Result (see :meth:`wait`)."""
        return self.wait(handle, timeout_s)[1]

    def cancel(self, handle: Any = None, timeout_s: float = 5.0) -> bool:
        """Ask the planner to cancel ``handle`` (default: the goal sent last); True once the
        planner has answered the cancel request."""
        with self._lock:
            handle = handle or self._handle
        if handle is None:
            return False
        future = handle.cancel_goal_async()
        self.graph.wait_future(future, timeout_s)
        return future.done()

    def grasp(self, instruction: str, configuration: str = "",
              on_feedback: Optional[Callable[[Any], None]] = None,
              timeout_s: float = 300.0, server_timeout_s: float = 10.0) -> Any:
        """Send and wait: the result, or GraphError (not available, rejected, timed out)."""
        from agentic_grasp.client import GraphError

        handle = self.send(instruction, configuration, on_feedback, server_timeout_s)
        if not handle.accepted:
            raise GraphError("grasp_object goal rejected: the planner is busy with another "
                             "goal (one at a time)")
        return self.result(handle, timeout_s)


def load_scene(graph: Any, task: str, seed: int, timeout_s: float = 30.0,
               settle_s: float = 0.0) -> Any:
    """Load a task scene and wait until the simulator's ground truth shows it.

    LoadScene answers before its ground-truth message has reached every subscriber; the
    oracle perception reads that topic, so a goal sent at once could be perceived in the
    previous scene. Seeing the new scene on this client's own subscription to the same
    latched topic is the sign that it is out; ``settle_s`` then leaves the other
    subscribers time to take it (see :func:`wait_until_perceived` for the exact check).
    """
    import time

    from agentic_grasp.client import GraphError

    loaded = graph.load_scene(task, seed, timeout_s=timeout_s)
    want = set(loaded.object_ids)
    deadline = time.monotonic() + timeout_s
    while {o.id for o in graph.ground_truth(timeout_s)} != want:
        if time.monotonic() > deadline:
            raise GraphError(f"sim/ground_truth did not show the scene of {task} within "
                             f"{timeout_s:.0f} s")
        graph._truth_event.clear()
        graph._truth_event.wait(0.05)
    if settle_s > 0.0:
        # The perception node takes the message in its own time (its sensor callbacks run
        # one at a time, camera images included, on a busy machine).
        threading.Event().wait(settle_s)
    return loaded


def _wait_for_oracle(graph: Any, object_ids: Any, timeout_s: float) -> None:
    """With the oracle backend, wait until perception has taken the newly loaded scene (the
    exact check); with the VLM each call costs seconds, so the settle time must do."""
    from agentic_grasp_interfaces.srv import Perceive

    client = graph.node.create_client(Perceive, "perceive")
    try:
        if not client.wait_for_service(timeout_sec=timeout_s):
            return                      # the planner reports a missing perception node itself
        probe = client.call_async(Perceive.Request(instruction="clear the table"))
        graph.wait_future(probe, timeout_s)
        if probe.done() and probe.result().result.backend == "oracle":
            wait_until_perceived(graph, client, object_ids, timeout_s)
    finally:
        graph.node.destroy_client(client)


def wait_until_perceived(graph: Any, perceive_client: Any, object_ids: Any,
                         timeout_s: float = 10.0) -> None:
    """Block until the perception node's answer lists exactly ``object_ids``.

    For the oracle backend (tests, benchmarks): the exact sign that perception has taken a
    newly loaded scene. (With the VLM a call costs seconds and may miss an object.)
    """
    import time

    from agentic_grasp.client import GraphError
    from agentic_grasp_interfaces.srv import Perceive

    want = set(object_ids)
    deadline = time.monotonic() + timeout_s
    seen: Any = None
    while time.monotonic() < deadline:
        future = perceive_client.call_async(Perceive.Request(instruction="clear the table"))
        # At most 1 s per probe: an answer lost to a just-restarted server is asked again.
        graph.wait_future(future, max(0.1, min(1.0, deadline - time.monotonic())))
        if future.done():
            seen = {o.id for o in future.result().result.objects}
            if seen == want:
                return
        threading.Event().wait(0.05)
    raise GraphError(f"perception did not see {sorted(want)} within {timeout_s:.0f} s "
                     f"(last answer: {sorted(seen) if seen is not None else 'none'})")


def feedback_line(fb: Any) -> str:
    """One human-readable line of GraspObject feedback."""
    parts = [f"[{fb.stage:<8}]"]
    if fb.subgoal_count:
        parts.append(f"sub-goal {fb.subgoal_index + 1}/{fb.subgoal_count}")
    if fb.target_id:
        parts.append(fb.target_id)
    if fb.target_id and fb.stage in ("plan", "execute", "reflect"):
        parts.append(f"attempt {fb.attempt + 1} L{fb.retry_level}")
    if fb.failure_type:
        parts.append(f"failure {fb.failure_type}")
    text = " ".join(parts)
    if fb.thought:
        text += f": {fb.thought}"
    if fb.correction:
        text += f" -> correction: {fb.correction}"
    return text


def attempt_summary(record: Any) -> Dict[str, Any]:
    """The essentials of one AttemptRecord, JSON-ready."""
    from agentic_grasp_interfaces.msg import GraspParameters as GraspMsg

    g = record.grasp
    types = {GraspMsg.GRASP_POWER: "power", GraspMsg.GRASP_PINCH: "pinch",
             GraspMsg.GRASP_SIDE: "side"}
    d = record.diagnosis
    return {"subgoal": int(record.subgoal_index), "target": record.target_id,
            "attempt": int(record.attempt), "retry_level": int(record.retry_level),
            "grasp": {"type": types.get(g.grasp_type, str(g.grasp_type)),
                      "force_n": round(float(g.grip_force), 2),
                      "width_mm": round(float(g.gripper_width) * 1e3, 1),
                      "position": [round(v, 4) for v in (g.position.x, g.position.y,
                                                         g.position.z)]},
            "success": bool(record.outcome.success),
            "quality": round(float(record.outcome.quality), 3),
            "events": list(record.outcome.events), "failure_type": d.failure_type,
            "correction": d.correction, "duration_s": round(float(record.duration_s), 3)}


def result_report(result: Any) -> Dict[str, Any]:
    from agentic_grasp_interfaces.action import GraspObject

    codes = {v: k for k, v in vars(GraspObject.Result).items()
             if k.startswith("ERROR_") and isinstance(v, int)}
    return {"success": bool(result.success),
            "error_code": codes.get(result.error_code, str(result.error_code)),
            "message": result.message, "grasped_ids": list(result.grasped_ids),
            "total_time_s": round(float(result.total_time_s), 3),
            "attempts": [attempt_summary(a) for a in result.attempts]}


def exit_code(result: Any) -> int:
    from agentic_grasp_interfaces.action import GraspObject

    if result.success:
        return 0
    return GRASP_FAILED_EXIT if result.error_code == GraspObject.Result.ERROR_GRASP_FAILED \
        else ERROR_EXIT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("instruction", help='what to grasp, e.g. "pick up the ceramic cup"')
    parser.add_argument("--configuration", default="",
                        help="Table II configuration (full, no_haa_rag, no_scene_graph, "
                        "no_recovery, no_episodic_memory, vlm_only, heuristic); default: "
                        "the planner node's")
    parser.add_argument("--task", default="",
                        help="load this task scene into the simulator first (e.g. sg_cup)")
    parser.add_argument("--seed", type=int, default=0, help="trial seed of --task's scene")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for the result (the goal is canceled after)")
    parser.add_argument("--server-timeout", type=float, default=30.0,
                        help="seconds to wait for the planner (and the simulator) to be up")
    parser.add_argument("--json", action="store_true",
                        help="print only the result, as JSON (no feedback lines)")


def run(args: argparse.Namespace) -> int:
    from agentic_grasp.client import GraphClient, GraphError

    with GraphClient("agentic_grasp_grasp") as graph:
        planner = PlannerClient(graph)
        try:
            if args.task:
                loaded = load_scene(graph, args.task, args.seed, args.server_timeout,
                                    settle_s=SCENE_SETTLE_S)
                _wait_for_oracle(graph, loaded.object_ids, args.server_timeout)
                if not args.json:
                    print(f"loaded {loaded.task_id} (seed {args.seed}): objects "
                          f"{', '.join(loaded.object_ids)}", flush=True)

            done = threading.Event()

            def feedback(fb: Any) -> None:
                if not args.json:
                    print(feedback_line(fb), flush=True)
                if fb.stage == "done":
                    done.set()

            try:
                result = planner.grasp(args.instruction, args.configuration, feedback,
                                       timeout_s=args.timeout,
                                       server_timeout_s=args.server_timeout)
                # Feedback and result travel separately: let the last lines arrive.
                done.wait(FEEDBACK_GRACE_S)
            except KeyboardInterrupt:
                planner.cancel()
                print("canceled", flush=True)
                return 130
        except GraphError as exc:
            print(f"error: {exc}", flush=True)
            return ERROR_EXIT
        finally:
            planner.close()
    report = result_report(result)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report)
    return exit_code(result)


def _print_report(report: Dict[str, Any]) -> None:
    lines: List[str] = [
        f"result: {'SUCCESS' if report['success'] else 'FAILED'} ({report['error_code']}): "
        f"{report['message']}",
        f"grasped: {', '.join(report['grasped_ids']) or 'nothing'}; "
        f"{len(report['attempts'])} attempt(s) in {report['total_time_s']:.2f} s"]
    for a in report["attempts"]:
        g = a["grasp"]
        line = (f"  sub-goal {a['subgoal'] + 1} {a['target']} attempt {a['attempt'] + 1} "
                f"L{a['retry_level']}: {g['type']} {g['force_n']:.1f} N {g['width_mm']:.0f} mm"
                f" -> {'success' if a['success'] else 'failed'} (Q {a['quality']:.2f})")
        if a["failure_type"] not in ("", "none"):
            line += f", {a['failure_type']}"
            if a["correction"]:
                line += f"; next: {a['correction']}"
        lines.append(line)
    print("\n".join(lines), flush=True)
