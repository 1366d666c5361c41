"""Where the fingers meet the target: landing during the descent, contact patches on closing.

Rays run along the closing axis (gripper y) from a grid over the finger's cross-section:
columns across the finger width (gripper x), rows along the finger (gripper z) from the
fingertip back over the whole descent. What the rays find decides, with no other input:
- whether a finger lands on the object on the way down (material where a finger sweeps);
- the width of material the fingers must enclose and its offset from the TCP;
- where each finger touches when closing (the outermost material inside the opening), the
  contact patch (rays within the pad's rubber compliance of that point), whether it lies on
  the rubber pad or on its rounded tip, and the surface normal there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Tuple

import numpy as np

from agentic_grasp.core.sim.collision import RayHits, Solid, cast_all, support_width
from agentic_grasp.core.sim.params import PhysicsParams
from agentic_grasp.core.types import GRIPPER_MAX_WIDTH_M


@dataclass
class Patch:
    """Contact of one finger: patch centre/extent in the gripper frame, outward normal."""

    normal: np.ndarray
    x: float
    z: float
    span_x: float
    span_z: float
    solid: int
    on_pad: bool
    edge_only: bool

    @property
    def radius(self) -> float:
        """Radius of the disc with the patch's area (torsional friction lever)."""
        return math.sqrt(max(self.span_x * self.span_z, 0.0) / math.pi)


@dataclass
class ContactGeometry:
    landed: bool = False
    land_s: float = math.inf          # descent travelled when a finger lands (m)
    land_extent: float = math.nan     # material width where it lands (m)
    land_sides: tuple = ()            # the fingers (+1 / -1 along the closing axis) that land
    extent: float = math.nan          # material width between the finger faces (m)
    offset: float = math.nan          # centre of that material along the closing axis (m)
    pad_x: float = math.nan           # centre of the material on the pad (gripper x, z)
    pad_z: float = math.nan
    width_along: float = math.nan     # widths of the touched solids along / across the
    width_across: float = math.nan    # closing axis (orientation diagnosis)
    y_plus: float = math.nan          # closing contact coordinates (m)
    y_minus: float = math.nan
    patches: List[Patch] = field(default_factory=list)
    solids: List[int] = field(default_factory=list)

    @property
    def closed_on_material(self) -> bool:
        return len(self.patches) == 2


_GRIDS: dict = {}


def ray_grid(params: PhysicsParams, z_start: float) -> Tuple[np.ndarray, ...]:
    """Ray origins (gripper x, z; y = 0) over the finger cross-section, rows from the tip
    back to ``z_start``, with masks of the rays on the finger face and on the rubber pad.
    Grids depend only on the finger geometry and the row count, so they are cached.
    """
    n_rows = max(1, int(math.floor((params.z_tip - z_start) / params.ray_spacing_m)) + 1)
    key = (params.finger_width_m, params.ray_columns, params.ray_spacing_m, params.z_tip, n_rows)
    grid = _GRIDS.get(key)
    if grid is None:
        cols = np.linspace(-params.finger_width_m / 2.0, params.finger_width_m / 2.0,
                           params.ray_columns)
        rows = params.z_tip - params.ray_spacing_m * np.arange(n_rows)
        gx, gz = np.meshgrid(cols, rows)
        xs, zs = gx.ravel(), gz.ravel()
        face = zs >= params.z_palm - 1e-9
        pad = (np.abs(zs) <= params.pad_depth_m / 2.0 + 1e-9) \
            & (np.abs(xs) <= params.pad_width_m / 2.0 + 1e-9)
        grid = (xs, zs, face, pad, np.vstack([xs, zs]))
        for arr in grid:
            arr.setflags(write=False)
        if len(_GRIDS) < 512:
            _GRIDS[key] = grid
    return grid


def analyse(solids: List[Solid], R: np.ndarray, p: np.ndarray, opening: float,
            approach_height: float, params: PhysicsParams) -> ContactGeometry:
    """Finger/target interaction for a gripper at TCP pose (R, p) with the given opening."""
    geo = ContactGeometry()
    if not solids:
        return geo
    z_axis = R[:, 2]
    z_lo = min(float((s.c - p) @ z_axis) - support_width(s, z_axis) / 2.0 for s in solids)
    z_start = max(params.z_palm - approach_height, z_lo)
    if z_start > params.z_tip:
        return geo
    xs, zs, face, pad_rows, xz = ray_grid(params, z_start)
    hits = cast_all(solids, xs, zs, xz, R, p)
    if hits is None:
        return geo
    t_in, t_out = hits.t_in, hits.t_out          # (K, N); NaN where no material
    half, thick = opening / 2.0, params.finger_thickness_m
    inner = half - params.finger_clearance_m
    # the widest material the hand could ever enclose: full aperture plus the fingers
    window = max(GRIPPER_MAX_WIDTH_M / 2.0, half) + thick
    # --- landing: material where a finger sweeps on the way down
    plus = (t_in < half + thick) & (t_out > inner)
    minus = (t_in < -inner) & (t_out > -half - thick)
    land = plus | minus
    land_rays = land.any(axis=0)
    if land_rays.any():
        z_land = float(zs[land_rays].min())
        geo.landed = True
        geo.land_s = max(0.0, approach_height - (params.z_tip - z_land))
        rows = np.abs(zs - z_land) < 1e-9
        geo.land_extent = _span(t_in[:, rows], t_out[:, rows], window)
        # which fingers met material first (what the landing pushes on: the sensor model)
        geo.land_sides = tuple(side for side, mask in ((1, plus), (-1, minus))
                               if bool(mask[:, rows].any()))
    # --- material between the finger faces (within what the aperture could ever enclose)
    in_win = face & (t_out > -window) & (t_in < window)
    cols = in_win.any(axis=1)
    if cols.any():
        geo.solids = sorted(set(hits.solid[cols].tolist()))
        hi = float(np.minimum(t_out, window)[in_win].max())
        lo = float(np.maximum(t_in, -window)[in_win].min())
        geo.extent, geo.offset = hi - lo, (hi + lo) / 2.0
        sel = pad_rows & in_win.any(axis=0)
        if sel.any():
            geo.pad_x, geo.pad_z = float(xs[sel].mean()), float(zs[sel].mean())
        y_axis, x_axis = R[:, 1], R[:, 0]
        geo.width_along = max(support_width(solids[k], y_axis) for k in geo.solids)
        geo.width_across = max(support_width(solids[k], x_axis) for k in geo.solids)
    if geo.landed:
        return geo
    # --- closing: each finger stops at the outermost material inside the opening
    inside = face & (t_in > -inner) & (t_out < inner)
    reach_plus = np.where(inside, t_out, -np.inf).max(axis=0)     # per ray, towards +y
    reach_minus = np.where(inside, t_in, np.inf).min(axis=0)
    geo.y_plus, geo.y_minus = float(reach_plus.max()), float(reach_minus.min())
    if not math.isfinite(geo.y_plus):
        geo.y_plus = geo.y_minus = math.nan
        return geo
    geo.patches = [_patch(hits, inside, t_out, reach_plus, geo.y_plus, +1.0, xs, zs, pad_rows,
                          params),
                   _patch(hits, inside, t_in, -reach_minus, -geo.y_minus, -1.0, xs, zs,
                          pad_rows, params)]
    return geo


def _span(t_in: np.ndarray, t_out: np.ndarray, window: float) -> float:
    m = (t_out > -window) & (t_in < window)
    if not m.any():
        return math.nan
    return float(np.minimum(t_out, window)[m].max() - np.maximum(t_in, -window)[m].min())


def _patch(hits: RayHits, inside: np.ndarray, t: np.ndarray, reach: np.ndarray,
           depth: float, side: float, xs: np.ndarray, zs: np.ndarray, pad_rows: np.ndarray,
           params: PhysicsParams) -> Patch:
    """The patch of one finger: rays whose material reaches within the pad compliance of the
    contact. ``reach`` is, per ray, how far the material extends towards this finger (signed
    so that larger is closer) and ``depth`` its maximum."""
    near = reach >= depth - params.pad_compliance_m
    pad = near & pad_rows
    on_pad = bool(pad.any())
    rays = np.flatnonzero(pad if on_pad else near)
    px, pz = xs[rays], zs[rays]
    col_step = params.finger_width_m / (params.ray_columns - 1)
    x_lo, x_hi, z_lo, z_hi = float(px.min()), float(px.max()), float(pz.min()), float(pz.max())
    span_x = min(x_hi - x_lo + col_step, params.pad_width_m if on_pad else 1.0)
    span_z = min(z_hi - z_lo + params.ray_spacing_m,
                 params.pad_depth_m if on_pad else params.finger_length_m)
    edge_only = on_pad and z_lo >= params.z_tip - params.pad_edge_m - 1e-9
    corner = False
    if edge_only:
        # Only the rounded fingertip touches. If the object's surface goes on above the
        # patch close to the pad (a curved body) the contact normal is the surface's; if
        # it ends there (an edge or corner) the pad's rounded tip sets it: the bevel.
        above = (zs < z_lo - 1e-9) & (zs >= z_lo - params.ray_spacing_m - 1e-9)
        corner = not bool((above & (reach >= depth - params.pad_edge_m)).any())
    # representative ray: the one nearest the patch centre; its outermost interval
    ray = int(rays[np.argmin(np.abs(px - (x_lo + x_hi) / 2.0) + np.abs(pz - (z_lo + z_hi) / 2.0))])
    col = int(np.argmax(np.where(inside[:, ray], side * t[:, ray], -np.inf)))
    if corner:
        normal = np.array([0.0, side, -params.pad_edge_tan])
    else:
        normal = hits.normal_at(col, ray, float(t[col, ray]))
    norm = math.sqrt(float(normal @ normal))
    normal = normal / norm if norm > 1e-9 else np.array([0.0, side, 0.0])
    return Patch(normal, (x_lo + x_hi) / 2.0, (z_lo + z_hi) / 2.0, span_x, span_z,
                 int(hits.solid[col]), on_pad, edge_only)
