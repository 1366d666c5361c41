"""Oracle perception: exact mode, seeded noise statistics, target resolution, config."""
from pathlib import Path

import numpy as np
import pytest

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.perception import (OracleBackend, OracleConfig, VlmBackend,
                                           create_backend, load_params, resolve_targets)
from agentic_grasp.core.types import (AffordanceDescriptor, AffordanceType, ObjectInstance,
                                      ObjectState, Shape)

CAMERA = Camera()
RGB = np.zeros((480, 640, 3), np.uint8)
DEPTH = np.zeros((480, 640), np.float32)


def obj(oid, category, name, pos, size, fragility, a_type, material, **kw):
    return ObjectInstance(
        id=oid, category=category, name=name, shape=kw.pop("shape", Shape.CYLINDER),
        position=pos, size=size, fragility=fragility, material=material,
        affordance=AffordanceDescriptor(a_type, material, fragility, kw.pop("region", "body")),
        **kw)


def scene():
    return [
        obj("cup_1", "cup", "ceramic cup", [0.50, 0.10, 0.045], [0.08, 0.08, 0.09], 0.3,
            AffordanceType.GRASPABLE_HANDLE, "ceramic", region="handle"),
        obj("cup_2", "cup", "plastic cup", [0.60, -0.20, 0.045], [0.08, 0.08, 0.09], 0.1,
            AffordanceType.GRASPABLE_BODY, "plastic"),
        obj("apple_1", "apple", "apple", [0.40, 0.25, 0.04], [0.08, 0.08, 0.08], 0.1,
            AffordanceType.WRAPPABLE, "organic", shape=Shape.SPHERE),
        obj("glass_1", "wine glass", "wine glass", [0.55, 0.0, 0.10], [0.07, 0.07, 0.20],
            0.9, AffordanceType.FRAGILE, "glass"),
        obj("cube_1", "cube", "wood cube", [0.70, 0.30, 0.025], [0.05, 0.05, 0.05], 0.0,
            AffordanceType.GRASPABLE_BODY, "wood", shape=Shape.BOX, yaw=0.4,
            state=ObjectState.STACKED),
    ]


def perceive_many(backend, n, instruction="pick up the ceramic cup"):
    return [backend.perceive(RGB, DEPTH, CAMERA, instruction) for _ in range(n)]


def test_noise_free_oracle_is_exact_and_shaped_like_the_vlm():
    truth = scene()
    result = OracleBackend(lambda: truth).perceive(RGB, DEPTH, CAMERA,
                                                   "pick up the ceramic cup")
    assert result.backend == "oracle" and result.ok and result.target_found
    assert (result.requests, result.prompt_tokens, result.completion_tokens) == (0, 0, 0)
    assert result.target.id == "cup_1" and result.target.category == "cup"
    assert result.target.affordance == truth[0].affordance
    assert [o.affordance is None for o in result.objects] == [False, True, True, True, True]
    for perceived, real in zip(result.objects, truth):
        np.testing.assert_array_equal(perceived.position, real.position)
        assert perceived.category == real.category and perceived.fragility == real.fragility
        assert perceived.state == real.state and perceived.shape == real.shape
        uv, _ = CAMERA.project(real.position[None])
        assert perceived.pixel == pytest.approx(tuple(uv[0]))
        x1, y1, x2, y2 = perceived.bbox
        assert x1 < perceived.pixel[0] < x2 and y1 < perceived.pixel[1] < y2
    instances = result.to_object_instances()
    assert [i.id for i in instances] == ["cup_1", "cup_2", "apple_1", "glass_1", "cube_1"]
    assert instances[4].yaw == pytest.approx(0.4) and instances[4].shape is Shape.BOX
    assert instances[0].material == "ceramic" and instances[1].material == "unknown"


def test_position_noise_has_the_configured_std():
    truth = [scene()[0]]
    backend = OracleBackend(lambda: truth, OracleConfig(position_std=0.01), seed=11)
    pos = np.array([r.target.position for r in perceive_many(backend, 2000)])
    err = pos - truth[0].position
    std = err.std(axis=0, ddof=1)
    assert np.all(np.abs(std - 0.01) < 0.001)                      # within 10 %
    assert np.all(np.abs(err.mean(axis=0)) < 4 * 0.01 / np.sqrt(2000))
    # Pixel and position stay consistent: the pixel is the noisy centre's projection.
    last = backend.perceive(RGB, DEPTH, CAMERA, "the ceramic cup").target
    uv, _ = CAMERA.project(last.position[None])
    assert last.pixel == pytest.approx(tuple(uv[0]))


def test_fragility_noise_std_and_clipping():
    truth = [scene()[0], scene()[4]]
    backend = OracleBackend(lambda: truth, OracleConfig(fragility_std=0.05), seed=5)
    results = perceive_many(backend, 2000)
    cup = np.array([r.objects[0].fragility for r in results])          # truth 0.3
    assert abs(cup.std(ddof=1) - 0.05) < 0.005 and abs(cup.mean() - 0.3) < 0.005
    cube = np.array([r.objects[1].fragility for r in results])         # truth 0.0: clipped
    assert cube.min() == 0.0 and cube.max() <= 1.0
    assert 0.4 < np.mean(cube == 0.0) < 0.6
    # The target's affordance carries the same (noisy) fragility as the object.
    assert all(r.target.affordance.fragility == r.target.fragility for r in results[:50])


def test_category_confusion_rate_and_map():
    truth = [scene()[k] for k in (0, 2, 3)]                 # cup, apple, wine glass
    cfg = OracleConfig(category_confusion_prob=0.2,
                       confusion_map={"cup": ["mug"], "wine_glass": ["vase"]})
    results = perceive_many(OracleBackend(lambda: truth, cfg, seed=2), 2000)
    cup = [r.objects[0].category for r in results]
    assert set(cup) == {"cup", "mug"}
    assert abs(cup.count("mug") / 2000 - 0.2) < 0.03            # ~3.5 sigma
    assert {r.objects[2].category for r in results} == {"wine glass", "vase"}
    assert {r.objects[1].category for r in results} == {"apple"}     # no partner
    confused = next(r.objects[0] for r in results if r.objects[0].category == "mug")
    assert confused.name == "mug"                                 # no truth leaks via name
    # The target is still the right object, only mislabelled.
    assert all(r.target.id == "cup_1" for r in results)


def test_affordance_confusion_rate_and_uniform_alternatives():
    truth = [scene()[0]]
    backend = OracleBackend(lambda: truth, OracleConfig(affordance_confusion_prob=0.3), seed=9)
    types = [r.target.affordance.type for r in perceive_many(backend, 2000)]
    wrong = [t for t in types if t is not AffordanceType.GRASPABLE_HANDLE]
    assert abs(len(wrong) / 2000 - 0.3) < 0.035
    counts = [wrong.count(t) for t in AffordanceType if t is not AffordanceType.GRASPABLE_HANDLE]
    assert len(counts) == 7 and min(counts) > 0.5 * len(wrong) / 7


def test_seeded_determinism():
    cfg = OracleConfig(category_confusion_prob=0.3, fragility_std=0.1, position_std=0.02,
                       affordance_confusion_prob=0.3)

    def draw(seed):
        results = perceive_many(OracleBackend(scene, cfg, seed=seed), 30)
        return [(o.category, o.fragility, tuple(o.position),
                 r.target.affordance.type) for r in results for o in r.objects]

    assert draw(4) == draw(4)
    assert draw(4) != draw(5)


@pytest.mark.parametrize("instruction, expected", [
    ("Pick up the ceramic cup", ["cup_1"]),
    ("pick up the plastic cup please", ["cup_2"]),
    ("pick up the cup", ["cup_1", "cup_2"]),
    ("grab the apple and then the wood cube", ["apple_1", "cube_1"]),
    ("the cube, then the apple", ["cube_1", "apple_1"]),
    ("hand me the mug", ["cup_1", "cup_2"]),                  # synonym of cup
    ("pick up cup_2", ["cup_2"]),
    ("move the wine glass", ["glass_1"]),
    ("pick up the glass", ["glass_1"]),                       # synonym of wine glass
    ("pick up the giraffe", []),
    ("Clear the table", ["cup_1", "cup_2", "apple_1", "glass_1", "cube_1"]),
    ("sort the objects by fragility", ["cube_1", "apple_1", "cup_2", "cup_1", "glass_1"]),
    ("sort by fragility, most fragile first",
     ["glass_1", "cup_1", "cup_2", "apple_1", "cube_1"]),
])
def test_resolve_targets(instruction, expected):
    assert resolve_targets(instruction, scene()) == expected


def test_synonyms_only_stand_in_for_unmatched_words():
    cup, apple = scene()[0], scene()[2]
    mug = obj("mug_1", "mug", "blue mug", [0.45, -0.1, 0.05], [0.09, 0.09, 0.1], 0.3,
              AffordanceType.GRASPABLE_HANDLE, "ceramic")
    assert resolve_targets("pick up the cup", [cup, mug]) == ["cup_1"]
    assert resolve_targets("pick up the mug", [cup, mug]) == ["mug_1"]
    assert resolve_targets("the mug and the apple", [cup, apple]) == ["cup_1", "apple_1"]


def test_target_not_found_and_out_of_view():
    truth = scene() + [obj("bowl_1", "bowl", "ceramic bowl", [1.5, 2.0, 0.03],
                           [0.12, 0.12, 0.06], 0.3, AffordanceType.GRASPABLE_EDGE, "ceramic")]
    backend = OracleBackend(lambda: truth)
    missing = backend.perceive(RGB, DEPTH, CAMERA, "pick up the banana")
    assert missing.ok and not missing.target_found and missing.target is None
    assert "target not found: no object matches the instruction" in missing.warnings
    hidden = backend.perceive(RGB, DEPTH, CAMERA, "pick up the bowl")
    assert not hidden.target_found
    assert "'bowl_1' is outside the camera view; not reported" in hidden.warnings
    assert "bowl_1" not in [o.id for o in hidden.objects]


def test_provider_failure_is_reported_not_raised():
    def broken():
        raise RuntimeError("simulator gone")
    result = OracleBackend(broken).perceive(RGB, DEPTH, CAMERA, "pick up the cup")
    assert result.error == "perception failed: RuntimeError: simulator gone"


def test_oracle_config_validation():
    with pytest.raises(ConfigError):
        OracleConfig(category_confusion_prob=1.5)
    with pytest.raises(ConfigError):
        OracleConfig(position_std=-0.1)
    with pytest.raises(ConfigError, match="unknown"):
        OracleConfig.from_params({"position_sigma": 0.1})
    cfg = OracleConfig(confusion_map={"Glass_Vase": "wine glass", "x": []})
    assert cfg.confusion_map == {"glass vase": ["wine glass"]}


def test_create_backend_from_the_shipped_config():
    params = load_params()
    assert params["backend"] == "vlm_sim"          # honest default: from pixels
    params = {**params, "backend": "oracle"}       # ground truth only when asked
    oracle = create_backend(params, ground_truth_provider=scene)
    assert isinstance(oracle, OracleBackend) and oracle.seed == 0
    assert create_backend(params, ground_truth_provider=scene, seed=7).seed == 7
    vlm = create_backend({"backend": "vlm", "vlm.url": "http://10.0.0.2:8000/v1",
                          "depth.window_radius_px": 2})
    assert isinstance(vlm, VlmBackend)
    assert vlm.config.url == "http://10.0.0.2:8000/v1" and vlm.config.depth.window_radius_px == 2
    with pytest.raises(ConfigError):
        create_backend({"backend": "oracle"})
    with pytest.raises(ConfigError):
        create_backend({"backend": "clip"}, ground_truth_provider=scene)


def test_served_model_name_matches_the_docker_setup():
    serve = Path(__file__).resolve().parents[5] / "docker" / "vllm" / "serve.sh"
    if not serve.parent.parent.is_dir():
        pytest.skip("not a source checkout (docker/ is not installed)")
    model = load_params()["vlm"]["model"]
    text = serve.read_text(encoding="utf-8")
    assert f'SERVED_NAME="${{SERVED_NAME:-{model}}}"' in text
