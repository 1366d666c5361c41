"""Algorithm 1 with a scripted arm: attempts, escalation levels, memory, cancel, events."""
import math

import numpy as np
import pytest

from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.scene_graph.constraints import ConstraintType
from agentic_grasp.core.grasping.config import GraspSynthesisConfig, Limits
from agentic_grasp.core.planner import (STATUS_BLOCKED, STATUS_CANCELED, STATUS_NOT_PERCEIVED,
                                        STATUS_SUCCEEDED, EpisodicMemory, PlannerConfig,
                                        ReflectivePlanner)
from agentic_grasp.core.planner.recovery import type_template, with_approach
from agentic_grasp.core.planner.sections import ClassificationConfig
from agentic_grasp.core.arm.closing_axis import closing_axis
from agentic_grasp.core.types import FailureType, GraspType, ObjectState, Shape

from test_planner_fakes import (FixedRetriever, ScriptedArm, experience, make_object, never,
                                ok, outcome, perception_of, slip)

CUP_GRASP = {"position": [0.05, 0.0, 0.01], "width": 0.03, "force": 15.0,
             "grasp_type": "pinch", "wrist_yaw": 0.0}


def cup(oid="cup_1", xy=(0.5, 0.0), yaw=0.0, **kw):
    return make_object(oid, "cup", xy=xy, yaw=yaw, size=(0.08, 0.08, 0.09),
                       shape=Shape.CYLINDER, aff_type="Graspable_Handle", material="ceramic",
                       region="handle", fragility=0.3, **kw)


#: These tests pin the paper's behaviour: stored grasps copied unchanged and the fixed
#: constraint adjustments (test_grasping.py covers fitting and constraint_mode clearance).
PAPER_MODE = GraspSynthesisConfig(constraint_mode="paper", fit_strategies=False)


def planner(configuration="full", strategies=None, **cfg):
    retriever = FixedRetriever(strategies if strategies is not None
                               else [experience("cup-001", "cup", CUP_GRASP)])
    cfg.setdefault("grasp_synthesis", PAPER_MODE)
    return ReflectivePlanner(PlannerConfig(**cfg), retriever, configuration=configuration)


def run(p, arm, objects=None, target="cup_1", memory=None, **kw):
    objects = objects if objects is not None else [cup()]
    events = []
    goal = p.plan_and_execute(perception_of(objects, target), target, arm, memory,
                              kw.pop("cancel", never), events.append, **kw)
    return goal, events


# ------------------------------------------------------------------ g0 and attempt records
def test_g0_is_the_top_strategy_placed_on_the_perceived_object():
    p = planner()
    arm = ScriptedArm([ok()])
    goal, events = run(p, arm, [cup(xy=(0.45, 0.1), yaw=math.pi / 2)])
    assert goal.success and goal.status == STATUS_SUCCEEDED
    g = arm.grasps[0]
    # object-frame (0.05, 0, 0.01) rotated by yaw 90 deg about the centre (0.45, 0.1, 0.045)
    assert np.allclose(g.position, [0.45, 0.15, 0.055], atol=1e-9)
    assert g.wrist_yaw == pytest.approx(math.pi / 2)
    assert g.grasp_type == GraspType.PINCH and g.force == pytest.approx(15.0)
    assert goal.initial_source == "retrieval" and "cup-001" in goal.initial_detail
    rec = goal.attempts[0].to_dict()
    assert rec["attempt"] == 0 and rec["retry_level"] == 0 and rec["success"]
    assert "0.450, 0.150, 0.055" in rec["thought"] and "30 mm" in rec["thought"]
    assert rec["diagnosis"] is None and rec["duration_s"] == pytest.approx(1.0)
    assert [e.kind for e in events] == ["plan", "thought", "phase", "phase", "phase",
                                            "observation", "result"]


def test_failed_experiences_are_not_used_as_plans():
    strategies = [experience("bad", "cup", {**CUP_GRASP, "force": 99.0}, success=False),
                  experience("good", "cup", CUP_GRASP)]
    arm = ScriptedArm([ok()])
    goal, _ = run(planner(strategies=strategies), arm)
    assert arm.grasps[0].force == pytest.approx(15.0)
    assert "good" in goal.initial_detail


def test_slip_then_success_raises_force_by_1_2_at_level_1():
    arm = ScriptedArm([slip(), ok()])
    goal, events = run(planner(), arm)
    assert goal.success and goal.n_attempts == 2
    assert arm.grasps[1].force == pytest.approx(1.2 * arm.grasps[0].force)
    first, second = goal.attempts
    assert first.diagnosis.failure_type == FailureType.SLIP
    assert first.correction.level == 1 and first.correction_executed
    assert second.retry_level == 1
    assert "slip" in second.thought and "15.0 -> 18.0 N" in second.thought
    d = first.to_dict()["diagnosis"]
    assert d["group"] == "post_grasp" and d["correction_level"] == 1 and d["evidence"]
    assert any(e.kind == "reflection" for e in events)


def test_paper_indexing_levels_g0_l1_l1_l2_and_l3_recorded_not_executed():
    p = planner(seed=3)
    arm = ScriptedArm([slip(), slip(), slip(), slip()])
    goal, _ = run(p, arm)
    assert not goal.success and goal.n_attempts == 4
    assert goal.levels == [0, 1, 1, 2]
    g = arm.grasps
    assert g[1].force == pytest.approx(15.0 * 1.2)
    assert g[2].force == pytest.approx(15.0 * 1.2 * 1.2)
    # level 2: pinch -> side, force - 10 %
    assert g[3].grasp_type == GraspType.SIDE
    assert g[3].force == pytest.approx(g[2].force * 0.9)
    last = goal.attempts[-1]
    assert last.correction.level == 3 and not last.correction_executed
    # level 3: g0 plus eps in [-0.01, 0.01]^3, everything else as g0
    eps = last.correction.grasp.position - goal.g0.position
    assert np.all(np.abs(eps) <= 0.01) and np.linalg.norm(eps) > 0
    assert last.correction.grasp.force == pytest.approx(goal.g0.force)
    assert last.correction.grasp.grasp_type == goal.g0.grasp_type


def test_next_attempt_indexing_executes_level_3():
    arm = ScriptedArm([slip(), slip(), slip(), slip()])
    goal, _ = run(planner(level_by="next_attempt", seed=5), arm)
    assert goal.levels == [0, 1, 2, 3]
    g0, g3 = goal.g0, arm.grasps[3]
    assert np.all(np.abs(g3.position - g0.position) <= 0.01)
    assert g3.force == pytest.approx(g0.force) and g3.width == pytest.approx(g0.width)


def test_level_3_perturbation_is_seeded():
    eps = []
    for _ in range(2):
        arm = ScriptedArm([slip()] * 4)
        goal, _ = run(planner(level_by="next_attempt", seed=11), arm)
        eps.append(arm.grasps[3].position - goal.g0.position)
    assert np.allclose(eps[0], eps[1])


def test_a_correction_that_changes_nothing_escalates():
    # a slip (the pads carried more than friction holds: no turn out of them) at the hand's
    # full force: f' = 1.2 f is clamped to the limit, so level 1 changes nothing
    top = Limits().max_force_n
    strategies = [experience("firm", "cup", {**CUP_GRASP, "force": top})]
    arm = ScriptedArm([slip(), ok()])
    goal, _ = run(planner(strategies=strategies), arm)
    assert goal.attempts[0].diagnosis.failure_type == FailureType.SLIP
    assert not goal.attempts[0].diagnosis.torque_bound
    assert goal.attempts[0].correction.level == 2
    assert goal.levels == [0, 2]
    assert "escalated" in goal.attempts[0].correction.text
    arm = ScriptedArm([slip(), ok()])
    goal, _ = run(planner(strategies=strategies, escalate_unchanged=False), arm)
    assert goal.levels == [0, 1] and arm.grasps[1].force == pytest.approx(top)


def test_arm_errors_are_attempts_and_classified():
    arm = ScriptedArm([ArmError.OUT_OF_WORKSPACE, ok()])
    goal, _ = run(planner(), arm)
    assert goal.success and goal.attempts[0].arm_error == ArmError.OUT_OF_WORKSPACE
    assert goal.attempts[0].diagnosis.failure_type == FailureType.UNREACHABLE_POSE


# ------------------------------------------------------------------ cancel
def test_cancel_before_the_first_attempt():
    arm = ScriptedArm([ok()])
    goal, _ = run(planner(), arm, cancel=lambda: True)
    assert goal.status == STATUS_CANCELED and not arm.grasps and not goal.success


def test_cancel_between_attempts():
    state = {"calls": 0}
    arm = ScriptedArm([slip(), ok()])

    def cancel():
        # polled before attempt 1 and before each of its 3 phases; then before attempt 2
        state["calls"] += 1
        return state["calls"] > 4

    goal, _ = run(planner(), arm, cancel=cancel)
    assert goal.status == STATUS_CANCELED and len(arm.grasps) == 1
    assert goal.n_attempts == 1 and "before attempt 2" in goal.message


def test_cancel_during_an_attempt():
    arm = ScriptedArm([ok()])
    calls = {"n": 0}

    def cancel():
        calls["n"] += 1
        return calls["n"] > 2        # false before the attempt and its first phase

    goal, _ = run(planner(), arm, cancel=cancel)
    assert goal.status == STATUS_CANCELED
    assert goal.attempts[0].arm_error == ArmError.CANCELED
    assert goal.attempts[0].diagnosis is None


# ------------------------------------------------------------------ memory
def _seen(objects, target):
    """Perception that saw each object's yaw (the fakes' default is a round, arbitrary one:
    a handled cup's grasp stored then is never copied whole, test_planner_memory.py)."""
    perception = perception_of(objects, target)
    for obj in perception.objects + [perception.target]:
        obj.yaw_known = True
    return perception


def test_success_is_stored_and_reused_for_the_next_cup():
    memory = EpisodicMemory()
    p = planner()
    arm = ScriptedArm([slip(), ok()])
    first = p.plan_and_execute(_seen([cup("cup_1", xy=(0.4, -0.1))], "cup_1"), "cup_1", arm,
                               memory, never)
    assert first.memory_stored and "cup" in memory
    proven = arm.grasps[1]
    arm2 = ScriptedArm([ok()])
    second = p.plan_and_execute(_seen([cup("cup_2", xy=(0.6, 0.2), yaw=math.pi / 2)], "cup_2"),
                                "cup_2", arm2, memory, never)
    assert second.initial_source == "memory" and second.memory_recalled
    assert "cup_1" in second.initial_detail
    g = arm2.grasps[0]
    assert g.force == pytest.approx(proven.force)                    # 18 N, not 15 N
    # the proven object-frame offset (0.05, 0, 0.01) follows the second cup's pose
    assert np.allclose(g.position, [0.6, 0.25, 0.055], atol=1e-9)
    assert g.wrist_yaw == pytest.approx(math.pi / 2)


def test_memory_stores_the_grasp_without_the_scene_adjustment():
    memory = EpisodicMemory()
    p = planner()
    near_vase = [cup("cup_1", xy=(0.5, 0.0)),
                 make_object("vase_1", "vase", xy=(0.5, 0.11), size=(0.08, 0.08, 0.15),
                             fragility=0.8, shape=Shape.CYLINDER)]
    arm = ScriptedArm([ok()])
    goal, _ = run(p, arm, near_vase, "cup_1", memory)
    assert ConstraintType.COLLISION_AVOIDANCE in goal.constraints.types
    assert arm.grasps[0].force == pytest.approx(15.0 * 0.8)
    arm2 = ScriptedArm([ok()])
    run(p, arm2, [cup("cup_2", xy=(0.5, -0.2))], "cup_2", memory)
    assert arm2.grasps[0].force == pytest.approx(15.0)       # not 0.8 * 0.8 * 15


def test_disabled_memory_neither_stores_nor_recalls():
    memory = EpisodicMemory()
    p = planner("no_episodic_memory")
    run(p, ScriptedArm([ok()]), [cup()], "cup_1", memory)
    assert len(memory) == 0
    memory.store("cup", p.default_grasp(cup()), cup())
    goal, _ = run(p, ScriptedArm([ok()]), [cup()], "cup_1", memory)
    assert goal.initial_source == "retrieval" and not goal.memory_recalled


# ------------------------------------------------------------------ constraints
def test_fragile_neighbour_reduces_force_and_keeps_the_finger_line():
    vase = make_object("vase_1", "vase", xy=(0.5, 0.11), size=(0.08, 0.08, 0.15),
                       fragility=0.8, shape=Shape.CYLINDER)
    arm = ScriptedArm([ok()])
    goal, _ = run(planner(), arm, [cup(), vase])
    g = arm.grasps[0]
    assert g.force == pytest.approx(12.0) and g.approach_height == pytest.approx(0.13)
    assert g.approach[2] > -0.999                               # tilted away from the vase
    axis = closing_axis(g.approach, g.wrist_yaw)
    assert abs(axis[1]) > 0.9                                    # still closes along y


def test_content_preservation_picks_a_top_down_strategy():
    side = experience("side", "cup", {**CUP_GRASP, "approach": [1.0, 0.0, 0.0],
                                      "grasp_type": "side"})
    top = experience("top", "cup", CUP_GRASP)
    arm = ScriptedArm([ok()])
    goal, _ = run(planner(strategies=[side, top]), arm, [cup(state=ObjectState.FILLED)])
    assert "top" in goal.initial_detail
    assert np.allclose(arm.grasps[0].approach, [0, 0, -1])
    assert arm.grasps[0].speed == pytest.approx(0.05)


def test_a_supporting_target_is_blocked_until_its_load_is_removed():
    box = make_object("box_1", "box", xy=(0.5, 0.0), size=(0.07, 0.07, 0.06))  # fits the hand
    block = make_object("block_1", "block", xy=(0.5, 0.0), size=(0.04, 0.04, 0.04), z=0.08)
    arm = ScriptedArm([ok()])
    goal, events = run(planner(), arm, [box, block], "box_1")
    assert goal.status == STATUS_BLOCKED and goal.prerequisites == ["block_1"]
    assert not arm.grasps
    assert events[-1].kind == "result"


def test_target_not_perceived():
    goal, _ = run(planner(), ScriptedArm([ok()]), [cup()], "ghost")
    assert goal.status == STATUS_NOT_PERCEIVED and not goal.attempts


# ------------------------------------------------------------------ observation refresh
def test_grasps_follow_a_target_that_moved():
    moved = {"n": 0}

    def reperceive():
        moved["n"] += 1
        return perception_of([cup(xy=(0.52, 0.0))], "cup_1")

    arm = ScriptedArm([slip(), ok()])
    goal, _ = run(planner(), arm, reperceive=reperceive)
    assert moved["n"] == 1 and goal.perception_calls == 1
    assert arm.grasps[1].position[0] == pytest.approx(arm.grasps[0].position[0] + 0.02)


# ------------------------------------------------------------------ level-2 templates
def test_type_templates_follow_the_perceived_box():
    cfg = PlannerConfig()
    obj = make_object("b", "bottle", xy=(0.5, 0.1), size=(0.07, 0.07, 0.22),
                      shape=Shape.CYLINDER)
    g = type_template(GraspType.SIDE, ReflectivePlanner(cfg).default_grasp(obj), obj,
                      cfg.level2, cfg.limits)
    assert g.grasp_type == GraspType.SIDE and abs(g.approach[2]) < 1e-9
    assert np.allclose(g.approach[:2], np.array([0.5, 0.1]) / np.hypot(0.5, 0.1))
    assert g.position[2] == pytest.approx(0.11) and g.width == pytest.approx(0.08)
    axis = closing_axis(g.approach, g.wrist_yaw)
    assert abs(axis[2]) < 1e-9 and abs(axis @ g.approach) < 1e-9
    p = type_template(GraspType.PINCH, g, obj, cfg.level2, cfg.limits)
    assert np.allclose(p.approach, [0, 0, -1]) and p.position[2] == pytest.approx(0.208)
    w = type_template(GraspType.POWER, p, obj, cfg.level2, cfg.limits)
    assert w.position[2] == pytest.approx(0.19) and w.width == pytest.approx(0.08)


def test_with_approach_keeps_the_closing_axis():
    g = ReflectivePlanner().default_grasp(cup()).copy(wrist_yaw=0.0)
    tilted = with_approach(g, np.array([0.0, 0.34, -0.94]))
    a0 = closing_axis(g.approach, g.wrist_yaw)
    a1 = closing_axis(tilted.approach, tilted.wrist_yaw)
    assert abs(float(a0 @ a1)) > 0.9


#: A grasp at the centre of a box (the cup's strategy sits on its handle, where a landing
#: finger is read against the handle's opening, not the body's width).
BOX_GRASP = {"position": [0.0, 0.0, 0.03], "width": 0.03, "force": 15.0,
             "grasp_type": "pinch", "wrist_yaw": 0.0}


def _failure_scene(kind: FailureType):
    """(planner, script, objects, target, expected diagnosis source) in which the arm's
    sensors show ``kind``: a neighbour to hit, a target wider than the opening, a long
    target across the closing axis; WRONG_OBJECT is the arm's error code and TIMEOUT the
    attempt's wall time, neither a sensor signature."""
    phase = {"slip": "lift", "drop": "lift"}.get(kind.value, "approach")
    first = outcome(events=[(kind.value, phase, "cup_1")])
    objects, target, p, source = [cup()], "cup_1", planner(), "observation"
    if kind == FailureType.COLLISION:
        objects = [cup(), make_object("box_2", "box", xy=(0.5, 0.12), size=(0.06, 0.06, 0.12))]
        first = outcome(events=[("collision", "approach", "box_2")])
    elif kind in (FailureType.WIDTH_MISMATCH, FailureType.ORIENTATION):
        # 60 mm across a 30 mm opening; the long box is 200 mm along the closing axis and
        # 50 mm across it
        size = (0.06, 0.06, 0.06) if kind == FailureType.WIDTH_MISMATCH else (0.05, 0.20, 0.06)
        objects, target = [make_object("box_1", "box", size=size)], "box_1"
        p = planner(strategies=[experience("box-001", "box", BOX_GRASP)])
        first = outcome(events=[(kind.value, "approach", "box_1")])
    elif kind == FailureType.WRONG_OBJECT:
        first, source = ArmError.UNKNOWN_TARGET, "arm_error"
    elif kind == FailureType.TIMEOUT:
        first, source = slip(), "timeout"
        p = planner(classification=ClassificationConfig(attempt_timeout_s=1e-9))
    return p, ScriptedArm([first, ok()]), objects, target, source


@pytest.mark.parametrize("kind", list(FailureType))
def test_every_failure_type_is_diagnosed_and_corrected_in_the_loop(kind):
    p, arm, objects, target, source = _failure_scene(kind)
    goal, _ = run(p, arm, objects, target=target)
    first = goal.attempts[0]
    assert first.diagnosis.failure_type == kind and first.diagnosis.source == source
    assert first.correction.level in (1, 2)          # 2 only when level 1 changed nothing
    assert goal.attempts[1].retry_level == first.correction.level
    assert arm.grasps[1].to_dict() != arm.grasps[0].to_dict()
    assert goal.success and goal.recovered
