"""The seven quality factors of Eq. 2: each moves with its physical quantity, Q = sum w phi."""
import numpy as np
import pytest

from agentic_grasp.core.sim import PhysicsParams, QualityParams, Simulator, load_catalogue
from agentic_grasp.core.sim.quality import quality_score, ramp, width_compatibility
from agentic_grasp.core.types import FailureType, GraspParameters

QUIET = PhysicsParams(tcp_sigma_xy_m=0.0, tcp_sigma_z_m=0.0, yaw_sigma_rad=0.0,
                      force_rel_sigma=0.0, friction_rel_sigma=0.0)
CAT = load_catalogue()
PAPER_WEIGHTS = (0.20, 0.15, 0.10, 0.15, 0.15, 0.10, 0.15)


def outcome(objects, target, **grasp):
    sim = Simulator(params=QUIET)
    sim.set_objects(objects)
    return sim.execute_attempt(target, GraspParameters(**grasp))


def phi(objects, target, k, **grasp):
    return outcome(objects, target, **grasp).phi[k - 1]


def test_weights_are_the_papers_and_q_is_the_weighted_sum():
    sim = Simulator.from_config()
    assert sim.quality_params.weights == pytest.approx(PAPER_WEIGHTS)
    banana = CAT.instance("banana", "b", 0.5, 0.0)
    for force in (2.0, 20.0, 60.0):
        out = outcome([banana], "b", position=[0.5, 0, 0.02], width=0.06, force=force)
        assert out.phi.shape == (7,) and np.all((out.phi >= 0) & (out.phi <= 1))
        assert out.quality == pytest.approx(float(np.dot(PAPER_WEIGHTS, out.phi)))
        assert out.quality == pytest.approx(quality_score(out.phi, PAPER_WEIGHTS))


def test_phi1_falls_with_the_offset_from_the_part():
    sd = CAT.instance("screwdriver", "sd", 0.5, 0.0)
    values = [phi([sd], "sd", 1, position=[0.5, dy, 0.19], width=0.03, force=20,
                  wrist_yaw=np.pi / 2, grasp_type="pinch") for dy in (0.0, 0.004, 0.008)]
    assert values[0] > values[1] > values[2]


def test_phi2_below_04_exactly_in_the_width_mismatch_regime():
    cube = CAT.instance("wood_cube", "c", 0.5, 0.0)
    for width in (0.045, 0.05, 0.052, 0.055, 0.06, 0.08):
        out = outcome([cube], "c", position=[0.5, 0, 0.025], width=width, force=20)
        mismatch = FailureType.WIDTH_MISMATCH.value in [e.kind for e in out.failure_events]
        assert (out.phi[1] < 0.4) == mismatch, width
    m = {"opening_margin_m": 0.001}
    assert width_compatibility(m, QUIET, QualityParams()) == pytest.approx(0.4)


def test_phi3_peaks_between_slip_and_crush():
    glass = CAT.instance("wine_glass", "w", 0.5, 0.0)
    side = dict(position=[0.5, 0, 0.15], approach=[1, 0, 0], width=0.08, grasp_type="side")
    low, mid, high = (phi([glass], "w", 3, force=f, **side) for f in (1.0, 10.0, 29.0))
    assert mid > low and mid > high


def test_phi4_matches_grasp_type_to_contact_geometry():
    bowl = CAT.instance("ceramic_bowl", "b", 0.5, 0.0)
    rim = dict(position=[0.443, 0, 0.05], width=0.025, force=15, wrist_yaw=np.pi / 2)
    assert phi([bowl], "b", 4, grasp_type="pinch", **rim) > \
        phi([bowl], "b", 4, grasp_type="power", **rim)
    banana = CAT.instance("banana", "ban", 0.5, 0.0)
    body = dict(position=[0.5, 0, 0.02], width=0.06, force=20)
    assert phi([banana], "ban", 4, grasp_type="power", **body) > \
        phi([banana], "ban", 4, grasp_type="side", **body)


def test_phi5_grows_with_the_distance_to_the_neighbour():
    values = []
    for gap in (0.02, 0.05, 0.12):
        cube = CAT.instance("wood_cube", "c", 0.5, 0.0)
        box = CAT.instance("box", "box", 0.5 + 0.025 + gap + 0.06, 0.0)
        values.append(phi([cube, box], "c", 5, position=[0.5, 0, 0.025], width=0.07, force=20))
    assert values[0] < values[1] < values[2] == pytest.approx(1.0)


def test_phi6_is_intrinsic_and_ranks_objects():
    def difficulty(name):
        inst = CAT.instance(name, "o", 0.5, 0.0)
        return phi([inst], "o", 6, position=inst.position, width=0.08, force=20)
    assert difficulty("wood_cube") > difficulty("wine_glass")
    assert difficulty("toy_block") > difficulty("ceramic_bowl")


def test_phi7_rises_with_force():
    cube = CAT.instance("wood_cube", "c", 0.5, 0.0)
    values = [phi([cube], "c", 7, position=[0.5, 0, 0.025], width=0.07, force=f)
              for f in (0.6, 0.8, 1.2)]
    assert values[0] < values[1] < values[2]


def test_ramp():
    assert ramp(0.5, 0.0, 1.0) == 0.5 and ramp(2.0, 0.0, 1.0) == 1.0
    assert ramp(0.2, 1.0, 0.0) == pytest.approx(0.8)
    assert ramp(float("nan"), 0.0, 1.0) == 0.0 and ramp(float("inf"), 0.0, 1.0) == 1.0
