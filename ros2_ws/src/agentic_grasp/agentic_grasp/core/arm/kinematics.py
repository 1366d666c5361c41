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
import struct
from collections import OrderedDict
from typing import List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.arm.closing_axis import _grasp_frame, _unit
from agentic_grasp.core.arm.panda_model import (DH_A, FLANGE_D, Q_MAX, Q_MIN, Q_READY, _B1, _B2,
                                                _C_HAND, _L1, _L2, _MAX_REACH_O7, _SHOULDER_Z,
                                                _S_HAND, _WRIST_TO_TCP, _branch_table, _chain,
                                                _dls_step, _pose_error, _reach_extreme_rolls,
                                                _to_matrix, _wrap_into, _wrap_limits,
                                                analytic_solutions)


logger = logging.getLogger(__name__)


_MAX_ITERS = 30


_MAX_STEP = 0.5                          # largest joint change per iteration (rad)
_Q7_GRID_SIZES = (16, 117)               # analytic sweeps: q7 every ~0.25 rad, then ~0.05
_NEAR_MISS_STARTS = 3                    # DLS starts taken from out-of-limit analytic solutions
#: IK solves kept per arm (_ik_floats): a few trials' worth of grasps, 1 kB each
_IK_MEMO_SIZE = 1024


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
        self._memo: "OrderedDict[tuple, Optional[List[float]]]" = OrderedDict()

    # ------------------------------------------------------------------ forward kinematics
    @staticmethod
    def _check_q(q: Sequence[float]) -> List[float]:
        arr = np.asarray(q, dtype=float).reshape(-1)
        if arr.shape != (7,) or not np.isfinite(arr).all():
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
        return bool(arr.shape == (7,) and np.isfinite(arr).all()
                    and (arr >= self.q_min - 1e-12).all() and (arr <= self.q_max + 1e-12).all())

    # ------------------------------------------------------------------ grasp frames
    @staticmethod
    def tcp_pose(position: Sequence[float], approach: Sequence[float],
                 wrist_yaw: float) -> np.ndarray:
        """4x4 TCP pose: z along ``approach``, y = closing axis (see :func:`closing_axis`).

        For a top-down grasp (approach ``[0, 0, -1]``) and ``wrist_yaw = 0`` the fingers close
        along world y and the TCP x axis is world -x.
        """
        p = np.asarray(position, dtype=float).reshape(-1)
        if p.shape != (3,) or not np.isfinite(p).all():
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
        """:meth:`_solve_floats` memoised on the exact bits of its arguments (a solve is a
        function of them and of this arm's limits alone): a sweep's configurations plan and
        execute the same grasps of the same scene, half of the solves of a vlm_sim slice
        were repeats. A copy of the kept solution is returned."""
        key = (struct.pack(f"{len(t)}d", *t),
               None if seed is None else struct.pack(f"{len(seed)}d", *seed),
               float(pos_tol), float(rot_tol), bool(symmetric))
        memo = self._memo
        if key in memo:
            q = memo[key]
            memo.move_to_end(key)
        else:
            q = memo[key] = self._solve_floats(t, seed, pos_tol, rot_tol, symmetric)
            if len(memo) > _IK_MEMO_SIZE:
                memo.popitem(last=False)
        return None if q is None else list(q)

    def _solve_floats(self, t: List[float], seed: Optional[List[float]], pos_tol: float,
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
        (target, seed); recent solves are memoised on those exact values (_ik_floats).
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
        if p.shape != (3,) or not np.isfinite(p).all() or not math.isfinite(float(wrist_yaw)):
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
