"""params.declare_config: parameters from a config dataclass's fields and their metadata."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Tuple

import pytest
from rclpy.exceptions import InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.ros.common.params import (declare_config, declare_fields, declare_map,
                                             description_of, parameter_tree)


@dataclass
class _Config:
    gain: float = field(default=0.5, metadata={"description": "Gain (1)", "range": (0.0, 1.0)})
    count: int = field(default=3, metadata={"description": "Count", "range": (1, 10, 1)})
    name: str = field(default="a", metadata={"description": "Name", "read_only": True})
    corner: Tuple[float, ...] = field(default=(0.1, 0.2), metadata={"description": "Corner"})
    internal: float = field(default=1.0, metadata={"param": False})
    undocumented: bool = False

    def __post_init__(self) -> None:
        if self.count == 7:
            raise ConfigError("count must not be 7")


def node(**overrides) -> Node:
    return Node("params_test", parameter_overrides=[Parameter(k, value=v)
                                                     for k, v in overrides.items()])


def test_fields_become_typed_described_parameters():
    n = node()
    try:
        config = declare_config(n, "cfg", _Config)
        assert config == _Config()
        assert isinstance(config.corner, tuple)
        assert not n.has_parameter("cfg.internal")
        gain = n.describe_parameter("cfg.gain")
        assert gain.description == "Gain (1)"
        assert (gain.floating_point_range[0].from_value,
                gain.floating_point_range[0].to_value) == (0.0, 1.0)
        count = n.describe_parameter("cfg.count")
        assert (count.integer_range[0].from_value, count.integer_range[0].to_value) == (1, 10)
        assert n.describe_parameter("cfg.name").read_only
        assert n.describe_parameter("cfg.undocumented").description == "_Config.undocumented"
    finally:
        n.destroy_node()


def test_overrides_are_read_and_validated():
    n = node(**{"cfg.gain": 0.25, "cfg.corner": [0.3, 0.4]})
    try:
        config = declare_config(n, "cfg", _Config)
        assert (config.gain, config.corner) == (0.25, (0.3, 0.4))
    finally:
        n.destroy_node()
    n = node(**{"cfg.count": 7})
    try:
        with pytest.raises(ConfigError):
            declare_config(n, "cfg", _Config)
    finally:
        n.destroy_node()
    n = node(**{"cfg.gain": 2.0})
    try:
        with pytest.raises(InvalidParameterValueException):
            declare_config(n, "cfg", _Config)       # outside its range
    finally:
        n.destroy_node()


def test_bare_names_and_the_raw_values():
    n = node()
    try:
        values = declare_fields(n, "", _Config)
        assert values["corner"] == [0.1, 0.2] and n.has_parameter("gain")
    finally:
        n.destroy_node()


def test_a_map_is_one_parameter_per_key_plus_the_keys_a_params_file_adds():
    n = node(**{"prior.glass_vase": 0.7})
    try:
        values = declare_map(n, "prior.", {"wine glass": 0.9}, "Prior of '{}'")
        assert values == {"wine_glass": 0.9, "glass_vase": 0.7}
        assert n.describe_parameter("prior.wine_glass").description == "Prior of 'wine_glass'"
    finally:
        n.destroy_node()


@dataclass
class _Hand:
    opening_m: float = 0.08
    palm_m: Tuple[float, ...] = (0.06, 0.2)


@dataclass
class _Section:
    speed_mps: float = 1                     # the validated config coerces it to a float
    thresholds: Dict[str, float] = field(default_factory=lambda: {"grip": 0.3})
    hand: _Hand = field(default_factory=_Hand)

    def __post_init__(self) -> None:
        self.speed_mps = float(self.speed_mps)


@dataclass
class _Tree:
    seed: int = field(default=0, metadata={"description": "Seed", "range": (0, 9)})
    section: _Section = field(default_factory=_Section,
                              metadata={"description": "The section"})
    bare: _Hand = field(default_factory=_Hand)
    hidden: _Hand = field(default_factory=_Hand, metadata={"param": False})

    @classmethod
    def from_params(cls, values: Mapping[str, Any]) -> "_Tree":
        section = {k.split(".", 1)[1]: v for k, v in values.items()
                   if k.startswith("section.") and "." not in k.split(".", 1)[1]}
        thresholds = {k.rsplit(".", 1)[1]: v for k, v in values.items()
                      if k.startswith("section.thresholds.")}
        return cls(seed=values["seed"], section=_Section(thresholds=thresholds, **section))


FALLBACK = "{section}: {path}{unit}"


def test_a_tree_is_one_parameter_per_leaf_under_dotted_names():
    tree = parameter_tree(_Tree(), FALLBACK)
    assert sorted(tree) == ["bare.opening_m", "bare.palm_m", "section.hand.opening_m",
                            "section.hand.palm_m", "section.speed_mps",
                            "section.thresholds.grip", "seed"]
    assert tree["section.speed_mps"].default == 1.0 and \
        isinstance(tree["section.speed_mps"].default, float)     # the validated value
    assert tree["section.hand.palm_m"].default == [0.06, 0.2]
    assert tree["seed"].description == "Seed" and tree["seed"].value_range == (0, 9)
    assert tree["section.speed_mps"].description == "The section: speed_mps (m/s)"
    assert tree["section.hand.opening_m"].description == "The section: hand opening_m (m)"
    assert tree["section.thresholds.grip"].description == "The section: thresholds grip"
    assert tree["bare.opening_m"].description == "bare: opening_m (m)"   # no text: its name


def test_a_tree_is_declared_and_built_from_the_dotted_names():
    n = node(**{"section.thresholds.grip": 0.5, "section.speed_mps": 2.0})
    try:
        config = declare_config(n, "", _Tree, nested=True, fallback=FALLBACK,
                                build=_Tree.from_params)
        assert config.section.thresholds == {"grip": 0.5} and config.section.speed_mps == 2.0
        assert n.describe_parameter("section.hand.opening_m").description == \
            "The section: hand opening_m (m)"
        assert not n.has_parameter("hidden.opening_m")
        with pytest.raises(ValueError):
            declare_config(n, "other", _Tree, nested=True)          # no build
    finally:
        n.destroy_node()


@dataclass
class _FileLaid:
    """A config read from a params file's layout (no defaults, fields grouped by name)."""

    w_type: float = field(metadata={"name": "weights.type", "description": "Type weight"})
    pairs: Dict[str, Dict[str, float]] = field(metadata={"template": "s of '{0}' and '{1}'"})
    embedding: Dict[str, Any] = field(metadata={"keys": {"open_clip.device": "Device"}})
    source: str = field(default="", metadata={"param": False, "description": "Not one"})


def test_the_text_of_a_parameter_read_from_a_params_file_layout():
    assert description_of(_FileLaid, "weights.type") == "Type weight"
    assert description_of(_FileLaid, "embedding.open_clip.device") == "Device"
    assert description_of(_FileLaid, "pairs.glass.ceramic") == "s of 'glass' and 'ceramic'"
    assert description_of(_FileLaid, "source", "file: {name}") == "file: source"
    assert description_of(_FileLaid, "w_type", "file: {name}") == "file: w_type"
