"""Object catalogue of the simulator (config/objects.yaml, paper Table I)."""
import copy

import numpy as np
import pytest
import yaml

from agentic_grasp.core import paths
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.sim.objects import load_catalogue, parse_catalogue
from agentic_grasp.core.types import AffordanceType, ObjectInstance, ObjectState, Shape

# Table I: name -> (affordance, material, fragility, largest dimension in cm)
TABLE_I = {
    "ceramic cup": ("Graspable_Handle", "ceramic", 0.3, 9),
    "apple": ("Wrappable", "organic", 0.1, 8),
    "plastic bottle": ("Graspable_Body", "plastic", 0.1, 22),
    "banana": ("Wrappable", "organic", 0.2, 18),
    "ceramic bowl": ("Graspable_Edge", "ceramic", 0.3, 12),
    "wood cube": ("Graspable_Body", "wood", 0.0, 5),
    "glass vase": ("Fragile", "glass", 0.8, 15),
    "wine glass": ("Fragile", "glass", 0.9, 20),
    "screwdriver": ("Tool_Handle", "metal", 0.0, 20),
    "smartphone": ("Clampable", "mixed", 0.5, 15),
    "tennis ball": ("Wrappable", "fabric", 0.0, 6.5),
    "toy block": ("Graspable_Body", "plastic", 0.0, 4),
}
YCB_MASS_KG = {"ceramic cup": 0.118, "banana": 0.066, "apple": 0.068, "ceramic bowl": 0.147,
               "tennis ball": 0.058, "screwdriver": 0.098, "wine glass": 0.133}


@pytest.fixture(scope="module")
def catalogue():
    return load_catalogue()


def test_table_i_objects_match_the_paper(catalogue):
    for name, (aff, material, fragility, largest_cm) in TABLE_I.items():
        model = catalogue.get(name)
        assert model.affordance == AffordanceType(aff)
        assert model.material == material
        assert model.fragility == pytest.approx(fragility)
        assert float(np.max(model.size)) == pytest.approx(largest_cm / 100.0)
        assert 0.0 < model.friction < 1.5
        assert model.crush_limit_n > 0
    assert len({catalogue.get(n).category for n in TABLE_I}) == 12
    assert len({catalogue.get(n).affordance for n in TABLE_I}) == 7


def test_ycb_masses_and_scene_props(catalogue):
    for name, mass in YCB_MASS_KG.items():
        assert catalogue.get(name).mass_kg == pytest.approx(mass)
    box = catalogue.get("box")
    assert box.size.tolist() == pytest.approx([0.12, 0.20, 0.14])


def test_strength_follows_material_and_fragility(catalogue):
    glass = catalogue.materials["glass"]
    assert catalogue.get("glass vase").crush_limit_n == pytest.approx(glass.crush_base_n * 0.2)
    assert catalogue.get("wine glass").crush_limit_n < catalogue.get("glass vase").crush_limit_n
    # soft things dent: organic matter and the thin PET bottle, not the wood cube
    assert catalogue.get("banana").deform_limit_n is not None
    assert catalogue.get("plastic bottle").deform_limit_n is not None
    assert catalogue.get("wood cube").deform_limit_n is None


def test_graspable_regions_fit_or_exceed_the_aperture(catalogue):
    cup = catalogue.get("ceramic cup")
    handle = next(p for p in cup.parts if p.name == "handle")
    assert 0.010 <= handle.size[1] <= 0.015            # across the fingers
    assert handle.centre[0] > cup.size[0] / 2.0          # offset from the body
    assert catalogue.get("ceramic bowl").size[0] > 0.08  # body wider than the aperture
    stem = next(p for p in catalogue.get("wine glass").parts if p.name == "stem")
    assert stem.size[0] < 0.01
    for name in TABLE_I:
        model = catalogue.get(name)
        assert model.region in model.regions or model.region == "body"


def test_instantiate_stands_on_the_table(catalogue):
    cup = catalogue.instance("ceramic_cup", "cup_1", 0.5, 0.1, 0.3, "filled")
    assert isinstance(cup, ObjectInstance)
    assert cup.bottom_z == pytest.approx(0.0)
    assert cup.shape == Shape.CYLINDER and cup.state == ObjectState.FILLED
    assert cup.mass == pytest.approx(0.118 + catalogue.get("ceramic cup").fill.mass_kg)
    assert cup.affordance.type == AffordanceType.GRASPABLE_HANDLE
    assert cup.affordance.region == "handle"
    assert cup.name == "ceramic cup"


def test_model_for_unknown_object_is_derived_with_the_formula(catalogue):
    odd = ObjectInstance(id="thing", category="thing", shape=Shape.BOX, position=[0.5, 0, 0.02],
                         size=[0.04, 0.04, 0.04], material="glass", fragility=0.5)
    model = catalogue.model_for(odd)
    assert model.crush_limit_n == pytest.approx(catalogue.materials["glass"].crush_base_n * 0.5)
    assert len(model.parts) == 1
    # a catalogue object with another size gets its parts scaled
    cup = catalogue.instance("ceramic_cup", "c", 0.5, 0, 0)
    cup.size = cup.size * 1.5
    scaled = catalogue.model_for(cup)
    assert scaled.parts[1].centre[0] == pytest.approx(0.0525 * 1.5)


def _raw():
    with paths.config_file("objects").open() as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d["objects"]["apple"].pop("mass_kg"), ["objects.apple.mass_kg", "missing"]),
    (lambda d: d["objects"]["banana"].update(material="unobtainium"),
     ["objects.banana.material", "unobtainium"]),
    (lambda d: d["objects"]["wood_cube"].update(fragility=1.5), ["objects.wood_cube.fragility"]),
    (lambda d: d["objects"]["ceramic_cup"]["parts"][0].update(shape="cone"),
     ["objects.ceramic_cup.parts[0].shape"]),
    (lambda d: d["objects"]["apple"].update(affordance={"type": "Edible", "region": "body"}),
     ["objects.apple.affordance.type"]),
])
def test_invalid_catalogue_names_file_object_and_field(tmp_path, mutate, words):
    data = copy.deepcopy(_raw())
    mutate(data)
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_catalogue(path)
    for word in [str(path)] + words:
        assert word in str(err.value)


def test_parse_rejects_duplicate_names():
    data = copy.deepcopy(_raw())
    data["objects"]["apple2"] = copy.deepcopy(data["objects"]["apple"])
    with pytest.raises(ConfigError, match="duplicate"):
        parse_catalogue(data, "mem")
