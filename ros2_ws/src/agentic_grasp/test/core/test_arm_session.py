"""The simulated arm's phase protocol (core/arm/session.py), without ROS: a fake simulator
records what the session asks of it."""
from __future__ import annotations

import numpy as np
import pytest

from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.arm.observation import ArmObservation
from agentic_grasp.core.arm.session import GRIPPER_OPEN, SimArmSession
from agentic_grasp.core.errors import UnknownTargetError
from agentic_grasp.core.types import AttemptOutcome, GraspParameters, Phase


class FakeKinematics:
    def solve_grasp(self, position, approach, wrist_yaw, seed):
        return np.full(7, 0.5)


class FakeSim:
    """Attempts finish after LIFT; success as configured; records calls. Its sensors
    report the phase reached and the finger width (``last_observation``)."""

    def __init__(self, success: bool = True, extent: float = 0.06) -> None:
        self.kinematics = FakeKinematics()
        self.success, self.extent = success, extent
        self.calls = []
        self._phase = {}
        self.last_observation = None

    def validate(self, target_id, grasp):
        if target_id != "banana":
            raise UnknownTargetError(f"no object {target_id!r}")

    def begin_attempt(self, target_id, grasp, attempt_id=None):
        attempt_id = attempt_id or "a1"
        self.calls.append(("begin", attempt_id))
        return attempt_id

    def advance(self, attempt_id, phase):
        self.calls.append(("advance", attempt_id, phase))
        self._phase[attempt_id] = phase
        self.last_observation = ArmObservation(phase_reached=phase,
                                               width_at_contact_m=self.extent)
        return AttemptOutcome(success=self.success and phase == Phase.LIFT, quality=0.9,
                              phi=np.ones(7), phase_reached=phase,
                              measurements={"object_extent_m": self.extent})

    def attempt_finished(self, attempt_id):
        return self._phase.get(attempt_id) == Phase.LIFT

    def abort(self, attempt_id):
        self.calls.append(("abort", attempt_id))

    def place_held_object(self):
        self.calls.append(("bin",))


def grasp() -> GraspParameters:
    return GraspParameters(position=np.array([0.5, 0.0, 0.05]))


def run(session, attempt_id, phase, target="banana"):
    return session.step(attempt_id, phase, target, grasp)


def test_a_successful_attempt_drops_the_object_into_the_bin():
    sim = FakeSim()
    session = SimArmSession(sim)
    step = run(session, "", Phase.APPROACH)
    assert step.attempt_id == "a1" and not step.finished and step.error is None
    # what goes on to the executor is the sensors' report of this phase
    assert step.observation is sim.last_observation
    assert step.observation.phase_reached == Phase.APPROACH
    assert np.allclose(session.q, 0.5)
    assert session.gripper == pytest.approx(0.03)
    run(session, "a1", Phase.CLOSE)
    step = run(session, "a1", Phase.LIFT)
    assert step.finished and step.outcome.success
    assert step.observation is sim.last_observation
    assert step.observation.phase_reached == Phase.LIFT
    assert sim.calls[-1] == ("bin",)
    assert session.abort_open() == ""          # nothing open any more


def test_a_failed_attempt_opens_the_gripper_and_keeps_the_object():
    sim = FakeSim(success=False)
    session = SimArmSession(sim)
    for phase in (Phase.APPROACH, Phase.CLOSE, Phase.LIFT):
        step = run(session, "a1", phase)
    assert step.finished and not step.outcome.success
    assert step.observation.phase_reached == Phase.LIFT
    assert ("bin",) not in sim.calls and session.gripper == GRIPPER_OPEN


def test_an_abort_skips_the_next_phase_without_reading_the_grasp():
    sim = FakeSim()
    session = SimArmSession(sim)
    run(session, "a1", Phase.APPROACH)
    session.request_abort("a1")

    def no_grasp():
        raise AssertionError("the grasp is read for APPROACH only")

    step = session.step("a1", Phase.CLOSE, "banana", no_grasp)
    assert step.aborted and step.finished and step.outcome is None
    assert step.observation is None
    assert sim.calls[-1] == ("abort", "a1") and session.gripper == GRIPPER_OPEN
    assert session.step("a1", Phase.LIFT, "banana", no_grasp).aborted is False


def test_approach_forgets_aborts_of_older_attempts():
    sim = FakeSim()
    session = SimArmSession(sim)
    session.request_abort("old")
    run(session, "a2", Phase.APPROACH)
    assert not run(session, "old", Phase.CLOSE).aborted


def test_losing_the_commander_aborts_the_open_attempt():
    sim = FakeSim()
    session = SimArmSession(sim)
    run(session, "a1", Phase.APPROACH)
    assert session.abort_open() == "a1"
    assert sim.calls[-1] == ("abort", "a1") and session.gripper == GRIPPER_OPEN
    assert session.abort_open() == ""


def test_errors_come_back_as_executor_error_codes():
    session = SimArmSession(FakeSim())
    step = run(session, "a1", Phase.APPROACH, target="nothing")
    assert step.error is not None and step.error.error == ArmError.UNKNOWN_TARGET
    assert step.attempt_id == "a1"
