"""Every parameter a node declares: its name, type, default and description stay as
recorded, and it has a description.

The record (``data/node_parameters.json``) was taken before the nodes were converted to
declaring from the config dataclasses (params.declare_config), so this test is what keeps
config/*.yaml params files, launch files and ``ros2 param`` users working. Regenerate it
only for an intended change: ``python test/ros/test_node_parameters.py > ...json``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
import rclpy
from rclpy.parameter import Parameter

RECORD = Path(__file__).with_name("data") / "node_parameters.json"


def _makers() -> Dict[str, Callable[..., Any]]:
    from agentic_grasp.ros.executor.node import ExecutorNode
    from agentic_grasp.ros.front.node import FrontNode
    from agentic_grasp.ros.perception.node import PerceptionNode
    from agentic_grasp.ros.planner.node import PlannerNode
    from agentic_grasp.ros.retrieval.node import RetrievalNode
    from agentic_grasp.ros.scene_graph.node import SceneGraphNode
    from agentic_grasp.ros.sim.node import SimNode

    return {"sim": SimNode, "executor": ExecutorNode, "scene_graph": SceneGraphNode,
            "perception": PerceptionNode, "retrieval": RetrievalNode, "planner": PlannerNode,
            "grasp_front": FrontNode}


def declared(make: Callable[..., Any]) -> Dict[str, Dict[str, Any]]:
    """name -> {type, value, description} of every parameter a node declares."""
    node = make()
    try:
        out = {}
        for name in sorted(node._parameters):     # noqa: SLF001 - every declared one
            if name == "use_sim_time":
                continue
            param = node.get_parameter(name)
            value = param.value
            out[name] = {"type": Parameter.Type(param.type_).name,
                         "value": list(value) if isinstance(value, (list, tuple)) else value,
                         "description": node.describe_parameter(name).description}
        return out
    finally:
        node.destroy_node()


def snapshot() -> Dict[str, Dict[str, Dict[str, Any]]]:
    return {name: declared(make) for name, make in _makers().items()}


@pytest.fixture(scope="module")
def current():
    return snapshot()       # rclpy is initialised for the session by conftest.py


def test_names_types_and_defaults_are_as_recorded(current):
    recorded = json.loads(RECORD.read_text())
    for node, params in recorded.items():
        assert set(current[node]) == set(params), node
        for name, spec in params.items():
            got = current[node][name]
            assert (got["type"], got["value"]) == (spec["type"], spec["value"]), (node, name)


def test_descriptions_are_as_recorded(current):
    # The texts are what `ros2 param describe` and rqt show; moving them from node-local
    # dicts into field metadata must not change them.
    recorded = json.loads(RECORD.read_text())
    for node, params in recorded.items():
        for name, spec in params.items():
            assert current[node][name]["description"] == spec["description"], (node, name)


def test_every_parameter_has_a_description(current):
    for node, params in current.items():
        for name, spec in params.items():
            assert spec["description"].strip(), (node, name)


if __name__ == "__main__":
    rclpy.init()
    json.dump(snapshot(), sys.stdout, indent=1, sort_keys=True, default=str)
    rclpy.shutdown()
