"""The perception node's parameters (config/perception.yaml), read without ROS.

Its own module so that the backends (e.g. :func:`.vlm.sim.bench_calls`) can read them
without importing the package ``__init__``, which imports the backends.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Union

from agentic_grasp.core.config import nested, node_params

NODE_NAME = "perception"


def load_params(path: Union[str, Path, None] = None) -> Dict[str, Any]:
    """The perception node's parameters from config/perception.yaml, as nested dicts."""
    return nested(node_params(NODE_NAME, path))


__all__ = ["NODE_NAME", "load_params"]
