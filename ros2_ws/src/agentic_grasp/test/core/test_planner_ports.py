"""The planner's peers as ports: every in-process implementation
subclasses its port, the planner refuses a peer that does not (a clear TypeError, before
anything runs), and the typed requests carry what the planner always passed."""
from __future__ import annotations

import numpy as np
import pytest

from agentic_grasp.core.arm.backend import InProcessSimArm
from agentic_grasp.core.scene_graph.constraints import infer_constraints
from agentic_grasp.core.planner import EpisodicMemory, PlannerConfig, ReflectivePlanner
from agentic_grasp.core.planner.episode import CameraPerception
from agentic_grasp.core.planner.peers import (FunctionPerceiver, HaaRagRetriever,
                                              SceneGraphReasoner, as_retriever)
from agentic_grasp.core.planner.ports import (Arm, ConstraintReasoner, Perceiver,
                                              RetrievalRequest, Retriever)
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.scene_graph.graph import build_scene_graph
from agentic_grasp.core.types import Shape

from test_planner_fakes import (FixedRetriever, ScriptedArm, experience, make_object, ok,
                                perception_of)

IN_PROCESS = [(CameraPerception, Perceiver), (FunctionPerceiver, Perceiver),
              (HaaRagRetriever, Retriever), (SceneGraphReasoner, ConstraintReasoner),
              (InProcessSimArm, Arm)]


@pytest.mark.parametrize("impl,port", IN_PROCESS, ids=lambda c: c.__name__)
def test_each_in_process_peer_implements_its_port(impl, port):
    assert issubclass(impl, port)
    assert not getattr(impl, "__abstractmethods__", frozenset())     # nothing left abstract


def _scene():
    box = make_object("box_1", "box", xy=(0.5, 0.0), size=(0.05, 0.07, 0.08))
    vase = make_object("vase_1", "vase", xy=(0.5, 0.12), size=(0.08, 0.08, 0.15),
                       fragility=0.8, shape=Shape.CYLINDER, aff_type="Fragile")
    return [box, vase]


class DuckRetriever:            # HAA-RAG's signature, but not a Retriever
    def retrieve(self, *args, **kwargs):
        raise AssertionError("never called")


def test_the_planner_refuses_peers_that_are_not_ports():
    with pytest.raises(TypeError, match=r"retriever must implement .*ports\.Retriever"):
        ReflectivePlanner(PlannerConfig(), DuckRetriever())
    with pytest.raises(TypeError, match=r"ConstraintReasoner"):
        ReflectivePlanner(PlannerConfig(), None, lambda objects, target_id: None)
    planner = ReflectivePlanner(PlannerConfig(), FixedRetriever([]))
    arm = ScriptedArm([ok()])
    with pytest.raises(TypeError, match=r"perceiver must implement .*ports\.Perceiver"):
        planner.run_task("pick up the box", lambda _text: perception_of(_scene(), "box_1"),
                         arm, EpisodicMemory())

    class DuckArm:
        def execute(self, *args, **kwargs):
            raise AssertionError("never called")

    with pytest.raises(TypeError, match=r"arm must implement .*ports\.Arm"):
        planner.plan_and_execute(perception_of(_scene(), "box_1"), "box_1", DuckArm())
    with pytest.raises(TypeError, match=r"ports\.Arm"):
        planner.run_task("pick up the box", FunctionPerceiver(
            lambda _text: perception_of(_scene(), "box_1")), DuckArm())
    assert arm.grasps == []                    # refused before anything ran


def test_retrieval_gets_a_typed_request_with_the_perceived_size():
    retriever = FixedRetriever([experience("box-001", "box", {"width": 0.06, "force": 10.0})])
    planner = ReflectivePlanner(PlannerConfig(), retriever)
    goal = planner.plan_and_execute(perception_of(_scene(), "box_1"), "box_1",
                                    ScriptedArm([ok()]), EpisodicMemory())
    assert goal.success and retriever.requests
    request = retriever.requests[0]
    assert isinstance(request, RetrievalRequest)
    assert request.category == "box" and request.size == pytest.approx((0.05, 0.07, 0.08))
    assert request.perception_backend == "test"
    assert request.k == PlannerConfig().grasp_synthesis.retrieve_k


def test_haa_rag_retriever_passes_every_field_by_name():
    seen = {}

    class Rag:
        def retrieve(self, category, affordance, **kwargs):
            seen.update(kwargs, category=category, affordance=affordance)
            return "answer"

    box = _scene()[0]
    crop = np.zeros((4, 4, 3), dtype=np.uint8)
    request = RetrievalRequest.of(box, crop, 7, "vlm_sim")
    assert HaaRagRetriever(Rag()).retrieve(request) == "answer"
    assert seen["category"] == "box" and seen["affordance"] is box.affordance
    assert seen["size"] == pytest.approx(tuple(box.size)) and seen["k"] == 7
    assert seen["crop"] is crop and seen["perception_backend"] == "vlm_sim"
    assert as_retriever(None) is None
    wrapped = HaaRagRetriever(Rag())
    assert as_retriever(wrapped) is wrapped and isinstance(as_retriever(Rag()), Retriever)
    blank = box.copy()
    blank.affordance = None
    with pytest.raises(ValueError, match="no affordance"):
        RetrievalRequest.of(blank, None, None, "")


def test_scene_graph_reasoner_is_build_scene_graph_and_infer_constraints():
    cfg = SceneGraphConfig()
    objects = _scene()
    reasoner = SceneGraphReasoner(cfg, (1.0, 0.0, 0.8))
    direct = build_scene_graph(objects, (1.0, 0.0, 0.8), cfg)
    assert reasoner.scene_graph(objects).relations() == direct.relations()
    got = reasoner.constraints(objects, "box_1")
    want = infer_constraints(direct, "box_1", cfg)
    assert got.explanations() == want.explanations() and len(got) == len(want)


def test_a_function_perceiver_looks_only_when_given_a_look():
    blind = FunctionPerceiver(lambda text: perception_of(_scene(), "box_1"))
    assert not blind.wrist_camera and blind.perceive("x").target.id == "box_1"
    with pytest.raises(NotImplementedError, match="no wrist camera"):
        blind.look("x", None)
    eyes = FunctionPerceiver(blind.perceive, lambda text, camera: perception_of([], ""))
    assert eyes.wrist_camera and eyes.look("x", None).target is None
