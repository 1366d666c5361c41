"""The simulated arm's phase protocol, between the simulator and whoever commands it.

An attempt is APPROACH (which begins it), CLOSE, LIFT, one call each, so the commander gets
true phase feedback and a point to stop between phases. ABORT may come at any time, also
while a phase is still moving: it names the attempt, and that attempt's next phase is
skipped and the attempt aborted (nothing more moves, the gripper opens). Losing the
commander aborts the open attempt the same way. The bin policy: when an attempt ends in
success, the simulated robot drops what it lifted into the bin beside the table, so the
next perception sees the table without it.

This module holds that protocol for the sim node (ros/sim/node.py), which only converts
messages; it imports no rclpy and is tested with plain pytest.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Optional, Set

import numpy as np

from agentic_grasp.core.arm.backend import ArmResult, error_for_exception
from agentic_grasp.core.arm.observation import ArmObservation
from agentic_grasp.core.arm.panda_model import Q_READY
from agentic_grasp.core.types import AttemptOutcome, GraspParameters, Phase

#: Gripper opening (each finger, m) when open.
GRIPPER_OPEN = 0.04


@dataclass
class PhaseStep:
    """What one phase call did: the attempt it ran, and its outcome, abort or error."""

    attempt_id: str
    outcome: Optional[AttemptOutcome] = None      # the simulator's truth (world side)
    finished: bool = False
    aborted: bool = False           # an ABORT named the attempt: nothing ran, it is over
    error: Optional[ArmResult] = None
    #: what the arm's sensors report (all that goes to the executor and the planner)
    observation: Optional[ArmObservation] = None


class SimArmSession:
    """The open attempt, pending aborts, arm joints and gripper of one Simulator.

    ``lock`` guards the simulator (it is not thread-safe); hold it for any other use of
    ``sim`` too. ``q`` and ``gripper`` are what joint_states shows.
    """

    def __init__(self, sim) -> None:
        self.sim = sim
        self.lock = threading.Lock()
        self.q = np.array(Q_READY, dtype=float)
        self.gripper = GRIPPER_OPEN
        self._aborted: Set[str] = set()   # attempt ids an ABORT named (the open one's, at most)
        self._open_attempt = ""           # the attempt between APPROACH and its end

    def reset_arm(self) -> None:
        """The arm back at its ready pose (a scene was loaded)."""
        self.q = np.array(Q_READY, dtype=float)

    def request_abort(self, attempt_id: str) -> None:
        """ABORT: the next phase of ``attempt_id`` is skipped and the attempt aborted."""
        self._aborted.add(attempt_id)

    def abort_open(self) -> str:
        """Abort the open attempt now (its commander is gone); its id, "" if none was open."""
        with self.lock:
            attempt_id, self._open_attempt = self._open_attempt, ""
            if attempt_id:
                self.sim.abort(attempt_id)
        if attempt_id:
            self.gripper = GRIPPER_OPEN
            self._aborted.discard(attempt_id)
        return attempt_id

    def step(self, attempt_id: str, phase: Phase, target_id: str,
             grasp: Callable[[], GraspParameters]) -> PhaseStep:
        """Run one phase of ``attempt_id`` (APPROACH begins it, "" lets the simulator name it).

        ``grasp`` is called for APPROACH only, after the abort check, so a grasp that does
        not convert is reported only when the phase would run. Every error comes back as
        ``PhaseStep.error`` (the executor's error codes), never raised.
        """
        try:
            if attempt_id and attempt_id in self._aborted:
                self._aborted.discard(attempt_id)
                with self.lock:
                    self.sim.abort(attempt_id)
                    self._open_attempt = ""
                self.gripper = GRIPPER_OPEN
                return PhaseStep(attempt_id, finished=True, aborted=True)
            with self.lock:
                if phase == Phase.APPROACH:
                    g = grasp()
                    self.sim.validate(target_id, g)
                    attempt_id = self.sim.begin_attempt(target_id, g,
                                                        attempt_id=attempt_id or None)
                    # An ABORT only ever names the attempt being run: older ids go.
                    self._aborted &= {attempt_id}
                    self._open_attempt = attempt_id
                    # joint_states follows the arm to the grasp pose when it is reachable
                    q = self.sim.kinematics.solve_grasp(g.position, g.approach, g.wrist_yaw,
                                                        seed=self.q)
                    if q is not None:
                        self.q = np.asarray(q, dtype=float)
                outcome = self.sim.advance(attempt_id, phase)
                finished = self.sim.attempt_finished(attempt_id)
                if finished:
                    self._open_attempt = ""
                if finished and outcome.success:
                    self.sim.place_held_object()      # the bin policy (module docstring)
            extent = outcome.measurements.get("object_extent_m", float("nan"))
            self.gripper = GRIPPER_OPEN if (finished and not outcome.success) or extent != extent \
                else min(GRIPPER_OPEN, extent / 2.0)
            return PhaseStep(attempt_id, outcome=outcome, finished=finished,
                             observation=self.sim.last_observation)
        except Exception as exc:  # noqa: BLE001 - mapped to an error code, the caller goes on
            return PhaseStep(attempt_id, error=error_for_exception(exc))


__all__ = ["GRIPPER_OPEN", "PhaseStep", "SimArmSession"]
