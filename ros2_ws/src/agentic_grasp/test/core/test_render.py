"""Scene renderer: exact depth, back-projection onto surfaces, occlusion, masks and crops."""
import math

import numpy as np
import pytest

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.render.raycast import BACKGROUND_ID, TABLE_ID, TableSpec, render_scene
from agentic_grasp.core.render.views import CANONICAL_XY, open_table, render_object_crop
from agentic_grasp.core.render.crops import crop_object, object_bbox
from agentic_grasp.core.types import ObjectInstance, Shape


def make(oid, shape, position, size, **kw):
    return ObjectInstance(id=oid, category=oid, shape=shape, position=position, size=size, **kw)


@pytest.fixture(scope="module")
def camera():
    return Camera()


@pytest.fixture(scope="module")
def scene():
    return [
        make("cube", Shape.BOX, [0.55, -0.05, 0.025], [0.05, 0.05, 0.05], yaw=0.5,
             color=(200, 160, 90)),
        make("cup", Shape.CYLINDER, [0.5, 0.12, 0.045], [0.08, 0.08, 0.09],
             color=(230, 230, 220)),
        make("apple", Shape.SPHERE, [0.42, -0.18, 0.04], [0.08, 0.08, 0.08],
             color=(200, 30, 30)),
        make("banana", Shape.CYLINDER, [0.35, 0.22, 0.09], [0.04, 0.04, 0.18], yaw=0.3,
             upright=False, color=(240, 220, 50)),
        make("phone", Shape.BOX, [0.68, 0.25, 0.075], [0.07, 0.01, 0.15], yaw=-0.4,
             color=(30, 30, 30)),
        make("bottle", Shape.CYLINDER, [0.65, -0.2, 0.11], [0.07, 0.07, 0.22],
             color=(40, 120, 200)),
    ]


@pytest.fixture(scope="module")
def frame(scene, camera):
    return render_scene(scene, camera)


def pixel_point(camera, u, v, z_plane):
    """World point on the plane z = z_plane seen through the centre of pixel (u, v)."""
    d_cam = np.array([(u - camera.cx) / camera.fx, (v - camera.cy) / camera.fy, 1.0])
    d = camera.T_world_cam[:3, :3] @ d_cam
    depth = (z_plane - camera.position[2]) / d[2]      # d_cam has unit optical z
    return camera.position + depth * d, depth


def test_output_types_and_shapes(frame, camera):
    assert frame.rgb.shape == (camera.height, camera.width, 3) and frame.rgb.dtype == np.uint8
    assert frame.depth.shape == (camera.height, camera.width)
    assert frame.depth.dtype == np.float32
    assert frame.instance.dtype == np.int32
    assert set(np.unique(frame.instance)) == {BACKGROUND_ID, TABLE_ID, 0, 1, 2, 3, 4, 5}


def test_depth_of_a_box_top_matches_the_camera_model(camera):
    u, v = 300, 260
    top, expected = pixel_point(camera, u, v, 0.05)
    box = make("box", Shape.BOX, [top[0], top[1], 0.025], [0.05, 0.05, 0.05], yaw=0.3)
    result = render_scene([box], camera)
    assert result.instance[v, u] == 0
    assert result.depth[v, u] == pytest.approx(expected, abs=1e-5)
    assert expected == pytest.approx(camera.world_to_cam(top)[0, 2], abs=1e-9)
    # A pixel beside the box sees the table top, whose depth is computed the same way.
    bu, bv = object_bbox(result, 0)[0] - 5, v
    _, table_depth = pixel_point(camera, bu, bv, 0.0)
    assert result.instance[bv, bu] == TABLE_ID
    assert result.depth[bv, bu] == pytest.approx(table_depth, abs=1e-5)


def _surface_distance(obj, p):
    """Distance (m) from world point p to the surface of the drawn primitive."""
    c, s = math.cos(obj.yaw), math.sin(obj.yaw)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    centre = obj.position.astype(float).copy()
    if not obj.upright:
        R = R @ np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
        centre[2] = max(0.0, obj.position[2] - obj.size[2] / 2) + obj.size[1] / 2
    local = (p - centre) @ R
    half = obj.size / 2.0
    if obj.shape == Shape.SPHERE:
        return abs(np.linalg.norm(p - centre) - half[0])
    if obj.shape == Shape.BOX:
        outside = np.maximum(np.abs(local) - half, 0.0)
        inside = np.min(half - np.abs(local))
        return np.linalg.norm(outside) if np.any(outside > 0) else inside
    radial = math.hypot(local[0] / half[0], local[1] / half[1])
    side = abs(radial - 1.0) * half[0] if abs(local[2]) <= half[2] + 1e-9 else np.inf
    cap = abs(abs(local[2]) - half[2]) if radial <= 1.0 + 1e-9 else np.inf
    return min(side, cap)


def test_back_projected_depth_lands_on_the_object_surfaces(frame, scene, camera):
    rng = np.random.default_rng(0)
    for index, obj in enumerate(scene):
        vs, us = np.nonzero(frame.instance == index)
        assert us.size > 30, obj.id
        for k in rng.choice(us.size, size=min(60, us.size), replace=False):
            p = camera.backproject(us[k], vs[k], float(frame.depth[vs[k], us[k]]))
            assert _surface_distance(obj, p) < 2e-3, (obj.id, p)
    vs, us = np.nonzero(frame.instance == TABLE_ID)
    for k in rng.choice(us.size, size=60, replace=False):
        p = camera.backproject(us[k], vs[k], float(frame.depth[vs[k], us[k]]))
        assert 0.2 - 2e-3 <= p[0] <= 0.8 + 2e-3 and -0.4 - 2e-3 <= p[1] <= 0.4 + 2e-3
        assert -0.04 - 2e-3 <= p[2] <= 2e-3


def test_tall_box_occludes_a_sphere_behind_it(camera):
    sphere = make("ball", Shape.SPHERE, [0.4, 0.0, 0.03], [0.06, 0.06, 0.06])
    wall = make("wall", Shape.BOX, [0.6, 0.0, 0.15], [0.08, 0.2, 0.3])
    alone = render_scene([sphere], camera)
    hidden = render_scene([sphere, wall], camera)
    assert np.count_nonzero(alone.instance == 0) > 300
    assert np.count_nonzero(hidden.instance == 0) == 0
    assert object_bbox(hidden, 0) is None
    assert crop_object(hidden, 0) is None
    # Where the sphere was seen, the wall is now nearer.
    seen = alone.instance == 0
    assert np.all(hidden.instance[seen] == 1)
    assert np.all(hidden.depth[seen] < alone.depth[seen])


def test_instance_masks_and_background(frame, scene, camera):
    for index, obj in enumerate(scene):
        centre = obj.position.copy()
        if not obj.upright:
            centre[2] = obj.size[1] / 2          # lying on the table
        uv, _ = camera.project(centre[None, :])
        u, v = (int(round(c)) for c in uv[0])
        # The centre of each (unoccluded) object is labelled with its index.
        assert frame.instance[v, u] == index, obj.id
    corner, _ = camera.project(np.array([[0.25, -0.35, 0.0]]))
    assert frame.instance[int(corner[0, 1]), int(corner[0, 0])] == TABLE_ID
    assert frame.instance[0, 0] == BACKGROUND_ID       # the floor beyond the table
    floor = frame.instance == BACKGROUND_ID
    assert np.all(frame.depth[floor] > 0.0)            # the floor is within range
    assert np.all(frame.depth[frame.instance >= TABLE_ID] > 0.0)


def test_nothing_within_range_gives_zero_depth(scene):
    # Tilt the camera up so that the upper rows look over the floor's 5 m range.
    cam = Camera.from_config({"eye": (1.15, 0.0, 0.75), "target": (0.0, 0.0, 0.6)})
    result = render_scene(scene, cam)
    assert np.all(result.depth[0] == 0.0)
    assert np.all(result.instance[0] == BACKGROUND_ID)
    assert np.all(result.depth[-1] > 0.0)


def test_lying_cylinder_is_rendered_lower_than_upright(camera):
    upright = make("b", Shape.CYLINDER, [0.5, 0.0, 0.09], [0.04, 0.04, 0.18])
    lying = make("b", Shape.CYLINDER, [0.5, 0.0, 0.09], [0.04, 0.04, 0.18], upright=False)

    def top_z(obj):
        r = render_scene([obj], camera)
        vs, us = np.nonzero(r.instance == 0)
        pts = np.array([camera.backproject(u, v, float(r.depth[v, u]))
                        for u, v in zip(us[::7], vs[::7])])
        return pts[:, 2].max(), pts

    z_up, _ = top_z(upright)
    z_lying, pts = top_z(lying)
    assert z_up == pytest.approx(0.18, abs=2e-3)
    assert z_lying == pytest.approx(0.04, abs=2e-3)
    # Lying along the object's y direction (world y for yaw 0), resting on the table.
    assert np.ptp(pts[:, 1]) > 0.15 and np.ptp(pts[:, 0]) < 0.05
    assert pts[:, 2].min() > -1e-3


def test_crops_have_the_requested_shape(frame, scene):
    for index in range(len(scene)):
        crop = crop_object(frame, index, size=48)
        assert crop.shape == (48, 48, 3) and crop.dtype == np.uint8
    u0, v0, u1, v1 = object_bbox(frame, 2)
    assert u1 > u0 and v1 > v0
    # The apple crop is dominated by its red colour.
    apple = crop_object(frame, 2).reshape(-1, 3).astype(int)
    assert np.mean((apple[:, 0] > 120) & (apple[:, 1] < 60)) > 0.3
    with pytest.raises(ValidationError):
        crop_object(frame, 0, size=0)


def test_render_object_crop_matches_a_full_scene_crop(scene, camera):
    for obj in scene:
        crop = render_object_crop(obj, camera)
        assert crop.shape == (64, 64, 3) and crop.dtype == np.uint8
        placed = obj.copy()
        placed.position = np.array([CANONICAL_XY[0], CANONICAL_XY[1], obj.size[2] / 2])
        full = render_scene([placed], camera, open_table(TableSpec()))
        np.testing.assert_array_equal(crop, crop_object(full, 0, camera=camera))


def test_damaged_objects_are_darker(camera):
    cup = make("cup", Shape.CYLINDER, [0.5, 0.0, 0.045], [0.08, 0.08, 0.09],
               color=(230, 230, 220))
    broken = cup.copy()
    broken.damaged = True
    a, b = render_scene([cup], camera), render_scene([broken], camera)
    mask = a.instance == 0
    assert np.array_equal(mask, b.instance == 0)
    assert b.rgb[mask].mean() < 0.85 * a.rgb[mask].mean()


def test_rendering_is_deterministic_and_noise_is_seeded(scene, camera):
    a, b = render_scene(scene, camera), render_scene(scene, camera)
    np.testing.assert_array_equal(a.rgb, b.rgb)
    np.testing.assert_array_equal(a.depth, b.depth)
    n1 = render_scene(scene, camera, depth_noise_std=0.002, rng=np.random.default_rng(3))
    n2 = render_scene(scene, camera, depth_noise_std=0.002, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(n1.depth, n2.depth)
    valid = a.depth > 0
    diff = (n1.depth - a.depth)[valid]
    assert abs(diff.mean()) < 2e-4 and diff.std() == pytest.approx(0.002, rel=0.05)
    np.testing.assert_array_equal(n1.rgb, a.rgb)
    with pytest.raises(ValidationError):
        render_scene(scene, camera, depth_noise_std=-1.0)


def test_custom_table_and_lighting(camera):
    table = TableSpec(x_min=0.3, x_max=0.6, color=(10, 200, 10))
    result = render_scene([], camera, table)
    green = result.rgb[result.instance == TABLE_ID]
    assert green.size and np.all(green[:, 1] > green[:, 0])
    # The table top faces the light more than its front edge: brighter.
    top = result.rgb[240, 320].astype(int)
    assert result.instance[240, 320] == TABLE_ID and top[1] > 150
    with pytest.raises(ValidationError):
        TableSpec(x_min=0.5, x_max=0.4)


def test_render_view_frame_cache_is_exact_and_keyed_on_every_object_field(scene, camera):
    """A cached frame equals a fresh render, is the caller's own copy, and a moved
    object or a changed colour is not served from the cache."""
    from agentic_grasp.core.render import views as render

    render._VIEW_CACHE.clear()
    first = render.render_view(scene, camera)
    again = render.render_view(scene, camera)                 # from the cache
    render._VIEW_CACHE.clear()
    fresh = render.render_view(scene, camera)
    for a, b, c in ((first.rgb, again.rgb, fresh.rgb), (first.depth, again.depth, fresh.depth),
                    (first.instance, again.instance, fresh.instance)):
        assert np.array_equal(a, b) and np.array_equal(b, c)
    again.depth[:] = 0.0                                      # a copy: the cache is intact
    assert np.array_equal(render.render_view(scene, camera).depth, fresh.depth)
    moved = [o.copy() for o in scene]
    moved[0].position = moved[0].position + np.array([0.01, 0.0, 0.0])
    render._VIEW_CACHE.clear()
    want = render.render_view(moved, camera)
    render.render_view(scene, camera)
    assert np.array_equal(render.render_view(moved, camera).depth, want.depth)
    recoloured = [o.copy() for o in scene]
    recoloured[1].color = (10, 10, 10)
    assert not np.array_equal(render.render_view(recoloured, camera).rgb, fresh.rgb)
