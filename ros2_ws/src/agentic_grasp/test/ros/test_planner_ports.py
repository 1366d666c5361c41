"""The node graph's and replay's peers implement the planner's ports,
and the graph's retriever forwards the typed request's fields to the retrieval service.
Replay binds the node's own peers (BoundPerception, ...) to recorded answers."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))  # the planner fakes

from agentic_grasp.core.planner.ports import (Arm, ConstraintReasoner, Perceiver,  # noqa: E402
                                              RetrievalRequest, Retriever)
from agentic_grasp.ros.planner import goal_peers  # noqa: E402
from agentic_grasp.ros.recording import replay_peers  # noqa: E402

from test_planner_fakes import make_object  # noqa: E402

PORTS = [(goal_peers.BoundPerception, Perceiver), (goal_peers.BoundRetriever, Retriever),
         (goal_peers.BoundSceneGraph, ConstraintReasoner), (goal_peers.BoundArm, Arm),
         (replay_peers.RecordedArm, Arm)]


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


def test_replay_perception_serves_the_recorded_answer_through_the_node_binding():
    """The recorded Perceive response comes back through BoundPerception as the live one
    did (same conversion); another question is a divergence, not an answer."""
    from agentic_grasp.ros.common.dependencies import GoalSignal
    from agentic_grasp.ros.recording.codec import msg_to_data
    from agentic_grasp.ros.recording.compare import Divergence, Exchanges
    from agentic_grasp_interfaces.msg import ObjectObservation
    from agentic_grasp_interfaces.srv import Perceive

    response = Perceive.Response()
    response.result.backend, response.result.target_found = "vlm_sim", True
    response.result.target_id = "cup_1"
    response.result.objects = [ObjectObservation(id="cup_1", category="cup", confidence=0.9)]
    request = Perceive.Request(instruction="pick up the cup", camera="fixed")
    doc = {"type": "exchange", "kind": "perceive", "motions": 0,
           "request": msg_to_data(request), "response": msg_to_data(response)}

    def bound():
        ex = Exchanges([doc])
        return goal_peers.BoundPerception(
            replay_peers.RecordedPerception(ex), GoalSignal(), goal_peers.TargetCrops(), 0, 0.0,
            lambda _t: None, lambda _t: None, goal_peers.WorldClock(lambda: None)), ex

    eyes, ex = bound()
    assert eyes.wrist_camera
    result = eyes.perceive("pick up the cup")
    assert result.ok and result.target.id == "cup_1" and ex.unserved() == {}
    eyes, _ = bound()
    with pytest.raises(Divergence) as err:
        eyes.perceive("pick up the bowl")
    assert err.value.kind == "perceive" and "instruction" in err.value.diff


def test_bound_scene_graph_takes_the_first_subgoal_from_the_task_graph_call():
    """The task graph is asked with every target's constraints (one InferConstraints call);
    a sub-goal on the same objects is answered from it, one on objects perceived since (a
    moved neighbour) asks the node (fewer hops)."""
    from types import SimpleNamespace

    from agentic_grasp.core.scene_graph.constraints import ConstraintSet
    from agentic_grasp.ros.planner.peers.scene_graph import SceneGraphService, TaskGraph

    calls = []
    keyed = SimpleNamespace(_frame="world", _source="")

    class Service:
        def scene_key(self, objects):
            return SceneGraphService.scene_key(keyed, objects)

        def task_graph(self, objects, signal=None):
            calls.append(("task_graph", [o.id for o in objects]))
            every = {o.id: ConstraintSet(o.id) for o in objects}
            return TaskGraph("G", every, self.scene_key(objects))

        def constraints(self, objects, target_id, signal=None):
            calls.append(("constraints", target_id))
            return ConstraintSet(target_id)

    class Session:
        def enter(self, _target):
            pass

        def stage(self, *_args):
            pass

    cup, glass = make_object("cup_1", "cup"), make_object("glass_1", "wine glass", xy=(0.5, 0.1))
    bound = goal_peers.BoundSceneGraph(Service(), object(), Session())
    assert bound.scene_graph([cup, glass]) == "G"
    first = bound.constraints([cup, glass], "cup_1")
    assert first.target_id == "cup_1"
    assert calls == [("task_graph", ["cup_1", "glass_1"])]          # no second call
    moved = make_object("glass_1", "wine glass", xy=(0.5, 0.2))       # perceived since
    bound.constraints([cup, moved], "cup_1")
    assert calls[-1] == ("constraints", "cup_1")
    bound.constraints([cup, glass], "glass_1")                       # same objects again
    assert len(calls) == 2


def test_executor_arm_reports_each_phase_once_in_order_even_when_feedback_is_late():
    """The phases the result says ran are reported when their feedback did not arrive before
    the result (rclpy drops feedback taken after it); feedback that does arrive is not
    reported twice."""
    from agentic_grasp.core.types import Phase
    from agentic_grasp.ros.planner.peers.executor_arm import _PhaseRelay

    seen = []
    relay = _PhaseRelay(lambda phase, index, count: seen.append((phase.value, index, count)))
    relay.report(Phase.APPROACH, 1, 3)
    relay.catch_up("lift")                          # close and lift: feedback not arrived
    relay.report(Phase.CLOSE, 2, 3)                 # arrives late: already reported
    assert seen == [("approach", 1, 3), ("close", 2, 3), ("lift", 3, 3)]
    stopped = []
    relay = _PhaseRelay(lambda phase, index, count: stopped.append(phase.value))
    relay.report(Phase.APPROACH, 1, 3)
    relay.catch_up("approach")                      # canceled after approach
    relay.catch_up("")                              # no outcome: nothing ran
    assert stopped == ["approach"]


def test_a_recorded_peer_timeout_replays_to_the_nodes_result():
    """A goal that ended because a peer did not answer replays to the same ending: the
    recorded error is raised again where the live call raised it, and the node's mapping
    (goal_session.exception_error) gives the same error code."""
    from types import SimpleNamespace

    from agentic_grasp.ros.recording.replay import RecordedGoal, replay_goal
    from agentic_grasp_interfaces.action import GraspObject

    code = GraspObject.Result.ERROR_DEPENDENCY_TIMEOUT
    docs = [{"format": 1, "goal_id": "g", "seq": 0, "type": "goal", "configuration": "full",
             "seed": 0, "rng_seed": [0, 7919], "memory": None, "perceive_retries": 0},
            {"format": 1, "goal_id": "g", "seq": 1, "type": "exchange", "kind": "perceive",
             "motions": 0, "request": {"instruction": "pick up the cup", "camera": "fixed"},
             "error": {"type": "DependencyTimeout", "peer": "perception",
                       "detail": "no answer within 30 s"}}]
    log = SimpleNamespace(success=False, error_code=code, grasped_ids=[], configuration="full",
                          message="dependency timeout: the perception node did not answer "
                                  "(no answer within 30 s)")
    report = replay_goal(RecordedGoal("g", "pick up the cup", docs, [], log))
    assert report["verdict"] == "reproduced", report
    assert report["replayed"]["error_code"] == code
    assert report["replayed"]["message"] == log.message
