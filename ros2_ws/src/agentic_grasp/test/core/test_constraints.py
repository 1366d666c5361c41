"""Constraint analyzer: the four constraints, their ranges, composition order, IT scenes."""
import json
import math

import numpy as np
import pytest

from agentic_grasp.core.scene_graph.constraints import (COMPOSITION_ORDER, ConstraintType,
                                                        apply_constraints, infer_constraints)
from agentic_grasp.core.errors import UnknownTargetError
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.scene_graph.graph import build_scene_graph
from agentic_grasp.core.types import GraspParameters, GraspType, ObjectInstance

CT = ConstraintType

# Table I (cm -> m), fragility
CUP = dict(category="ceramic cup", shape="cylinder", size=(0.08, 0.08, 0.09), fragility=0.3)
VASE = dict(category="glass vase", shape="cylinder", size=(0.08, 0.08, 0.15), fragility=0.8)
WINE_GLASS = dict(category="wine glass", shape="cylinder", size=(0.07, 0.07, 0.20),
                  fragility=0.9)
PHONE_FLAT = dict(category="smartphone", shape="box", size=(0.07, 0.15, 0.01), fragility=0.5)
SCREWDRIVER = dict(category="screwdriver", shape="box", size=(0.20, 0.03, 0.03), fragility=0.0)
BALL = dict(category="tennis ball", shape="sphere", size=(0.065, 0.065, 0.065), fragility=0.0)
CUBE = dict(category="wood cube", shape="box", size=(0.05, 0.05, 0.05), fragility=0.0)
BOX = dict(category="cardboard box", shape="box", size=(0.10, 0.20, 0.15), fragility=0.0)


def put(oid, spec, x, y, z0=0.0, **kw):
    args = dict(spec)
    args.update(kw)
    size = args.pop("size")
    return ObjectInstance(id=oid, position=(x, y, z0 + size[2] / 2.0), size=size, **args)


def grasp_at(obj, **kw):
    return GraspParameters(position=obj.position, **kw)


def tilt_deg(d):
    return math.degrees(math.acos(-d[2] / np.linalg.norm(d)))


def cup_and_vase(gap, state="empty", vase_fragility=0.8):
    cup = put("cup", CUP, 0.5, 0.0, state=state)
    vase = put("vase", dict(VASE, fragility=vase_fragility), 0.5, 0.08 + gap)
    return cup, vase


# ---------------------------------------------------------------------------------------------
# single constraints
# ---------------------------------------------------------------------------------------------

def test_content_preservation_for_a_filled_target_only():
    filled = put("cup", CUP, 0.5, 0.0, state="filled")
    cs = infer_constraints(build_scene_graph([filled]), "cup")
    assert cs.types == [CT.CONTENT_PRESERVATION]
    c = cs.constraints[0]
    np.testing.assert_allclose(c.direction_override, [0.0, 0.0, -1.0])
    assert c.speed_cap == pytest.approx(0.05) and "filled" in c.explanation
    tilted = grasp_at(filled, approach=(0.3, 0.0, -1.0), speed=0.10)
    out = apply_constraints(tilted, cs)
    np.testing.assert_allclose(out.approach, [0.0, 0.0, -1.0])
    assert out.speed == pytest.approx(0.05) and out.force == tilted.force
    empty = put("cup", CUP, 0.5, 0.0)
    assert len(infer_constraints(build_scene_graph([empty]), "cup")) == 0


def test_collision_avoidance_fragile_neighbour_within_delta_safe():
    cup, vase = cup_and_vase(0.05)
    cs = infer_constraints(build_scene_graph([cup, vase]), "cup")
    assert cs.types == [CT.COLLISION_AVOIDANCE]
    c = cs.constraints[0]
    assert c.source_id == "vase" and c.force_scale == 0.8 and c.height_delta == 0.03
    assert "vase" in c.explanation and "0.050 m" in c.explanation
    g = grasp_at(cup, force=20.0, approach_height=0.10)
    out = apply_constraints(g, cs)
    assert out.force == pytest.approx(16.0)
    assert out.approach_height == pytest.approx(0.13)
    assert tilt_deg(out.approach) == pytest.approx(20.0)
    # the hand (pre-grasp pose p - h d) moves away from the vase, not over it
    pre = out.position - out.approach_height * out.approach
    away = np.array([0.0, -1.0, 0.0])               # from the vase (y > 0) to the cup
    assert (pre - out.position) @ away > 0.0
    assert np.linalg.norm(pre[:2] - vase.position[:2]) > np.linalg.norm(
        out.position[:2] - vase.position[:2])


@pytest.mark.parametrize("gap", [0.10, 0.099])
def test_collision_triggers_at_and_inside_delta_safe(gap):
    cup, vase = cup_and_vase(gap)
    assert infer_constraints(build_scene_graph([cup, vase]), "cup").types == \
        [CT.COLLISION_AVOIDANCE]


def test_collision_not_triggered_out_of_range_or_not_fragile():
    cup, vase = cup_and_vase(0.12)                 # within delta_check, beyond delta_safe
    g = build_scene_graph([cup, vase])
    assert g.neighbours_within("cup", 0.15) == ["vase"]
    assert len(infer_constraints(g, "cup")) == 0
    cup, bowl = cup_and_vase(0.05, vase_fragility=0.3)   # close but not fragile
    assert len(infer_constraints(build_scene_graph([cup, bowl]), "cup")) == 0
    cup, phone = cup_and_vase(0.05, vase_fragility=0.5)  # threshold is inclusive
    assert infer_constraints(build_scene_graph([cup, phone]), "cup").types == \
        [CT.COLLISION_AVOIDANCE]


def test_two_fragile_neighbours_do_not_compound():
    cup = put("cup", CUP, 0.5, 0.0)
    left = put("v1", VASE, 0.5, -0.13)
    right = put("v2", VASE, 0.5, 0.13)
    cs = infer_constraints(build_scene_graph([cup, left, right]), "cup")
    assert cs.types == [CT.COLLISION_AVOIDANCE] * 2
    adj = cs.adjustment
    assert adj["force_scale"] == 0.8 and adj["delta_h"] == 0.03
    out = apply_constraints(grasp_at(cup, force=20.0), cs)
    assert out.force == pytest.approx(16.0)
    np.testing.assert_allclose(out.approach, [0.0, 0.0, -1.0], atol=1e-9)  # biases cancel
    same_side = [cup, put("v1", VASE, 0.5, 0.13), put("v2", VASE, 0.58, 0.11)]
    out = apply_constraints(grasp_at(cup), infer_constraints(build_scene_graph(same_side),
                                                             "cup"))
    assert tilt_deg(out.approach) == pytest.approx(20.0)          # not doubled


def test_support_dependency_removes_supported_objects_topmost_first():
    blocks = [put(f"b{k}", dict(CUBE, size=(0.04, 0.04, 0.04)), 0.5, 0.0, z0=0.04 * k,
                  state="stacked") for k in range(3)]
    g = build_scene_graph(blocks)
    cs = infer_constraints(g, "b0")
    assert cs.types == [CT.SUPPORT_DEPENDENCY]
    assert cs.prerequisites == ["b2", "b1"]
    assert "b1 rests on b0" in cs.constraints[0].explanation
    assert infer_constraints(g, "b1").prerequisites == ["b2"]
    assert len(infer_constraints(g, "b2")) == 0
    out = apply_constraints(grasp_at(blocks[0]), cs)                # g itself is unchanged
    assert out.to_dict() == grasp_at(blocks[0]).to_dict()


def test_support_dependency_includes_objects_leaning_on_the_target():
    box = put("box", BOX, 0.5, 0.0)
    bottle = ObjectInstance(id="bottle", category="plastic bottle", shape="cylinder",
                            position=(0.5, 0.1385, 0.11), size=(0.07, 0.07, 0.22),
                            upright=False)
    cs = infer_constraints(build_scene_graph([box, bottle]), "box")
    assert cs.prerequisites == ["bottle"]
    assert "leans on" in cs.constraints[0].explanation


def test_occlusion_gives_a_lateral_approach_away_from_the_occluder():
    box = put("box", BOX, 0.55, 0.0)
    ball = put("ball", BALL, 0.45, 0.0)            # smaller x: behind the box from the camera
    g = build_scene_graph([box, ball])
    cs = infer_constraints(g, "ball")
    assert cs.types == [CT.OCCLUSION] and cs.constraints[0].source_id == "box"
    out = apply_constraints(grasp_at(ball), cs)
    assert tilt_deg(out.approach) == pytest.approx(45.0)
    pre = out.position - out.approach_height * out.approach
    assert pre[0] < out.position[0]                # hand on the robot side, not over the box
    assert out.force == grasp_at(ball).force       # no force change


def test_occlusion_not_triggered_when_not_occluded_or_occluder_out_of_range():
    box = put("box", BOX, 0.55, 0.0)
    far_ball = put("ball", BALL, 0.30, 0.0)
    assert len(infer_constraints(build_scene_graph([box, far_ball]), "ball")) == 0
    tall = put("wall", dict(BOX, size=(0.05, 0.4, 0.6)), 0.70, 0.0)   # occludes, 0.21 m away
    ball = put("ball", BALL, 0.45, 0.0)
    g = build_scene_graph([tall, ball])
    assert g.has_relation("wall", "Occludes", "ball")
    assert len(infer_constraints(g, "ball")) == 0


# ---------------------------------------------------------------------------------------------
# composition
# ---------------------------------------------------------------------------------------------

def test_filled_cup_next_to_fragile_vase_collision_first_then_vertical():
    cup, vase = cup_and_vase(0.05, state="filled")
    cs = infer_constraints(build_scene_graph([cup, vase]), "cup")
    assert cs.types == [CT.COLLISION_AVOIDANCE, CT.CONTENT_PRESERVATION]
    assert [t for t in COMPOSITION_ORDER if t in cs.types] == cs.types
    g = grasp_at(cup, force=20.0, approach_height=0.10, speed=0.10)
    out = apply_constraints(g, cs)
    assert out.force == pytest.approx(16.0)
    assert out.approach_height == pytest.approx(0.13)
    np.testing.assert_allclose(out.approach, [0.0, 0.0, -1.0])
    assert out.speed == pytest.approx(0.05)
    adj = cs.adjustment
    assert adj["delta_d"][1] != 0.0               # the bias is there, the override wins
    assert adj["delta_f"] == pytest.approx(-0.2)
    json.dumps(cs.to_dict())
    # the input grasp is not modified
    np.testing.assert_allclose(g.approach, [0.0, 0.0, -1.0])
    assert g.force == 20.0 and g.approach_height == 0.10


def test_occlusion_side_yields_to_collision_priority():
    box = put("box", BOX, 0.56, 0.0)
    ball = put("ball", BALL, 0.45, 0.0)
    glass = put("glass", WINE_GLASS, 0.38, -0.07)   # on the robot side, diagonally
    g = build_scene_graph([box, ball, glass])
    assert g.has_relation("box", "Occludes", "ball")
    cs = infer_constraints(g, "ball")
    assert cs.types == [CT.COLLISION_AVOIDANCE, CT.OCCLUSION]
    assert "priority" in cs.of_type(CT.OCCLUSION)[0].explanation
    out = apply_constraints(grasp_at(ball), cs)
    hand = -out.approach[:2]
    away_from_glass = ball.position[:2] - glass.position[:2]
    assert hand @ away_from_glass > 0.0           # the hand never heads toward the glass
    # without the glass the occlusion side points straight at the glass's position
    alone = apply_constraints(grasp_at(ball), infer_constraints(
        build_scene_graph([box, ball]), "ball"))
    assert -alone.approach[:2] @ away_from_glass < 0.0


# ---------------------------------------------------------------------------------------------
# the four interactive tasks (paper Sec. V, IT a-d), built from Table I dimensions
# ---------------------------------------------------------------------------------------------

def test_it_a_cup_near_fragile_glass_vase():
    cup = put("cup", CUP, 0.50, -0.02)
    vase = put("vase", VASE, 0.50, 0.11)            # 5 cm surface gap
    cs = infer_constraints(build_scene_graph([cup, vase]), "cup")
    assert cs.types == [CT.COLLISION_AVOIDANCE]
    out = apply_constraints(grasp_at(cup, force=15.0, grasp_type=GraspType.SIDE), cs)
    assert out.force == pytest.approx(12.0) and out.approach_height == pytest.approx(0.13)


def test_it_b_ball_behind_box():
    box = put("box", BOX, 0.56, 0.0)
    ball = put("ball", BALL, 0.46, 0.0)
    g = build_scene_graph([box, ball])
    assert g.has_relation("ball", "Behind", "box")
    assert infer_constraints(g, "ball").types == [CT.OCCLUSION]


def test_it_c_phone_near_wine_glass():
    phone = put("phone", PHONE_FLAT, 0.50, 0.0)
    glass = put("glass", WINE_GLASS, 0.50, 0.035 + 0.04 + 0.035)   # 4 cm gap
    cs = infer_constraints(build_scene_graph([phone, glass]), "phone")
    assert cs.types == [CT.COLLISION_AVOIDANCE] and cs.constraints[0].source_id == "glass"
    out = apply_constraints(grasp_at(phone, force=10.0), cs)
    assert out.force == pytest.approx(8.0)


def test_it_d_screwdriver_side_grasp_is_left_alone():
    screwdriver = put("screwdriver", SCREWDRIVER, 0.50, 0.0)
    cube = put("cube", CUBE, 0.50, 0.10)
    cs = infer_constraints(build_scene_graph([screwdriver, cube]), "screwdriver")
    assert len(cs) == 0 and cs.prerequisites == []
    side = grasp_at(screwdriver, approach=(-1.0, 0.0, -0.2), grasp_type=GraspType.SIDE)
    assert apply_constraints(side, cs).to_dict() == side.to_dict()


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------

def test_unknown_target_and_empty_scene():
    with pytest.raises(UnknownTargetError, match="ghost"):
        infer_constraints(build_scene_graph([put("cup", CUP, 0.5, 0.0)]), "ghost")
    with pytest.raises(UnknownTargetError):
        infer_constraints(build_scene_graph([]), "cup")
    alone = infer_constraints(build_scene_graph([put("cup", CUP, 0.5, 0.0)]), "cup")
    assert len(alone) == 0 and alone.adjustment["force_scale"] == 1.0
    assert alone.adjustment["direction_override"] is None


def test_config_argument_overrides_the_graphs():
    cup, vase = cup_and_vase(0.12)
    g = build_scene_graph([cup, vase])
    assert len(infer_constraints(g, "cup")) == 0
    wide = SceneGraphConfig(delta_safe=0.13, delta_check=0.15)
    assert infer_constraints(g, "cup", wide).types == [CT.COLLISION_AVOIDANCE]
