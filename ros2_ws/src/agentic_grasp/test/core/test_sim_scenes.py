"""Benchmark scenes (config/scenes/*.yaml, paper Sec. V-A)."""
import numpy as np
import pytest
import yaml

from agentic_grasp.core import paths
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.sim.objects import load_catalogue
from agentic_grasp.core.sim.scenes import layout_problem, list_tasks, load_task

EXPECTED = {"sg_cup", "sg_apple", "sg_bottle", "sg_banana", "sg_bowl", "sg_cube",
            "it_cup_near_vase", "it_ball_behind_box", "it_phone_near_wine_glass",
            "it_screwdriver_side_grasp", "lh_clear_table", "lh_sort_by_fragility"}


def test_there_is_one_scene_per_benchmark_task():
    assert set(list_tasks()) == EXPECTED


@pytest.mark.parametrize("task_id", sorted(EXPECTED))
def test_scene_loads_and_jittered_layouts_stay_physical(task_id):
    spec = load_task(task_id)
    assert spec.task_id == task_id
    assert spec.category == task_id[:2].upper()
    assert spec.instruction
    ids = [o.id for o in spec.objects_spec]
    assert set(spec.targets) <= set(ids)
    assert len(spec.targets) == (3 if spec.category == "LH" else 1)
    cat = load_catalogue()
    for seed in range(10):
        objs = spec.instantiate(np.random.default_rng(seed))
        assert [o.id for o in objs] == ids
        assert layout_problem(objs, cat) is None
        for o in objs:
            assert o.bottom_z == pytest.approx(0.0)


def test_jitter_is_seeded():
    spec = load_task("lh_clear_table")
    a = spec.instantiate(np.random.default_rng(7))
    b = spec.instantiate(np.random.default_rng(7))
    c = spec.instantiate(np.random.default_rng(8))
    assert all(np.allclose(x.position, y.position) and x.yaw == y.yaw for x, y in zip(a, b))
    assert not all(np.allclose(x.position, y.position) for x, y in zip(a, c))


def _by_id(spec):
    return {o.id: o for o in spec.nominal()}


def test_interactive_layouts_have_their_spatial_relation():
    objs = _by_id(load_task("it_ball_behind_box"))
    assert objs["ball_1"].position[0] < objs["box_1"].position[0]     # behind, seen from x=1.15
    objs = _by_id(load_task("it_cup_near_vase"))
    gap = np.linalg.norm(objs["cup_1"].position[:2] - objs["vase_1"].position[:2]) - 0.08
    assert 0.05 <= gap <= 0.08
    assert objs["vase_1"].fragility >= 0.8
    spec = load_task("lh_sort_by_fragility")
    objs = _by_id(spec)
    frag = [objs[t].fragility for t in spec.targets]
    assert len(set(frag)) == 3 and frag == sorted(frag, reverse=True)


def test_broken_scene_files_are_rejected_with_the_field(tmp_path):
    base = yaml.safe_load((paths.scenes_dir() / "sg_cup.yaml").read_text())
    cases = [({"category": "XX"}, "category"),
             ({"targets": ["ghost"]}, "targets"),
             ({"objects": [{"id": "a", "object": "apple", "x": 0.5, "y": 0.0},
                           {"id": "b", "object": "apple", "x": 0.52, "y": 0.0}],
               "targets": ["a"]}, "overlap"),
             ({"objects": [{"id": "a", "object": "apple", "x": 0.9, "y": 0.0}],
               "targets": ["a"]}, "table"),
             ({"objects": [{"id": "a", "object": "wood_cube", "x": 0.5, "y": 0.0,
                            "state": "filled"}], "targets": ["a"]}, "cannot be filled")]
    for i, (change, word) in enumerate(cases):
        data = dict(base, **change)
        path = tmp_path / f"case{i}.yaml"
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(ConfigError, match=word):
            load_task(str(path))
    with pytest.raises(ConfigError, match="no such scene"):
        load_task("does_not_exist")
