"""OOD splits (config/ood/splits.yaml): they load, each object is valid and each split is
what its name says against the knowledge base's taxonomy."""
import numpy as np
import pytest
import yaml

from agentic_grasp.core import paths
from agentic_grasp.core.errors import ConfigError
from agentic_grasp_lab.evaluation.studies.ood import load_splits, run_ood, validate_splits
from agentic_grasp.core.retrieval.taxonomy import Taxonomy
from agentic_grasp.core.sim import load_catalogue, load_task
from agentic_grasp.core.sim.scenes import layout_problem


@pytest.fixture(scope="module")
def splits():
    return load_splits()


@pytest.fixture(scope="module")
def rows(splits):
    return validate_splits(splits)


def test_splits_load(splits):
    assert list(splits.splits) == ["in_distribution", "near_ood", "far_ood"]
    sizes = {name: len(s.paths) for name, s in splits.splits.items()}
    assert sizes == {"in_distribution": 12, "near_ood": 6, "far_ood": 5}
    assert splits.configuration == "full"
    assert len(set(splits.tasks())) == 23
    assert set(splits.split_of().values()) == set(splits.splits)


def test_every_ood_object_is_valid(rows):
    catalogue = load_catalogue()
    assert len(rows) == 23
    for row in rows:
        model = catalogue.get(row["object"])
        assert model.mass_kg > 0 and 0.0 <= model.fragility <= 1.0
        assert model.crush_limit_n > 0 and np.all(model.size > 0)
        assert model.friction > 0
        spec = load_task(str(paths.scenes_dir() / "ood" / f"{row['task_id']}.yaml")) \
            if row["task_id"].startswith("ood_") else load_task(row["task_id"])
        assert spec.category == "SG" and spec.targets == [row["object_id"]]
        for seed in range(5):
            objs = spec.instantiate(np.random.default_rng(seed))
            assert layout_problem(objs, catalogue) is None


def test_far_ood_categories_are_unknown_and_retrieval_falls_back(rows):
    taxonomy = Taxonomy.load()
    far = [r for r in rows if r["split"] == "far_ood"]
    assert {r["category"] for r in far} == {"thermos", "egg", "kettle", "light_bulb",
                                             "stapler"}
    for r in far:
        assert taxonomy.canonical(r["category"]) is None
        assert taxonomy.superclass(r["category"]) is None
        # level 1 is empty: the affordance fallback ranks the whole KB
        assert r["retrieved"] and "unknown category" in r["retrieval_reason"]
        assert "fallback" in r["retrieval_reason"]
    for r in rows:
        if r["split"] != "far_ood":
            assert r["taxonomy_known"] and r["retrieved"], r["object"]


def test_near_ood_objects_are_new_instances_of_known_categories(rows):
    table_i = {r["object"] for r in rows if r["split"] == "in_distribution"}
    assert len(table_i) == 12
    near = [r for r in rows if r["split"] == "near_ood"]
    assert not table_i & {r["object"] for r in near}
    assert {r["category"] for r in near} <= {"mug", "bottle", "bowl", "apple", "cube",
                                             "paper_cup"}


def test_a_split_that_breaks_its_rule_is_rejected(tmp_path):
    data = yaml.safe_load((paths.config_dir() / "ood" / "splits.yaml").read_text())
    bad = tmp_path / "splits.yaml"
    data["splits"]["far_ood"]["scenes"].append("sg_cup")        # also in-distribution
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="more than one split"):
        load_splits(bad)
    scene = yaml.safe_load((paths.scenes_dir() / "ood" / "ood_far_egg.yaml").read_text())
    scene.update(task_id="mug_alone", instruction="pick up the mug", targets=["mug_1"],
                 objects=[{"id": "mug_1", "object": "mug", "x": 0.5, "y": 0.0}])
    (tmp_path / "mug_alone.yaml").write_text(yaml.safe_dump(scene))
    data["splits"]["far_ood"]["scenes"][-1] = str(tmp_path / "mug_alone")   # a known category
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="far-OOD needs an unseen one"):
        validate_splits(load_splits(bad))
    data["splits"]["far_ood"]["scenes"] = ["ood/does_not_exist"]
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="no scene file"):
        load_splits(bad)
    data["splits"] = {"odd_split": {"scenes": ["sg_cup"]}}
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="unknown split"):
        load_splits(bad)


def test_ood_run_labels_records_with_their_split(splits):
    result = run_ood(splits, trials=1, seeds=[0], workers=1, progress=False)
    assert len(result.records) == 23
    by_task = {r.task_id: r for r in result.records}
    assert by_task["sg_cup"].split == "in_distribution"
    assert by_task["ood_far_thermos"].split == "far_ood"
    assert by_task["ood_far_thermos"].initial_sources[0] == "retrieval"   # the fallback
    assert by_task["ood_near_tall_mug"].initial_sources[0] in ("retrieval", "memory")
    assert all(r.configuration == "full" for r in result.records)
