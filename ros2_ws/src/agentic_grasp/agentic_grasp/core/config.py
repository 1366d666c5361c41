"""Loading YAML configuration: node parameter files and data files.

Node parameter files have the ROS 2 shape ``<node_name>: {ros__parameters: {...}}``; core
code reads the same files with :func:`node_params`, so the in-process paths (benchmarks,
tests) and the ROS nodes run on one configuration.
"""
from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Tuple, Union

import yaml

from agentic_grasp.core import paths
from agentic_grasp.core.errors import ConfigError


def require_positive(obj: Any, where: str, allow_zero: Tuple[str, ...] = (),
                     skip: Tuple[str, ...] = ()) -> None:
    """Coerce a config dataclass's numeric fields to float and require them finite and > 0
    (>= 0 where ``allow_zero`` names them; ``skip``: finite only)."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.name in skip:
            if not math.isfinite(float(value)):
                raise ConfigError(f"{where}.{f.name} must be finite, got {value}")
            setattr(obj, f.name, float(value))
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        value = float(value)
        if not math.isfinite(value) or value < 0.0 or (value == 0.0
                                                      and f.name not in allow_zero):
            raise ConfigError(f"{where}.{f.name} must be a finite number > 0, got {value}")
        setattr(obj, f.name, value)



def load_yaml(path: Union[str, Path]) -> Any:
    path = Path(path)
    try:
        with path.open("r", encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None


def reject_unknown(where: str, params: Mapping[str, Any], known: Iterable[str]) -> None:
    """A ConfigError naming every key of ``params`` outside ``known`` (typos in a config)."""
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ConfigError(f"{where}: unknown parameter(s) {', '.join(unknown)}")


def node_params(node_name: str, path: Union[str, Path, None] = None) -> Dict[str, Any]:
    """The ``ros__parameters`` mapping of ``node_name`` in ``config/<node_name>.yaml``."""
    path = Path(path) if path else paths.config_file(node_name)
    data = load_yaml(path) or {}
    for key in (node_name, f"/{node_name}", "/**"):
        section = data.get(key) if isinstance(data, dict) else None
        if isinstance(section, dict) and "ros__parameters" in section:
            return dict(section["ros__parameters"] or {})
    raise ConfigError(f"{path}: no '{node_name}: ros__parameters:' section")


def nested(flat: Dict[str, Any]) -> Dict[str, Any]:
    """Turn ROS-style dotted parameter names ({'physics.mu': 1}) into nested dicts."""
    out: Dict[str, Any] = {}
    for key, value in flat.items():
        cursor = out
        parts = key.split(".")
        for part in parts[:-1]:
            cursor = cursor.setdefault(part, {})
        cursor[parts[-1]] = value
    return out
