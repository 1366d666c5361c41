"""The Franka Emika Panda (FER) as a kinematic model: joint limits, the
modified-DH chain to the flange and the TCP, and the closed-form inverse-kinematics branches
(shoulder, elbow, wrist) with the damped-least-squares step that refines them.

:class:`agentic_grasp.core.arm.kinematics.PandaKinematics` is the solver built on these; the
numbers are the FER's published DH parameters (see the constants' comments).
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import numpy as np


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


_LAMBDA_SQ = 1e-4                        # DLS damping (m^2 / rad^2)


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
