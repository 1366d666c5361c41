"""params.declare_config: parameters from a config dataclass's fields and their metadata."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Tuple

import pytest
from rclpy.exceptions import InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.params import declare_config, declare_dataclass, declare_map


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
        values = declare_dataclass(n, "", _Config)
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
