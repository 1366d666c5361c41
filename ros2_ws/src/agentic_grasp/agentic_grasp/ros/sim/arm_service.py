"""The sim node's arm services: one motion phase per ``sim/arm`` call (or ATTEMPT, the three
in one call), ABORT on ``sim/arm_abort``, and the abort of an open attempt when the commanding
executor dies. A mixin of nodes/sim_node.SimNode (it uses the node's ``arm``, ``_lock``,
``_moving``, ``_arm_quiet_at``, ``phase_delay`` and ``_world_changed``); kept apart so the
node file stays a thin translation layer.
"""
from __future__ import annotations

from contextlib import contextmanager
import time
from typing import Iterator

from agentic_grasp.ros.conversions.grasp import grasp_from_msg, observation_to_msg
from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.types import Phase
from agentic_grasp_interfaces.srv import SimArmPhase

_PHASES = {SimArmPhase.Request.APPROACH: Phase.APPROACH, SimArmPhase.Request.CLOSE: Phase.CLOSE,
           SimArmPhase.Request.LIFT: Phase.LIFT}


class SimArmServices:
    """``_on_arm``, ``_on_abort`` and ``_on_commander_lost`` of the sim node (module docstring)."""

    @contextmanager
    def _arm_moving(self) -> Iterator[None]:
        """Around anything that may move the world: while it runs, and until its new version
        is counted, no capture is declared still current (_on_capture_request)."""
        with self._lock:
            self._moving += 1
        try:
            yield
        finally:
            with self._lock:
                self._moving -= 1

    def _on_commander_lost(self, peer: str) -> None:
        with self._arm_moving():
            attempt_id = self.arm.abort_open()
            if attempt_id:
                self.get_logger().warning(f"{peer} vanished during attempt {attempt_id}: "
                                          "aborted (arm stopped, gripper opened)")
                self._world_changed()

    def _on_abort(self, request, response):
        """ABORT, also served on sim/arm_abort in its own callback group so it lands while a
        phase is still moving; the next phase of that attempt is then skipped."""
        self.arm.request_abort(request.attempt_id)
        response.ok, response.finished, response.message = True, True, "aborted"
        response.attempt_id = request.attempt_id
        return response

    def _on_arm(self, request, response):
        """One motion phase (APPROACH starts the attempt), or ATTEMPT: the three in one call;
        each phase takes ``phase_delay_s``.

        Per-phase calls give the executor true phase feedback and a point to stop between
        phases; ATTEMPT saves two request/response hops, and an ABORT on sim/arm_abort still
        skips the phases not yet run (README, "ROS overhead", has both measured).
        """
        self._arm_quiet_at = time.monotonic() + 0.25
        if request.phase == SimArmPhase.Request.ABORT:
            return self._on_abort(request, response)
        with self._arm_moving():
            if request.phase != SimArmPhase.Request.ATTEMPT:
                response.phases_run = 1
                return self._phase(request, response)
            for count, code in enumerate(_PHASES, start=1):
                last = response.observation        # an aborted phase reports none
                response = self._phase(SimArmPhase.Request(
                    phase=code, attempt_id=request.attempt_id, target_id=request.target_id,
                    grasp=request.grasp), SimArmPhase.Response())
                response.phases_run = count
                if response.error_code == int(ArmError.CANCELED):
                    response.observation, response.phases_run = last, count - 1
                request.attempt_id = response.attempt_id
                if not response.ok or response.finished:
                    break
            return response

    def _phase(self, request, response):
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
        response.observation = observation_to_msg(step.observation)
        response.ok, response.error_code = True, int(ArmError.NONE)
        response.finished = step.finished
        response.message = f"{phase.value if not step.finished else 'attempt'} done"
        if step.finished or phase != Phase.APPROACH:
            self._world_changed()
        return response


__all__ = ["SimArmServices"]
