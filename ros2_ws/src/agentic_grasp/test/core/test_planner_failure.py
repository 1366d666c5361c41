"""ClassifyFailure (assess: the arm's observation read as a failure type) precedence and
thresholds, and the level-1 rule of every failure type."""
import copy
import math

import numpy as np
import pytest

from agentic_grasp.core.arm.backend import ArmError, ArmResult
from agentic_grasp.core.arm.observation import CLOSE_TRACE_SAMPLES, Reflex, Wrench
from agentic_grasp.core.grasping.config import HandConfig
from agentic_grasp.core.grasping.hand import HandModel
from agentic_grasp.core.planner.configurations import PlannerConfig
from agentic_grasp.core.planner.sections import ClassificationConfig, CorrectionConfig
from agentic_grasp.core.planner.recovery.diagnosis import (CRUSH_FRACTION, DYNAMIC_LOAD_BOUND,
                                                           LOAD_CHANGE_N, MATERIAL_DENSITY,
                                                           PAPER_WEIGHTS, YIELD_WIDTH_M,
                                                           assess)
from agentic_grasp.core.planner.recovery.failure import Diagnosis
from agentic_grasp.core.planner.recovery import (CORRECTION_RULES, CorrectionContext,
                                                 failure_types_covered, get_correction,
                                                 level1_adjustment)
from agentic_grasp.core.types import (FailureGroup, FailureType, GraspParameters, GraspType,
                                      Phase, QUALITY_FACTOR_NAMES, Shape)

from test_planner_fakes import make_object, observation_for, ok, outcome, slip


# ------------------------------------------------------------------ classification
def test_every_taxonomy_type_has_a_rule_and_a_group():
    assert failure_types_covered() == list(FailureType)
    assert len(CORRECTION_RULES) == 14
    groups = {t.group for t in FailureType}
    assert groups == set(FailureGroup)


HAND = HandModel(HandConfig())
BOX = make_object("t", "thing", xy=(0.5, 0.05), size=(0.05, 0.05, 0.10))
#: 200 mm along the closing axis of a wrist at 0 rad, 50 mm across it
LONG = make_object("t", "bar", xy=(0.5, 0.05), size=(0.05, 0.20, 0.06))
#: wider than the hand's stroke both ways around its centre
BOWL = make_object("t", "bowl", xy=(0.5, 0.05), size=(0.16, 0.16, 0.06), shape=Shape.CYLINDER)
#: 10 mm tall: the fingertips beside it reach the table
FLAT = make_object("t", "phone", xy=(0.5, 0.05), size=(0.05, 0.05, 0.01))
VASE = make_object("vase", "vase", xy=(0.5, 0.20), size=(0.08, 0.08, 0.20))


def at_centre(target=BOX, width=0.07, **kw):
    return GraspParameters(position=np.array([0.5, 0.05, 0.04]), width=width, force=20.0,
                           approach_height=0.10, speed=0.10, wrist_yaw=0.0,
                           grasp_type="pinch", **kw)


def assessed(item, grasp=None, target=BOX, neighbours=(), error=ArmError.NONE, obs=None,
             **kw):
    """assess() of the sensor readings ``item`` leaves (test_planner_fakes.observation_for)
    or of ``obs``, against the perceived target and neighbours."""
    grasp = grasp or at_centre(target)
    scene = [target, *neighbours]
    if obs is None and item is not None:
        obs = observation_for(item, grasp, target.id, {o.id: o for o in scene})
    return assess(ArmResult(error, "test", obs), grasp, HAND, target, scene, **kw)


#: (type, phase, other_id, target, opening): a scene whose sensors show that type
SIGNATURES = [
    (FailureType.UNREACHABLE_POSE, "approach", "", BOX, 0.07),
    (FailureType.COLLISION, "approach", "vase", BOX, 0.07),         # the neighbour
    (FailureType.COLLISION, "approach", "", FLAT, 0.07),            # the table
    (FailureType.APPROACH_ANGLE, "approach", "t", BOX, 0.07),       # the palm on the target
    (FailureType.WIDTH_MISMATCH, "approach", "t", BOX, 0.03),       # a finger: 50 in 30 mm
    (FailureType.WIDTH_MISMATCH, "close", "t", BOWL, 0.07),         # closed inside a bowl
    (FailureType.ORIENTATION, "approach", "t", LONG, 0.03),         # a finger on its length
    (FailureType.POSITION_ERROR, "approach", "t", BOX, 0.07),       # 50 mm passes 70 mm
    (FailureType.POSITION_ERROR, "close", "t", BOX, 0.07),          # closed on nothing
    (FailureType.FORCE_DAMAGE, "close", "t", BOX, 0.07),
    (FailureType.DEFORMATION, "close", "t", BOX, 0.07),
    (FailureType.SLIP, "lift", "t", BOX, 0.07),
    (FailureType.DROP, "lift", "t", BOX, 0.07),
    (FailureType.CONSTRAINT_VIOLATION, "lift", "t", BOX, 0.07),
    (FailureType.UNKNOWN, "approach", "", BOX, 0.07),
]


@pytest.mark.parametrize("kind, phase, other, target, width", SIGNATURES)
def test_each_sensor_signature_is_read_as_its_type(kind, phase, other, target, width):
    a = assessed(outcome(events=[(kind.value, phase, other)]), at_centre(target, width),
                 target, [VASE])
    diag = a.diagnosis
    assert diag.failure_type == kind and diag.source == "observation"
    assert diag.group == kind.group
    assert not a.success and a.outcome is not None and not a.outcome.success
    if kind == FailureType.COLLISION:
        assert diag.other_id == (other or "table")


def test_every_type_is_read_from_a_signature_or_the_arms_error_or_the_clock():
    read = {k for k, *_ in SIGNATURES}
    assert read | {FailureType.WRONG_OBJECT, FailureType.TIMEOUT} == set(FailureType)


def test_a_held_object_is_a_success_with_no_diagnosis():
    a = assessed(ok())
    assert a.success and a.diagnosis is None
    assert a.outcome.events == [] and a.outcome.quality > 0.0


def test_the_first_signature_in_causal_order_wins():
    grasp = at_centre()
    scene = {o.id: o for o in (BOX, VASE)}
    slipped = observation_for(slip(), grasp, "t", scene)
    hit = observation_for(outcome(events=[("collision", "approach", "vase")]), grasp, "t",
                          scene)
    # a reflex after the approach (the lift's) is no approach hit: the slip still reads
    late = copy.deepcopy(slipped)
    late.reflexes = [Reflex(Phase.LIFT, hit.reflexes[0].ee_position, hit.reflexes[0].wrench)]
    assert assessed(None, grasp, obs=late, neighbours=[VASE]).diagnosis.failure_type \
        == FailureType.SLIP
    # the approach's reflex (pre-contact) beats a slip (post-grasp)
    both = copy.deepcopy(slipped)
    both.reflexes = hit.reflexes
    diag = assessed(None, grasp, obs=both, neighbours=[VASE]).diagnosis
    assert diag.failure_type == FailureType.COLLISION and diag.other_id == "vase"
    # a planning error beats the reflex
    both.planning_error = "NO_IK_SOLUTION at the pre-grasp pose"
    assert assessed(None, grasp, obs=both, neighbours=[VASE]).diagnosis.failure_type \
        == FailureType.UNREACHABLE_POSE
    # a collapse while closing (contact) beats the width lost at lift-off (post-grasp)
    crushed = observation_for(outcome(events=[("force_damage", "close")]), grasp, "t", scene)
    slipped.close_trace_m = crushed.close_trace_m
    assert assessed(None, grasp, obs=slipped).diagnosis.failure_type \
        == FailureType.FORCE_DAMAGE


def test_arm_error_beats_the_observation_and_maps_codes():
    slipped = slip()
    a = assessed(slipped, error=ArmError.OUT_OF_WORKSPACE)
    assert a.diagnosis.failure_type == FailureType.UNREACHABLE_POSE and a.outcome is None
    assert assessed(None, error=ArmError.UNKNOWN_TARGET).diagnosis.failure_type \
        == FailureType.WRONG_OBJECT
    assert assessed(None, error=ArmError.BACKEND_UNAVAILABLE).diagnosis.failure_type \
        == FailureType.TIMEOUT
    assert assessed(None, error=ArmError.FORCE_LIMIT).diagnosis.failure_type \
        == FailureType.UNKNOWN
    assert assessed(None, error=ArmError.BACKEND_FAILURE).diagnosis.source == "arm_error"


def test_timeout_beats_the_observation():
    cfg = ClassificationConfig(attempt_timeout_s=5.0)
    late = assessed(slip(), elapsed_s=6.0, config=cfg).diagnosis
    assert late.failure_type == FailureType.TIMEOUT and late.source == "timeout"
    assert assessed(slip(), elapsed_s=4.0, config=cfg).diagnosis.failure_type \
        == FailureType.SLIP


def trace_obs(fall_m, w0=0.04, force=20.0, first=3):
    """Held to the top of the lift; the width fell by ``fall_m`` from sample ``first`` of
    the close trace on."""
    obs = observation_for(ok(), at_centre(), "t", {"t": BOX})
    obs.width_at_contact_m, obs.commanded_force_n = w0, force
    obs.close_trace_m = [w0 if k < first else w0 - fall_m
                         for k in range(CLOSE_TRACE_SAMPLES)]
    obs.width_after_close_m = obs.width_at_liftoff_m = obs.width_after_lift_m = w0 - fall_m
    return obs


@pytest.mark.parametrize("fall, expected", [
    (0.5 * YIELD_WIDTH_M, None),                                         # within the noise
    (1.5 * YIELD_WIDTH_M, FailureType.DEFORMATION),
    (0.99 * CRUSH_FRACTION * 0.04, FailureType.DEFORMATION),
    (CRUSH_FRACTION * 0.04, FailureType.FORCE_DAMAGE),                   # a quarter of 40 mm
    (0.5 * 0.04, FailureType.FORCE_DAMAGE)])
def test_how_far_the_material_gave_way_splits_damage_from_deformation(fall, expected):
    a = assessed(None, obs=trace_obs(fall, w0=0.04))
    if expected is None:
        assert a.success and a.diagnosis is None
        return
    assert a.diagnosis.failure_type == expected and a.diagnosis.phase == "close"
    # it gave way between the 3rd and 4th sample of the build-up to 20 N
    assert a.diagnosis.yield_force_n == pytest.approx(3.5 / CLOSE_TRACE_SAMPLES * 20.0)


def test_when_the_width_was_lost_splits_slip_from_drop_and_a_lost_load_is_a_spill():
    grasp = at_centre()
    held = observation_for(ok(), grasp, "t", {"t": BOX})
    off = copy.deepcopy(held)
    off.width_at_liftoff_m = off.width_after_lift_m = 0.0
    assert assessed(None, obs=off).diagnosis.failure_type == FailureType.SLIP
    top = copy.deepcopy(held)
    top.width_after_lift_m = 0.0
    assert assessed(None, obs=top).diagnosis.failure_type == FailureType.DROP
    spilled = copy.deepcopy(held)                   # the load fell beyond the noise
    spilled.wrench_lifted = Wrench(spilled.wrench_liftoff.force + [0.0, 0.0, 2.0 * LOAD_CHANGE_N],
                                   spilled.wrench_liftoff.torque)
    assert assessed(None, obs=spilled).diagnosis.failure_type \
        == FailureType.CONSTRAINT_VIOLATION
    steady = copy.deepcopy(held)                    # within the noise
    steady.wrench_lifted = Wrench(steady.wrench_liftoff.force + [0.0, 0.0, 0.5 * LOAD_CHANGE_N],
                                  steady.wrench_liftoff.torque)
    assert assessed(None, obs=steady).success


def test_a_slip_that_carried_less_than_the_pads_friction_turned_out_of_them():
    # 20 N on plastic: the pads hold 2 x 0.3 x 20 = 12 N by friction
    friction_bound = assessed(slip()).diagnosis           # carried more than that
    assert friction_bound.failure_type == FailureType.SLIP and not friction_bound.torque_bound
    turned = assessed(slip(carried_n=2.0)).diagnosis
    assert turned.torque_bound
    # its perceived volume at the densest plastic: the weight's upper bound
    weight = 0.05 * 0.05 * 0.10 * MATERIAL_DENSITY["plastic"] * 9.81
    assert turned.torque_ratio == pytest.approx(weight / 2.0)


def test_a_drop_the_pads_friction_held_far_above_the_lifts_load_turned_out_of_them():
    # carried 1 N at lift-off; at 20 N the pads hold 12 N by friction, far above the
    # lift's dynamic load on 1 N: the moment let go, by at most that dynamic factor
    turned = assessed(outcome(events=[("drop", "lift")])).diagnosis
    assert turned.failure_type == FailureType.DROP and turned.torque_bound
    assert turned.torque_ratio == pytest.approx(DYNAMIC_LOAD_BOUND)
    grasp = at_centre()
    heavy = observation_for(outcome(events=[("drop", "lift")]), grasp, "t", {"t": BOX})
    heavy.wrench_liftoff = Wrench(np.array([0.0, 0.0, -10.0]), np.zeros(3))
    friction_bound = assessed(None, grasp, obs=heavy).diagnosis
    assert friction_bound.failure_type == FailureType.DROP and not friction_bound.torque_bound


def test_phi_and_q_are_read_from_the_observation():
    index = {n: k for k, n in enumerate(QUALITY_FACTOR_NAMES)}
    held = assessed(ok()).outcome
    slipped = assessed(slip()).outcome
    assert slipped.phi[index["grip_security"]] == 0.0
    assert slipped.phi[index["force_appropriateness"]] == 0.0
    assert held.phi[index["grip_security"]] == pytest.approx(1.0)
    for out in (held, slipped):
        assert out.quality == pytest.approx(float(np.dot(PAPER_WEIGHTS, out.phi)))
    assert held.quality > slipped.quality
    landed = assessed(outcome(events=[("position_error", "approach", "t")])).outcome
    assert landed.phi[index["position_accuracy"]] == 0.0


def test_no_evidence_is_unknown():
    a = assessed(outcome(events=[("unknown", "approach")]))
    assert a.diagnosis.failure_type == FailureType.UNKNOWN and a.diagnosis.source == "observation"
    none = assessed(None)                                 # no observation reported
    assert none.diagnosis.failure_type == FailureType.UNKNOWN
    assert none.diagnosis.source == "default" and none.outcome is None
    canceled = assessed(ok(), error=ArmError.CANCELED)
    assert canceled.diagnosis is None and not canceled.success


def test_width_direction_and_material_from_the_perceived_extent():
    landed = assessed(outcome(events=[("width_mismatch", "approach", "t")]),
                      at_centre(width=0.03)).diagnosis
    assert landed.width_direction == 1 and landed.material_width_m == pytest.approx(0.05)
    inside = assessed(outcome(events=[("width_mismatch", "close", "t")]), at_centre(BOWL),
                      BOWL).diagnosis
    assert inside.failure_type == FailureType.WIDTH_MISMATCH and inside.width_direction == 1
    # the same finger on a target the opening passes is off position, no width evidence
    passes = assessed(outcome(events=[("position_error", "approach", "t")])).diagnosis
    assert passes.failure_type == FailureType.POSITION_ERROR and passes.width_direction == 0
    assert passes.material_width_m == pytest.approx(0.05)


# ------------------------------------------------------------------ level-1 corrections
TARGET = make_object("t", "thing", xy=(0.5, 0.05), size=(0.05, 0.05, 0.10))


def grasp(**kw):
    base = dict(position=np.array([0.52, 0.05, 0.08]), width=0.05, force=20.0,
                approach_height=0.10, speed=0.10, wrist_yaw=0.3, grasp_type="power")
    base.update(kw)
    return GraspParameters(**base)


def corrected(kind, g=None, target=TARGET, **diag_kw):
    g = g or grasp()
    ctx = CorrectionContext(target=target, g0=g, b0=g, constrain=lambda x: x.copy(),
                            rng=np.random.default_rng(0),
                            objects={target.id: target,
                                     "vase": make_object("vase", "vase", xy=(0.5, 0.20))})
    cfg = PlannerConfig(escalate_unchanged=False)
    return get_correction(Diagnosis(kind, "test", "event", **diag_kw), 1, g, g, ctx, cfg)


@pytest.mark.parametrize("kind, scale", [(FailureType.SLIP, 1.2), (FailureType.DROP, 1.3),
                                         (FailureType.FORCE_DAMAGE, 0.7),
                                         (FailureType.DEFORMATION, 0.8)])
def test_force_rules(kind, scale):
    c = corrected(kind)
    assert c.level == 1
    assert c.grasp.force == pytest.approx(20.0 * scale)
    assert c.grasp.width == pytest.approx(0.05)
    assert np.allclose(c.grasp.position, grasp().position)


def test_width_rule_sign_follows_the_evidence():
    assert corrected(FailureType.WIDTH_MISMATCH, width_direction=1).grasp.width \
        == pytest.approx(0.06)
    assert corrected(FailureType.WIDTH_MISMATCH, width_direction=-1).grasp.width \
        == pytest.approx(0.04)
    assert corrected(FailureType.WIDTH_MISMATCH).grasp.width == pytest.approx(0.06)  # paper
    at_limit = corrected(FailureType.WIDTH_MISMATCH, g=grasp(width=0.08), width_direction=1)
    assert at_limit.grasp.width == pytest.approx(0.08)
    assert "no parameter changed" in at_limit.text


def test_collision_rule_raises_the_approach_and_turns_the_palm_away():
    # wrist 0.3 rad closes along (-sin .3, cos .3): within 45 deg of the vase at +y
    c = corrected(FailureType.COLLISION, other_id="vase")
    assert c.grasp.approach_height == pytest.approx(0.13)
    assert c.grasp.wrist_yaw == pytest.approx(0.3 + math.pi / 2)
    # closing across x (wrist -pi/2): the palm's long side does not point at the vase
    c = corrected(FailureType.COLLISION, g=grasp(wrist_yaw=-math.pi / 2), other_id="vase")
    assert c.grasp.approach_height == pytest.approx(0.13)
    assert c.grasp.wrist_yaw == pytest.approx(-math.pi / 2)


def test_collision_with_the_table_raises_the_grasp_point_or_verticalises():
    c = corrected(FailureType.COLLISION, other_id="table")
    assert c.grasp.position[2] == pytest.approx(0.09)
    assert c.grasp.approach_height == pytest.approx(0.10)
    tilted = grasp(approach=np.array([0.3, 0.0, -0.95]))
    c = corrected(FailureType.COLLISION, g=tilted, other_id="table")
    assert np.allclose(c.grasp.approach, [0, 0, -1])


def test_position_error_recentres_by_a_step_or_raises_when_centred():
    c = corrected(FailureType.POSITION_ERROR)                       # 20 mm off centre
    assert np.allclose(c.grasp.position[:2], [0.51, 0.05])
    assert c.grasp.position[2] == pytest.approx(0.08)
    near = grasp(position=np.array([0.505, 0.05, 0.08]))             # 5 mm: snaps onto it
    assert np.allclose(corrected(FailureType.POSITION_ERROR, g=near).grasp.position[:2],
                       [0.5, 0.05])
    # a landing on a centred grasp raises it only where the section narrows upward (a
    # sphere); a box's does not, so nothing is left to tune there without a measurement
    centred = grasp(position=np.array([0.5, 0.05, 0.08]))
    c = corrected(FailureType.POSITION_ERROR, g=centred, phase="approach")
    assert np.allclose(c.grasp.position, centred.position)
    ball = make_object("t", "ball", xy=(0.5, 0.05), size=(0.08, 0.08, 0.08),
                       shape=Shape.SPHERE)
    c = corrected(FailureType.POSITION_ERROR, g=centred, phase="approach", target=ball)
    assert c.grasp.position[2] == pytest.approx(0.09)


def test_position_error_on_a_part_beside_the_body_widens_instead_of_recentring():
    on_handle = grasp(position=np.array([0.54, 0.05, 0.08]))     # 15 mm outside the body
    c = corrected(FailureType.POSITION_ERROR, g=on_handle, phase="approach")
    assert np.allclose(c.grasp.position, on_handle.position)      # not onto the body
    assert c.grasp.width == pytest.approx(on_handle.width + 0.02)
    assert "part beside the body" in c.text


def test_unreachable_rule():
    c = corrected(FailureType.UNREACHABLE_POSE)
    assert c.grasp.wrist_yaw == pytest.approx(0.3 + math.pi / 2)
    tilted = grasp(approach=np.array([1.0, 0.0, -1.0]))
    c = corrected(FailureType.UNREACHABLE_POSE, g=tilted, detail="for the pre-grasp pose")
    assert np.allclose(c.grasp.approach, [0, 0, -1])
    assert c.grasp.approach_height == pytest.approx(0.07)


def test_approach_angle_rule():
    tilted = grasp(approach=np.array([1.0, 0.0, -1.0]))
    assert np.allclose(corrected(FailureType.APPROACH_ANGLE, g=tilted).grasp.approach,
                       [0, 0, -1])
    c = corrected(FailureType.APPROACH_ANGLE)
    assert c.grasp.position[2] == pytest.approx(0.09)


def test_orientation_and_constraint_violation_rules():
    assert corrected(FailureType.ORIENTATION).grasp.wrist_yaw \
        == pytest.approx(0.3 + math.pi / 2)
    c = corrected(FailureType.CONSTRAINT_VIOLATION, g=grasp(approach=np.array([1, 0, -1.0])))
    assert c.grasp.speed == pytest.approx(0.05)
    assert np.allclose(c.grasp.approach, [0, 0, -1])


@pytest.mark.parametrize("kind", [FailureType.WRONG_OBJECT, FailureType.TIMEOUT,
                                  FailureType.UNKNOWN])
def test_replan_rules_take_the_next_strategy_then_g0(kind):
    g = grasp()
    alt = grasp(grasp_type="pinch", width=0.03, force=12.0)
    ctx = CorrectionContext(target=TARGET, g0=g, b0=g, constrain=lambda x: x.copy(),
                            rng=np.random.default_rng(0), alternatives=[alt],
                            alternative_names=["alt-001"])
    cfg = PlannerConfig()
    moved = g.copy(force=33.0)
    first = get_correction(Diagnosis(kind, "t", "event"), 1, moved, moved, ctx, cfg)
    assert first.grasp.grasp_type == GraspType.PINCH and "alt-001" in first.rule
    second = get_correction(Diagnosis(kind, "t", "event"), 1, moved, moved, ctx, cfg)
    assert second.grasp.force == pytest.approx(20.0)          # back to g0
    assert "g0" in second.rule


def test_level1_adjustment_is_declarative():
    adj = level1_adjustment(Diagnosis(FailureType.SLIP, "e", "event"), grasp(),
                            CorrectionConfig(slip_force_scale=1.5))
    assert adj.ops == {"force_scale": 1.5}
    assert "1.5" in adj.rule
