"""The wider procedural families: items of a kind vary, clutter, far reach, duplicates told
apart, novel objects and long tasks with relations inside them (core/sim/procedural.py)."""
import numpy as np

from agentic_grasp.core.sim import Simulator, load_catalogue, load_task
from agentic_grasp.core.sim.procedural import MASS_SPREAD, SIZE_SPREAD, generate
from agentic_grasp.core.sim.procedural_ids import FAMILIES
from agentic_grasp_lab.evaluation.studies.procedural import parser_correct


def _scenes(family, seed=21, n=12):
    k0 = FAMILIES.index(family)
    return [generate(seed, k0 + j * len(FAMILIES)) for j in range(n)]


def test_items_of_a_kind_vary_in_size_mass_and_friction_within_their_bounds():
    cat = load_catalogue()
    sizes, seen = set(), 0
    for scene in _scenes("sg", n=20) + _scenes("it_clutter", n=5):
        for spec, inst in zip(scene.task.objects_spec, scene.task.nominal()):
            base = cat.get(spec.catalogue)
            factor = inst.size / base.size
            assert np.all(np.abs(factor - 1.0) <= SIZE_SPREAD + 1e-9)
            empty = inst.mass - (base.fill.mass_kg if inst.state.value == "filled" else 0.0)
            assert abs(empty / base.mass_kg - 1.0) <= MASS_SPREAD + 1e-9
            lo, hi = cat.materials[base.material].friction_bounds
            nominal = cat.materials[base.material].friction
            assert base.friction + lo - nominal - 1e-9 <= inst.friction \
                <= base.friction + hi - nominal + 1e-9
            sizes.add(round(float(factor[2]), 3))
            seen += 1
    assert len(sizes) > seen // 2           # not one size per kind


def test_clutter_puts_three_to_six_neighbours_close_round_the_target():
    for scene in _scenes("it_clutter"):
        objs = {o.id: o for o in scene.task.nominal()}
        target = objs[scene.task.targets[0]]
        others = [o for o in objs.values() if o.id != target.id]
        assert 3 <= len(others) <= 6
        frag = [o.fragility >= 0.5 for o in others]
        assert any(frag) and not all(frag)
        assert all(np.linalg.norm(o.position[:2] - target.position[:2]) <= 0.30 for o in others)


def test_duplicates_are_one_kind_told_apart_and_the_parser_names_the_right_one():
    for scene in _scenes("it_duplicate", n=20):
        cats = [o.category for o in scene.task.nominal()]
        target = next(o for o in scene.task.nominal() if o.id == scene.task.targets[0])
        assert cats.count(target.category) >= 2
        assert parser_correct(scene), scene.task.instruction


def test_a_novel_object_is_outside_the_catalogue_yet_loads_and_is_simulated():
    cat = load_catalogue()
    scene = _scenes("it_novel", n=1)[0]
    spec = scene.task.objects_spec[0]
    assert spec.catalogue not in cat.models
    task = load_task(scene.task_id)
    sim = Simulator.from_config()
    sim.load_task(scene.task_id, trial_seed=3)
    novel = sim.get(spec.id)
    assert novel.name == scene.task.catalogue.get(spec.catalogue).name
    assert task.instruction == scene.task.instruction


def test_long_tasks_hold_relations_hidden_objects_and_long_sorts():
    kinds = set()
    for scene in _scenes("lh_long", n=30):
        kinds.add(scene.details["kind"])
        if scene.details["kind"] == "sort_many":
            assert 4 <= len(scene.task.targets) <= 6
        assert parser_correct(scene), scene.task.instruction
    assert kinds == {"clear_hidden", "sort_many", "but_clutter", "list"}


def test_far_targets_stand_beyond_the_usual_region():
    reach = [np.hypot(o.x, o.y) for s in _scenes("it_far")
             for o in s.task.objects_spec if o.id == s.task.targets[0]]
    assert min(reach) >= 0.6 and max(reach) > 0.66
