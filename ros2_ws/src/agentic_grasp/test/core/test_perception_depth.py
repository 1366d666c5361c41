"""Depth back-projection, robust depth and object centre/size estimation."""
import math

import numpy as np
import pytest

from agentic_grasp.core.camera import Camera, backproject_many
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.perception.config import DepthConfig
from agentic_grasp.core.perception.depth import estimate_geometry, robust_depth

CFG = DepthConfig()

# Camera() defaults, by hand: eye E = (1.15, 0, 0.75) looking at (0.5, 0, 0).
# forward f = (-0.65, 0, -0.75) / sqrt(0.65^2 + 0.75^2) = (-0.654931, 0, -0.755689),
# right (optical x) = f x up, normalised = (0, 1, 0); down (optical y) = f x right
# = (0.755689, 0, -0.654931). fx = fy = 554.26, cx = 319.5, cy = 239.5.
EYE = np.array([1.15, 0.0, 0.75])
DIST = math.hypot(0.65, 0.75)                      # 0.992472, eye to the look-at point
FWD = np.array([-0.65, 0.0, -0.75]) / DIST
DOWN = np.array([0.75, 0.0, -0.65]) / DIST


def render(camera, shapes):
    """Depth and object-index images: table (x 0.2..0.8, y -0.4..0.4, z = 0) + shapes.

    ("box", centre, size) is axis aligned; ("cyl", (x, y), radius, height) stands on z = 0.
    """
    d = camera.pixel_rays().reshape(-1, 3)
    o = camera.position
    t = np.full(len(d), np.inf)
    ids = np.full(len(d), -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tp = -o[2] / d[:, 2]
        p = o + tp[:, None] * d
        on = (tp > 0) & (np.abs(p[:, 0] - 0.5) <= 0.3) & (np.abs(p[:, 1]) <= 0.4)
        t[on] = tp[on]
        for k, shape in enumerate(shapes):
            if shape[0] == "box":
                c, s = np.asarray(shape[1], float), np.asarray(shape[2], float)
                t1, t2 = (c - s / 2 - o) / d, (c + s / 2 - o) / d
                th = np.max(np.minimum(t1, t2), axis=1)
                hit = (np.min(np.maximum(t1, t2), axis=1) >= th) & (th > 0)
            else:
                (cx, cy), r, height = shape[1], shape[2], shape[3]
                ox, oy = o[0] - cx, o[1] - cy
                a = d[:, 0] ** 2 + d[:, 1] ** 2
                b = 2 * (ox * d[:, 0] + oy * d[:, 1])
                disc = b * b - 4 * a * (ox * ox + oy * oy - r * r)
                ts = (-b - np.sqrt(disc)) / (2 * a)
                z = o[2] + ts * d[:, 2]
                side = (disc >= 0) & (ts > 0) & (z >= 0) & (z <= height)
                tc = (height - o[2]) / d[:, 2]
                pc = o + tc[:, None] * d
                cap = (tc > 0) & ((pc[:, 0] - cx) ** 2 + (pc[:, 1] - cy) ** 2 <= r * r)
                th = np.where(side, ts, np.where(cap, tc, np.inf))
                hit = side | cap
            sel = hit & (th < t)
            t[sel], ids[sel] = th[sel], k
    depth = t * (d @ camera.T_world_cam[:3, 2])
    depth[~np.isfinite(depth)] = 0.0
    return depth.reshape(camera.height, camera.width).astype(np.float32), \
        ids.reshape(camera.height, camera.width)


def tight_box(ids, k):
    vs, us = np.nonzero(ids == k)
    return int(us.min()), int(vs.min()), int(us.max()), int(vs.max())


def test_backproject_principal_point_hits_the_look_at_point():
    cam = Camera()
    np.testing.assert_allclose(cam.backproject(319.5, 239.5, DIST), [0.5, 0.0, 0.0],
                               atol=1e-6)


def test_backproject_offset_pixels_by_hand():
    cam = Camera()
    # u = cx + 0.1 fx at depth 1 m: 1 m along forward plus 0.1 m to the right (+y world).
    expected = EYE + 1.0 * FWD + 0.1 * np.array([0.0, 1.0, 0.0])
    np.testing.assert_allclose(expected, [0.495069, 0.1, -0.005689], atol=1e-6)
    np.testing.assert_allclose(cam.backproject(319.5 + 55.426, 239.5, 1.0), expected,
                               atol=1e-6)
    # v = cy + 0.2 fy at depth 0.8 m: 0.8 forward plus 0.16 down the image.
    expected = EYE + 0.8 * FWD + 0.16 * DOWN
    np.testing.assert_allclose(cam.backproject(319.5, 239.5 + 110.852, 0.8), expected,
                               atol=1e-6)
    many = backproject_many(cam, np.array([319.5 + 55.426, 319.5]),
                            np.array([239.5, 239.5 + 110.852]), np.array([1.0, 0.8]))
    np.testing.assert_allclose(many[1], expected, atol=1e-6)


def test_robust_depth_ignores_invalid_samples_and_outliers():
    depth = np.full((480, 640), 0.9, dtype=np.float32)
    depth[100:107, 200:207] = [[0.80, 0.81, 0.0, 0.82, np.nan, 0.83, 0.80]] * 7
    depth[103, 203] = 3.5                  # a far outlier (background) replaces one 0.82
    z, source, support = robust_depth(depth, 203, 103, CFG)
    valid = [0.80, 0.81, 0.82, 0.83, 0.80] * 7
    valid.remove(0.82)
    valid.append(3.5)
    assert source == "window"
    assert z == pytest.approx(np.median(valid), abs=1e-6) and z < 0.83
    assert support == pytest.approx(35 / 49)      # 0.0 and NaN columns are no returns


def test_robust_depth_falls_back_to_the_near_part_of_the_box():
    depth = np.zeros((480, 640), dtype=np.float32)
    depth[50:60, 50:80] = 1.2                              # table behind
    depth[50:60, 80:90] = 0.7                              # object, nearer
    z, source, support = robust_depth(depth, 30, 30, CFG, bbox=(50, 50, 89, 59))
    assert (z, source, support) == (pytest.approx(0.7), "bbox", 0.0)
    assert robust_depth(depth, 30, 30, CFG) == (None, "", 0.0)
    assert robust_depth(depth, 900, 30, CFG, bbox=(700, 10, 800, 20))[0] is None


@pytest.mark.parametrize("x, y, radius, height", [
    (0.50, 0.10, 0.040, 0.09),      # ceramic cup, 8 x 8 x 9 cm
    (0.35, -0.15, 0.035, 0.22),     # plastic bottle, 7 x 7 x 22 cm (tall)
    (0.70, 0.25, 0.0325, 0.065),    # tennis-ball-sized can, far corner
])
def test_cylinder_centre_and_size_from_depth(x, y, radius, height):
    cam = Camera()
    depth, ids = render(cam, [("cyl", (x, y), radius, height)])
    centre = np.array([x, y, height / 2])
    uv, _ = cam.project(centre[None])
    geom = estimate_geometry(depth, cam, uv[0], tight_box(ids, 0), CFG)
    assert geom.notes == [] and geom.depth_source == "window"
    assert np.linalg.norm(geom.position - centre) < 0.01
    assert geom.size[2] == pytest.approx(height, abs=0.005)
    assert geom.size[0] == pytest.approx(2 * radius, abs=0.01)
    # The surface point is on the object's front, about a radius nearer the camera.
    assert np.linalg.norm(geom.surface_point[:2] - centre[:2]) == pytest.approx(radius,
                                                                                 abs=0.01)


def test_stacked_box_keeps_its_bottom_off_the_table():
    cam = Camera()
    lower = ("box", (0.5, 0.0, 0.03), (0.12, 0.12, 0.06))
    upper = ("box", (0.5, 0.0, 0.085), (0.05, 0.05, 0.05))
    depth, ids = render(cam, [lower, upper])
    uv, _ = cam.project(np.array([[0.5, 0.0, 0.085]]))
    geom = estimate_geometry(depth, cam, uv[0], tight_box(ids, 1), CFG)
    assert geom.position[2] == pytest.approx(0.085, abs=0.01)
    assert geom.size[2] == pytest.approx(0.05, abs=0.01)
    np.testing.assert_allclose(geom.position[:2], [0.5, 0.0], atol=0.01)


def test_without_a_box_the_object_is_found_around_the_point():
    cam = Camera()
    depth, _ = render(cam, [("box", (0.5, 0.0, 0.025), (0.05, 0.05, 0.05))])
    uv, _ = cam.project(np.array([[0.5, 0.0, 0.025]]))
    geom = estimate_geometry(depth, cam, uv[0], None, CFG)
    assert any("no box" in n for n in geom.notes) and geom.n_points > CFG.min_object_points
    assert np.linalg.norm(geom.position - [0.5, 0.0, 0.025]) < 0.005


def test_without_object_points_the_estimate_is_coarse_but_present():
    cam = Camera()
    # 3 mm high: below min_height_above_table_m, so no point survives the table filter.
    depth, ids = render(cam, [("box", (0.5, 0.0, 0.0015), (0.05, 0.05, 0.003))])
    uv, _ = cam.project(np.array([[0.5, 0.0, 0.0015]]))
    geom = estimate_geometry(depth, cam, uv[0], tight_box(ids, 0), CFG)
    assert any("only 0 object points" in n for n in geom.notes) and geom.n_points == 0
    assert np.linalg.norm(geom.position - [0.5, 0.0, 0.0015]) < 0.05


def test_no_depth_anywhere_gives_none():
    cam = Camera()
    empty = np.full((480, 640), np.nan, dtype=np.float32)
    assert estimate_geometry(empty, cam, (320, 240), (300, 220, 340, 260), CFG) is None


def test_depth_config_rejects_typos_and_bad_values():
    with pytest.raises(ConfigError, match="unknown"):
        DepthConfig.from_params({"window_radius": 3})
    with pytest.raises(ConfigError):
        DepthConfig(min_depth_m=2.0, max_depth_m=1.0)
    cfg = DepthConfig.from_params({"window_radius_px": 5.0, "table_z": "0.01"})
    assert cfg.window_radius_px == 5 and isinstance(cfg.window_radius_px, int)
    assert cfg.table_z == 0.01
