"""Grasp fitting, the Franka Hand sweep and clearance-aware candidates (core/grasping)."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from agentic_grasp.core.grasping import GraspSynthesisConfig, HandModel, fit_record
from agentic_grasp.core.arm.closing_axis import closing_axis
from agentic_grasp.core.grasping.candidates import generate_candidates
from agentic_grasp.core.grasping.fit import fit_strategy
from agentic_grasp.core.geometry import yaw_matrix
from agentic_grasp.core.grasping.hand import Box, gap_matrix, obb_gap, object_box
from agentic_grasp.core.planner.configurations import PlannerConfig
from agentic_grasp.core.planner.recovery.failure import Diagnosis
from agentic_grasp.core.planner.recovery import CorrectionContext, NextCandidates, get_correction
from agentic_grasp.core.types import (FailureType, GraspParameters, ObjectInstance, ObjectState,
                                      Shape)

CFG = GraspSynthesisConfig()
HAND = HandModel(CFG.hand)
KB = Path(__file__).resolve().parents[5] / "kb_data" / "experiences"

CUP_HANDLE = {"position": [0.0525, 0.0, 0.0], "approach": [0.0, 0.0, -1.0], "width": 0.03,
              "force": 15.0, "grasp_type": "pinch", "approach_height": 0.1, "speed": 0.08,
              "wrist_yaw": 0.0}
CUP_SPEC = {"shape": "cylinder", "size": [0.08, 0.08, 0.09]}
BALL_GRASP = {"position": [0.0, 0.0, 0.0], "approach": [0.0, 0.0, -1.0], "width": 0.08,
              "force": 10.0, "grasp_type": "power", "approach_height": 0.1, "speed": 0.1,
              "wrist_yaw": 0.0}
BALL_SPEC = {"shape": "sphere", "size": [0.065, 0.065, 0.065]}


def obj(oid="t", shape=Shape.CYLINDER, xy=(0.5, 0.0), size=(0.08, 0.08, 0.09), yaw=0.0,
        state=ObjectState.EMPTY, category="cup"):
    return ObjectInstance(id=oid, category=category, shape=shape,
                          position=np.array([xy[0], xy[1], size[2] / 2.0]),
                          size=np.array(size, dtype=float), yaw=yaw, state=state)


def fit(grasp, spec, target, region="body", handle_yaw=None):
    rec = fit_record({"grasp": grasp, "render_spec": spec, "affordance": {"region": region}})
    return fit_strategy(grasp, spec, rec, target, CFG, HAND, handle_yaw)


def test_every_experience_carries_the_fit_record_its_grasp_implies():
    n = 0
    for path in sorted(KB.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            assert rec["fit"] == fit_record(rec), rec["id"]
            n += 1
    assert n == 125


def test_handle_offset_scales_with_the_perceived_cup_and_follows_the_handle_side():
    big = obj(size=(0.10, 0.10, 0.11))
    res = fit(CUP_HANDLE, CUP_SPEC, big, region="handle")
    assert res.breakdown["yaw_ref"] == "handle" and res.breakdown["opening"] == "part"
    # 52.5 mm on an 8 cm cup = 1.3125 half-widths = 65.6 mm on a 10 cm cup
    assert res.grasp.position[0] - 0.5 == pytest.approx(0.065625)
    assert res.grasp.width == pytest.approx(0.03)
    turned = fit(CUP_HANDLE, CUP_SPEC, big, region="handle", handle_yaw=math.pi / 2)
    assert turned.grasp.position[:2] == pytest.approx([0.5, 0.065625])
    assert turned.grasp.wrist_yaw == pytest.approx(math.pi / 2)


def test_body_opening_comes_from_the_perceived_extent_plus_margin():
    egg = obj(shape=Shape.SPHERE, size=(0.045, 0.045, 0.045), category="egg")
    res = fit(BALL_GRASP, BALL_SPEC, egg)
    assert res.grasp.width == pytest.approx(0.045 + CFG.opening_margin_m)
    near_max = obj(shape=Shape.SPHERE, size=(0.075, 0.075, 0.075))
    clamped = fit(BALL_GRASP, BALL_SPEC, near_max)
    assert clamped.grasp.width == pytest.approx(CFG.hand.max_opening_m)
    assert any("clamped" in n for n in clamped.breakdown["notes"])
    too_big = obj(shape=Shape.SPHERE, size=(0.12, 0.12, 0.12))
    skipped = fit(BALL_GRASP, BALL_SPEC, too_big)
    assert skipped.skipped and "no finger clearance" in skipped.breakdown["skipped"]


def test_a_flat_object_grasped_at_its_centre_is_raised_above_the_table():
    phone = obj(shape=Shape.BOX, size=(0.07, 0.15, 0.01), category="smartphone")
    grasp = dict(BALL_GRASP, width=0.08, wrist_yaw=-math.pi / 2)
    res = fit(grasp, {"shape": "box", "size": [0.07, 0.15, 0.01]}, phone, region="sides")
    assert HAND.lowest_point(res.grasp) >= CFG.table_clearance_m - 1e-9
    assert res.breakdown["raised_mm"] > 0


def test_gap_matrix_equals_pairwise_sat_gaps():
    rng = np.random.default_rng(3)
    boxes = [Box(rng.normal(size=3) * 0.1, yaw_matrix(rng.uniform(-3, 3)),
                 rng.uniform(0.01, 0.05, 3), str(i)) for i in range(6)]
    g = gap_matrix(boxes[:3], boxes[3:])
    assert np.allclose(g, [[obb_gap(a, b) for b in boxes[3:]] for a in boxes[:3]])


def test_swept_palm_meets_a_neighbour_under_the_approach_only():
    g = GraspParameters(position=np.array([0.5, 0.0, 0.045]), approach=np.array([0, 0, -1.0]),
                        width=0.03, force=10.0, grasp_type="pinch", approach_height=0.1,
                        wrist_yaw=0.0)
    under = object_box(obj("v", xy=(0.5, 0.12), size=(0.08, 0.08, 0.15)))
    beside = object_box(obj("w", xy=(0.5, 0.25), size=(0.08, 0.08, 0.15)))
    assert HAND.clearance(g, [under])[0] < 0.0           # the 200 mm palm reaches y = 0.1
    assert HAND.clearance(g, [beside])[0] > 0.05


def test_candidates_turn_the_palm_away_from_a_close_neighbour():
    target = obj(shape=Shape.BOX, size=(0.05, 0.05, 0.05), category="cube")
    base = fit(dict(BALL_GRASP, width=0.07), {"shape": "box", "size": [0.05, 0.05, 0.05]},
               target).grasp
    vase = object_box(obj("vase", xy=(0.5, 0.11), size=(0.08, 0.08, 0.15)))
    assert HAND.clearance(base, [vase])[0] < 0.0
    cs = generate_candidates(base, target, [vase], CFG, HAND, opening="extent",
                             away_dirs=[np.array([0.0, -1.0, 0.0])])
    assert cs.collision_free and cs.best.clearance_m >= CFG.required_clearance_m
    assert HAND.clearance(cs.best.grasp, [vase])[0] == pytest.approx(cs.best.clearance_m)


def test_a_tilted_candidate_opens_to_its_tilted_section():
    """A tilt not about the closing axis takes that axis off the horizontal, and a box's
    section along it grows by its height x sin(tilt): the opening follows, so a tilted hand
    keeps the margin beside the body that the untilted one had."""
    from agentic_grasp.core.grasping.fit import extent_at

    bar = obj(shape=Shape.BOX, size=(0.16, 0.04, 0.06), category="stapler")
    base = fit(dict(BALL_GRASP, width=0.06, wrist_yaw=math.pi / 2),
               {"shape": "box", "size": [0.16, 0.04, 0.06]}, bar).grasp
    tall = object_box(obj("bottle", xy=(0.5, 0.1), size=(0.075, 0.075, 0.25)))
    cs = generate_candidates(base, bar, [tall], CFG, HAND, opening="extent",
                             away_dirs=[np.array([0.0, -1.0, 0.0])])
    tilted = [c.grasp for c in cs.ranked if float(c.grasp.approach[2]) > -0.999]
    assert tilted, "no tilted candidate generated"
    for g in tilted:
        section = extent_at(bar, g, CFG.hand.pad_depth_m)
        assert g.width == pytest.approx(min(CFG.hand.max_opening_m,
                                            section + CFG.opening_margin_m))
    across = [g for g in tilted
              if abs(float(closing_axis(g.approach, g.wrist_yaw)[2])) > 0.05]
    assert across and all(g.width > 0.04 + CFG.opening_margin_m + 1e-3 for g in across)


def test_a_part_grasp_of_a_sphere_narrower_than_its_chord_there_is_skipped():
    """A sphere has no part: a banana-end pinch (30 mm) fitted to a 90 mm ball closes
    where tens of mm of the ball lie between the pads, so it is skipped with the reason;
    the same pinch over a ball narrower than its opening there is kept."""
    pinch = {"position": [0.06, 0.0, 0.0], "approach": [0.0, 0.0, -1.0], "width": 0.03,
             "force": 8.0, "grasp_type": "pinch", "approach_height": 0.1, "speed": 0.1,
             "wrist_yaw": 0.0}
    spec = {"shape": "box", "size": [0.2, 0.035, 0.035]}       # a banana lying along x
    ball = obj(shape=Shape.SPHERE, size=(0.09, 0.09, 0.09), category="apple")
    skipped = fit(pinch, spec, ball)
    assert skipped.grasp is None and "a sphere has no part" in skipped.breakdown["skipped"]
    small = obj(shape=Shape.SPHERE, size=(0.02, 0.02, 0.02), category="marble")
    assert fit(dict(pinch, position=[0.0, 0.0, 0.0]), spec, small).grasp is not None


def test_no_finger_inside_the_rim_of_a_filled_container():
    cup = obj(state=ObjectState.FILLED)
    rim = GraspParameters(position=np.array([0.5375, 0.0, 0.08]), approach=np.array([0, 0, -1.0]),
                          width=0.025, force=12.0, grasp_type="pinch", approach_height=0.1,
                          wrist_yaw=math.pi / 2)        # closing radially across the wall
    far = object_box(obj("far", xy=(0.5, 0.14), size=(0.05, 0.05, 0.05)))
    cs = generate_candidates(rim, cup, [far], CFG, HAND, opening="part", vertical_only=True,
                             filled=True)
    assert not cs.collision_free and "inside the rim" in cs.best.nearest
    empty = generate_candidates(rim, obj(), [far], CFG, HAND, opening="part")
    assert empty.collision_free


def test_a_collision_moves_to_the_next_best_candidate():
    g = GraspParameters(position=np.array([0.5, 0.0, 0.05]), approach=np.array([0, 0, -1.0]),
                        width=0.04, force=10.0, grasp_type="power")
    nxt = g.copy(wrist_yaw=0.5)
    ctx = CorrectionContext(target=obj(), g0=g, b0=g, constrain=lambda x: x,
                            rng=np.random.default_rng(0),
                            candidates=NextCandidates([g.copy(), nxt]))
    diag = Diagnosis(FailureType.COLLISION, "palm hits v", "event")
    corr = get_correction(diag, 1, g, g, ctx, PlannerConfig())
    assert corr.ops == {"next_candidate": True} and corr.grasp.wrist_yaw == pytest.approx(0.5)
    slip = get_correction(Diagnosis(FailureType.SLIP, "slid", "event"), 1, g, g, ctx,
                          PlannerConfig())
    assert "next_candidate" not in slip.ops


def test_constraint_mode_is_validated():
    with pytest.raises(Exception):
        GraspSynthesisConfig(constraint_mode="new")


def test_unknown_category_falls_back_to_affordance_and_size():
    from agentic_grasp.core.planner.episode import retriever_for
    from agentic_grasp.core.types import AffordanceDescriptor
    body = AffordanceDescriptor(type="Graspable_Body", material="metal", fragility=0.1,
                                region="body")
    res = retriever_for().retrieve("thermos", body, size=[0.075, 0.075, 0.25])
    assert res.fallback and res.strategies and "fallback" in res.reason
    assert all(s.experience.affordance.type.value == "Graspable_Body" for s in res.strategies)
    assert all("FALLBACK" in s.explanation for s in res.strategies)
    small = retriever_for().retrieve("thermos", body, size=[0.02, 0.02, 0.02])
    assert [s.experience.id for s in small.strategies] != [s.experience.id
                                                           for s in res.strategies]
    known = retriever_for().retrieve("cup", body)
    assert not known.fallback


def test_handle_strategies_are_skipped_when_the_handle_side_is_unknown():
    cup = obj()
    rec = fit_record({"grasp": CUP_HANDLE, "render_spec": CUP_SPEC,
                      "affordance": {"region": "handle"}})
    res = fit_strategy(CUP_HANDLE, CUP_SPEC, rec, cup, CFG, HAND, None, yaw_known=False)
    assert res.skipped and "handle side not perceived" in res.breakdown["skipped"]
    assert not fit_strategy(CUP_HANDLE, CUP_SPEC, rec, cup, CFG, HAND, 0.3,
                            yaw_known=False).skipped


def test_each_attempt_records_its_candidate_and_clearance():
    """The attempt record names the executed candidate and its swept clearance to
    the perceived neighbours; constraint_mode paper runs no clearance search and records none."""
    from dataclasses import replace

    from agentic_grasp.core.grasping.candidates import evaluate
    from agentic_grasp.core.planner.episode import run_trial

    result = run_trial("it_cup_near_vase", "full", 3, perception="vlm_sim")
    attempts = [a for g in result.task.goals for a in g.attempts]
    first = attempts[0].candidate
    assert first["label"].startswith("around ") and "vase_1" in first["nearest"]
    assert 0.0 < first["clearance_m"] < 0.3
    assert attempts[0].to_dict()["candidate"] == first
    for a in attempts[1:]:
        assert a.candidate is not None and a.candidate["label"]
    paper = replace(PlannerConfig.from_config(),
                    grasp_synthesis=GraspSynthesisConfig(constraint_mode="paper"))
    result = run_trial("it_cup_near_vase", "full", 3, perception="vlm_sim",
                       planner_config=paper)
    assert all(a.candidate is None for g in result.task.goals for a in g.attempts)
    # evaluate() is the search's own scoring: a grasp far from every box is collision-free
    target = obj("t", xy=(0.5, 0.0), size=(0.06, 0.06, 0.10))
    g = GraspParameters(position=np.array([0.5, 0.0, 0.09]), approach=np.array([0, 0, -1.0]),
                        width=0.075, force=10.0, grasp_type="pinch", approach_height=0.1)
    far = object_box(obj("far", xy=(0.5, 0.6), size=(0.08, 0.08, 0.15)))
    under = object_box(obj("v", xy=(0.5, 0.12), size=(0.08, 0.08, 0.15)))
    cfg = GraspSynthesisConfig()
    assert evaluate(g, target, [far], cfg, HAND).feasible
    hit = evaluate(g, target, [under], cfg, HAND, label="x")
    assert not hit.feasible and hit.clearance_m < 0.0 and "v" in hit.nearest


def test_swept_arrays_are_the_per_grasp_boxes_bit_for_bit():
    """The candidate search's batched hand must not move a record by one bit."""
    hand = HandModel(GraspSynthesisConfig().hand)
    rng = np.random.default_rng(7)
    grasps = []
    for _ in range(300):
        a = rng.normal(size=3)
        a[2] = -abs(a[2]) - 0.3
        grasps.append(GraspParameters(rng.normal(size=3) * 0.3, a,
                                      width=float(rng.uniform(0.0, 0.1)),
                                      approach_height=float(rng.uniform(0.02, 0.2)),
                                      wrist_yaw=float(rng.uniform(-3.0, 3.0))))
    rotations = [hand.rotation(g) for g in grasps]
    centres, halves, rots, lowest = hand.swept_arrays(grasps, rotations)
    for i, g in enumerate(grasps):
        for k, box in enumerate(hand.boxes(g, rotation=rotations[i])):
            assert np.array_equal(box.c, centres[i, k]) and np.array_equal(box.h, halves[i, k])
            assert np.array_equal(box.R, rots[i])
        assert hand.lowest_point(g, rotation=rotations[i]) == lowest[i]


def test_round_body_gaps_are_the_per_grasp_finger_tests_bit_for_bit():
    """The batched finger-vs-round-body test equals the per-grasp one: the
    finger boxes' face points and the region between the pads, each through
    along.finger_body_gap, the smaller of the two."""
    from agentic_grasp.core.grasping.along import finger_body_gap
    from agentic_grasp.core.grasping.candidates import (_between_fingers, _finger_samples,
                                                        _round_body_gaps)

    hand = HandModel(GraspSynthesisConfig().hand)
    rng = np.random.default_rng(11)
    body = obj("cup", xy=(0.5, 0.0), size=(0.08, 0.08, 0.10))
    grasps = []
    for _ in range(300):
        a = rng.normal(size=3)
        a[2] = -abs(a[2]) - 0.3
        p = np.array([0.5, 0.0, 0.05]) + rng.normal(size=3) * np.array([0.06, 0.06, 0.05])
        grasps.append(GraspParameters(p, a, width=float(rng.uniform(0.0, 0.1)),
                                      wrist_yaw=float(rng.uniform(-3.0, 3.0))))
    grasps.append(GraspParameters(np.array([0.5, 0.0, 0.6])))     # every point above the top
    rotations = [hand.rotation(g) for g in grasps]
    at = hand.swept_arrays(grasps, rotations, with_pose=True)[4]
    got = _round_body_gaps(hand, grasps, rotations, at, body)
    want = [min(finger_body_gap(_finger_samples(hand.boxes(g, swept=False)), body),
                finger_body_gap(_between_fingers(hand, g), body)) for g in grasps]
    assert got == want
    assert math.isinf(want[-1])
    assert any(v < 0.0 for v in want) and any(0.0 < v < math.inf for v in want)
