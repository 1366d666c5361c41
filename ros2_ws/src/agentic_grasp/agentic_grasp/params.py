"""Declaring node parameters with types, defaults and descriptions, in one idiom."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Type

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node


def declare(node: Node, name: str, default: Any, description: str) -> Any:
    """Declare one parameter and return its value (from the params file or the default)."""
    descriptor = ParameterDescriptor(description=description)
    if isinstance(default, (list, tuple)) and not default:
        raise ValueError(f"parameter {name}: give a non-empty default so its type is known")
    value = node.declare_parameter(name, default, descriptor).value
    return list(value) if isinstance(value, (list, tuple)) else value


def declare_dataclass(node: Node, prefix: str, cls: Type) -> Dict[str, Any]:
    """Declare every field of a config dataclass as ``<prefix>.<field>``; return their values.

    Field defaults give the types; ``field(metadata={"description": ...})`` gives the text.
    """
    values: Dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            continue
        if isinstance(default, tuple):
            default = list(default)
        if not isinstance(default, (bool, int, float, str, list)):
            continue
        desc = f.metadata.get("description", f"{cls.__name__}.{f.name}")
        values[f.name] = declare(node, f"{prefix}.{f.name}" if prefix else f.name, default, desc)
    return values
