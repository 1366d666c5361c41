"""Each physical failure mechanism of the simulator, triggered by a constructed case and not
triggered by a good grasp on the same object (paper Sec. V-A, failure taxonomy Sec. IV-B).

Most cases run without execution noise so that the geometry alone decides; the last test
checks a success rate with the configured noise.
"""
import numpy as np
import pytest

from agentic_grasp.core.sim import PhysicsParams, Simulator, load_catalogue
from agentic_grasp.core.types import FailureType, GraspParameters, ObjectState, Phase

QUIET = dict(tcp_sigma_xy_m=0.0, tcp_sigma_z_m=0.0, yaw_sigma_rad=0.0, force_rel_sigma=0.0,
             friction_rel_sigma=0.0)
CAT = load_catalogue()


def attempt(objects, target, noisy=False, seed=0, physics=None, **grasp):
    params = PhysicsParams(**dict(QUIET, **(physics or {}))) if not noisy else PhysicsParams()
    sim = Simulator(params=params, seed=seed)
    sim.set_objects(objects)
    return sim, sim.execute_attempt(target, GraspParameters(**grasp))


def failures(outcome):
    return [e.kind for e in outcome.failure_events]


def kinds(outcome):
    return [e.kind for e in outcome.events]


def cube(mass=None):
    c = CAT.instance("wood_cube", "cube", 0.5, 0.0)
    if mass is not None:
        c.mass = mass
    return c


def test_good_grasp_holds_the_cube():
    _, out = attempt([cube()], "cube", position=[0.5, 0, 0.025], width=0.07, force=20)
    assert out.success and out.events == [] and out.phase_reached == Phase.LIFT
    assert out.measurements["friction_capacity_n"] == pytest.approx(2 * 0.6 * 20, rel=1e-6)


def test_slip_when_friction_cannot_carry_the_weight():
    _, out = attempt([cube(mass=2.0)], "cube", position=[0.5, 0, 0.025], width=0.07, force=5)
    assert failures(out) == [FailureType.SLIP.value]
    assert out.measurements["static_margin"] < 1.0
    _, out = attempt([cube(mass=2.0)], "cube", position=[0.5, 0, 0.025], width=0.07, force=40)
    assert out.success


def test_drop_when_only_the_lift_inertia_exceeds_the_grip():
    sim, out = attempt([cube(mass=0.5)], "cube", position=[0.5, 0, 0.025], width=0.07,
                       force=4.5)
    assert failures(out) == [FailureType.DROP.value]
    assert out.measurements["static_margin"] > 1.0 > out.measurements["hold_margin"]
    assert sim.get("cube").position[2] == pytest.approx(0.025)     # back on the table


def test_dropped_fragile_glass_breaks():
    glass = CAT.instance("wine_glass", "glass", 0.5, 0.0)
    glass.mass = 0.6                      # full of something heavy: 8 N holds it only at rest
    side = dict(position=[0.5, 0, 0.15], approach=[1, 0, 0], width=0.08, force=8.0,
                grasp_type="side")
    sim, out = attempt([glass], "glass", physics={"drop_break_height_m": 0.0}, **side)
    assert failures(out) == [FailureType.DROP.value]
    assert sim.get("glass").damaged and not sim.get("glass").upright
    sim, out = attempt([glass], "glass", physics={"drop_break_height_m": 1.0}, **side)
    assert failures(out) == [FailureType.DROP.value]
    assert not sim.get("glass").damaged                # a fall shorter than that never breaks


def test_force_damage_on_the_wine_glass():
    glass = CAT.instance("wine_glass", "glass", 0.5, 0.0)
    side = dict(position=[0.5, 0, 0.15], approach=[1, 0, 0], width=0.08, grasp_type="side")
    sim, out = attempt([glass], "glass", force=50, **side)
    assert failures(out) == [FailureType.FORCE_DAMAGE.value]
    assert out.phase_reached == Phase.CLOSE and sim.get("glass").damaged
    _, out = attempt([glass], "glass", force=10, **side)
    assert out.success


def test_deformation_of_a_squeezed_banana():
    banana = CAT.instance("banana", "banana", 0.5, 0.0)
    sim, out = attempt([banana], "banana", position=[0.5, 0, 0.02], width=0.06, force=60)
    assert failures(out) == [FailureType.DEFORMATION.value]
    assert sim.get("banana").damaged
    _, out = attempt([banana], "banana", position=[0.5, 0, 0.02], width=0.06, force=20)
    assert out.success


def test_width_mismatch_opening_narrower_than_the_object():
    banana = CAT.instance("banana", "banana", 0.5, 0.0)
    _, out = attempt([banana], "banana", position=[0.5, 0, 0.02], width=0.03, force=20)
    assert failures(out) == [FailureType.WIDTH_MISMATCH.value]
    assert out.phase_reached == Phase.APPROACH


def test_bowl_body_exceeds_the_aperture_but_its_rim_can_be_pinched():
    bowl = CAT.instance("ceramic_bowl", "bowl", 0.5, 0.0)
    for z in (0.015, 0.03):                 # fingers landing on / going down inside the bowl
        _, out = attempt([bowl], "bowl", position=[0.5, 0, z], width=0.08, force=20)
        assert failures(out) == [FailureType.WIDTH_MISMATCH.value]
    _, out = attempt([bowl], "bowl", position=[0.443, 0, 0.05], width=0.025, force=15,
                     wrist_yaw=np.pi / 2, grasp_type="pinch")
    assert out.success
    assert out.measurements["object_extent_m"] < 0.01


def test_orientation_when_closing_along_the_long_axis():
    banana = CAT.instance("banana", "banana", 0.5, 0.0)
    _, out = attempt([banana], "banana", position=[0.5, 0, 0.02], width=0.08, force=20,
                     wrist_yaw=np.pi / 2)
    assert failures(out) == [FailureType.ORIENTATION.value]


def test_position_error_when_the_fingers_miss_the_object():
    # beside it along the pad width: the fingers close on air
    _, out = attempt([cube()], "cube", position=[0.54, 0.0, 0.025], width=0.07, force=20)
    assert failures(out) == [FailureType.POSITION_ERROR.value]
    assert out.phase_reached == Phase.CLOSE
    # off along the closing axis by more than the clearance: a finger lands on the cube
    _, out = attempt([cube()], "cube", position=[0.5, 0.02, 0.025], width=0.07, force=20)
    assert failures(out) == [FailureType.POSITION_ERROR.value]
    assert out.phase_reached == Phase.APPROACH
    assert out.phi[0] == 0.0 and out.phi[1] >= 0.4


def test_palm_meeting_the_target_is_an_approach_angle_failure():
    screwdriver = CAT.instance("screwdriver", "sd", 0.5, 0.0)     # handle at the bottom
    _, out = attempt([screwdriver], "sd", position=[0.5, 0, 0.05], width=0.05, force=20)
    assert failures(out) == [FailureType.APPROACH_ANGLE.value]
    _, out = attempt([screwdriver], "sd", position=[0.5, 0, 0.05], approach=[1, 0, 0],
                     width=0.05, force=20, grasp_type="side")
    assert out.success


def test_collision_with_a_neighbour_knocks_it_over_when_fast():
    bottle = CAT.instance("plastic_bottle", "bottle", 0.5, 0.0, state="filled")
    glass = CAT.instance("wine_glass", "glass", 0.42, 0.0)
    side = dict(position=[0.5, 0, 0.15], approach=[1, 0, 0], approach_height=0.15, width=0.08,
                force=20, grasp_type="side")
    sim, out = attempt([bottle, glass], "bottle", speed=0.05, **side)
    assert failures(out) == [FailureType.COLLISION.value]
    assert out.failure_events[0].other_id == "glass"
    assert sim.get("glass").upright and not sim.get("glass").damaged
    sim, out = attempt([bottle, glass], "bottle", speed=0.5, **side)
    assert failures(out) == [FailureType.COLLISION.value]
    assert "knocked_over" in kinds(out)
    assert not sim.get("glass").upright and sim.get("glass").damaged


def test_wrist_orientation_decides_a_collision_with_the_vase():
    cup = CAT.instance("ceramic_cup", "cup", 0.5, -0.04)
    vase = CAT.instance("glass_vase", "vase", 0.5, 0.095)
    # closing along y sweeps the 20 cm hand body into the vase; along x it stays clear
    _, out = attempt([cup, vase], "cup", position=[0.5, -0.04, 0.06], width=0.08, force=20,
                     grasp_type="pinch")
    assert FailureType.COLLISION.value in failures(out)
    assert out.measurements["min_clearance_m"] == 0.0
    _, out = attempt([cup, vase], "cup", position=[0.4625, -0.04, 0.08], width=0.025, force=20,
                     wrist_yaw=np.pi / 2, grasp_type="pinch")
    assert out.success and out.measurements["min_clearance_m"] > 0.01


def test_unreachable_far_corner():
    far = CAT.instance("wood_cube", "cube", 0.78, 0.38)
    sim, out = attempt([far], "cube", position=[0.78, 0.38, 0.025], width=0.07, force=20)
    assert failures(out) == [FailureType.UNREACHABLE_POSE.value]
    assert out.phi[0] == 0.0
    assert np.allclose(sim.get("cube").position, far.position)


def test_table_collision_of_a_too_low_grasp():
    _, out = attempt([cube()], "cube", position=[0.5, 0, 0.002], width=0.07, force=20)
    assert failures(out) == [FailureType.COLLISION.value]
    assert out.failure_events[0].other_id == "table"


def test_filled_cup_spills_on_a_fast_lift_but_not_a_slow_one():
    cup = CAT.instance("ceramic_cup", "cup", 0.5, 0.0, state="filled")
    handle = dict(position=[0.5525, 0, 0.06], width=0.035, force=70, grasp_type="pinch")
    sim, out = attempt([cup], "cup", speed=0.5, **handle)
    assert failures(out) == [FailureType.CONSTRAINT_VIOLATION.value]
    assert "liquid rises" in out.failure_events[0].detail
    assert sim.get("cup").state == ObjectState.EMPTY and sim.held_id is None
    sim, out = attempt([cup], "cup", speed=0.1, **handle)
    assert out.success and sim.held_id == "cup"
    assert sim.get("cup").state == ObjectState.FILLED


def test_a_finger_inside_a_filled_cups_rim_is_in_the_liquid():
    rim = dict(position=[0.4625, 0, 0.08], width=0.025, force=60, wrist_yaw=np.pi / 2,
               grasp_type="pinch", speed=0.1)        # fingers straddle the wall, one inside
    cup = CAT.instance("ceramic_cup", "cup", 0.5, 0.0, state="filled")
    sim, out = attempt([cup], "cup", **rim)
    assert failures(out) == [FailureType.CONSTRAINT_VIOLATION.value]
    assert "enters the liquid" in out.failure_events[0].detail
    assert sim.get("cup").state == ObjectState.EMPTY
    empty = CAT.instance("ceramic_cup", "cup", 0.5, 0.0)
    _, out = attempt([empty], "cup", **rim)
    assert out.success                                  # the same pinch on an empty cup


def test_filled_cup_tilting_in_a_weak_handle_grasp_spills():
    cup = CAT.instance("ceramic_cup", "cup", 0.5, 0.0, state="filled")
    handle = dict(position=[0.5525, 0, 0.06], width=0.035, grasp_type="pinch")
    sim, out = attempt([cup], "cup", force=25, **handle)
    assert set(failures(out)) & {FailureType.SLIP.value, FailureType.DROP.value}
    assert "spill" in kinds(out) and sim.get("cup").state == ObjectState.EMPTY
    _, out = attempt([cup], "cup", force=70, **handle)
    assert out.success


def test_banana_power_grasp_succeeds_in_most_seeds():
    banana = CAT.instance("banana", "banana", 0.5, 0.0, yaw=0.3)
    sim = Simulator(seed=11)
    ok = 0
    for _ in range(50):
        sim.set_objects([banana])
        out = sim.execute_attempt("banana", GraspParameters(
            position=[0.5, 0, 0.02], width=0.06, force=20, wrist_yaw=0.3))
        ok += out.success
    assert ok >= 45
