"""Ray-primitive intersection for the renderer (:mod:`agentic_grasp.core.render.raycast`).

Each function takes ray origins ``o`` and directions ``d`` already in the primitive's local
frame (its centre at the origin), its half extents and the light direction in that frame,
and returns the ray parameter of the nearest entry (inf where a ray misses) and the
Lambert factor (normal . light) there. Vectorised numpy over all the rays of a pixel
rectangle.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np


def hit_box(o: np.ndarray, d: np.ndarray, half: np.ndarray, light: np.ndarray
             ) -> Tuple[np.ndarray, np.ndarray]:
    """Slab test in the box frame: entry distance (inf on a miss) and the Lambert factor.

    ``o`` is the ray origin and ``light`` the light direction, both in the box frame; ``d``
    holds the (..., 3) ray directions.
    """
    t_in = t_out = None
    ndotl = None
    for k in range(3):
        dk = d[..., k]
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / dk
            t1 = (-half[k] - o[k]) * inv
            t2 = (half[k] - o[k]) * inv
        near, far = np.minimum(t1, t2), np.maximum(t1, t2)
        face = np.where(dk > 0.0, -light[k], light[k])   # the entry face's normal . light
        if t_in is None:
            t_in, t_out, ndotl = near, far, face
        else:
            later = near > t_in
            t_in = np.where(later, near, t_in)
            ndotl = np.where(later, face, ndotl)
            t_out = np.minimum(t_out, far)
    hit = (t_in <= t_out) & (t_in > 0.0)
    return np.where(hit, t_in, np.inf), ndotl


def hit_cylinder(o: np.ndarray, d: np.ndarray, half: np.ndarray, light: np.ndarray
                  ) -> Tuple[np.ndarray, np.ndarray]:
    """Elliptic cylinder (radii half[0], half[1], axis z, half height half[2])."""
    rx, ry, hz = half
    ox, oy, oz = o[0] / rx, o[1] / ry, o[2]
    dx, dy, dz = d[..., 0] / rx, d[..., 1] / ry, d[..., 2]
    a = dx * dx + dy * dy
    b = ox * dx + oy * dy
    c = ox * ox + oy * oy - 1.0
    disc = b * b - a * c
    with np.errstate(divide="ignore", invalid="ignore"):
        t_side = (-b - np.sqrt(np.maximum(disc, 0.0))) / a
        side_ok = (disc >= 0.0) & (a > 1e-15) & (t_side > 0.0) & \
            (np.abs(oz + t_side * dz) <= hz)
        t_cap = np.where(dz < 0.0, (hz - oz) / dz, (-hz - oz) / dz)   # the cap facing the ray
    cx, cy = ox + t_cap * dx, oy + t_cap * dy
    cap_ok = np.isfinite(t_cap) & (t_cap > 0.0) & (cx * cx + cy * cy <= 1.0)
    t_side = np.where(side_ok, t_side, np.inf)
    t_cap = np.where(cap_ok, t_cap, np.inf)
    # Side normal: gradient of (x / rx)^2 + (y / ry)^2, i.e. (X / rx, Y / ry) / (rx, ry)
    # in the scaled coordinates X = x / rx, Y = y / ry of the hit point.
    sx, sy = (ox + t_side * dx) / rx, (oy + t_side * dy) / ry
    with np.errstate(invalid="ignore"):
        side_dot = (sx * light[0] + sy * light[1]) / np.sqrt(sx * sx + sy * sy)
    cap_dot = np.where(dz < 0.0, light[2], -light[2])
    use_cap = t_cap < t_side
    return np.minimum(t_side, t_cap), np.where(use_cap, cap_dot, side_dot)


def hit_hollow_cylinder(o: np.ndarray, d: np.ndarray, half: np.ndarray, light: np.ndarray,
                         wall: float, floor: float) -> Tuple[np.ndarray, np.ndarray]:
    """A cylinder open towards +z with a ``wall`` thick side and a cavity floor ``floor``
    above its bottom: outer side, bottom, the rim annulus, the inner wall (seen from inside)
    and the cavity floor. The camera is outside the object, so the nearest of these hits is
    the visible surface (a ray reaches the inner wall or the floor only through the opening,
    or meets a nearer outer face first)."""
    rx, ry, hz = half
    ix, iy = max(rx - wall, 1e-6), max(ry - wall, 1e-6)
    zf = -hz + min(floor, 2.0 * hz)
    t_out, n_out = hit_cylinder(o, d, half, light)
    # The outer top cap is a hit only on the rim annulus (outside the inner ellipse).
    dx, dy, dz = d[..., 0], d[..., 1], d[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        t_top = (hz - o[2]) / dz
        hx, hy = (o[0] + t_out * dx) / ix, (o[1] + t_out * dy) / iy
    on_top = np.isfinite(t_out) & (np.abs(t_out - t_top) <= 1e-9) & (dz < 0.0)
    t_out = np.where(on_top & (hx * hx + hy * hy < 1.0), np.inf, t_out)
    # Inner wall: where the ray leaves the inner cylinder, between the floor and the rim.
    sx, sy = o[0] / ix, o[1] / iy
    ex, ey = dx / ix, dy / iy
    a = ex * ex + ey * ey
    b = sx * ex + sy * ey
    c = sx * sx + sy * sy - 1.0
    disc = b * b - a * c
    with np.errstate(divide="ignore", invalid="ignore"):
        t_in = (-b + np.sqrt(np.maximum(disc, 0.0))) / a
        z_in = o[2] + t_in * dz
        wall_ok = (disc >= 0.0) & (a > 1e-15) & (t_in > 0.0) & (z_in >= zf) & (z_in <= hz)
        t_floor = (zf - o[2]) / dz
        fx, fy = sx + t_floor * ex, sy + t_floor * ey
    t_in = np.where(wall_ok, t_in, np.inf)
    floor_ok = (dz < 0.0) & np.isfinite(t_floor) & (t_floor > 0.0) & (fx * fx + fy * fy <= 1.0)
    t_floor = np.where(floor_ok, t_floor, np.inf)
    with np.errstate(invalid="ignore"):
        px, py = (sx + t_in * ex) / ix, (sy + t_in * ey) / iy
        in_dot = -(px * light[0] + py * light[1]) / np.sqrt(px * px + py * py)
    t = np.minimum(np.minimum(t_out, t_in), t_floor)
    ndotl = np.where(t == t_out, n_out, np.where(t == t_in, in_dot, light[2]))
    return t, ndotl


def hit_sphere(o: np.ndarray, d: np.ndarray, radius: float, light: np.ndarray
                ) -> Tuple[np.ndarray, np.ndarray]:
    b = d @ o
    c = float(o @ o) - radius * radius
    disc = b * b - c
    t = -b - np.sqrt(np.maximum(disc, 0.0))
    hit = (disc >= 0.0) & (t > 0.0)
    ndotl = (float(o @ light) + t * (d @ light)) / radius
    return np.where(hit, t, np.inf), ndotl


__all__ = ["hit_box", "hit_cylinder", "hit_hollow_cylinder", "hit_sphere"]
