"""Procedural scenes: rebuilt from (seed, index) alone, physical, labelled by geometry."""
import json

import pytest

from agentic_grasp.core.errors import ConfigError
from agentic_grasp_lab.evaluation.studies.procedural import score, summarise
from agentic_grasp_lab.evaluation.records import TrialRecord
from agentic_grasp.core.instructions import resolve_targets
from agentic_grasp.core.planner.instruction.tasks import (KIND_SORT_SIZE, plan_subgoals,
                                                          split_landmarks)
from agentic_grasp.core.sim import Simulator, load_catalogue, load_task
from agentic_grasp.core.sim.procedural_ids import FAMILIES, parse_procedural_id, procedural_id
from agentic_grasp.core.sim.procedural import generate
from agentic_grasp.core.sim.feasibility import target_feasibility
from agentic_grasp.core.sim.scenes import layout_problem


def test_a_scene_is_rebuilt_from_its_seed_and_index_alone():
    a, b = generate(5, 17), generate(5, 17)
    assert a.task.instruction == b.task.instruction
    assert a.task.objects_spec == b.task.objects_spec
    assert generate(5, 18).task.objects_spec != a.task.objects_spec
    assert generate(6, 17).task.objects_spec != a.task.objects_spec


def test_every_family_is_drawn_in_turn_and_every_layout_is_physical():
    cat = load_catalogue()
    for k in range(3 * len(FAMILIES)):
        scene = generate(11, k, cat)
        assert scene.family == FAMILIES[k % len(FAMILIES)]
        assert layout_problem(scene.task.nominal(), cat) is None
        assert set(scene.task.targets) <= {o.id for o in scene.task.objects_spec}
        assert set(scene.feasibility) == set(scene.task.targets)


def test_feasibility_comes_from_geometry():
    cat = load_catalogue()
    box = target_feasibility(cat.get("box"))
    assert not box.feasible and "120 mm" in box.reason
    assert target_feasibility(cat.get("ceramic_cup")).feasible      # its handle
    assert target_feasibility(cat.get("ceramic_bowl")).feasible     # its rim
    assert target_feasibility(cat.get("kettle")).feasible           # its handle
    assert target_feasibility(cat.get("toy_block")).feasible
    # a sphere wider than the hand encloses is held above its equator, where each pad's
    # push has a downward part: the 9 cm apple needs 64 N there, above the 36 N at which
    # it bruises; the 8 cm apple is held near its equator with a few newtons
    large = target_feasibility(cat.get("large_apple"))
    assert not large.feasible and "to hold" in large.reason
    assert target_feasibility(cat.get("apple")).feasible


def test_a_procedural_name_loads_anywhere_a_task_loads():
    name = procedural_id(3, 9)
    spec = load_task(name)
    assert spec.task_id == name and spec.instruction == generate(3, 9).task.instruction
    sim = Simulator.from_config()
    sim.load_task(name, trial_seed=1)
    assert {o.id for o in sim.objects()} == {o.id for o in spec.objects_spec}
    assert parse_procedural_id(name) == (3, 9)
    for bad in ("procedural:x:1", "procedural:1", "procedural:-1:2"):
        with pytest.raises(ConfigError):
            parse_procedural_id(bad)


def test_the_grammar_reads_exclusion_size_sorting_and_between():
    cat = load_catalogue()
    objs = [cat.instance("wine_glass", "glass_1", 0.45, -0.15),
            cat.instance("toy_block", "block_1", 0.55, 0.0),
            cat.instance("plastic_bottle", "bottle_1", 0.45, 0.15)]
    assert resolve_targets("put away everything but the wine glass", objs) == \
        ["block_1", "bottle_1"]
    plan = plan_subgoals("sort the objects by size, largest first", objs)
    assert plan.kind == KIND_SORT_SIZE and plan.order_matters
    assert plan.target_ids == ["bottle_1", "glass_1", "block_1"]
    text = "pick up the toy block between the wine glass and the plastic bottle"
    assert split_landmarks(text, resolve_targets(text, objs), objs) == ["block_1"]


def _record(task, conf, grasped, refused=()):
    return TrialRecord(task_id=task, category="IT", configuration=conf, seed=0, trial=0,
                       trial_seed=0, success=False, n_attempts=1, n_subgoals=1, n_targets=1,
                       n_grasped=len(grasped), order_ok=True, grasped=list(grasped),
                       refused=list(refused))


def test_scoring_separates_feasible_targets_from_refusals():
    seed = 11
    clear = next(generate(seed, k) for k in range(6, 600, len(FAMILIES))
                 if generate(seed, k).infeasible_targets)
    infeasible = clear.infeasible_targets[0]
    feasible = clear.feasible_targets
    good = score(_record(clear.task_id, "full", feasible, [infeasible]), clear)
    assert good.success and good.cleared == 1.0 and good.refused_correct == 1
    assert good.refused_wrong == 0
    bad = score(_record(clear.task_id, "full", feasible[:1], [feasible[-1]]), clear)
    assert not bad.success and bad.feasible_refused == 1 and bad.infeasible_attempted == 1
    out = summarise([_record(clear.task_id, "full", feasible, [infeasible]),
                     _record(clear.task_id, "no_scene_graph", [], [])], seed, 1,
                    ("full", "no_scene_graph"))
    json.dumps(out)
    full = out["configurations"]["full"]
    assert full["overall"]["mean"] == 100.0 and full["refusals"] == {
        **full["refusals"], "correct": 1, "wrong": 0}
    assert out["scene_graph"]["lh_clear"]["gain"] == 100.0


def test_bench_procedural_prints_the_json_the_issue_names(tmp_path, capsys):
    from agentic_grasp import cli

    rc = cli.main(["bench", "procedural", "--scenes", "8", "--scene-seed", "4", "--workers",
                   "1", "--out", str(tmp_path), "--json", "--no-figures"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scene_seed"] == 4 and out["scenes"] == 8
    full = out["configurations"]["full"]
    assert set(full["overall"]) >= {"mean", "ci95"} and len(full["overall"]["ci95"]) == 2
    assert set(full["families"]) <= set(FAMILIES)
    assert all({"mean", "n"} <= set(f) for f in full["families"].values())
    assert set(full["refusals"]) >= {"correct", "wrong"}
    assert "no_scene_graph" in out["configurations"] and "scene_graph" in out
    assert (tmp_path / "records.jsonl").is_file() and (tmp_path / "summary.json").is_file()
    # one scene again, by its seed and index
    rc = cli.main(["bench", "procedural", "--scene-seed", "4", "--only-scene", "3",
                   "--configurations", "full", "--workers", "1", "--out",
                   str(tmp_path / "one"), "--json", "--no-figures"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["only_scene"] == 3
    assert cli.main(["bench", "procedural", "--only-scene", "3"]) == 2   # needs its seed
