"""The node graph's and replay's peers implement the planner's ports (issue 27, item 1),
and the graph's retriever forwards the typed request's fields to the retrieval service."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))  # the planner fakes

from agentic_grasp.core.planner.ports import (Arm, ConstraintReasoner, Perceiver,  # noqa: E402
                                              RetrievalRequest, Retriever)
from agentic_grasp.ros import goal_peers  # noqa: E402
from agentic_grasp.ros.recording import replay  # noqa: E402

from test_planner_fakes import make_object  # noqa: E402

PORTS = [(goal_peers.BoundPerception, Perceiver), (goal_peers.BoundRetriever, Retriever),
         (goal_peers.BoundSceneGraph, ConstraintReasoner), (goal_peers.BoundArm, Arm),
         (replay.ReplayPerception, Perceiver), (replay.ReplayArm, Arm)]


@pytest.mark.parametrize("impl,port", PORTS, ids=lambda c: c.__name__)
def test_graph_and_replay_peers_implement_their_ports(impl, port):
    assert issubclass(impl, port)
    assert not getattr(impl, "__abstractmethods__", frozenset())


def test_bound_retriever_forwards_the_request_to_the_service():
    calls, said = [], []

    class Service:
        def retrieve(self, *args, signal=None):
            calls.append((args, signal))
            return "answer"

    signal = object()
    box = make_object("box_1", "box", size=(0.05, 0.07, 0.08))
    request = RetrievalRequest.of(box, None, 5, "vlm_sim")
    bound = goal_peers.BoundRetriever(Service(), signal, said.append)
    assert bound.retrieve(request) == "answer"
    (args, got_signal), = calls
    category, affordance, embedding, crop, model, k, mode, size, backend = args
    assert (category, affordance, k, backend) == ("box", box.affordance, 5, "vlm_sim")
    assert embedding is None and crop is None and model is None and mode is None
    assert size == pytest.approx((0.05, 0.07, 0.08)) and got_signal is signal
    assert said and "'box'" in said[0]


def test_replay_perception_serves_the_recorded_answers_by_instruction():
    eyes = replay.ReplayPerception([])
    assert not eyes.wrist_camera
    result = eyes.perceive("pick up the cup")
    assert not result.ok and "no recorded perception" in result.error
