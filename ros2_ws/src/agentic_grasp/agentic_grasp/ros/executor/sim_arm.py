"""Arm backend that drives the simulator node as if it were hardware (/sim/arm service)."""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Callable, Optional

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from agentic_grasp.ros.conversions.wrist_view import (pose_to_msg, view_result_from_msg,
                                                      wrist_camera_from_response)
from agentic_grasp.ros.conversions.grasp import grasp_to_msg, observation_from_msg
from agentic_grasp.core.arm.backend import (PHASES, ArmBackend, ArmError, ArmResult, ViewResult,
                                            WristCameraInfo)
from agentic_grasp.core.types import GraspParameters, Phase
from agentic_grasp.ros.common.futures import wait_done
from agentic_grasp.ros.common.liveness import PeerMonitor
from agentic_grasp.ros.common.readiness import STARTUP_S
from agentic_grasp_interfaces.srv import SimArmPhase, SimMoveCamera, WristCamera

def _plain_wait(event: threading.Event, timeout_s: float) -> None:
    event.wait(timeout_s)


def _polling(on_cancel: Callable[[], bool], every_s: float = 0.02):
    """A wait that calls ``on_cancel`` every ``every_s`` until the event or the time is up."""
    def wait(event: threading.Event, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not event.wait(max(0.0, min(every_s, deadline - time.monotonic()))):
            on_cancel()
            if time.monotonic() >= deadline:
                return
    return wait


_PHASE_CODES = {Phase.APPROACH: SimArmPhase.Request.APPROACH,
                Phase.CLOSE: SimArmPhase.Request.CLOSE, Phase.LIFT: SimArmPhase.Request.LIFT}


class SimArmBackend(ArmBackend):
    """APPROACH, CLOSE, LIFT as one service call each, so feedback is per phase and a cancel
    stops the arm before the next phase (ABORT opens the gripper, nothing more moves).
    ``whole_attempt``: one ATTEMPT call runs the three (two request/response hops fewer); a
    cancel during it sends ABORT, which skips the phases not yet run, and the feedback of
    the phases after APPROACH is sent when the call returns, not as they start: just before
    the result, on another topic, which DDS does not order against it, and rclpy's
    ActionClient drops feedback that arrives after its goal's result, so a client can miss
    them (the result's outcome says what ran).

    Runs inside the executor's action callback under a MultiThreadedExecutor with a reentrant
    group: responses arrive on another executor thread while this one waits on an event.

    The simulator node's liveliness is watched (agentic_grasp.ros.common.liveness): when it dies
    during a phase, the wait ends at once with BACKEND_UNAVAILABLE naming it, not after
    ``timeout_s``.
    """

    name = "sim"

    def __init__(self, node: Node, service: str = "/sim/arm", timeout_s: float = 5.0,
                 whole_attempt: bool = False) -> None:
        self._node = node
        self._timeout = timeout_s
        self._whole = whole_attempt
        group = ReentrantCallbackGroup()
        self._client = node.create_client(SimArmPhase, service, callback_group=group)
        self._abort = node.create_client(SimArmPhase, service + "_abort", callback_group=group)
        self.peer = service.strip("/").split("/")[0] or "sim"
        base = service.rsplit("/", 1)[0]              # /sim: the wrist camera's services
        self._view = node.create_client(SimMoveCamera, f"{base}/move_camera",
                                        callback_group=group)
        self._describe = node.create_client(WristCamera, f"{base}/wrist_camera",
                                            callback_group=group)
        self._camera: Optional[WristCameraInfo] = None
        #: A sim service never seen yet is waited for until then (readiness.STARTUP_S), not
        #: only timeout_s: a goal sent as the graph comes up waits for discovery.
        self.startup_until = time.monotonic() + STARTUP_S
        self._seen: set = set()
        self._waits: set = set()
        self._waits_lock = threading.Lock()
        self._monitor = PeerMonitor(node, [self.peer], on_lost=self._on_lost)

    def _on_lost(self, _peer: str) -> None:
        with self._waits_lock:
            waits = list(self._waits)
        for event in waits:
            event.set()

    def _call(self, request, client=None, timeout_s: float = 0.0,
              on_cancel: Optional[Callable[[], bool]] = None):
        """The response, None on timeout, or "lost" when the simulator died meanwhile.
        ``client``: the sim service (default ``sim/arm``); ``on_cancel``: polled while
        waiting; it sends ABORT once and says whether it did."""
        client = client or self._client
        if self._monitor.lost(self.peer):
            return "lost"
        losses = self._monitor.losses(self.peer)
        done = threading.Event()
        with self._waits_lock:
            self._waits.add(done)
        try:
            future = client.call_async(request)
            wait_done(future, timeout_s or self._timeout, event=done,   # _on_lost sets it too
                      wait=_polling(on_cancel) if on_cancel else _plain_wait)
        finally:
            with self._waits_lock:
                self._waits.discard(done)
        if future.done():
            return future.result()
        client.remove_pending_request(future)
        return "lost" if self._monitor.losses(self.peer) != losses else None

    def _await_back(self, is_canceled: Callable[[], bool]) -> None:
        """Before an attempt's (or a view's) first request: while this node's own watch does
        not see the sim alive, wait up to ``timeout_s`` for it. Nothing was sent to it yet, so
        a restarted sim can take the request; the planner's watch may have seen the new
        instance before this one did (each node discovers it on its own; CI saw the
        executor's watch 0.9 s behind the planner's, and the attempt end as lost).

        Not alive covers lost and in doubt alike: a sim whose lease ran out and whose verdict
        is still pending (liveness.CONFIRM_S) must be waited out too. A request sent then went
        to the restarted instance, and the old one's verdict, landing during the call, ended
        that sound attempt as lost (CI: the sim back 1.1 s after its SIGKILL, the executor's
        verdict 0.07 s into the attempt)."""
        deadline = time.monotonic() + self._timeout
        poll = threading.Event()                 # never set: a sleep
        while not self._monitor.alive(self.peer) and time.monotonic() < deadline \
                and not is_canceled():
            poll.wait(0.05)

    def _send_abort(self, attempt_id: str) -> None:
        self._abort.call_async(SimArmPhase.Request(phase=SimArmPhase.Request.ABORT,
                                                   attempt_id=attempt_id))

    def execute(self, target_id, grasp: GraspParameters, on_phase, is_canceled) -> ArmResult:
        self._await_back(is_canceled)
        if not self._ready(self._client):
            return ArmResult(ArmError.BACKEND_UNAVAILABLE,
                             f"simulator arm service not available within {self._timeout:.1f} s")
        attempt_id = uuid.uuid4().hex
        if self._whole:
            return self._execute_whole(attempt_id, target_id, grasp, on_phase, is_canceled)
        last = None
        for index, phase in enumerate(PHASES, start=1):
            if is_canceled():
                self._send_abort(attempt_id)
                return ArmResult(ArmError.CANCELED, f"canceled before {phase.value}",
                                 observation_from_msg(last.observation) if last else None)
            on_phase(phase, index, len(PHASES))
            request = SimArmPhase.Request(phase=_PHASE_CODES[phase], attempt_id=attempt_id)
            if phase == Phase.APPROACH:
                request.target_id, request.grasp = target_id, grasp_to_msg(grasp)
            response = self._call(request)
            unanswered = self._unanswered(response, attempt_id, phase.value, self._timeout)
            if unanswered is not None:
                return unanswered
            if not response.ok:
                return ArmResult(ArmError(response.error_code or ArmError.BACKEND_FAILURE),
                                 response.message)
            last = response
            if response.finished:
                break
        return ArmResult(ArmError.NONE, last.message if last else "",
                         observation_from_msg(last.observation) if last else None)

    def _unanswered(self, response: Any, attempt_id: str, what: str,
                    waited_s: float) -> Optional[ArmResult]:
        """The result of a call the simulator did not answer: its node was lost, or the wait
        of ``waited_s`` ran out (the attempt is then aborted there); None when it answered."""
        if response == "lost":
            return ArmResult(ArmError.BACKEND_UNAVAILABLE,
                             f"{self._monitor.describe_loss(self.peer)} during {what}")
        if response is None:
            self._send_abort(attempt_id)
            return ArmResult(ArmError.BACKEND_UNAVAILABLE,
                             f"simulator did not answer {what} within {waited_s:.1f} s")
        return None

    def _execute_whole(self, attempt_id: str, target_id: str, grasp: GraspParameters,
                       on_phase, is_canceled) -> ArmResult:
        """The attempt as one ATTEMPT call (class docstring)."""
        if is_canceled():
            return ArmResult(ArmError.CANCELED, f"canceled before {PHASES[0].value}")
        on_phase(PHASES[0], 1, len(PHASES))
        sent = []

        def abort_once() -> bool:
            if not sent and is_canceled():
                self._send_abort(attempt_id)
                sent.append(True)
            return bool(sent)

        response = self._call(SimArmPhase.Request(
            phase=SimArmPhase.Request.ATTEMPT, attempt_id=attempt_id, target_id=target_id,
            grasp=grasp_to_msg(grasp)), timeout_s=self._timeout * len(PHASES),
            on_cancel=abort_once)
        unanswered = self._unanswered(response, attempt_id, "the attempt",
                                      self._timeout * len(PHASES))
        if unanswered is not None:
            return unanswered
        ran = min(int(response.phases_run), len(PHASES))     # phases that ran
        for index in range(2, ran + 1):
            on_phase(PHASES[index - 1], index, len(PHASES))
        if response.ok and response.error_code == int(ArmError.CANCELED) and ran < len(PHASES):
            return ArmResult(ArmError.CANCELED, f"canceled before {PHASES[ran].value}",
                             observation_from_msg(response.observation) if ran else None)
        if not response.ok:
            return ArmResult(ArmError(response.error_code or ArmError.BACKEND_FAILURE),
                             response.message)
        return ArmResult(ArmError.NONE, response.message,
                         observation_from_msg(response.observation))

    # ---- the wrist camera (ros/sim/wrist.py serves it on the sim node) ----------------
    def _ready(self, client) -> bool:
        """Whether ``client``'s service is discovered, waiting ``timeout_s`` for it (until the
        start-up window's end for one never seen)."""
        timeout = self._timeout
        if client.srv_name not in self._seen:
            timeout = max(timeout, self.startup_until - time.monotonic())
        if client.service_is_ready() or client.wait_for_service(timeout_sec=timeout):
            self._seen.add(client.srv_name)
            return True
        return False

    def wrist_camera(self) -> Optional[WristCameraInfo]:
        """The simulated hand camera's model (config/sim.yaml ``wrist_camera``), asked of
        the sim once; None while the sim does not answer (then no view is offered)."""
        if self._camera is None and self._ready(self._describe):
            response = self._call(WristCamera.Request(), self._describe)
            if response not in (None, "lost"):
                self._camera = wrist_camera_from_response(response)
        return self._camera

    def move_camera_to(self, T_world_cam, is_canceled) -> ViewResult:
        if is_canceled():
            return ViewResult(ArmError.CANCELED, "canceled before the view motion")
        self._await_back(is_canceled)
        if not self._ready(self._view):
            return ViewResult(ArmError.BACKEND_UNAVAILABLE, "simulator view service not "
                              f"available within {self._timeout:.1f} s")
        request = SimMoveCamera.Request(camera_pose=pose_to_msg(T_world_cam))
        response = self._call(request, self._view)
        if response == "lost":
            return ViewResult(ArmError.BACKEND_UNAVAILABLE,
                              f"{self._monitor.describe_loss(self.peer)} during a view motion")
        if response is None:
            return ViewResult(ArmError.BACKEND_UNAVAILABLE, "simulator did not answer the view "
                              f"motion within {self._timeout:.1f} s")
        return view_result_from_msg(response, self.wrist_camera())

    def close(self) -> None:
        for client in (self._client, self._abort, self._view, self._describe):
            self._node.destroy_client(client)
