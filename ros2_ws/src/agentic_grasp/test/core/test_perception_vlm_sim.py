"""The simulated VLM (core/perception/vlm/sim.py) and the re-perception policy.

Scenes are rendered with the real renderer; the simulated VLM gets only the object-id mask
and the labels, and its answer goes through the real client's checks and depth geometry.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.perception import create_backend, load_params
from agentic_grasp.core.perception.vlm import schema
from agentic_grasp.core.perception.reperception import ReperceivingPerception, depth_change
from agentic_grasp.core.perception.config import ReperceptionConfig
from agentic_grasp.core.perception.vlm.config import VlmLatencyModel, VlmSimConfig
from agentic_grasp.core.perception.vlm.sim import VlmSimBackend, count_tokens, visible_objects
from agentic_grasp.core.render.crops import object_bbox
from agentic_grasp.core.render.raycast import render_scene
from agentic_grasp.core.render.views import render_view
from agentic_grasp.core.types import (AffordanceDescriptor, AffordanceType, ObjectInstance,
                                      Shape)

CUP = "pick up the ceramic cup"


def _scene():
    return [
        ObjectInstance(id="cup_1", category="cup", name="ceramic cup", shape=Shape.CYLINDER,
                       position=np.array([0.50, 0.10, 0.05]), size=np.array([0.08, 0.08, 0.10]),
                       material="ceramic", fragility=0.3, color=(200, 60, 40),
                       affordance=AffordanceDescriptor(AffordanceType.GRASPABLE_HANDLE,
                                                       "ceramic", 0.3, "handle")),
        ObjectInstance(id="glass_1", category="wine_glass", name="wine glass",
                       shape=Shape.CYLINDER, position=np.array([0.42, -0.12, 0.09]),
                       size=np.array([0.07, 0.07, 0.18]), fragility=0.9, color=(200, 220, 230),
                       affordance=AffordanceDescriptor(AffordanceType.FRAGILE, "glass", 0.9,
                                                       "stem")),
        ObjectInstance(id="cube_1", category="cube", name="wood cube", shape=Shape.BOX,
                       position=np.array([0.65, -0.02, 0.025]),
                       size=np.array([0.05, 0.05, 0.05]), material="wood", fragility=0.0,
                       color=(190, 150, 90),
                       affordance=AffordanceDescriptor(AffordanceType.GRASPABLE_BODY, "wood",
                                                       0.0, "body")),
    ]


class _Eyes:
    """A camera on a list of objects: render, then hand the mask and labels to vlm_sim."""

    def __init__(self, objects):
        self.camera = Camera()
        self.objects = objects
        self.frame = render_scene(objects, self.camera)

    def rerender(self):
        self.frame = render_scene(self.objects, self.camera)

    def segmentation(self, _camera):
        return self.frame.instance, self.objects


def _backend(eyes, **errors) -> VlmSimBackend:
    params = load_params()
    return create_backend({**params, "backend": "vlm_sim",
                           "vlm_sim": {**params["vlm_sim"], **errors}},
                          segmentation_provider=eyes.segmentation, seed=3)


ZERO = dict(point_std=0.0, box_std=0.0, category_confusion_prob=0.0,
            affordance_confusion_prob=0.0, state_error_prob=0.0, fragility_std=0.0,
            miss_prob_small=0.0)


def test_zero_noise_answer_points_at_the_visible_pixels_and_depth_gives_the_metres():
    eyes = _Eyes(_scene())
    backend = _backend(eyes, **ZERO)
    result = backend.perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, CUP)
    assert result.ok, result.error
    assert result.backend == "vlm_sim" and result.target.id == "cup_1"
    assert result.requests == 1 and result.completion_tokens == count_tokens(result.raw)
    answer = json.loads(result.raw)
    assert schema.schema_errors(answer) == []
    truth = {o.id: o for o in eyes.objects}
    for k, item in enumerate(answer["objects"]):
        oid = item["id"]
        index = [o.id for o in eyes.objects].index(oid)
        u = item["point_2d"][0] / 1000.0 * eyes.camera.width
        v = item["point_2d"][1] / 1000.0 * eyes.camera.height
        assert eyes.frame.instance[int(v), int(u)] == index, oid     # points on the object
        x1, y1, x2, y2 = object_bbox(eyes.frame, index)
        assert item["bbox_2d"][0] == pytest.approx(x1 / 0.64, abs=1.0)
        assert item["bbox_2d"][3] == pytest.approx((y2 + 1) / 0.48, abs=1.0)
    for obj in result.objects:                 # centres come from the depth image
        assert np.linalg.norm(obj.position - truth[obj.id].position) < 0.02, obj.id
    assert result.target.affordance.type == AffordanceType.GRASPABLE_HANDLE
    assert {o.category for o in result.objects} == {"cup", "wine glass", "cube"}


def test_the_answer_never_depends_on_poses_sizes_or_yaw_of_the_labels():
    eyes = _Eyes(_scene())
    clean = _backend(eyes).answer(eyes.frame.instance, eyes.objects, CUP,
                                  np.random.default_rng(1))
    lying = [o.copy() for o in eyes.objects]
    for obj in lying:                          # labels with nonsense geometry
        obj.position = np.array([5.0, 5.0, 5.0])
        obj.size = np.array([1.0, 2.0, 3.0])
        obj.yaw = 2.0
    same = _backend(eyes).answer(eyes.frame.instance, lying, CUP, np.random.default_rng(1))
    assert same == clean


def test_answers_satisfy_the_hardened_schema_patterns_under_default_noise():
    eyes = _Eyes(_scene())
    backend = _backend(eyes)
    ids, words = re.compile(r"^[a-z0-9_]{1,32}$"), re.compile(r"^[a-z]+( [a-z]+)*$")
    for seed in range(30):
        answer = backend.answer(eyes.frame.instance, eyes.objects, CUP,
                                np.random.default_rng(seed))
        assert schema.schema_errors(answer) == []
        assert re.fullmatch(r"[A-Za-z0-9 .,'-]{0,200}", answer["reason"])
        for item in answer["objects"]:
            assert ids.match(item["id"]) and words.match(item["category"])
            assert all(0 <= c <= 1000 for c in item["point_2d"] + item["bbox_2d"])
            assert 0.0 <= item["fragility"] <= 1.0
        if answer["target_found"]:
            assert ids.match(answer["target_id"])
            assert words.match(answer["target_affordance"]["region"])


def test_pointing_noise_has_the_configured_spread_and_is_seeded():
    eyes = _Eyes(_scene())
    backend = _backend(eyes, **{**ZERO, "point_std": 10.0})
    exact = _backend(eyes, **ZERO).answer(eyes.frame.instance, eyes.objects, CUP,
                                          np.random.default_rng(0))["objects"][0]["point_2d"]
    us = [backend.answer(eyes.frame.instance, eyes.objects, CUP,
                         np.random.default_rng(s))["objects"][0]["point_2d"][0]
          for s in range(400)]
    assert np.std(us) == pytest.approx(10.0, rel=0.2)
    assert np.mean(us) == pytest.approx(exact[0], abs=2.0)
    a = backend.perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, CUP)
    backend.reseed(3)
    b = backend.perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, CUP)
    assert a.raw == b.raw                           # same seed, same call index


def test_a_hidden_target_is_not_found_rather_than_replaced_by_its_occluder():
    ball = ObjectInstance(id="ball_1", category="tennis_ball", name="tennis ball",
                          shape=Shape.SPHERE, position=np.array([0.45, 0.0, 0.032]),
                          size=np.array([0.065, 0.065, 0.065]), fragility=0.0,
                          affordance=AffordanceDescriptor(AffordanceType.WRAPPABLE, "rubber",
                                                          0.0, "whole"))
    box = ObjectInstance(id="box_1", category="box", name="cardboard box", shape=Shape.BOX,
                         position=np.array([0.57, 0.0, 0.07]), size=np.array([0.12, 0.2, 0.14]),
                         fragility=0.2)
    eyes = _Eyes([box, ball])
    assert [s.label.id for s in visible_objects(eyes.frame.instance, eyes.objects)] == ["box_1"]
    result = _backend(eyes, **ZERO).perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera,
                                             "pick up the tennis ball behind the box")
    assert result.ok and not result.target_found and result.target is None
    assert any("not visible" in w for w in result.warnings), result.warnings


def test_small_objects_are_missed_with_the_configured_probability():
    eyes = _Eyes(_scene())
    seen = {s.label.id: s.area for s in visible_objects(eyes.frame.instance, eyes.objects)}
    backend = _backend(eyes, **{**ZERO, "miss_prob_small": 1.0,
                                "miss_min_area_px": seen["cube_1"] + 1,
                                "miss_full_area_px": seen["cube_1"] + 2})
    answer = backend.answer(eyes.frame.instance, eyes.objects, CUP, np.random.default_rng(0))
    assert [o["id"] for o in answer["objects"]] == ["cup_1", "glass_1"]


def test_latency_model_and_zero_noise_config():
    model = VlmLatencyModel(prefill_s=0.35, decode_tok_per_s=155.5)
    assert model.seconds(311) == pytest.approx(0.35 + 2.0)
    cfg = VlmSimConfig(point_std=9.0, box_std=12.5, miss_prob_small=0.5).zero_noise()
    assert cfg.point_std == cfg.box_std == cfg.miss_prob_small == 0.0
    with pytest.raises(Exception, match="vlm_sim"):
        VlmSimConfig.from_params({"point_stdd": 1.0})


def test_reperception_reuses_the_answer_until_the_depth_changes_around_the_target():
    eyes = _Eyes(_scene())
    inner = _backend(eyes, **ZERO)
    policy = ReperceivingPerception(inner, ReperceptionConfig())
    first = policy.perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, CUP)
    assert first.requests == 1 and policy.vlm_calls == 1
    # A neighbour moves far from the target: the target's box is unchanged -> reused, and
    # the moved neighbour is located again in the fresh depth image.
    eyes.objects[2].position = eyes.objects[2].position + np.array([0.0, -0.05, 0.0])
    eyes.rerender()
    again = policy.perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, CUP)
    assert again.requests == 0 and policy.vlm_calls == 1 and policy.reused == 1
    assert again.target.id == "cup_1"
    # The target moves by 1 cm: its box changes -> the VLM is asked again.
    eyes.objects[0].position = eyes.objects[0].position + np.array([0.01, 0.0, 0.0])
    eyes.rerender()
    moved = policy.perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, CUP)
    assert moved.requests == 1 and policy.vlm_calls == 2
    assert moved.target.position[0] == pytest.approx(eyes.objects[0].position[0], abs=0.01)
    # The target is gone: asked again, and it says so.
    eyes.objects = eyes.objects[1:]
    eyes.rerender()
    gone = policy.perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, CUP)
    assert policy.vlm_calls == 3 and not gone.target_found


def test_depth_change_counts_moved_and_lost_returns_only_beyond_the_tolerance():
    before = np.full((4, 4), 1.0, dtype=np.float32)
    after = before.copy()
    after[0, 0] += 0.003          # beyond 2 mm
    after[0, 1] += 0.001          # noise
    after[1, 1] = 0.0             # lost return
    assert depth_change(before, after, 0.002) == 2


def test_render_view_equals_render_scene_around_the_objects():
    objects = _scene()
    full, part = render_scene(objects, Camera()), render_view(objects, Camera())
    seen = part.depth > 0
    assert seen.mean() < 0.5
    assert np.array_equal(full.depth[seen], part.depth[seen])
    assert np.array_equal(full.instance[seen], part.instance[seen])
    for k in range(len(objects)):            # every object pixel is in the rendered regions
        assert np.array_equal(full.instance == k, part.instance == k)


def test_a_benchmark_trial_perceives_through_the_camera_and_counts_vlm_calls():
    from agentic_grasp.core.planner.episode import CameraPerception, run_trial
    from agentic_grasp.core.sim import Simulator

    sim = Simulator.from_config()
    spec = sim.load_task("sg_cube", trial_seed=11)
    eyes = CameraPerception(sim, "vlm_sim", seed=11)
    result = eyes.perceive(spec.instruction)
    assert result.backend == "vlm_sim" and result.target.id == "cube_1"
    assert eyes.vlm_calls == 1
    assert eyes.vlm_s == pytest.approx(eyes.latency.seconds(result.completion_tokens))
    crop = eyes.crop(result.target.to_object_instance())
    assert crop is not None and crop.shape == (64, 64, 3)
    # The crop is the camera image at the perceived box: the cube's colour dominates it.
    cube = next(o for o in sim.objects() if o.id == "cube_1")
    centre = crop[24:40, 24:40].reshape(-1, 3).mean(axis=0)
    assert np.abs(centre - np.asarray(cube.color)).max() < 80
    trial = run_trial("sg_cube", "full", 11, simulator=sim, perception="vlm_sim",
                      visual_query="camera")
    assert trial.perception == "vlm_sim"
    assert 1 <= trial.vlm_calls <= trial.perception_calls
    assert trial.sim_time_s == pytest.approx(trial.motion_s + trial.compute_s + trial.vlm_s)


def _uncached(backend, eyes, instruction):
    """perceive() with the memo of vlm_sim emptied first: a fresh computation."""
    from agentic_grasp.core.perception.vlm import sim as vlm_sim

    vlm_sim._PERCEIVED.clear()
    return backend.perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, instruction)


def _same_result(a, b):
    assert a.raw == b.raw and a.error == b.error and a.warnings == b.warnings
    assert [o.id for o in a.objects] == [o.id for o in b.objects]
    for x, y in zip(a.objects, b.objects):
        assert x.position.tobytes() == y.position.tobytes()
        assert np.asarray(x.size).tobytes() == np.asarray(y.size).tobytes()


def test_a_memoised_perceive_is_the_computed_one_and_each_caller_gets_a_copy():
    """A sweep's configurations perceive trial k's first frame with the same
    seed; the kept result must be exactly a fresh computation's, and editing one caller's
    result (the planner does) must not reach the next caller."""
    eyes = _Eyes(_scene())
    first = _uncached(_backend(eyes), eyes, CUP)
    again_backend = _backend(eyes)
    again = again_backend.perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, CUP)
    _same_result(first, again)
    assert again_backend.calls == 1 and again_backend.last_interpretation is not None
    again.objects[0].position[0] += 1.0
    again.warnings.append("edited")
    third = _backend(eyes).perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, CUP)
    _same_result(first, third)
    # the second call of a backend draws from another stream: not the first call's result
    second_call = again_backend.perceive(eyes.frame.rgb, eyes.frame.depth, eyes.camera, CUP)
    _same_result(second_call, _uncached(_seeded_at(eyes, 1), eyes, CUP))


def _seeded_at(eyes, calls):
    backend = _backend(eyes)
    backend.calls = calls
    return backend


def test_the_perceive_memo_misses_when_any_pixel_of_the_depth_or_mask_differs():
    eyes = _Eyes(_scene())
    backend = _backend(eyes)
    base = _uncached(backend, eyes, CUP)
    depth = eyes.frame.depth.copy()
    v, u = np.argwhere(eyes.frame.instance == 0)[0]
    depth[v, u] += np.float32(0.05)          # one pixel of the cup 5 cm further
    fresh = _backend(eyes)
    moved = fresh.perceive(eyes.frame.rgb, depth, eyes.camera, CUP)
    from agentic_grasp.core.perception.vlm import sim as vlm_sim

    vlm_sim._PERCEIVED.clear()
    computed = _backend(eyes).perceive(eyes.frame.rgb, depth, eyes.camera, CUP)
    _same_result(moved, computed)
    assert base.raw == moved.raw             # the answer reads the mask, not the depth
