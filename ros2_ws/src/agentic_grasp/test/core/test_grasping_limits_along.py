"""The hand's limits, grasp points along the object and its parts, round
neighbours, and the handle side on the benchmark's own frames."""

import numpy as np
import pytest

from agentic_grasp.core.grasping import GraspSynthesisConfig, HandModel
from agentic_grasp.core.grasping.along import along_shifts, principal_axis
from agentic_grasp.core.grasping.candidates import generate_candidates
from agentic_grasp.core.grasping.clearance import SceneGeometry, choose, rank_key
from agentic_grasp.core.grasping.hand import object_box
from agentic_grasp.core.grasping.limits import (STATUS_BEYOND_HAND, check_hand_limits,
                                                narrowest_width)
from agentic_grasp.core.scene_graph.constraints import ConstraintSet
from agentic_grasp.core.planner.sections import Limits
from agentic_grasp.core.types import (AffordanceDescriptor, AffordanceType, GraspParameters,
                                      ObjectInstance, ObjectState, Shape)

CFG = GraspSynthesisConfig()
HAND = HandModel(CFG.hand)
LIM = CFG.hand_limits


def obj(oid="t", shape=Shape.CYLINDER, xy=(0.5, 0.0), size=(0.08, 0.08, 0.09), yaw=0.0,
        region="body", state=ObjectState.EMPTY, fragility=0.1, upright=True):
    aff = AffordanceDescriptor(AffordanceType.GRASPABLE_BODY, "plastic", fragility, region)
    o = ObjectInstance(id=oid, category="thing", shape=shape,
                       position=np.array([xy[0], xy[1], size[2] / 2.0]),
                       size=np.array(size, dtype=float), yaw=yaw, state=state,
                       affordance=aff, fragility=fragility)
    o.upright = upright
    return o


class Seen:
    """The PerceivedObject fields the limit check reads."""

    def __init__(self, handle_yaw=None, mass_kg=None):
        self.handle_yaw, self.mass_kg = handle_yaw, mass_kg


def refusal(target, seen=None):
    return check_hand_limits(seen or Seen(), target, CFG.hand, LIM, CFG.finger_clearance_m)


# ------------------------------------------------------------------ the hand's limits
def test_an_object_wider_than_the_hand_every_way_is_refused_with_width_and_limit():
    ball = obj(shape=Shape.SPHERE, size=(0.12, 0.12, 0.12))
    why = refusal(ball)
    # held above its equator at best: the chord 120 mm x cos(atan 0.9) = 89 mm
    assert why is not None and "89 mm" in why and "78 mm" in why
    box = obj(shape=Shape.BOX, size=(0.20, 0.12, 0.14))
    assert "120 mm" in refusal(box)          # its narrowest side decides


def test_what_fits_or_offers_a_part_is_never_refused():
    # the Table I apple is 80 mm, as wide as the opening: within the 8 mm noise margin;
    # a 90 mm apple is held above its equator (chord 67 mm in rubber's friction cone)
    assert refusal(obj(shape=Shape.SPHERE, size=(0.08, 0.08, 0.08))) is None
    assert refusal(obj(shape=Shape.SPHERE, size=(0.09, 0.09, 0.09))) is None
    assert refusal(obj(size=(0.03, 0.03, 0.2))) is None
    # a 12 cm bowl grasped at its rim, a kettle by its (hidden) handle, a perceived handle
    assert refusal(obj(size=(0.12, 0.12, 0.06), region="rim")) is None
    assert refusal(obj(size=(0.15, 0.15, 0.22), region="handle")) is None
    assert refusal(obj(size=(0.15, 0.15, 0.22)), Seen(handle_yaw=0.3)) is None
    # a long box: its narrow side fits
    assert refusal(obj(shape=Shape.BOX, size=(0.30, 0.05, 0.05))) is None


def test_margin_separates_noise_from_width():
    limit = CFG.hand.max_opening_m - 2 * CFG.finger_clearance_m
    assert refusal(obj(size=(limit + LIM.width_margin_m - 1e-4,) * 2 + (0.1,))) is None
    assert refusal(obj(size=(limit + LIM.width_margin_m + 1e-3,) * 2 + (0.1,))) is not None


def test_a_mass_estimate_above_the_payload_is_refused_and_none_is_not_guessed():
    small = obj(size=(0.05, 0.05, 0.05))
    assert refusal(small, Seen(mass_kg=None)) is None
    assert refusal(small, Seen(mass_kg=1.0)) is None
    why = refusal(small, Seen(mass_kg=2.5))
    assert why is not None and "2.50 kg" in why and "2.27 kg" in why


def test_lying_cylinder_width_is_its_diameter():
    assert narrowest_width(Shape.CYLINDER, (0.09, 0.09, 0.25), upright=False) \
        == pytest.approx(0.09)
    assert narrowest_width(Shape.BOX, (0.2, 0.12, 0.14)) == pytest.approx(0.12)


def test_a_sphere_some_surface_lets_the_pads_hold_is_never_refused():
    # a 10 cm rubber ball: at the 78 mm chord the contact is tilted atan(0.80) above its
    # equator, inside rubber's friction cone (0.9), so the pads hold it; a lower friction
    # would put the holding chord nearer the equator, so the bound is the highest friction
    ball = obj(shape=Shape.SPHERE, size=(0.10, 0.10, 0.10))
    assert narrowest_width(Shape.SPHERE, (0.10, 0.10, 0.10)) < 0.078
    assert refusal(ball) is None


def test_planner_refuses_with_zero_attempts_and_its_own_status():
    from agentic_grasp.core.perception.backend import PerceivedObject, PerceptionResult
    from agentic_grasp.core.planner import ReflectivePlanner

    aff = AffordanceDescriptor(AffordanceType.WRAPPABLE, "organic", 0.1, "body")
    big = PerceivedObject(id="apple_1", category="apple", pixel=(300, 200), bbox=None,
                          position=np.array([0.5, 0.0, 0.05]), size=np.array([0.12] * 3),
                          state=ObjectState.EMPTY, fragility=0.1, affordance=aff,
                          confidence=1.0, shape=Shape.SPHERE)
    perception = PerceptionResult("vlm_sim", True, big, [big])

    from agentic_grasp.core.arm.backend import ArmBackend

    class NoArm(ArmBackend):
        def execute(self, *a, **k):
            raise AssertionError("no attempt may be made")

    goal = ReflectivePlanner().plan_and_execute(perception, "apple_1", NoArm())
    assert goal.status == STATUS_BEYOND_HAND and not goal.attempts and not goal.success
    assert "89 mm" in goal.message and "78 mm" in goal.message


# ------------------------------------------------------------------ along the object
def grasp(pos, width=0.06, wrist=0.0):
    return GraspParameters(position=np.array(pos, dtype=float),
                           approach=np.array([0.0, 0.0, -1.0]), width=width, force=10.0,
                           grasp_type="power", approach_height=0.1, speed=0.1,
                           wrist_yaw=wrist)


def test_long_object_near_a_fragile_neighbour_is_grasped_nearer_its_far_end():
    # a 24 cm bar along x; a fragile glass 2 cm beyond its +x half, 3 cm to the side
    bar = obj("bar", Shape.BOX, xy=(0.5, 0.0), size=(0.24, 0.04, 0.04))
    glass = obj("glass", Shape.CYLINDER, xy=(0.56, 0.075), size=(0.07, 0.07, 0.20),
                fragility=0.9)
    axis, length = principal_axis(bar)
    assert length == pytest.approx(0.24) and abs(axis[0]) == pytest.approx(1.0)
    base = grasp([0.5, 0.0, 0.02], width=0.06)        # across the bar, at its centre
    scene = SceneGeometry.build(None, bar, [bar, glass], CFG)
    cs = generate_candidates(base, bar, scene.obstacles, CFG, HAND, opening="extent",
                             away_dirs=scene.away_dirs)
    best = cs.best
    assert best.feasible and "along -" in best.label, best.label
    assert best.grasp.position[0] < 0.5 - 0.02        # moved away from the glass
    at_centre = [c for c in cs.ranked if c.label.endswith("tilt 0 deg")
                 and "wrist +0" in c.label][0]
    assert best.clearance_m > at_centre.clearance_m


def test_a_handle_pinch_stays_on_the_handle_and_rises_over_the_body():
    cup = obj("cup", size=(0.08, 0.08, 0.09))
    base = grasp([0.5525, 0.0, 0.045], width=0.03)     # handle at +x, pads at mid height
    shifts = along_shifts(base, cup, CFG, "part")
    rises = [s[0][2] for s in shifts if s[1].startswith("up the part")]
    # the palm (45 mm above the pads' centre) clears the 90 mm top by 6 mm: pads at 51 mm
    assert rises and rises[0] == pytest.approx(0.09 + 0.006 - 0.045 - 0.045, abs=1e-6)
    vase = obj("vase", xy=(0.60, 0.20), size=(0.08, 0.08, 0.15), fragility=0.8)
    cs = generate_candidates(base, cup, [object_box(vase)], CFG, HAND, opening="part",
                             away_dirs=[np.array([0.0, -1.0, 0.0])])
    # never moved around the body to where there is no handle
    assert all(np.hypot(*(c.grasp.position[:2] - cup.position[:2])) > 0.045
               for c in cs.ranked)
    # the palm over the rim at mid height is infeasible; a grasp raised or pitched out along
    # the handle (the palm leaves the rim) is chosen
    assert cs.best.feasible and _palm_leaves_the_rim(cs.best.grasp, cup)
    # an untilted pinch whose finger passes within 3 mm (1 sigma of the TCP's lateral error)
    # of the round body is not feasible
    flat = [c for c in cs.ranked if c.label == "around 0 deg, wrist +0 deg, tilt 0 deg"]
    assert flat and not flat[0].feasible and "finger meets the body" in flat[0].nearest


def _palm_leaves_the_rim(g, body):
    """Raised above mid height, or leaning out: the approach points back towards the body."""
    out = np.asarray(g.position[:2]) - np.asarray(body.position[:2])
    return g.position[2] > 0.045 + 1e-3 or float(np.asarray(g.approach[:2]) @ out) < -1e-3


def test_part_pitches_keep_the_pads_flat_and_lean_the_hand_out():
    from agentic_grasp.core.grasping.along import part_pitches
    from agentic_grasp.core.arm.closing_axis import closing_axis

    cup = obj("cup", size=(0.08, 0.08, 0.09))
    base = grasp([0.5525, 0.0, 0.051], width=0.03)
    pitches = [p for p in part_pitches(base, cup, CFG) if "wrist +0 deg" in p[1]]
    assert [round(np.degrees(d)) for _, _, d in pitches] == [10, 20, 30, 40]
    axis0 = closing_axis(base.approach, base.wrist_yaw)
    for g, label, tilt in pitches:
        assert abs(abs(float(closing_axis(g.approach, g.wrist_yaw) @ axis0)) - 1.0) < 1e-9
        assert g.approach[0] == pytest.approx(-np.sin(tilt))        # leans out along +x
        assert g.approach[2] == pytest.approx(-np.cos(tilt))
        shift = 0.01 * (1 - np.cos(tilt)) + 0.01 * np.sin(tilt)     # pad 20 x 20 mm
        assert g.position[0] - base.position[0] == pytest.approx(shift)
        assert g.position[2] == base.position[2] and "pitched" in label
    assert part_pitches(grasp([0.5, 0.0, 0.051]), cup, CFG) == []    # on the body


def test_a_handle_grasp_of_an_empty_container_grips_against_its_weight():
    from agentic_grasp.core.planner.planner import ReflectivePlanner

    planner = ReflectivePlanner()
    planner._rim_z = None
    mug = obj("mug", size=(0.08, 0.08, 0.12), fragility=0.3)
    on_handle = grasp([0.5525, 0.0, 0.07], width=0.03)
    assert on_handle.force < 20.0
    mug.category = "mug"                                  # a container word
    raised, note = planner._pivot_grip(on_handle, mug)
    # 603 ml of water as the mass bound, 52.5 mm off the axis: 88 N, more than the hand's
    # 70 N continuous force, which is what it gets
    need = 1.5 * 0.6032 * 9.81 * 0.0525 / (4 / 3 * 0.35 * 0.011284)
    assert need > 80.0 and raised.force == pytest.approx(70.0)
    cup = obj("cup", size=(0.08, 0.08, 0.09), fragility=0.3)
    cup.category = "cup"                                  # 452 ml: 66 N, within the hand's
    assert planner._pivot_grip(grasp([0.5525, 0.0, 0.05], width=0.03), cup)[0].force \
        == pytest.approx(1.5 * 0.4524 * 9.81 * 0.0525 / (4 / 3 * 0.35 * 0.011284), rel=0.01)
    assert "turn about the pinched part" in note
    assert planner._pivot_grip(grasp([0.5, 0.0, 0.07]), mug)[0].force == on_handle.force
    mug.category = "thing"                                # not a container, no rim seen
    assert planner._pivot_grip(on_handle, mug)[0].force == on_handle.force
    planner._rim_z = 0.12                                 # ... but an open rim perceived
    assert planner._pivot_grip(on_handle, mug)[0].force > 60.0
    mug.fragility = 0.8                                   # fragile: never squeezed harder
    assert planner._pivot_grip(on_handle, mug)[0].force == on_handle.force


def test_a_kettle_handle_that_cannot_hold_its_weight_starts_at_the_rim():
    """The 15 x 22 cm kettle's handle, 92.5 mm off the axis: by the content bound (3.9 l of
    water) its pads' torsional friction needs about 1000 N, and still 260 N for the
    lightest container per volume, more than the hand's 70 N: it would turn out of the
    pads whatever it weighs, so the grasp starts as a rim pinch (closing radially, the
    pads half a pad below the rim) with the hand's continuous grip. A mug's handle, which
    the hand can hold, stays; so does a filled or a fragile kettle's, or one with no rim
    seen."""
    from agentic_grasp.core.grasping.along import (LIGHTEST_CONTAINER_FRACTION,
                                                   part_cannot_hold)
    from agentic_grasp.core.planner.planner import ReflectivePlanner
    from agentic_grasp.core.arm.closing_axis import closing_axis

    planner = ReflectivePlanner()
    kettle = obj("kettle", size=(0.15, 0.15, 0.22), fragility=0.1)
    kettle.category = "kettle"
    on_handle = grasp([0.5925, 0.0, 0.18], width=0.03, wrist=0.0)
    assert part_cannot_hold(on_handle, kettle, CFG)
    need = 1.5 * np.pi * 0.075 ** 2 * 0.22 * 1000.0 * 9.81 * 0.0925 / (4 / 3 * 0.35 * 0.011284)
    assert need * LIGHTEST_CONTAINER_FRACTION > 70.0
    planner._rim_z = None                                 # no opening seen: the handle stays
    assert planner._rim_over_part(on_handle, kettle)[0] is on_handle
    planner._rim_z = 0.22
    rim, note = planner._rim_over_part(on_handle, kettle)
    assert "rim pinch" in note
    centre = kettle.position[:2]
    assert np.hypot(*(rim.position[:2] - centre)) == pytest.approx(0.075, abs=1e-6)
    assert rim.position[2] == pytest.approx(0.22 - CFG.hand.pad_depth_m / 2.0)
    radial = (rim.position[:2] - centre) / 0.075
    assert abs(float(closing_axis(rim.approach, rim.wrist_yaw)[:2] @ radial)) \
        == pytest.approx(1.0, abs=1e-6)
    assert rim.force == pytest.approx(70.0)
    # the constrain step the planner runs on every base grasp takes it too
    assert planner._pivot_grip(rim, kettle)[0].force == pytest.approx(70.0)
    mug = obj("mug", size=(0.07, 0.07, 0.10), fragility=0.3)
    mug.category = "mug"
    mug_handle = grasp([0.5475, 0.0, 0.05], width=0.03)
    assert not part_cannot_hold(mug_handle, mug, CFG)
    assert planner._rim_over_part(mug_handle, mug)[0] is mug_handle
    kettle.state = ObjectState.FILLED                     # a finger would enter the water
    assert planner._rim_over_part(on_handle, kettle)[0] is on_handle
    kettle.state, kettle.fragility = ObjectState.EMPTY, 0.8
    assert planner._rim_over_part(on_handle, kettle)[0] is on_handle


def test_filled_cup_handle_pinch_grips_hard_enough_not_to_turn():
    from agentic_grasp.core.grasping.along import content_grip_force

    cup = obj("cup", state=ObjectState.FILLED)
    on_handle = grasp([0.5525, 0.0, 0.051], width=0.03)
    need = content_grip_force(on_handle, cup, CFG)
    # 452 ml of water 52.5 mm off the axis, 4/3 x 0.35 x 11.3 mm torsional lever, x 1.5
    assert need == pytest.approx(1.5 * 0.4524 * 9.81 * 0.0525 / (4 / 3 * 0.35 * 0.011284),
                                 rel=0.01)
    assert content_grip_force(grasp([0.5, 0.0, 0.045]), cup, CFG) == 0.0   # on the axis


def test_empty_candidate_set_ranks_after_an_infeasible_one():
    assert rank_key({"chosen": None}, CFG) > rank_key(
        {"chosen": {"feasible": False, "clearance_m": -0.02}}, CFG)


def test_no_neighbour_but_the_palm_over_the_body_searches_candidates():
    cup = obj("cup")
    base = grasp([0.5525, 0.0, 0.045], width=0.03)
    scene = SceneGeometry.build(None, cup, [cup], CFG)
    chosen, _, summary, _ = choose(base, scene, CFG, HAND, ConstraintSet("cup"), Limits())
    assert _palm_leaves_the_rim(chosen, cup)
    assert any("not clear of cup itself" in n for n in summary["notes"])


# ------------------------------------------------------------------ handle side, bench frames
def test_handle_side_on_the_benchmark_frames():
    from agentic_grasp_lab.benchmarks.geometry import scene_handle_sides

    report = scene_handle_sides(trials=6)
    assert report["visible"] >= 10
    assert report["accuracy"] >= 0.9, report


def test_part_pitches_also_lean_out_with_the_closing_axis_turned():
    """A handle turned towards a neighbour: the pitch is also taken about the closing axis
    turned by each wrist offset a part allows, leaning away from the body normal to it."""
    from agentic_grasp.core.grasping.along import part_pitches
    from agentic_grasp.core.arm.closing_axis import closing_axis

    cup = obj("cup", size=(0.08, 0.08, 0.09))
    base = grasp([0.5525, 0.0, 0.051], width=0.03)
    pitches = part_pitches(base, cup, CFG)
    limit = CFG.part_wrist_limit_rad
    turns = sorted({round(float(np.degrees(d)))
                    for d in CFG.wrist_offsets_rad if abs(d) <= limit + 1e-9})
    assert len(pitches) == 4 * len(turns) and len(turns) > 1
    axis0 = closing_axis(base.approach, base.wrist_yaw)
    seen = set()
    for g, label, dev in pitches:
        axis = closing_axis(g.approach, g.wrist_yaw)
        turn = float(np.degrees(np.arccos(min(1.0, abs(float(axis @ axis0))))))
        seen.add(round(turn))
        assert abs(float(axis[2])) < 1e-9                  # the closing axis stays level
        lean = -np.asarray(g.approach[:2])                 # where the hand leans to
        assert float(lean @ axis[:2]) == pytest.approx(0.0, abs=1e-9)
        assert lean[0] > 0.0                               # away from the body (+x side)
        assert g.width == pytest.approx(0.03 / np.cos(np.radians(turn)), rel=1e-6)
        tilt = float(np.arccos(-g.approach[2]))
        assert dev == pytest.approx(tilt + np.radians(turn), abs=1e-6)
    assert seen == {abs(t) for t in turns}


def test_a_lying_cylinder_is_body_along_its_length():
    from agentic_grasp.core.grasping.along import on_part, principal_axis

    lying = ObjectInstance(id="b", category="bottle", shape=Shape.CYLINDER,
                           position=np.array([0.5, 0.0, 0.02]), size=np.array([0.04, 0.04, 0.18]),
                           yaw=0.3, upright=False)
    axis, length = principal_axis(lying)
    assert length == pytest.approx(0.18)
    base = GraspParameters(position=np.array([0.5, 0.0, 0.02]) + 0.07 * axis,
                           approach=np.array([0.0, 0.0, -1.0]), wrist_yaw=0.0, width=0.06)
    assert not on_part(base, lying)                      # 70 mm along its 180 mm length
    beyond = base.copy(position=np.array([0.5, 0.0, 0.02]) + 0.1 * axis)
    assert on_part(beyond, lying)


def test_the_occlusion_lateral_approach_is_not_taken_where_a_fingertip_would_reach_the_table():
    from agentic_grasp.core.scene_graph.constraints import Constraint, ConstraintType

    def chosen_for(size):
        target = obj("t", shape=Shape.BOX, xy=(0.45, 0.0), size=size)
        glass = obj("g", xy=(0.6, 0.0), size=(0.07, 0.07, 0.2), fragility=0.9)
        base = grasp([0.45, 0.0, max(size[2] / 2.0, 0.005) + 0.002], width=0.06)
        cs = ConstraintSet("t", [Constraint(ConstraintType.OCCLUSION, "g", "hidden",
                                           direction_bias=np.array([0.7, 0.0, 0.0]))])
        scene = SceneGeometry.build(None, target, [target, glass], CFG, cs)
        chosen, _, summary, _ = choose(base, scene, CFG, HAND, cs, Limits())
        return chosen, summary

    flat, summary = chosen_for((0.15, 0.07, 0.01))          # a phone lying flat
    assert float(flat.approach[2]) == pytest.approx(-1.0)
    assert any("below the table" in n for n in summary["notes"])
    tall, summary = chosen_for((0.05, 0.05, 0.1))           # a block: the lateral approach
    assert float(tall.approach[2]) > -0.99
    assert any("lateral approach kept" in n for n in summary["notes"])


# ------------------------------------------------------------------ relaxation
def _occluded_beside(wall_x, wall_height):
    """A block whose occlusion constraint fixes a lateral approach from -x, where a wall
    stands: every lateral candidate meets the wall."""
    from agentic_grasp.core.scene_graph.constraints import Constraint, ConstraintType

    target = obj("t", shape=Shape.BOX, xy=(0.45, 0.0), size=(0.05, 0.05, 0.1))
    wall = obj("w", shape=Shape.BOX, xy=(wall_x, 0.0), size=(0.03, 0.30, wall_height),
               fragility=0.0)
    base = grasp([0.45, 0.0, 0.07], width=0.07)
    cs = ConstraintSet("t", [Constraint(ConstraintType.OCCLUSION, "w", "hidden",
                                       direction_bias=np.array([0.7, 0.0, 0.0]))])
    scene = SceneGeometry.build(None, target, [target, wall], CFG, cs)
    return choose(base, scene, CFG, HAND, cs, Limits())


def test_constraints_that_block_every_candidate_give_way_in_the_stated_order():
    from agentic_grasp.core.grasping.clearance import RELAXATION_ORDER

    assert RELAXATION_ORDER == ("clearance", "approach side", "force")
    # the lateral approach meets the wall; the strategy's own top-down grasp clears it
    chosen, _, summary, _ = _occluded_beside(0.38, 0.12)
    assert float(chosen.approach[2]) == pytest.approx(-1.0)
    assert summary["collision_free"] and summary["chosen"]["feasible"]
    relaxed = summary["relaxed"]
    assert [r.split(":")[0] for r in relaxed[:2]] == ["clearance", "approach side"]
    assert "[relaxed: clearance, approach side" in summary["chosen"]["label"]
    # a relaxed choice never makes its strategy win over one the constraints leave clear
    assert rank_key(summary, CFG)[0] is True
    # with room for the lateral approach nothing is relaxed
    chosen, _, summary, _ = _occluded_beside(0.30, 0.12)
    assert "relaxed" not in summary and float(chosen.approach[2]) > -0.99
