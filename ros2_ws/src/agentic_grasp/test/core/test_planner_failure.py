"""ClassifyFailure precedence and thresholds, and the level-1 rule of every failure type."""
import math

import numpy as np
import pytest

from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.planner.configurations import PlannerConfig
from agentic_grasp.core.planner.sections import ClassificationConfig, CorrectionConfig
from agentic_grasp.core.planner.recovery.failure import Diagnosis, classify_failure
from agentic_grasp.core.planner.recovery import (CORRECTION_RULES, CorrectionContext,
                                                 failure_types_covered, get_correction,
                                                 level1_adjustment)
from agentic_grasp.core.types import (FailureGroup, FailureType, GraspParameters, GraspType,
                                      QUALITY_FACTOR_NAMES, Shape)

from test_planner_fakes import make_object, outcome


def phi_with(**low):
    phi = np.full(7, 0.9)
    for name, value in low.items():
        phi[QUALITY_FACTOR_NAMES.index(name)] = value
    return phi


# ------------------------------------------------------------------ classification
def test_every_taxonomy_type_has_a_rule_and_a_group():
    assert failure_types_covered() == list(FailureType)
    assert len(CORRECTION_RULES) == 14
    groups = {t.group for t in FailureType}
    assert groups == set(FailureGroup)


@pytest.mark.parametrize("kind", [t for t in FailureType])
def test_an_event_of_each_type_is_classified_as_that_type(kind):
    diag = classify_failure(outcome(events=[(kind.value, "close", "x")]))
    assert diag.failure_type == kind
    assert diag.source == "event"
    assert diag.group == kind.group


def test_first_failure_event_wins_and_neutral_events_are_skipped():
    out = outcome(events=[("pushed", "approach", "vase"), ("collision", "approach", "vase"),
                          ("slip", "lift")])
    diag = classify_failure(out)
    assert diag.failure_type == FailureType.COLLISION
    assert diag.other_id == "vase"


def test_events_beat_phi():
    out = outcome(events=[("drop", "lift")], phi=phi_with(position_accuracy=0.0))
    assert classify_failure(out).failure_type == FailureType.DROP


def test_arm_error_beats_events_and_maps_codes():
    out = outcome(events=[("slip", "lift")])
    assert classify_failure(out, ArmError.OUT_OF_WORKSPACE, "x").failure_type \
        == FailureType.UNREACHABLE_POSE
    assert classify_failure(None, ArmError.UNKNOWN_TARGET).failure_type \
        == FailureType.WRONG_OBJECT
    assert classify_failure(None, ArmError.BACKEND_UNAVAILABLE).failure_type \
        == FailureType.TIMEOUT
    assert classify_failure(None, ArmError.FORCE_LIMIT).failure_type == FailureType.UNKNOWN
    assert classify_failure(None, ArmError.BACKEND_FAILURE).source == "arm_error"


def test_timeout_beats_events():
    cfg = ClassificationConfig(attempt_timeout_s=5.0)
    out = outcome(events=[("slip", "lift")])
    assert classify_failure(out, elapsed_s=6.0, config=cfg).failure_type == FailureType.TIMEOUT
    assert classify_failure(out, elapsed_s=4.0, config=cfg).failure_type == FailureType.SLIP


@pytest.mark.parametrize("low, expected", [
    ({"position_accuracy": 0.29}, FailureType.POSITION_ERROR),
    ({"width_compatibility": 0.39}, FailureType.WIDTH_MISMATCH),
    ({"approach_clearance": 0.1}, FailureType.COLLISION),
    ({"grasp_type_matching": 0.1}, FailureType.ORIENTATION),
    ({"force_appropriateness": 0.1}, FailureType.SLIP),
    ({"grip_security": 0.1}, FailureType.SLIP),
])
def test_phi_fallback_thresholds(low, expected):
    diag = classify_failure(outcome(phi=phi_with(**low)))
    assert diag.failure_type == expected
    assert diag.source == "phi"


def test_phi_at_the_threshold_is_not_a_failure():
    assert classify_failure(outcome(phi=phi_with(width_compatibility=0.4))).failure_type \
        == FailureType.UNKNOWN


def test_phi_fallback_follows_causal_order():
    # position (pre-contact) beats width (contact) beats security (post-grasp)
    out = outcome(phi=phi_with(position_accuracy=0.1, width_compatibility=0.1,
                               grip_security=0.0))
    assert classify_failure(out).failure_type == FailureType.POSITION_ERROR
    out = outcome(phi=phi_with(width_compatibility=0.1, grip_security=0.0))
    assert classify_failure(out).failure_type == FailureType.WIDTH_MISMATCH


def test_phi_force_and_hold_use_the_measurements():
    damage = outcome(phi=phi_with(force_appropriateness=0.0),
                     measurements={"applied_force_n": 50.0, "damage_limit_n": 30.0})
    assert classify_failure(damage).failure_type == FailureType.FORCE_DAMAGE
    drop = outcome(phi=phi_with(grip_security=0.0), measurements={"static_margin": 1.4})
    assert classify_failure(drop).failure_type == FailureType.DROP
    slip = outcome(phi=phi_with(grip_security=0.0), measurements={"static_margin": 0.6})
    assert classify_failure(slip).failure_type == FailureType.SLIP


def test_no_evidence_is_unknown():
    assert classify_failure(outcome()).failure_type == FailureType.UNKNOWN
    assert classify_failure(None).failure_type == FailureType.UNKNOWN


@pytest.mark.parametrize("margin, direction", [(-0.004, 1), (0.001, 1), (0.03, -1),
                                               (float("nan"), 0)])
def test_width_direction_from_the_measured_margin(margin, direction):
    out = outcome(events=[("width_mismatch", "approach")],
                  measurements={"opening_margin_m": margin})
    assert classify_failure(out).width_direction == direction


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
