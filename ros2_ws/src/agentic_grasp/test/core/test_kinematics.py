"""Panda FK / IK: hand-known poses, an independent FK, round trips, limits and conventions."""
import math

import numpy as np
import pytest

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.arm.panda_model import Q_MAX, Q_MIN, Q_READY, analytic_solutions
from agentic_grasp.core.arm.kinematics import PandaKinematics
from agentic_grasp.core.arm.closing_axis import (closing_axis, default_closing_axis,
                                                 wrist_yaw_for_closing_axis)

# Franka's modified DH table, written out again so the reference FK shares no code.
_A = [0.0, 0.0, 0.0, 0.0825, -0.0825, 0.0, 0.088, 0.0]
_D = [0.333, 0.0, 0.316, 0.0, 0.384, 0.0, 0.0, 0.107]
_ALPHA = [0.0, -math.pi / 2, math.pi / 2, math.pi / 2, -math.pi / 2, math.pi / 2,
          math.pi / 2, 0.0]


def _rot_x(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])


def _rot_z(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def _trans(x, y, z):
    T = np.eye(4)
    T[:3, 3] = x, y, z
    return T


def reference_fk(q):
    """Craig's convention, 4x4 matrix products: T_i = Rx(alpha) Tx(a) Rz(theta) Tz(d)."""
    T = np.eye(4)
    frames = []
    for i, theta in enumerate(list(q) + [0.0]):          # 7 joints then the flange
        T = T @ _rot_x(_ALPHA[i]) @ _trans(_A[i], 0, 0) @ _rot_z(theta) @ _trans(0, 0, _D[i])
        frames.append(T.copy())
    tcp = T @ _rot_z(-math.pi / 4) @ _trans(0, 0, 0.1034)
    return frames, tcp


def rotation_angle(Ra, Rb):
    return math.acos(max(-1.0, min(1.0, (np.trace(Ra.T @ Rb) - 1.0) / 2.0)))


@pytest.fixture(scope="module")
def kin():
    return PandaKinematics()


def test_fk_zero_pose_matches_hand_computed_values(kin):
    T = kin.fk(np.zeros(7))
    # Stretched up: z = 0.333 + 0.316 + 0.384 - 0.107 - 0.1034, x = 0.0825 - 0.0825 + 0.088.
    np.testing.assert_allclose(T[:3, 3], [0.088, 0.0, 0.8226], atol=1e-9)
    # Flange points down with x7 = world x; the hand is turned -45 deg about it.
    r = math.sqrt(0.5)
    np.testing.assert_allclose(T[:3, :3], [[r, r, 0], [r, -r, 0], [0, 0, -1]], atol=1e-9)


def test_fk_ready_pose_matches_franka_values(kin):
    T = kin.fk(Q_READY)
    # franka_ros reports O_T_EE at "ready" as x = 0.307, z = 0.487 (flange at 0.590).
    np.testing.assert_allclose(T[:3, 3], [0.30689, 0.0, 0.48688], atol=1e-4)
    np.testing.assert_allclose(T[:3, :3], np.diag([1.0, -1.0, -1.0]), atol=1e-9)
    flange = kin.fk_all(Q_READY)[7]
    np.testing.assert_allclose(flange[:3, 3], [0.30689, 0.0, 0.59028], atol=1e-4)


def test_fk_matches_independent_matrix_composition(kin):
    rng = np.random.default_rng(7)
    for _ in range(50):
        q = rng.uniform(Q_MIN, Q_MAX)
        frames, tcp = reference_fk(q)
        np.testing.assert_allclose(kin.fk(q), tcp, atol=1e-12)
        got = kin.fk_all(q)
        assert len(got) == 9
        for mine, ref in zip(got[:8], frames):
            np.testing.assert_allclose(mine, ref, atol=1e-12)
        np.testing.assert_allclose(got[8], tcp, atol=1e-12)


def test_ik_round_trip_on_random_reachable_poses(kin):
    rng = np.random.default_rng(11)
    checked = 0
    while checked < 150:
        q = rng.uniform(Q_MIN, Q_MAX)
        target = kin.fk(q)
        if target[2, 3] < -0.1:
            continue
        checked += 1
        sol = kin.ik(target)
        assert sol is not None, f"reachable pose from q={q.round(3).tolist()} not solved"
        assert kin.within_limits(sol)
        T = kin.fk(sol)
        assert np.linalg.norm(T[:3, 3] - target[:3, 3]) <= 1e-3
        assert rotation_angle(T[:3, :3], target[:3, :3]) <= 1e-2


def test_solve_grasp_covers_the_table_top(kin):
    """Top-down and side grasps over the reachable part of the table all solve exactly."""
    count = 0
    for x in np.linspace(0.3, 0.7, 5):
        for y in np.linspace(-0.3, 0.3, 5):
            for z in (0.02, 0.15):
                p = np.array([x, y, z])
                radial = np.array([x, y, 0.0]) / math.hypot(x, y)
                for approach in ([0.0, 0.0, -1.0], radial):
                    for yaw in (0.0, 0.7, -1.3):
                        q = kin.solve_grasp(p, approach, yaw)
                        assert q is not None, (p, approach, yaw)
                        assert kin.within_limits(q)
                        T = kin.fk(q)
                        np.testing.assert_allclose(T[:3, 3], p, atol=1e-3)
                        np.testing.assert_allclose(T[:3, 2], approach, atol=1e-2)
                        # The fingers close along the requested line (either direction).
                        axis = closing_axis(approach, yaw)
                        assert abs(abs(float(T[:3, 1] @ axis)) - 1.0) < 1e-4
                        count += 1
    assert count == 300


def test_solve_grasp_tilted_non_radial_approach(kin):
    p = np.array([0.55, 0.15, 0.08])
    approach = np.array([0.6, -0.3, -0.74])
    approach /= np.linalg.norm(approach)
    q = kin.solve_grasp(p, approach, 0.4)
    assert q is not None and kin.within_limits(q)
    T = kin.fk(q)
    assert np.linalg.norm(T[:3, 3] - p) < 1e-3
    target = kin.tcp_pose(p, approach, 0.4)
    # Equal up to the gripper's half turn about the approach axis.
    flipped = target[:3, :3] @ np.diag([-1.0, -1.0, 1.0])
    assert min(rotation_angle(T[:3, :3], target[:3, :3]),
               rotation_angle(T[:3, :3], flipped)) <= 1e-2


@pytest.mark.parametrize("position, approach", [
    ([1.2, 0.0, 0.1], [0.0, 0.0, -1.0]),          # far beyond the reach
    ([0.9, 0.0, -0.4], [0.0, 0.0, -1.0]),         # below the table and too far
    ([0.78, 0.38, 0.02], [0.0, 0.0, -1.0]),       # the table's far corner, top-down
    ([0.0, 0.0, 0.2], [0.0, 0.0, -1.0]),          # inside the robot's own base
])
def test_unreachable_poses_return_none(kin, position, approach):
    assert kin.solve_grasp(position, approach, 0.0) is None
    assert kin.ik(kin.tcp_pose(position, approach, 0.0)) is None


def test_unreachable_orientation_returns_none(kin):
    # Reaching down at the table with the approach pointing back up at the robot: every
    # configuration breaks a joint limit (checked here on a dense q7 grid).
    target = kin.tcp_pose([0.45, 0.0, 0.05], [-0.5, 0.0, 0.866], 0.0)
    assert kin.ik(target) is None
    t = target[:3, :3].T.reshape(-1).tolist() + target[:3, 3].tolist()
    sols, valid = analytic_solutions(t, np.linspace(-math.pi, math.pi, 2000))
    inside = np.all((sols >= Q_MIN) & (sols <= Q_MAX), axis=1)
    assert not np.any(inside & valid)


def test_analytic_solutions_contain_the_generating_configuration():
    kin = PandaKinematics()
    rng = np.random.default_rng(3)
    for _ in range(100):
        q = rng.uniform(Q_MIN, Q_MAX)
        T = kin.fk(q)
        t = T[:3, :3].T.reshape(-1).tolist() + T[:3, 3].tolist()
        sols, valid = analytic_solutions(t, np.array([q[6]]))
        assert sols.shape == (8, 7)
        diff = np.angle(np.exp(1j * (sols[valid] - q)))     # compare modulo 2 pi
        assert np.min(np.abs(diff).max(axis=1)) < 1e-6
        for s in sols[valid]:
            np.testing.assert_allclose(kin.fk(s), T, atol=1e-9)


def test_joint_limit_margin_is_respected():
    kin = PandaKinematics(joint_limit_margin=0.1)
    np.testing.assert_allclose(kin.q_min, Q_MIN + 0.1)
    np.testing.assert_allclose(kin.q_max, Q_MAX - 0.1)
    rng = np.random.default_rng(5)
    for _ in range(40):
        p = [rng.uniform(0.3, 0.7), rng.uniform(-0.3, 0.3), rng.uniform(0.0, 0.2)]
        q = kin.solve_grasp(p, [0.0, 0.0, -1.0], rng.uniform(-math.pi, math.pi))
        assert q is not None
        assert np.all(q >= Q_MIN + 0.1 - 1e-12) and np.all(q <= Q_MAX - 0.1 + 1e-12)
    assert not kin.within_limits(Q_MAX)
    assert PandaKinematics().within_limits(Q_MAX)
    with pytest.raises(ValidationError):
        PandaKinematics(joint_limit_margin=1.6)       # joint 4 is only 3.0 rad wide


def test_ik_is_deterministic_and_uses_the_seed(kin):
    target = kin.tcp_pose([0.5, -0.1, 0.1], [0.5, 0.4, -0.77], 0.3)
    first = kin.ik(target)
    kin.ik(kin.tcp_pose([0.4, 0.2, 0.2], [0.0, 0.0, -1.0], 1.0))    # unrelated call
    np.testing.assert_array_equal(kin.ik(target), first)
    # Among the redundant solutions the one nearest the seed is preferred.
    other = kin.ik(target, seed=first + np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.6]))
    assert other is not None
    assert np.linalg.norm(kin.fk(other)[:3, 3] - target[:3, 3]) < 1e-3


def test_top_down_grasps_use_the_elbow_up_posture(kin):
    q = kin.solve_grasp([0.5, 0.2, 0.05], [0.0, 0.0, -1.0], 0.0)
    assert q is not None
    assert abs(q[2]) < 1e-9 and abs(q[4]) < 1e-9                 # planar family
    assert q[3] < -0.5                                             # elbow bent, up
    assert abs(q[6] - Q_READY[6]) <= math.pi / 2                   # roll near "ready"


def test_tcp_pose_is_orthonormal_and_follows_the_convention(kin):
    rng = np.random.default_rng(2)
    for _ in range(50):
        a = rng.normal(size=3)
        T = kin.tcp_pose(rng.uniform(-1, 1, 3), a, rng.uniform(-4, 4))
        R = T[:3, :3]
        np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-12)
        assert np.linalg.det(R) == pytest.approx(1.0)
        np.testing.assert_allclose(R[:, 2], a / np.linalg.norm(a), atol=1e-12)
        np.testing.assert_array_equal(T[3], [0, 0, 0, 1])
    top = kin.tcp_pose([0.5, 0.0, 0.1], [0, 0, -1], 0.0)
    np.testing.assert_allclose(top[:3, :3], [[-1, 0, 0], [0, 1, 0], [0, 0, -1]], atol=1e-12)
    np.testing.assert_allclose(top[:3, 3], [0.5, 0.0, 0.1])
    # Positive yaw turns the closing axis counter-clockwise about world z when top-down.
    yaw = 0.4
    np.testing.assert_allclose(kin.tcp_pose([0, 0, 0], [0, 0, -1], yaw)[:3, 1],
                               [-math.sin(yaw), math.cos(yaw), 0.0], atol=1e-12)
    # ... and counter-clockwise as seen looking along a side approach (+x): from the
    # viewer's left (+y) towards down (-z).
    np.testing.assert_allclose(closing_axis([1, 0, 0], 0.4),
                               [0.0, math.cos(0.4), -math.sin(0.4)], atol=1e-12)
    # Side approaches close horizontally: world_z x approach.
    np.testing.assert_allclose(default_closing_axis([1, 0, 0]), [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(default_closing_axis([0, 1, 0]), [-1, 0, 0], atol=1e-12)
    tilted = np.array([math.sin(0.5), 0.0, -math.cos(0.5)])
    np.testing.assert_allclose(default_closing_axis(tilted), [0, 1, 0], atol=1e-12)
    # Near vertical the reference stays close to world y.
    near = np.array([0.0, 0.05, -1.0])
    assert default_closing_axis(near)[1] > 0.99


def test_wrist_yaw_for_closing_axis_inverts_closing_axis():
    rng = np.random.default_rng(4)
    for _ in range(30):
        a = rng.normal(size=3)
        yaw = rng.uniform(-math.pi, math.pi)
        axis = closing_axis(a, yaw)
        assert wrist_yaw_for_closing_axis(a, axis) == pytest.approx(yaw, abs=1e-9)
    # Closing along the y axis of an object rotated by psi, from the top: yaw = psi;
    # along its x axis: psi - pi / 2.
    psi = 0.3
    assert wrist_yaw_for_closing_axis([0, 0, -1], [-math.sin(psi), math.cos(psi), 0]) \
        == pytest.approx(psi)
    assert wrist_yaw_for_closing_axis([0, 0, -1], [math.cos(psi), math.sin(psi), 0]) \
        == pytest.approx(psi - math.pi / 2)


def test_invalid_inputs_raise_validation_error(kin):
    with pytest.raises(ValidationError):
        kin.fk(np.zeros(6))
    with pytest.raises(ValidationError):
        kin.fk([0, 0, 0, float("nan"), 0, 0, 0])
    with pytest.raises(ValidationError):
        kin.ik(np.eye(3))
    bad = np.eye(4)
    bad[:3, :3] *= 2.0
    with pytest.raises(ValidationError):
        kin.ik(bad)
    with pytest.raises(ValidationError):
        kin.tcp_pose([0.5, 0, 0], [0, 0, 0], 0.0)
    with pytest.raises(ValidationError):
        kin.solve_grasp([0.5, 0, 0], [0, 0, -1], float("inf"))


def test_tcp_rotation_is_the_tcp_pose_rotation_bit_for_bit():
    from agentic_grasp.core.arm.kinematics import PandaKinematics, tcp_rotation

    rng = np.random.default_rng(5)
    for _ in range(500):
        p, a, yaw = rng.normal(size=3), rng.normal(size=3), float(rng.normal() * 3.0)
        assert np.array_equal(PandaKinematics.tcp_pose(p, a, yaw)[:3, :3], tcp_rotation(a, yaw))


def test_ik_solves_are_memoised_on_exact_inputs_and_handed_out_as_copies():
    """A sweep's configurations solve the same grasps; a kept solve must be the
    computed one, and a caller editing its joints must not change the next caller's."""
    from agentic_grasp.core.arm.kinematics import PandaKinematics

    kin = PandaKinematics()
    p, a = [0.5, 0.05, 0.12], [0.0, 0.0, -1.0]
    q1 = kin.solve_grasp(p, a, 0.3)
    assert q1 is not None
    q1[0] += 1.0
    q2 = kin.solve_grasp(p, a, 0.3)
    fresh = PandaKinematics().solve_grasp(p, a, 0.3)
    assert q2.tobytes() == fresh.tobytes()
    # -0.0 and 0.0 are different inputs to the memo (their bits differ)
    key_count = len(kin._memo)
    kin.solve_grasp([0.5, 0.05, 0.12], [-0.0, 0.0, -1.0], 0.3)
    assert len(kin._memo) == key_count + 1
