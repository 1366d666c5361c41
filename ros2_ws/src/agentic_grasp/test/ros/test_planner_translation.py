"""The planner node's translation, without a graph: typed planner events -> feedback,
AttemptRecord messages and markers (goal_session), the message conversion of the core
record, the grasp markers and the node-level settings."""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from std_msgs.msg import Header

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))  # the planner fakes

from test_planner_fakes import (FixedRetriever, ScriptedArm, experience,  # noqa: E402
                                make_object, observation_for, ok, perception_of, slip)

from agentic_grasp.ros.conversions.records import (attempt_record_to_msg, recorded_grasp)  # noqa: E402
from agentic_grasp.ros.conversions.fields import message_values  # noqa: E402
from agentic_grasp.ros.conversions.grasp import (observation_from_msg,  # noqa: E402
                                                 observation_to_msg, outcome_from_msg,
                                                 outcome_to_msg)
from agentic_grasp.core.errors import ConfigError  # noqa: E402
from agentic_grasp.core.grasping.config import GraspSynthesisConfig  # noqa: E402
from agentic_grasp.core.planner import EpisodicMemory, PlannerConfig  # noqa: E402
from agentic_grasp.core.planner import FunctionPerceiver, ReflectivePlanner  # noqa: E402
from agentic_grasp.core.planner.outcomes import AttemptRecord  # noqa: E402
from agentic_grasp.core.types import GraspParameters, Phase  # noqa: E402
from agentic_grasp.ros.planner.goal_session import GoalSession  # noqa: E402
from agentic_grasp.ros.planner.markers import grasp_markers  # noqa: E402
from agentic_grasp.ros.planner.settings import NodeSettings, Timeouts  # noqa: E402
from agentic_grasp_interfaces.msg import FailureDiagnosis, GraspOutcome  # noqa: E402

GRASP = {"position": [0.0, 0.0, 0.01], "width": 0.03, "force": 15.0, "grasp_type": "pinch"}
HEADER = Header(frame_id="world")


class _Sinks:
    def __init__(self):
        self.feedback, self.attempts, self.grasps = [], [], []

    def session(self, arm):
        return GoalSession("goal-1", self.feedback.append, self.attempts.append,
                           lambda *a: self.grasps.append(a), lambda: HEADER)


def _run(arm, sinks):
    session = sinks.session(arm)
    cup = make_object("cup_1", "cup", xy=(0.5, 0.0))
    planner = ReflectivePlanner(
        PlannerConfig(grasp_synthesis=GraspSynthesisConfig(constraint_mode="paper",
                                                           fit_strategies=False)),
        FixedRetriever([experience("cup-001", "cup", GRASP)]))
    try:
        task = planner.run_task("pick up the cup",
                                FunctionPerceiver(lambda _t: perception_of([cup], "cup_1")), arm,
                                EpisodicMemory(), on_event=session.on_event)
    finally:
        session.close()
    return session, task


def test_session_publishes_one_record_per_attempt_with_its_reflection():
    sinks = _Sinks()
    arm = ScriptedArm([slip(), ok()])
    session, task = _run(arm, sinks)
    first, second = sinks.attempts
    assert session.records == sinks.attempts and session.grasped == ["cup_1"]
    assert [r.attempt for r in sinks.attempts] == [0, 1]
    assert {r.goal_id for r in sinks.attempts} == {"goal-1"}
    assert {r.subgoal_index for r in sinks.attempts} == {0}
    core = task.goals[0].attempts[0]
    assert first.diagnosis.failure_type == "slip" and first.diagnosis.group == "post_grasp"
    assert first.diagnosis.retry_level == 1 and first.diagnosis.correction == core.correction.text
    # each record carries what the arm's sensors reported, as the message the executor
    # sent, and the planner's reading of it
    assert first.thought == core.thought
    assert message_values(first.observation) == message_values(
        observation_to_msg(observation_for(slip(), arm.grasps[0], "cup_1")))
    assert message_values(first.outcome) == message_values(outcome_to_msg(core.outcome))
    assert not first.outcome.success and list(first.outcome.events) == ["slip:lift"]
    assert second.diagnosis.failure_type == FailureDiagnosis.NONE and second.retry_level == 1
    assert message_values(second.observation) == message_values(
        observation_to_msg(observation_for(ok(), arm.grasps[1], "cup_1")))
    assert second.outcome.success and not second.outcome.events
    assert first.grasp.grip_force == pytest.approx(arm.grasps[0].force)
    assert math.isnan(first.clearance_m)             # paper mode: no clearance reasoning
    stages = [f.stage for f in sinks.feedback]
    assert stages[0] == "plan" and "reflect" in stages and stages.count("execute") == 8
    reflect = next(f for f in sinks.feedback if f.stage == "reflect")
    assert reflect.failure_type == "slip" and reflect.retry_level == 1
    assert [label for _g, label, _c in sinks.grasps] == ["cup_1 #1: ", "cup_1 #2: "]


def test_an_observation_message_comes_back_bit_for_bit_through_the_core():
    """What lets the planner's records carry the arm's observation without a side channel:
    the executor's ArmObservation (observation_to_msg of the sim's sensor readings) survives
    observation_from_msg then observation_to_msg unchanged, on real simulated attempts that
    succeed and fail; so does the planner's GraspOutcome of its reading."""
    from agentic_grasp.core.grasping.heuristic import heuristic_grasp
    from agentic_grasp.core.sim.simulator import Simulator

    sim = Simulator.from_config(seed=0)
    seen = set()
    for task in ("sg_banana", "sg_cup", "it_cup_near_vase", "lh_clear_table", "sg_apple"):
        for seed in range(3):
            spec = sim.load_task(task, trial_seed=seed)
            target = sim.get(spec.targets[0])
            grasp = heuristic_grasp(target)
            grasp.force *= 0.2 if seed == 1 else 1.0         # a weak grip slips
            truth = sim.execute_attempt(target.id, grasp)
            sent = observation_to_msg(sim.last_observation)
            back = observation_to_msg(observation_from_msg(sent))
            # field by field, not ==: some readings are NaN (not measured) and NaN != NaN;
            # not the CDR bytes either: the serializer leaves alignment padding uninitialised
            # (CI saw byte 5, the pad after the leading bool, differ between two serialisations)
            assert message_values(back) == message_values(sent), (task, seed)
            read = outcome_to_msg(truth)
            assert message_values(outcome_to_msg(outcome_from_msg(read))) == \
                message_values(read), (task, seed)
            seen.add(truth.success)
    assert seen == {True, False}


class _DyingArm(ScriptedArm):
    def execute(self, target_id, grasp, on_phase, is_canceled):
        on_phase(Phase.APPROACH, 1, 3)
        raise RuntimeError("executor lost")


def test_an_attempt_the_arm_never_reported_is_sent_on_close_without_outcome_or_diagnosis():
    sinks = _Sinks()
    with pytest.raises(RuntimeError):
        _run(_DyingArm([]), sinks)
    (record,) = sinks.attempts
    assert record.attempt == 0 and record.retry_level == 0 and record.thought
    assert record.outcome == GraspOutcome()
    assert observation_from_msg(record.observation) is None     # the arm reported nothing
    assert record.diagnosis.failure_type == FailureDiagnosis.NONE
    assert record.duration_s >= 0.0


def test_an_attempt_whose_reflection_was_interrupted_is_sent_as_observed():
    """The planner builds an attempt's record once it has reflected on it; when the
    re-perception of the reflection fails, the session sends the attempt as the arm
    observed it (its observation and the planner's reading of it), without a diagnosis or
    correction."""
    sinks = _Sinks()
    arm = ScriptedArm([slip(), ok()])
    session = sinks.session(arm)
    cup = make_object("cup_1", "cup", xy=(0.5, 0.0))
    looks = iter([perception_of([cup], "cup_1")])

    def perceive(_text):
        for answer in looks:
            return answer
        raise RuntimeError("perception lost")

    planner = ReflectivePlanner(
        PlannerConfig(grasp_synthesis=GraspSynthesisConfig(constraint_mode="paper",
                                                           fit_strategies=False)),
        FixedRetriever([experience("cup-001", "cup", GRASP)]))
    with pytest.raises(RuntimeError, match="perception lost"):
        try:
            planner.run_task("pick up the cup", FunctionPerceiver(perceive), arm,
                             EpisodicMemory(), on_event=session.on_event)
        finally:
            session.close()
    (record,) = sinks.attempts
    assert record.attempt == 0 and len(arm.grasps) == 1
    # observed: the arm's sensor readings and the planner's reading of them
    assert message_values(record.observation) == message_values(
        observation_to_msg(observation_for(slip(), arm.grasps[0], "cup_1")))
    assert not record.outcome.success and list(record.outcome.events) == ["slip:lift"]
    assert record.diagnosis.failure_type == FailureDiagnosis.NONE
    assert record.diagnosis.correction == ""


def _record(candidate=None) -> AttemptRecord:
    grasp = GraspParameters(position=np.array([0.5, 0.1234567891, 0.05]),
                            approach=np.array([0.0, 0.3, -1.0]))
    return AttemptRecord(2, 1, "try", grasp, False, None, candidate=candidate)


def test_attempt_record_msg_of_the_core_record():
    msg = attempt_record_to_msg(_record(), "g", 3, "cup_1", None, 0.25, HEADER)
    assert (msg.goal_id, msg.subgoal_index, msg.target_id, msg.attempt, msg.retry_level) == \
        ("g", 3, "cup_1", 2, 1)
    assert msg.grasp.position.y == 0.123457          # as the JSON records store it
    assert msg.duration_s == 0.25 and math.isnan(msg.clearance_m)
    free = attempt_record_to_msg(_record({"label": "around 0 deg", "clearance_m": None,
                                          "nearest": "", "collision_free": True}),
                                 "g", 0, "cup_1", None, 0.0)
    assert free.clearance_m == math.inf and free.collision_free and free.candidate
    near = attempt_record_to_msg(_record({"label": "x", "clearance_m": 0.012,
                                          "nearest": "vase_1", "collision_free": False}),
                                 "g", 0, "cup_1", None, 0.0)
    assert near.clearance_m == pytest.approx(0.012) and near.clearance_nearest == "vase_1"
    assert msg.memory_transfer == ""                 # nothing transferred
    recalled = dataclasses.replace(
        _record(), memory="episodic memory (level 2, similar object): the grasp of mug_1")
    assert attempt_record_to_msg(recalled, "g", 0, "cup_1", None, 0.0).memory_transfer == \
        recalled.memory


def test_recorded_grasp_is_the_to_dict_round_trip():
    grasp = _record().grasp
    assert recorded_grasp(grasp).to_dict() == grasp.to_dict()


def test_grasp_markers_arrow_fingers_and_label():
    grasp = GraspParameters(position=np.array([0.5, 0.0, 0.05]),
                            approach=np.array([0.0, 0.0, -1.0]), width=0.04, wrist_yaw=0.3)
    markers = grasp_markers(grasp, HEADER, "cup_1 #1: ",
                            {"label": "around 0 deg", "clearance_m": 0.03, "nearest": "v",
                             "collision_free": True}).markers
    assert [m.id for m in markers] == [0, 1, 2, 3, 4]
    q = markers[2].pose.orientation
    assert q.x ** 2 + q.y ** 2 + q.z ** 2 + q.w ** 2 == pytest.approx(1.0)
    # the finger's z axis is the approach direction: q rotates z = (0, 0, 1) to (0, 0, -1)
    z = np.array([2 * (q.x * q.z + q.w * q.y), 2 * (q.y * q.z - q.w * q.x),
                  1 - 2 * (q.x ** 2 + q.y ** 2)])
    assert np.allclose(z, [0.0, 0.0, -1.0])
    gap = np.linalg.norm([markers[2].pose.position.x - markers[3].pose.position.x,
                          markers[2].pose.position.y - markers[3].pose.position.y])
    assert gap == pytest.approx(0.04 + 0.012)
    assert markers[4].text.startswith("cup_1 #1: power, 20.0 N, 40 mm\naround 0 deg")
    assert "30 mm" in markers[4].text and "NOT" not in markers[4].text


def test_node_settings_refuse_bad_values():
    assert NodeSettings().timeouts == Timeouts()
    with pytest.raises(ConfigError, match="timeouts.execute_s must be > 0 s"):
        NodeSettings(timeouts=Timeouts(execute_s=0.0))
    with pytest.raises(ConfigError, match="memory_lifetime"):
        NodeSettings(memory_lifetime="forever")
    with pytest.raises(ConfigError, match="visual_query"):
        NodeSettings(visual_query="render")


def test_a_target_beyond_the_hand_ends_with_its_own_error_code():
    """A 12 cm ball is refused at planning: zero attempts, ERROR_BEYOND_HAND_LIMITS and a
    message naming the width and the limit (core/grasping/limits.py)."""
    from agentic_grasp.core.types import Shape
    from agentic_grasp.ros.planner.goal_session import task_error
    from agentic_grasp_interfaces.action import GraspObject

    apple = make_object("apple_1", "apple", xy=(0.5, 0.0), size=(0.12, 0.12, 0.12),
                        shape=Shape.SPHERE)
    arm = ScriptedArm([ok()])
    eyes = FunctionPerceiver(lambda _i: perception_of([apple], "apple_1"))
    task = ReflectivePlanner().run_task("pick up the apple", eyes, arm)
    code, message = task_error(task)
    assert code == GraspObject.Result.ERROR_BEYOND_HAND_LIMITS == 9
    assert not arm.grasps and "89 mm" in message and "78 mm" in message


class _WristArm(ScriptedArm):
    """A scripted arm with a wrist camera: every view is reached."""

    name = "wrist"

    def wrist_camera(self):
        from agentic_grasp.core.arm.backend import WristCameraInfo
        from agentic_grasp.core.camera import Camera

        return WristCameraInfo(Camera(), 0.18)

    def move_camera_to(self, T_world_cam, is_canceled):
        from agentic_grasp.core.arm.backend import ArmError, ViewResult
        from agentic_grasp.core.camera import Camera

        return ViewResult(ArmError.NONE, "view pose reached", Camera(T_world_cam=T_world_cam),
                          1.0, 0.05, "palm vs table")


def test_session_records_every_uncover_view_like_an_attempt():
    """A hidden target: each wrist-camera view is feedback stage 'uncover', an
    AttemptRecord and a marker, before the grasp's own; the box is never grasped."""
    sinks = _Sinks()
    arm = _WristArm([ok()])
    session = sinks.session(arm)
    box = make_object("box_1", "box", xy=(0.58, 0.0), size=(0.12, 0.20, 0.14))
    cup = make_object("cup_1", "cup", xy=(0.455, 0.0))
    looks = []

    def look(instruction, camera):
        looks.append(camera)
        return perception_of([cup, box], "cup_1")

    planner = ReflectivePlanner(
        PlannerConfig(grasp_synthesis=GraspSynthesisConfig(constraint_mode="paper",
                                                           fit_strategies=False)),
        FixedRetriever([experience("cup-001", "cup", GRASP)]))
    try:
        task = planner.run_task("pick up the cup behind the box",
                                FunctionPerceiver(lambda _t: perception_of([box], "nothing"),
                                                  look), arm,
                                EpisodicMemory(), on_event=session.on_event)
    finally:
        session.close()
    assert task.success and task.grasped == ["cup_1"] and len(looks) == 1
    view, grasp = sinks.attempts
    assert view.candidate.startswith("uncover view: box_1") and view.collision_free
    assert view.outcome.success                  # the view saw the target; nothing grasped
    assert "box_1" in view.thought and "Uncover" in view.thought
    assert grasp.target_id == "cup_1" and not grasp.candidate.startswith("uncover")
    stages = [f.stage for f in sinks.feedback]
    assert stages.index("uncover") < stages.index("execute")
    assert [label for _g, label, _c in sinks.grasps] == ["uncover #1: ", "cup_1 #1: "]
    assert [g.target_id for g in task.goals] == ["cup_1"]


def test_without_a_wrist_camera_the_goal_ends_target_not_found():
    """An arm without a wrist camera (arm:=moveit unless wrist_camera.enabled): the planner
    says so and ends with ERROR_TARGET_NOT_FOUND, never grasping the landmark."""
    from agentic_grasp.ros.planner.goal_session import Result, task_error

    box = make_object("box_1", "box", xy=(0.58, 0.0), size=(0.12, 0.20, 0.14))
    planner = ReflectivePlanner(
        PlannerConfig(grasp_synthesis=GraspSynthesisConfig(constraint_mode="paper",
                                                           fit_strategies=False)),
        FixedRetriever([experience("cup-001", "cup", GRASP)]))
    arm = ScriptedArm([ok()])
    task = planner.run_task("pick up the cup behind the box",
                            FunctionPerceiver(lambda _t: perception_of([box], "nothing")), arm,
                            EpisodicMemory())
    code, message = task_error(task)
    assert code == Result.ERROR_TARGET_NOT_FOUND and "no wrist camera" in message
    assert not task.goals and not arm.grasps
