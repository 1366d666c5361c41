"""Franka Emika Panda (FER) forward and inverse kinematics with the Franka Hand.

The paper's simulator "implements forward/inverse kinematics with joint limits" (Sec. V);
this module is that part. Geometry is Franka's published modified (Craig) DH table
(docs/paper_facts.md): joint i is ``RotX(alpha_i) TransX(a_i) RotZ(q_i) TransZ(d_i)``, the flange is
0.107 m along joint 7's z axis, the hand is mounted at -45 deg about the flange z axis and the
TCP (``panda_hand_tcp``, between the finger pads) is 0.1034 m beyond the flange along z.
Frames are ``world`` = ``panda_link0``, metres and radians.

The TCP frame used everywhere in the project (see :meth:`PandaKinematics.tcp_pose`):
- z axis = the approach direction (the way the gripper moves in its final descent;
  top-down is ``[0, 0, -1]``);
- y axis = the finger closing axis (the fingers move along +-y);
- x axis = y x z.

For a top-down grasp with ``wrist_yaw = 0`` the fingers close along world y; see
:func:`default_closing_axis` for other approaches. Positive ``wrist_yaw`` turns the closing
axis counter-clockwise as seen looking along the approach, i.e. counter-clockwise about world
+z for a top-down grasp (:func:`closing_axis`).

Inverse kinematics (the simulator calls it twice per attempt, so speed matters) runs in
stages, the first success wins, and nothing is cached, so the answer is a deterministic
function of (target, seed) and never of call history:
1. Planar closed form: with q3 = q5 = 0 the Panda is a planar 3-link arm (joints 2, 4, 6)
   swung by q1 and rolled by q7. It is exact whenever the approach lies in a vertical plane
   through the base axis, so it answers every reachable top-down grasp (about 0.1 ms);
   radial side grasps near the table usually break joint 6's limit in this family.
2. Analytic sweep: with q7 fixed the arm has at most 8 closed-form solutions
   (:func:`analytic_solutions`); they are computed vectorised for a coarse, then a fine
   grid of q7, and the in-limit solution nearest the seed (``Q_READY`` by default) wins
   (about 0.5 ms on the 2-core development machine).
3. Damped least squares on the 6-D pose error with joint-limit clamping, started from the
   planar guess, the seed, the nearest out-of-limit analytic solutions and ``Q_READY``: it
   finds feasible q7 intervals narrower than the grid and polishes nearly radial guesses.
"""
from __future__ import annotations

import logging
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.errors import ValidationError

logger = logging.getLogger(__name__)

#: The "ready" configuration of franka_ros / MoveIt (TCP about 0.307 m ahead, 0.487 m up).
Q_READY = np.array([0.0, -math.pi / 4, 0.0, -3 * math.pi / 4, 0.0, math.pi / 2, math.pi / 4])

#: Joint position limits of the FER arm (docs/paper_facts.md, Franka's control parameters), rad.
Q_MIN = np.array([-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973])
Q_MAX = np.array([2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973])

#: Modified DH parameters per joint 1..7: a_{i-1}, d_i, alpha_{i-1} (docs/paper_facts.md).
DH_A = (0.0, 0.0, 0.0, 0.0825, -0.0825, 0.0, 0.088)
DH_D = (0.333, 0.0, 0.316, 0.0, 0.384, 0.0, 0.0)
DH_ALPHA = (0.0, -math.pi / 2, math.pi / 2, math.pi / 2, -math.pi / 2, math.pi / 2, math.pi / 2)
#: Flange offset along joint 7's z axis (m).
FLANGE_D = 0.107
#: Rotation of the Franka Hand about the flange z axis (rad).
HAND_YAW = -math.pi / 4
#: TCP offset beyond the flange along z (m).
TCP_D = 0.1034

#: Approaches within this angle of straight down use the top-down closing-axis reference.
VERTICAL_APPROACH_TOL_RAD = math.radians(10.0)

_SIN_ALPHA = tuple(round(math.sin(a), 15) for a in DH_ALPHA)
_COS_ALPHA = tuple(round(math.cos(a), 15) for a in DH_ALPHA)
_C_HAND, _S_HAND = math.cos(HAND_YAW), math.sin(HAND_YAW)
_SHOULDER_Z = DH_D[0]
# Planar model with q3 = q5 = 0: shoulder -> elbow (O4) and elbow -> wrist (O6) links.
_L1 = math.hypot(DH_D[2], DH_A[3])
_B1 = math.atan2(DH_A[3], DH_D[2])
_L2 = math.hypot(DH_D[4], -DH_A[4])
_B2 = math.atan2(-DH_A[4], DH_D[4])
_WRIST_TO_TCP = FLANGE_D + TCP_D
_MAX_REACH_O7 = _L1 + _L2 + DH_A[6]      # shoulder to joint-7 origin, any configuration
_MAX_ITERS = 30
_LAMBDA_SQ = 1e-4                        # DLS damping (m^2 / rad^2)
_MAX_STEP = 0.5                          # largest joint change per iteration (rad)
_Q7_GRID_SIZES = (16, 117)               # analytic sweeps: q7 every ~0.25 rad, then ~0.05
_NEAR_MISS_STARTS = 3                    # DLS starts taken from out-of-limit analytic solutions

_Frame = Tuple[float, ...]               # 12 floats: x(3), y(3), z(3) axes, then origin(3)


def _chain(q: Sequence[float]) -> List[_Frame]:
    """Frames of joints 1..7 (origin on the joint axis) then the TCP, as flat float tuples.

    Hand-written with Python floats: for a 7-joint chain this is several times faster than
    composing 4x4 numpy matrices, and IK calls it once per iteration.
    """
    xx, xy, xz, yx, yy, yz, zx, zy, zz = 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0
    px = py = pz = 0.0
    frames = []
    for i in range(7):
        a, d, sa, ca = DH_A[i], DH_D[i], _SIN_ALPHA[i], _COS_ALPHA[i]
        if a:
            px += a * xx
            py += a * xy
            pz += a * xz
        # RotX(alpha): y' = ca y + sa z, z' = -sa y + ca z.
        y1x, y1y, y1z = ca * yx + sa * zx, ca * yy + sa * zy, ca * yz + sa * zz
        zx, zy, zz = ca * zx - sa * yx, ca * zy - sa * yy, ca * zz - sa * yz
        c, s = math.cos(q[i]), math.sin(q[i])
        xx, xy, xz, yx, yy, yz = (c * xx + s * y1x, c * xy + s * y1y, c * xz + s * y1z,
                                  c * y1x - s * xx, c * y1y - s * xy, c * y1z - s * xz)
        if d:
            px += d * zx
            py += d * zy
            pz += d * zz
        frames.append((xx, xy, xz, yx, yy, yz, zx, zy, zz, px, py, pz))
    c, s = _C_HAND, _S_HAND
    hx, hy, hz = c * xx + s * yx, c * xy + s * yy, c * xz + s * yz
    gx, gy, gz = c * yx - s * xx, c * yy - s * xy, c * yz - s * xz
    dd = FLANGE_D + TCP_D
    frames.append((hx, hy, hz, gx, gy, gz, zx, zy, zz,
                   px + dd * zx, py + dd * zy, pz + dd * zz))
    return frames


def _to_matrix(f: _Frame) -> np.ndarray:
    T = np.eye(4)
    T[:3, 0], T[:3, 1], T[:3, 2], T[:3, 3] = f[0:3], f[3:6], f[6:9], f[9:12]
    return T


def _pose_error(f: _Frame, t: Sequence[float]) -> Tuple[List[float], float, float]:
    """6-D error (position, rotation vector of R_target R^T) and its two norms.

    ``t`` is the target as 12 floats in the same layout as a frame.
    """
    ex, ey, ez = t[9] - f[9], t[10] - f[10], t[11] - f[11]
    # R_err = R_t R^T = sum over the axis pairs k of t_k f_k^T (columns of both rotations).
    m = [[t[i] * f[j] + t[3 + i] * f[3 + j] + t[6 + i] * f[6 + j] for j in range(3)]
         for i in range(3)]
    vx, vy, vz = m[2][1] - m[1][2], m[0][2] - m[2][0], m[1][0] - m[0][1]
    cos_th = max(-1.0, min(1.0, (m[0][0] + m[1][1] + m[2][2] - 1.0) * 0.5))
    theta = math.acos(cos_th)
    s = math.sqrt(vx * vx + vy * vy + vz * vz)  # = 2 sin(theta)
    if theta < 1e-7:
        wx, wy, wz = 0.5 * vx, 0.5 * vy, 0.5 * vz
    elif theta < math.pi - 1e-3:
        k = theta / s
        wx, wy, wz = k * vx, k * vy, k * vz
    else:  # near pi the skew part vanishes: sym(R) = cos I + (1 - cos) a a^T gives the axis
        j = max(range(3), key=lambda i: m[i][i])
        col = [(m[i][j] + m[j][i]) * 0.5 for i in range(3)]
        col[j] -= cos_th
        n = math.sqrt(col[0] * col[0] + col[1] * col[1] + col[2] * col[2]) or 1.0
        sign = 1.0 if (vx * col[0] + vy * col[1] + vz * col[2]) >= 0.0 else -1.0
        wx, wy, wz = (sign * theta * c / n for c in col)
    e = [ex, ey, ez, wx, wy, wz]
    return e, math.sqrt(ex * ex + ey * ey + ez * ez), theta


def _dls_step(frames: List[_Frame], e: List[float]) -> List[float]:
    """dq = J^T (J J^T + lambda^2 I)^-1 e with the geometric Jacobian built from the frames.

    The 6x6 system is solved by a hand-written Cholesky factorisation: at this size the
    Python loop beats numpy's call overhead.
    """
    tx, ty, tz = frames[7][9], frames[7][10], frames[7][11]
    cols = []
    for f in frames[:7]:
        zx, zy, zz = f[6], f[7], f[8]
        rx, ry, rz = tx - f[9], ty - f[10], tz - f[11]
        cols.append((zy * rz - zz * ry, zz * rx - zx * rz, zx * ry - zy * rx, zx, zy, zz))
    A = [[0.0] * 6 for _ in range(6)]
    for i in range(6):
        Ai = A[i]
        for j in range(i + 1):
            s = 0.0
            for c in cols:
                s += c[i] * c[j]
            Ai[j] = s
        Ai[i] += _LAMBDA_SQ
    # Cholesky A = L L^T in place (lower triangle).
    for j in range(6):
        s = A[j][j]
        for k in range(j):
            s -= A[j][k] * A[j][k]
        d = math.sqrt(s)
        A[j][j] = d
        for i in range(j + 1, 6):
            s = A[i][j]
            for k in range(j):
                s -= A[i][k] * A[j][k]
            A[i][j] = s / d
    y = list(e)
    for i in range(6):
        s = y[i]
        for k in range(i):
            s -= A[i][k] * y[k]
        y[i] = s / A[i][i]
    for i in range(5, -1, -1):
        s = y[i]
        for k in range(i + 1, 6):
            s -= A[k][i] * y[k]
        y[i] = s / A[i][i]
    return [sum(c[r] * y[r] for r in range(6)) for c in cols]


def _wrap_into(angle: float, lo: float, hi: float) -> float:
    """angle + 2 k pi inside [lo, hi] if possible, else the representative nearest to it."""
    a = math.atan2(math.sin(angle), math.cos(angle))
    best, best_d = a, math.inf
    for k in (-1, 0, 1):
        c = a + 2 * math.pi * k
        dist = max(lo - c, 0.0, c - hi)
        if dist < best_d:
            best, best_d = c, dist
    return best


def _default_closing_axis(a: Sequence[float]) -> Tuple[float, float, float]:
    """See :func:`default_closing_axis`; ``a`` is a unit vector, floats in and out."""
    ax, ay, az = a
    horizontal = math.hypot(ax, ay)
    if az < 0.0 and math.atan2(horizontal, -az) <= VERTICAL_APPROACH_TOL_RAD:
        cx, cy, cz = -ay * ax, 1.0 - ay * ay, -ay * az   # world y projected off the approach
    elif horizontal > 1e-9:
        cx, cy, cz = -ay, ax, 0.0                        # world z x approach
    else:
        cx, cy, cz = 0.0, 1.0, 0.0
    n = math.sqrt(cx * cx + cy * cy + cz * cz)
    return cx / n, cy / n, cz / n


def _grasp_frame(p: Sequence[float], a: Sequence[float], wrist_yaw: float) -> List[float]:
    """TCP frame of a grasp as 12 floats (x, y, z axes, origin); ``a`` must be unit length."""
    ax, ay, az = a
    c0x, c0y, c0z = _default_closing_axis(a)
    c, s = math.cos(wrist_yaw), math.sin(wrist_yaw)
    # y = c0 turned by wrist_yaw about -a: cos c0 + sin (c0 x a) (c0 is normal to a).
    yx = c * c0x + s * (c0y * az - c0z * ay)
    yy = c * c0y + s * (c0z * ax - c0x * az)
    yz = c * c0z + s * (c0x * ay - c0y * ax)
    return [yy * az - yz * ay, yz * ax - yx * az, yx * ay - yy * ax,
            yx, yy, yz, ax, ay, az, float(p[0]), float(p[1]), float(p[2])]


def _branch_table(q7: np.ndarray) -> Tuple[np.ndarray, ...]:
    """Flat per-row constants of :func:`analytic_solutions`: q7, elbow, q6 and q2 branches.

    Each q7 value appears 8 times (2 elbows x 2 wrists x 2 shoulders), so the whole solution
    set is one pass of element-wise numpy operations with no stacking or broadcasting.
    """
    n = q7.size
    q7_rows = np.tile(q7, 8)
    branch = np.repeat(np.arange(8), n)
    elbow = np.where(branch & 1, 1.0, -1.0)
    wrist = np.where(branch & 2, -1.0, 1.0)          # q6 = off + wrist * asin(...)
    wrist_off = np.where(branch & 2, math.pi, 0.0)
    shoulder = np.where(branch & 4, -1.0, 1.0)       # sign of q2
    return q7_rows, elbow, wrist, wrist_off, shoulder


def analytic_solutions(target: Sequence[float], q7: np.ndarray,
                       table: Optional[Tuple[np.ndarray, ...]] = None
                       ) -> Tuple[np.ndarray, np.ndarray]:
    """Every closed-form IK solution of the arm for the given values of joint 7.

    With q7 fixed the Panda is a 6R chain with finitely many solutions (the approach of
    He and Liu, "Analytical inverse kinematics for Franka Emika Panda", 2021): frame 6 is
    known, the shoulder-wrist distance fixes q4 (two elbow branches), the wrist geometry gives
    q6 (two branches) and q5, and frame 3's z axis gives q1, q2 (two branches) and q3.
    ``target`` is the TCP frame as 12 floats (x, y, z axes then origin); ``table`` is
    ``_branch_table(q7)`` when the caller caches it. Returns an (8 N, 7) array of joint
    vectors, not yet wrapped into the limits, and a mask of the geometrically valid ones.

    Written for few numpy calls (their overhead, not arithmetic, dominates at this size):
    frame 6 is x6 = c7 x7 - s7 y7, y6 = -z7, z6 = s7 x7 + c7 y7, so the shoulder-to-wrist
    vector in frame 6 and the axes of frames 4 and 3 are scalar combinations of x7, y7, z7.
    """
    q7r, elbow, wrist, wrist_off, shoulder = _branch_table(q7) if table is None else table
    xt, yt, zt = target[0:3], target[3:6], target[6:9]
    x7 = [_C_HAND * xt[i] - _S_HAND * yt[i] for i in range(3)]
    y7 = [_S_HAND * xt[i] + _C_HAND * yt[i] for i in range(3)]
    o7 = [target[9 + i] - _WRIST_TO_TCP * zt[i] for i in range(3)]
    o7[2] -= _SHOULDER_Z                                  # shoulder -> joint 7 origin
    ox = o7[0] * x7[0] + o7[1] * x7[1] + o7[2] * x7[2]
    oy = o7[0] * y7[0] + o7[1] * y7[1] + o7[2] * y7[2]
    oz = o7[0] * zt[0] + o7[1] * zt[1] + o7[2] * zt[2]
    a7 = DH_A[6]
    c7, s7 = np.cos(q7r), np.sin(q7r)
    # Shoulder -> wrist D = o7 - a7 x6, in frame 6 (the dy component does not depend on q7).
    ox6 = c7 * ox - s7 * oy                               # o7 . x6
    dx = ox6 - a7
    dy = -oz
    dz = s7 * ox + c7 * oy
    k = ((o7[0] ** 2 + o7[1] ** 2 + o7[2] ** 2 + a7 * a7 - _L1 ** 2 - _L2 ** 2)
         - 2.0 * a7 * ox6) / (2.0 * _L1 * _L2)
    q4 = elbow * np.arccos(np.clip(k, -1.0, 1.0)) - (_B1 + _B2)
    c4, s4 = np.cos(q4), np.sin(q4)
    # Shoulder -> wrist in frame 4 is (mx, my, 0); the frame-4-to-6 rotation maps d onto it.
    mx = c4 * DH_A[3] + s4 * DH_D[2] + DH_A[4]
    my = c4 * DH_D[2] - s4 * DH_A[3] + DH_D[4]
    rho = np.sqrt(dx * dx + dy * dy)
    valid = (np.abs(k) <= 1.0) & (np.abs(my) <= rho)
    q6 = wrist_off - np.arctan2(dy, dx) + wrist * np.arcsin(
        np.clip(my / np.maximum(rho, 1e-12), -1.0, 1.0))
    c6, s6 = np.cos(q6), np.sin(q6)
    q5 = np.arctan2(0.0, mx) - np.arctan2(-dz, c6 * dx - s6 * dy)
    c5, s5 = np.cos(q5), np.sin(q5)
    # R4 = R6 RotZ(-q6) RotX(-pi/2) RotZ(-q5) RotX(pi/2) and R3 = R4 RotZ(-q4) RotX(-pi/2);
    # in the basis (x7, y7, z7): x4 = c5 (c6 x6 + s6 z7) + s5 z6, y4 = s6 x6 - c6 z7,
    # x3 = c4 x4 - s4 y4, z3 = s4 x4 + c4 y4.
    c5c6 = c5 * c6
    x4 = np.stack([c5c6 * c7 + s5 * s7, s5 * c7 - c5c6 * s7, c5 * s6])
    y4 = np.stack([s6 * c7, -s6 * s7, -c6])
    basis = np.array([x7, y7, list(zt)]).T               # columns x7, y7, z7
    x3 = basis @ (c4 * x4 - s4 * y4)
    z3 = basis @ (s4 * x4 + c4 * y4)
    q2 = shoulder * np.arccos(np.clip(z3[2], -1.0, 1.0))
    q1 = np.arctan2(shoulder * z3[1], shoulder * z3[0])
    cq1, sq1, cq2, sq2 = np.cos(q1), np.sin(q1), np.cos(q2), np.sin(q2)
    # q3: angle of x3 from frame 2's x axis (c1 c2, s1 c2, -s2) towards its z axis (-s1, c1, 0).
    q3 = np.arctan2(cq1 * x3[1] - sq1 * x3[0], cq2 * (cq1 * x3[0] + sq1 * x3[1]) - sq2 * x3[2])
    return np.stack([q1, q2, q3, q4, q5, q6, q7r], axis=1), valid


def _reach_extreme_rolls(t: Sequence[float]) -> np.ndarray:
    """q7 values that bring the wrist (joint 6's origin) nearest to and farthest from the
    shoulder, each with close neighbours.

    The wrist lies on a circle of radius a7 = 0.088 m around joint 7's origin, in the plane
    normal to the approach; with w = shoulder -> joint 7 origin, the distance is extreme where
    x6 = c7 x7 - s7 y7 is parallel to w's in-plane part, i.e. at q7 = -phi and pi - phi with
    phi = atan2(w.y7, w.x7).
    """
    xt, yt, zt = t[0:3], t[3:6], t[6:9]
    w = [t[9 + i] - _WRIST_TO_TCP * zt[i] for i in range(3)]
    w[2] -= _SHOULDER_Z
    wx7 = sum(w[i] * (_C_HAND * xt[i] - _S_HAND * yt[i]) for i in range(3))
    wy7 = sum(w[i] * (_S_HAND * xt[i] + _C_HAND * yt[i]) for i in range(3))
    phi = math.atan2(wy7, wx7)
    offsets = np.array([0.0, -0.01, 0.01, -0.03, 0.03])
    return np.concatenate([-phi + offsets, math.pi - phi + offsets])


def _wrap_limits(q: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Shift each angle by 2 pi k towards [lo, hi] (every joint range is under 2 pi wide)."""
    two_pi = 2.0 * math.pi
    q = q - two_pi * np.floor((q + math.pi) / two_pi)          # into [-pi, pi)
    # Shift only into the range: an angle just past a limit keeps its small violation (the
    # DLS fallback starts from the least-violating solutions).
    q = np.where((q < lo) & (q + two_pi <= hi), q + two_pi, q)
    return np.where((q > hi) & (q - two_pi >= lo), q - two_pi, q)


def _unit(v: Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(v, dtype=float).reshape(-1)
    n = float(np.linalg.norm(arr)) if arr.shape == (3,) else 0.0
    if not math.isfinite(n) or n < 1e-9:
        raise ValidationError(f"{name} must be a finite non-zero 3-vector, got {v!r}")
    return arr / n


def default_closing_axis(approach: Sequence[float]) -> np.ndarray:
    """Finger closing axis at ``wrist_yaw = 0`` for an approach direction (unit 3-vector).

    Convention: for approaches within ``VERTICAL_APPROACH_TOL_RAD`` of straight down it is
    world y projected onto the plane normal to the approach (exactly world y for a top-down
    grasp); otherwise it is the horizontal direction ``world_z x approach`` (fingers close
    horizontally, e.g. world y for an approach along +x). The two rules agree for approaches
    tilted in the world x-z plane; a 90 deg switch happens at the 10 deg boundary for tilts
    towards +-y, which no continuous rule can avoid (hairy-ball theorem). Straight up falls
    back to world y.
    """
    return np.array(_default_closing_axis(_unit(approach, "approach").tolist()))


def closing_axis(approach: Sequence[float], wrist_yaw: float) -> np.ndarray:
    """Finger closing axis: the default axis turned by ``wrist_yaw`` about ``-approach``.

    Positive yaw is counter-clockwise as seen looking along the approach (from behind the
    hand), so for a top-down grasp it is the familiar counter-clockwise yaw about world +z:
    the axis is ``(-sin(wrist_yaw), cos(wrist_yaw), 0)``. Closing along the y axis of an
    object with yaw psi therefore takes ``wrist_yaw = psi``, along its x axis
    ``psi - pi / 2``.
    """
    frame = _grasp_frame((0.0, 0.0, 0.0), _unit(approach, "approach").tolist(),
                         float(wrist_yaw))
    return np.array(frame[3:6])


def wrist_yaw_for_closing_axis(approach: Sequence[float], axis: Sequence[float]) -> float:
    """The wrist_yaw whose closing axis is ``axis`` projected normal to ``approach``.

    Use this rather than re-deriving the sign convention. ``axis`` and ``-axis`` describe
    the same finger line; the gripper is symmetric, so :meth:`PandaKinematics.solve_grasp`
    accepts either (the two answers differ by pi).
    """
    a = _unit(approach, "approach")
    v = _unit(axis, "axis")
    c0l = _default_closing_axis(a.tolist())
    c0 = np.array(c0l)
    # np.cross(c0, a) as numpy computes it (each product rounded, then the difference)
    # without its broadcasting set-up: the candidate search calls this per tilted grasp
    x, y, z = c0l
    ax, ay, az = a.tolist()
    cross = np.array([y * az - z * ay, z * ax - x * az, x * ay - y * ax])
    return math.atan2(float(np.dot(cross, v)), float(np.dot(c0, v)))


def tcp_rotation(approach: Sequence[float], wrist_yaw: float) -> np.ndarray:
    """The rotation of :meth:`PandaKinematics.tcp_pose` (its axes do not depend on the
    position), as a C-contiguous 3x3, without building the 4x4: the candidate search asks
    for one per scored grasp. Same values bit for bit."""
    f = _grasp_frame((0.0, 0.0, 0.0), _unit(approach, "approach").tolist(), float(wrist_yaw))
    return np.array(f[:9]).reshape(3, 3).T.copy()


class PandaKinematics:
    """FK / IK of the Panda arm to the Franka Hand TCP, honouring the joint limits.

    ``q_min`` / ``q_max`` are the limits IK and :meth:`within_limits` enforce: docs/paper_facts.md's
    limits shrunk by ``joint_limit_margin`` on both sides (so a margin keeps solutions away
    from the hard stops, as MoveIt's padding does).
    """

    def __init__(self, joint_limit_margin: float = 0.0) -> None:
        margin = float(joint_limit_margin)
        if not math.isfinite(margin) or margin < 0.0 or np.any(Q_MAX - Q_MIN <= 2 * margin):
            raise ValidationError(f"joint_limit_margin must be >= 0 and leave every joint "
                                  f"some range, got {joint_limit_margin!r}")
        self.joint_limit_margin = margin
        self.q_min: np.ndarray = Q_MIN + margin
        self.q_max: np.ndarray = Q_MAX - margin
        self._lo = self.q_min.tolist()
        self._hi = self.q_max.tolist()
        grids = [np.linspace(self.q_min[6], self.q_max[6], n) for n in _Q7_GRID_SIZES]
        self._sweeps = [(g, _branch_table(g)) for g in grids]
        # With the gripper's half-turn symmetry every row is also tried with q7 + pi, so the
        # grid spans the whole circle (a row's q7 may be out of limits, its twin's not).
        grids = [np.linspace(-math.pi, math.pi, n, endpoint=False) for n in _Q7_GRID_SIZES]
        self._sweeps_symmetric = [(g, _branch_table(g)) for g in grids]

    # ------------------------------------------------------------------ forward kinematics
    @staticmethod
    def _check_q(q: Sequence[float]) -> List[float]:
        arr = np.asarray(q, dtype=float).reshape(-1)
        if arr.shape != (7,) or not np.all(np.isfinite(arr)):
            raise ValidationError(f"joint vector must have 7 finite values, got {q!r}")
        return arr.tolist()

    def fk(self, q: np.ndarray) -> np.ndarray:
        """4x4 pose of the TCP in ``world`` for joint positions ``q`` (7,)."""
        return _to_matrix(_chain(self._check_q(q))[7])

    def fk_all(self, q: np.ndarray) -> List[np.ndarray]:
        """4x4 frames of links 1..7, the flange and the TCP (9 poses), for tests and collision.

        Link i's frame is the modified-DH frame i (origin on joint i's axis); the flange
        frame is link 7 moved 0.107 m along z; the TCP frame includes the hand's -45 deg.
        """
        frames = _chain(self._check_q(q))
        out = [_to_matrix(f) for f in frames[:7]]
        flange = out[6].copy()
        flange[:3, 3] += FLANGE_D * flange[:3, 2]
        out.append(flange)
        out.append(_to_matrix(frames[7]))
        return out

    def within_limits(self, q: np.ndarray) -> bool:
        """True when every joint lies inside [q_min, q_max] (margin included)."""
        arr = np.asarray(q, dtype=float).reshape(-1)
        return bool(arr.shape == (7,) and np.all(np.isfinite(arr))
                    and np.all(arr >= self.q_min - 1e-12) and np.all(arr <= self.q_max + 1e-12))

    # ------------------------------------------------------------------ grasp frames
    @staticmethod
    def tcp_pose(position: Sequence[float], approach: Sequence[float],
                 wrist_yaw: float) -> np.ndarray:
        """4x4 TCP pose: z along ``approach``, y = closing axis (see :func:`closing_axis`).

        For a top-down grasp (approach ``[0, 0, -1]``) and ``wrist_yaw = 0`` the fingers close
        along world y and the TCP x axis is world -x.
        """
        p = np.asarray(position, dtype=float).reshape(-1)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise ValidationError(f"position must be a finite 3-vector, got {position!r}")
        if not math.isfinite(float(wrist_yaw)):
            raise ValidationError(f"wrist_yaw must be finite, got {wrist_yaw!r}")
        frame = _grasp_frame(p.tolist(), _unit(approach, "approach").tolist(),
                             float(wrist_yaw))
        return _to_matrix(tuple(frame))

    # ------------------------------------------------------------------ inverse kinematics
    def _planar_guess(self, t: Sequence[float]) -> Optional[List[float]]:
        """Closed-form IK of the q3 = q5 = 0 family (exact when the approach is radial).

        ``t`` is the target frame as 12 floats. Returns None when the wrist is beyond reach.
        """
        zx, zy, zz = t[6], t[7], t[8]
        o7x, o7y = t[9] - _WRIST_TO_TCP * zx, t[10] - _WRIST_TO_TCP * zy
        r7 = math.hypot(o7x, o7y)
        q1 = math.atan2(o7y, o7x) if r7 > 1e-9 else 0.0
        er_x, er_y = math.cos(q1), math.sin(q1)
        # Approach angle in the arm plane, u(phi) = (sin phi, cos phi) in (r, z).
        psi = math.atan2(zx * er_x + zy * er_y, zz)
        r_t = t[9] * er_x + t[10] * er_y
        # O6 = TCP - 0.2104 u(psi) - 0.088 u(psi - pi/2)
        o6r = r_t - _WRIST_TO_TCP * math.sin(psi) - DH_A[6] * math.sin(psi - math.pi / 2)
        o6z = t[11] - _WRIST_TO_TCP * math.cos(psi) - DH_A[6] * math.cos(psi - math.pi / 2)
        dr, dz = o6r, o6z - _SHOULDER_Z
        dist_sq = dr * dr + dz * dz
        k = (dist_sq - _L1 * _L1 - _L2 * _L2) / (2 * _L1 * _L2)
        if k > 1.0 + 1e-9:
            return None
        delta = math.acos(max(-1.0, min(1.0, k)))
        q4 = -delta - _B1 - _B2
        theta1 = math.atan2(dr, dz) - math.atan2(_L2 * math.sin(delta),
                                                 _L1 + _L2 * math.cos(delta))
        q2 = theta1 - _B1
        q6 = q2 - q4 + math.pi - psi
        q = [q1, q2, 0.0, q4, 0.0, q6, 0.0]
        q[0] = _wrap_into(q[0], self._lo[0], self._hi[0])
        q[1] = _wrap_into(q[1], self._lo[1], self._hi[1])
        q[5] = _wrap_into(q[5], self._lo[5], self._hi[5])
        # Roll q7 so the TCP axes match: frame 7 at q7 = 0 versus the target's frame 7.
        f7 = _chain(q)[6]
        # target x7 axis = R_t RotZ(-HAND_YAW) e_x, expressed with the target's x and y axes
        c, s = _C_HAND, -_S_HAND
        tx7 = (c * t[0] + s * t[3], c * t[1] + s * t[4], c * t[2] + s * t[5])
        cos7 = tx7[0] * f7[0] + tx7[1] * f7[1] + tx7[2] * f7[2]
        sin7 = tx7[0] * f7[3] + tx7[1] * f7[4] + tx7[2] * f7[5]
        q[6] = _wrap_into(math.atan2(sin7, cos7), self._lo[6], self._hi[6])
        return q

    def _refine(self, q: List[float], t: Sequence[float], pos_tol: float,
                rot_tol: float) -> Optional[List[float]]:
        """Damped least squares from ``q`` with joint clamping; the solution or None.

        Iterates until the error is 1 % of the tolerances (one or two extra steps once in
        the quadratic regime), gives up after ``_MAX_ITERS`` or six steps without a 2 %
        improvement, and returns the best iterate if that one is within tolerance.
        """
        lo, hi = self._lo, self._hi
        q = [min(max(v, lo[i]), hi[i]) for i, v in enumerate(q)]
        best, best_q, stall = math.inf, None, 0
        for _ in range(_MAX_ITERS):
            frames = _chain(q)
            e, pos_err, rot_err = _pose_error(frames[7], t)
            score = pos_err / pos_tol + rot_err / rot_tol
            if pos_err <= pos_tol and rot_err <= rot_tol:
                if pos_err <= 0.01 * pos_tol and rot_err <= 0.01 * rot_tol:
                    return q
                if score < best:
                    best_q = q
            if score < best * 0.98:
                best, stall = score, 0
            else:
                stall += 1
                if stall >= 6:
                    break
            dq = _dls_step(frames, e)
            big = max(abs(v) for v in dq)
            scale = _MAX_STEP / big if big > _MAX_STEP else 1.0
            q = [min(max(v + scale * dq[i], lo[i]), hi[i]) for i, v in enumerate(q)]
        return best_q

    @staticmethod
    def _target_floats(target: np.ndarray) -> List[float]:
        T = np.asarray(target, dtype=float)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise ValidationError("IK target must be a finite 4x4 homogeneous matrix")
        R = T[:3, :3]
        if not np.allclose(R.T @ R, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0.0:
            raise ValidationError("IK target rotation must be orthonormal and right-handed")
        return R.T.reshape(-1).tolist() + T[:3, 3].tolist()

    def _ik_floats(self, t: List[float], seed: Optional[List[float]], pos_tol: float,
                   rot_tol: float, symmetric: bool) -> Optional[List[float]]:
        """IK on float lists; ``symmetric`` also accepts the TCP turned by pi about z.

        The half-turn symmetry of the parallel gripper is exactly a shift of q7 by pi (joint
        7 turns about the TCP z axis), so it costs nothing but extra candidate rows.
        """
        o7 = (t[9] - _WRIST_TO_TCP * t[6], t[10] - _WRIST_TO_TCP * t[7],
              t[11] - _WRIST_TO_TCP * t[8])
        if math.dist(o7, (0.0, 0.0, _SHOULDER_Z)) > _MAX_REACH_O7 + pos_tol:
            return None  # beyond the arm's reach whatever the configuration
        ref = list(seed) if seed is not None else Q_READY.tolist()
        # The same target with the fingers swapped (x, y negated): q7 + pi reaches it.
        t_flip = [-v for v in t[:6]] + list(t[6:])
        targets = (t, t_flip) if symmetric else (t,)

        def matched_target(q: List[float]) -> Tuple[Optional[List[float]], bool]:
            """The target (t or its flip) q reaches within tolerance, and whether tightly."""
            frame = _chain(q)[7]
            for target in targets:
                _, pos_err, rot_err = _pose_error(frame, target)
                if pos_err <= pos_tol and rot_err <= rot_tol:
                    return target, pos_err <= 0.01 * pos_tol and rot_err <= 0.01 * rot_tol
            return None, False

        guess = self._planar_guess(t)
        if guess is not None:
            guess[6] = self._wrist_roll(guess[6], ref[6], math.pi if symmetric else 2 * math.pi)
            if self.within_limits(guess):
                target, tight = matched_target(guess)
                if tight:
                    return guess  # radial approach: the closed form is exact
                if target is not None:  # nearly radial: polish with DLS
                    return self._refine(guess, target, pos_tol, rot_tol) or guess
        near: List[List[float]] = []
        sweeps = list(self._sweeps_symmetric if symmetric else self._sweeps)
        sweeps.append(None)   # placeholder: the wrist rolls at the ends of the reach, below
        any_valid = False
        for sweep in sweeps:
            if sweep is None:
                if any_valid:
                    break
                # Near the boundary of the workspace the valid q7 interval can fall between
                # grid points; it always contains one of the two rolls that put the wrist
                # nearest to / farthest from the shoulder, so try those (and neighbours).
                grid = _reach_extreme_rolls(t)
                table = _branch_table(grid)
            else:
                grid, table = sweep
            sols, valid = analytic_solutions(t, grid, table)
            if not np.any(valid):
                continue
            any_valid = True
            sols = sols[valid]
            if symmetric:
                flipped = sols.copy()
                flipped[:, 6] += math.pi
                sols = np.concatenate([sols, flipped])
            sols = _wrap_limits(sols, self.q_min, self.q_max)
            violation = (np.maximum(self.q_min - sols, 0.0)
                         + np.maximum(sols - self.q_max, 0.0)).sum(axis=1)
            inside = np.flatnonzero(violation == 0.0)
            order = inside[np.argsort(((sols[inside] - ref) ** 2).sum(axis=1), kind="stable")]
            for i in order[:4]:
                q = sols[i].tolist()
                if matched_target(q)[0] is not None:
                    return q
            near = [sols[i].tolist() for i in
                    np.argsort(violation, kind="stable")[:_NEAR_MISS_STARTS]]
        if not any_valid:
            return None  # the wrist cannot be placed at any roll of joint 7: out of reach
        # Only out-of-limit solutions on the grids: let DLS with clamping slide from the
        # planar guess, the seed, the nearest misses (a feasible q7 interval may fall between
        # grid points) and Q_READY.
        starts = [] if guess is None else [guess]
        if seed is not None:
            starts.append(list(seed))
        starts.extend(near)
        starts.append(Q_READY.tolist())
        for target in targets:
            for start in starts:
                q = self._refine(start, target, pos_tol, rot_tol)
                if q is not None:
                    return q
        return None

    def _wrist_roll(self, q7: float, ref7: float, period: float) -> float:
        """The in-limit value q7 + k period nearest to ref7 (q7 itself if none is in limits)."""
        lo, hi = self._lo[6], self._hi[6]
        best, best_d = q7, math.inf
        for k in range(-3, 4):
            c = q7 + k * period
            if lo <= c <= hi and abs(c - ref7) < best_d:
                best, best_d = c, abs(c - ref7)
        return best

    def ik(self, target: np.ndarray, seed: Optional[np.ndarray] = None,
           pos_tol: float = 1e-3, rot_tol: float = 1e-2) -> Optional[np.ndarray]:
        """Joint positions (7,) within limits reaching the 4x4 TCP ``target``, or None.

        Stages, first success wins: (1) the planar closed form (exact for targets whose
        approach lies in a vertical plane through the base); (2) the analytic solutions on a
        coarse then a fine grid of q7, the in-limit one nearest ``seed`` (``Q_READY`` if
        None) in joint space; (3) damped least squares with joint clamping from the planar
        guess, ``seed``, the three nearest out-of-limit analytic solutions and ``Q_READY``.
        Returns None early when the wrist is out of reach. Deterministic for a given
        (target, seed): nothing is cached between calls.
        """
        t = self._target_floats(target)
        s = self._check_q(seed) if seed is not None else None
        q = self._ik_floats(t, s, float(pos_tol), float(rot_tol), symmetric=False)
        if q is None:
            logger.debug("no IK solution for the TCP at %s", np.round(t[9:], 3).tolist())
            return None
        return np.array(q)

    def solve_grasp(self, position: Sequence[float], approach: Sequence[float],
                    wrist_yaw: float, seed: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
        """IK for a grasp pose (tolerances 1 mm, 0.01 rad), using the gripper's symmetry.

        ``wrist_yaw`` and ``wrist_yaw + pi`` close the fingers along the same line, so both are
        accepted: among the solutions of both the one nearest the seed (``Q_READY`` when
        None) wins, which keeps joint 7 away from its stops. ``fk(q)`` therefore matches
        ``tcp_pose(position, approach, wrist_yaw)`` up to a half turn about the approach.
        """
        p = np.asarray(position, dtype=float).reshape(-1)
        if p.shape != (3,) or not np.all(np.isfinite(p)) or not math.isfinite(float(wrist_yaw)):
            raise ValidationError(f"grasp position must be a finite 3-vector and wrist_yaw "
                                  f"finite, got {position!r}, {wrist_yaw!r}")
        t = _grasp_frame(p.tolist(), _unit(approach, "approach").tolist(), float(wrist_yaw))
        s = self._check_q(seed) if seed is not None else None
        q = self._ik_floats(t, s, 1e-3, 1e-2, symmetric=True)
        if q is None:
            logger.debug("no IK solution for a grasp at %s approaching along %s",
                         np.round(p, 3).tolist(), np.round(t[6:9], 3).tolist())
            return None
        return np.array(q)
