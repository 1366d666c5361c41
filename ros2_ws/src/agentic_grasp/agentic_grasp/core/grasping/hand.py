"""A geometric Franka Hand swept along an approach (planner side).

Four boxes in the gripper frame (z = approach, y = closing axis, TCP at the pad centre):
the palm, the wrist (link 7 + flange) above it, and the two fingers at the commanded
opening. Moving along its own z axis, a box sweeps a box on the same axes, so the volume a
hand part sweeps from the pre-grasp pose (stand-off h) to the grasp pose is one box, h longer
along z. Clearances are separating-axis gaps between those swept boxes and the perceived
objects' oriented boxes (a lower bound of the distance; <= 0 means they meet).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.geometry import yaw_matrix

from agentic_grasp.core.grasping.config import HandConfig
from agentic_grasp.core.arm.kinematics import tcp_rotation
from agentic_grasp.core.numeric import cross3
from agentic_grasp.core.types import GraspParameters, ObjectInstance, Shape


@dataclass
class Box:
    """Oriented box: centre c, axes as the columns of R, half extents h."""

    c: np.ndarray
    R: np.ndarray
    h: np.ndarray
    name: str = ""


#: A knocked-over object's frame: turned 90 deg about its own x (core/render/raycast.py convention).
_LYING = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])


def object_box(obj: ObjectInstance, inflate: float = 0.0) -> Box:
    """The perceived object's oriented bounding box (cylinders and spheres boxed: safe side);
    a lying object's (``upright`` False: a fallen bottle, a banana's lying body) is turned
    as the renderer draws it, its size[2] horizontal."""
    R = yaw_matrix(obj.yaw)
    if not getattr(obj, "upright", True) and obj.shape != Shape.SPHERE:
        R = R @ _LYING
    return Box(np.asarray(obj.position, dtype=float), R,
               np.asarray(obj.size, dtype=float) / 2.0 + inflate, obj.id)


def obb_gap(a: Box, b: Box) -> float:
    """Largest separating gap of two boxes over the 15 SAT axes (> 0 apart, <= 0 overlap)."""
    # the 3 + 3 face axes, then a.R[:, i] x b.R[:, j] for i, then j
    A = np.concatenate([a.R.T, b.R.T, cross3(a.R.T[:, None, :], b.R.T[None, :, :]).reshape(9, 3)])
    n = np.linalg.norm(A, axis=1)
    ok = n > 1e-6
    A = A[ok] / n[ok, None]
    ra = np.abs(A @ a.R) @ a.h
    rb = np.abs(A @ b.R) @ b.h
    d = np.abs(A @ (b.c - a.c))
    return float(np.max(d - ra - rb))


class HandModel:
    """The hand's boxes at a grasp, swept or not (module docstring)."""

    def __init__(self, config: HandConfig) -> None:
        self.cfg = config
        self.z_tip = config.pad_depth_m / 2.0
        self.z_palm = self.z_tip - config.finger_length_m

    def local_boxes(self, opening: float) -> List[Tuple[str, np.ndarray, np.ndarray]]:
        c = self.cfg
        px, py, pz = c.palm_size_m
        wx, wy, wz = c.wrist_size_m
        t, L = c.finger_thickness_m, c.finger_length_m
        zf = (self.z_palm + self.z_tip) / 2.0
        return [("palm", np.array([0.0, 0.0, self.z_palm - pz / 2.0]),
                 np.array([px, py, pz]) / 2.0),
                ("wrist", np.array([0.0, 0.0, self.z_palm - pz - wz / 2.0]),
                 np.array([wx, wy, wz]) / 2.0),
                ("finger", np.array([0.0, opening / 2.0 + t / 2.0, zf]),
                 np.array([c.finger_width_m, t, L]) / 2.0),
                ("finger", np.array([0.0, -opening / 2.0 - t / 2.0, zf]),
                 np.array([c.finger_width_m, t, L]) / 2.0)]

    @staticmethod
    def rotation(grasp: GraspParameters) -> np.ndarray:
        return tcp_rotation(grasp.approach, grasp.wrist_yaw)

    def boxes(self, grasp: GraspParameters, swept: bool = True,
              rotation: Optional[np.ndarray] = None) -> List[Box]:
        """World boxes of the hand at ``grasp``; ``swept``: over the whole approach.
        ``rotation``: :meth:`rotation` of ``grasp`` when the caller already has it."""
        R = self.rotation(grasp) if rotation is None else rotation
        h = float(grasp.approach_height) if swept else 0.0
        out = []
        for name, centre, half in self.local_boxes(min(float(grasp.width),
                                                       self.cfg.max_opening_m)):
            c = centre.copy()
            hh = half.copy()
            c[2] -= h / 2.0                 # the pre-grasp pose trails by h along -z
            hh[2] += h / 2.0
            out.append(Box(np.asarray(grasp.position, dtype=float) + R @ c, R, hh, name))
        return out

    def finger_points(self, grasp: GraspParameters,
                      rotation: Optional[np.ndarray] = None) -> np.ndarray:
        """The two finger centres (pad height) at the grasp pose, world frame."""
        R = self.rotation(grasp) if rotation is None else rotation
        off = min(float(grasp.width), self.cfg.max_opening_m) / 2.0 \
            + self.cfg.finger_thickness_m / 2.0
        p = np.asarray(grasp.position, dtype=float)
        return np.array([p + R[:, 1] * off, p - R[:, 1] * off])

    def lowest_point(self, grasp: GraspParameters,
                     rotation: Optional[np.ndarray] = None) -> float:
        """Lowest z of the hand at the grasp pose (the fingertips, or a tilted corner)."""
        lows = []
        for box in self.boxes(grasp, swept=False, rotation=rotation):
            lows.append(float(box.c[2] - np.abs(box.R[2]) @ box.h))
        return min(lows)

    def swept_arrays(self, grasps: Sequence[GraspParameters],
                     rotations: Sequence[np.ndarray], with_pose: bool = False
                     ) -> Tuple[np.ndarray, ...]:
        """:meth:`boxes` (swept) and :meth:`lowest_point` of many grasps at once, as arrays:
        the swept boxes' centres and half extents (N, 4, 3) in :meth:`local_boxes` order,
        their rotations (N, 3, 3) and the hand's lowest z at each grasp pose (N,).

        Bit for bit what the per-grasp methods compute: the same elementwise operations, and
        each ``R @ c`` and ``|R[2]| @ h`` a stacked ``np.matmul`` over vector core
        dimensions, which runs the same BLAS gemv / dot per item (a batched gemm or einsum
        would sum in another order). The candidate search scores ~100 grasps per call.
        ``with_pose``: also the boxes' centres at the grasp pose (N, 4, 3), the centres of
        ``boxes(swept=False)``."""
        c = self.cfg
        n = len(grasps)
        R = np.array(rotations, dtype=float).reshape(n, 3, 3)
        p = np.array([np.asarray(g.position, dtype=float) for g in grasps]).reshape(n, 3)
        h = np.array([float(g.approach_height) for g in grasps])
        w = np.minimum(np.array([float(g.width) for g in grasps]), c.max_opening_m)
        local = self.local_boxes(0.0)
        centre = np.empty((n, 4, 3))
        half = np.empty((n, 4, 3))
        for k, (_, ck, hk) in enumerate(local):
            centre[:, k] = ck
            half[:, k] = hk
        t = c.finger_thickness_m
        centre[:, 2, 1] = w / 2.0 + t / 2.0
        centre[:, 3, 1] = -w / 2.0 - t / 2.0
        Rk = np.broadcast_to(R[:, None], (n, 4, 3, 3))
        # the grasp pose (unswept: c[2] - 0.0 and h[2] + 0.0 are c[2] and h[2])
        at = p[:, None] + np.matmul(Rk, centre[..., None])[..., 0]
        low = at[..., 2] - np.matmul(np.abs(R[:, 2])[:, None, None, :], half[..., None])[..., 0, 0]
        centre[..., 2] -= (h / 2.0)[:, None]         # the pre-grasp pose trails by h along -z
        half[..., 2] += (h / 2.0)[:, None]
        swept = p[:, None] + np.matmul(Rk, centre[..., None])[..., 0]
        if with_pose:
            return swept, half, R, low.min(axis=1), at
        return swept, half, R, low.min(axis=1)

    def clearance(self, grasp: GraspParameters, obstacles: Sequence[Box],
                  parts: Sequence[str] = ("palm", "wrist", "finger")
                  ) -> Tuple[float, str, str]:
        """(smallest gap, hand part, obstacle) of the swept hand against ``obstacles``."""
        best = (math.inf, "", "")
        for hb in self.boxes(grasp, swept=True):
            if hb.name not in parts:
                continue
            for ob in obstacles:
                gap = obb_gap(hb, ob)
                if gap < best[0]:
                    best = (gap, hb.name, ob.name)
        return best




def gap_matrix(A: Sequence[Box], B: Sequence[Box]) -> np.ndarray:
    """obb_gap for every pair (len(A), len(B)), vectorised over the 15 SAT axes."""
    if not len(A) or not len(B):
        return np.full((len(A), len(B)), np.inf)
    Ac, AR, Ah = (np.array([getattr(a, k) for a in A]) for k in ("c", "R", "h"))
    Bc, BR, Bh = (np.array([getattr(b, k) for b in B]) for k in ("c", "R", "h"))
    return gap_arrays(Ac, AR, Ah, Bc, BR, Bh)


def gap_arrays(Ac: np.ndarray, AR: np.ndarray, Ah: np.ndarray, Bc: np.ndarray,
               BR: np.ndarray, Bh: np.ndarray) -> np.ndarray:
    """:func:`gap_matrix` of boxes given as arrays: centres (N, 3), rotations (N, 3, 3),
    half extents (N, 3) against (M, ...); for callers that hold arrays, not Box lists."""
    Aax = AR.transpose(0, 2, 1)[:, None]           # (N, 1, 3 axes, 3)
    Bax = BR.transpose(0, 2, 1)[None]              # (1, M, 3, 3)
    N, M = len(Ac), len(Bc)
    Aax = np.broadcast_to(Aax, (N, M, 3, 3))
    Bax = np.broadcast_to(Bax, (N, M, 3, 3))
    cross = cross3(Aax[:, :, :, None, :], Bax[:, :, None, :, :]).reshape(N, M, 9, 3)
    axes = np.concatenate([Aax, Bax, cross], axis=2)               # (N, M, 15, 3)
    norm = np.linalg.norm(axes, axis=-1)
    ok = norm > 1e-6
    axes = axes / np.where(ok, norm, 1.0)[..., None]
    ra = np.einsum("nmki,ni->nmk", np.abs(np.einsum("nmkj,nji->nmki", axes, AR)), Ah)
    rb = np.einsum("nmki,mi->nmk", np.abs(np.einsum("nmkj,mji->nmki", axes, BR)), Bh)
    d = np.abs(np.einsum("nmkj,nmj->nmk", axes, Bc[None] - Ac[:, None]))
    gap = np.where(ok, d - ra - rb, -np.inf)
    return gap.max(axis=2)


__all__ = ["Box", "HandModel", "gap_arrays", "gap_matrix", "obb_gap", "object_box"]
