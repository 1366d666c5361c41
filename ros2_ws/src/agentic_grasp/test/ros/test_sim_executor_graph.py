"""Whole graph: sim and executor nodes as separate processes, talking over Fast DDS."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from agentic_grasp.ros.client.graph_client import GraphError
from agentic_grasp.ros.conversions.grasp import grasp_to_msg, observation_from_msg
from agentic_grasp.core.arm.backend import ArmError, ArmResult
from agentic_grasp.core.arm.observation import MIN_OBJECT_WIDTH_M
from agentic_grasp.core.grasping.config import HandConfig
from agentic_grasp.core.grasping.hand import HandModel
from agentic_grasp.core.grasping.heuristic import heuristic_grasp
from agentic_grasp.core.planner.recovery.diagnosis import assess
from agentic_grasp.core.types import Phase
from agentic_grasp_interfaces.action import ExecuteGrasp


def _truth(graph, until=None, timeout_s=5.0):
    """The latest ground truth; with ``until``, spin until it holds (the topic is latched and
    the sim publishes after every change, so a fresh message may arrive after the result)."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        truth = {o.id: o for o in graph.client.ground_truth()}
        if until is None or until(truth) or time.monotonic() > deadline:
            return truth
        graph.client._truth_event.clear()
        graph.client._truth_event.wait(0.1)


PHASES = ["approach", "close", "lift"]


def held(result) -> bool:
    """What the executor's result says of the hand: the grasp action succeeded and the
    fingers still close on something at the top of the lift."""
    obs = observation_from_msg(result.observation)
    return (obs is not None and obs.phase_reached == Phase.LIFT and bool(obs.is_grasped)
            and obs.width_after_lift_m >= MIN_OBJECT_WIDTH_M)


def read(result, grasp, target, objects=()):
    """The planner's reading of the result's observation (core/planner/recovery/diagnosis):
    what it records as the attempt's outcome."""
    observation = observation_from_msg(result.observation)
    return assess(ArmResult(ArmError(result.error_code), result.message, observation), grasp,
                  HandModel(HandConfig()), target, list(objects))


def all_phases(phases, timeout_s=5.0):
    """``phases`` (a list the feedback callback appends to, on the client's spin thread) once
    all three have arrived, or as it stands after ``timeout_s``. Feedback travels on its own
    topic and the result as a service reply: DDS does not order the two, and rclpy's
    ActionClient drops feedback that lands after its goal's result."""
    import time

    deadline = time.monotonic() + timeout_s
    while len(phases) < len(PHASES) and time.monotonic() < deadline:
        time.sleep(0.02)
    return list(phases)


def in_phase_order(phases) -> bool:
    """Whether ``phases`` are distinct phases in the arm's order (some may be missing)."""
    at = [PHASES.index(p) for p in phases if p in PHASES]
    return len(at) == len(phases) and at == sorted(set(at))


def test_banana_is_grasped_over_dds(sim_graph):
    client = sim_graph.client
    loaded = client.load_scene("sg_banana", 0)
    assert list(loaded.target_ids) == ["banana_1"]
    objects = {o.id: o for o in client.ground_truth()}
    phases = []
    grasp = heuristic_grasp(objects["banana_1"])
    result = client.execute_grasp("banana_1", grasp,
                                  on_feedback=lambda fb: phases.append(fb.phase))
    assert result.error_code == ArmError.NONE, result.message
    assert held(result), result.observation
    reading = read(result, grasp, objects["banana_1"], objects.values())
    assert reading.success, reading.diagnosis
    # Per phase, each is sent as its phase starts; still, a client spun late takes the last
    # one with the result, and rclpy's ActionClient runs the result first and then drops the
    # feedback of a finished goal (rclpy/action/client.py, execute). What arrives is in order.
    got = all_phases(phases, timeout_s=1.0)
    assert got and in_phase_order(got), got
    assert len(reading.outcome.phi) == 7
    assert 0.0 < reading.outcome.quality <= 1.0
    # The lifted banana has left the table.
    assert "banana_1" not in _truth(sim_graph, until=lambda t: "banana_1" not in t)


@pytest.mark.parametrize("change, code", [
    ({"position": [math.nan, 0.0, 0.02]}, ArmError.INVALID_PARAMETERS),
    ({"force": math.inf}, ArmError.INVALID_PARAMETERS),
    ({"force": 500.0}, ArmError.FORCE_LIMIT),
    ({"width": 0.12}, ArmError.WIDTH_LIMIT),
    ({"position": [1.5, 0.0, 0.02]}, ArmError.OUT_OF_WORKSPACE),
    ({"target": "unicorn"}, ArmError.UNKNOWN_TARGET),
])
def test_bad_requests_are_rejected_and_change_nothing(sim_graph, change, code):
    client = sim_graph.client
    client.load_scene("sg_banana", 1)
    before = _truth(sim_graph)
    banana = before["banana_1"]
    msg = grasp_to_msg(heuristic_grasp(banana))
    if "position" in change:
        msg.position.x, msg.position.y, msg.position.z = change["position"]
    if "force" in change:
        msg.grip_force = change["force"]
    if "width" in change:
        msg.gripper_width = change["width"]
    goal = ExecuteGrasp.Goal(target_id=change.get("target", "banana_1"), grasp=msg)
    result = client.execute_grasp("", None, goal_msg=goal)
    assert result.error_code == code, result.message
    assert result.message
    after = _truth(sim_graph)
    assert after.keys() == before.keys()
    for oid, obj in before.items():
        assert np.allclose(obj.position, after[oid].position)
    assert sim_graph.launcher.dead() == []


def cancel_during_attempt(graph) -> None:
    """Load sg_banana seed 2, send a grasp of the banana, cancel it at its first feedback:
    the result is CANCELED and the banana is still on the table."""
    client = graph.client
    client.load_scene("sg_banana", 2)
    banana = _truth(graph)["banana_1"]
    goal = ExecuteGrasp.Goal(target_id="banana_1", grasp=grasp_to_msg(heuristic_grasp(banana)))
    from agentic_grasp.ros.common.dependencies import OrderedActionClient as ActionClient

    action = ActionClient(client.node, ExecuteGrasp, "execute_grasp")
    try:
        assert action.wait_for_server(timeout_sec=10.0)
        first_feedback = threading.Event()
        # resent while unanswered: this client is new, and the server's response writer may
        # not have matched it when the first copy lands (a loop of this test saw the goal's
        # answer never come, once in 15 runs)
        handle = action.send_goal_resending(goal, lambda fb: first_feedback.set(), 10.0)
        assert handle is not None and handle.accepted
        assert first_feedback.wait(10.0)
        cancel = handle.cancel_goal_async()
        client.wait_future(cancel, 10.0)
        result_future = handle.get_result_async()
        client.wait_future(result_future, 10.0)
        result = result_future.result().result
    finally:
        action.destroy()
    assert result.error_code == ArmError.CANCELED, result.message
    assert "banana_1" in _truth(graph)


def test_cancel_stops_the_attempt_and_keeps_the_object(sim_graph):
    cancel_during_attempt(sim_graph)


def test_second_goal_while_busy_is_rejected(sim_graph):
    client = sim_graph.client
    client.load_scene("sg_banana", 3)
    banana = _truth(sim_graph)["banana_1"]
    goal = ExecuteGrasp.Goal(target_id="banana_1", grasp=grasp_to_msg(heuristic_grasp(banana)))
    from agentic_grasp.ros.common.dependencies import OrderedActionClient as ActionClient

    action = ActionClient(client.node, ExecuteGrasp, "execute_grasp")
    try:
        assert action.wait_for_server(timeout_sec=10.0)
        first = action.send_goal_resending(goal, None, 10.0)        # as in cancel_during_attempt
        assert first is not None and first.accepted
        second = action.send_goal_async(goal)
        client.wait_future(second, 10.0)
        assert not second.result().accepted
        done = first.get_result_async()
        client.wait_future(done, 10.0)
        assert done.result().result.error_code == ArmError.NONE
    finally:
        action.destroy()


def test_load_of_a_missing_scene_is_an_error_not_a_crash(sim_graph):
    with pytest.raises(GraphError, match="cannot load scene"):
        sim_graph.client.load_scene("no_such_task", 0)
    assert sim_graph.launcher.dead() == []


def test_joint_states_follow_the_arm(sim_graph):
    """joint_states starts at the ready pose and moves to the grasp configuration."""
    import threading

    from sensor_msgs.msg import JointState

    from agentic_grasp.core.arm.panda_model import Q_READY
    from agentic_grasp.core.arm.kinematics import PandaKinematics

    client = sim_graph.client
    client.load_scene("sg_banana", 4)
    banana = _truth(sim_graph)["banana_1"]
    grasp = heuristic_grasp(banana)
    latest = {}
    got = threading.Event()

    def on_joints(msg):
        latest["q"] = list(msg.position[:7])
        latest["names"] = list(msg.name)
        got.set()

    sub = client.node.create_subscription(JointState, "joint_states", on_joints, 10)

    def wait_for(condition, timeout_s=5.0):
        # joint_states streams at 20 Hz; a message sent before the last change may still
        # arrive first, so wait for the expected state rather than take the first message.
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            got.clear()
            if got.wait(0.5) and condition():
                return True
        return False

    try:
        assert wait_for(lambda: np.allclose(latest["q"], Q_READY)), latest
        assert latest["names"][:7] == [f"fer_joint{i}" for i in range(1, 8)]
        client.execute_grasp("banana_1", grasp)
        kin = PandaKinematics()
        assert wait_for(lambda: np.linalg.norm(
            kin.fk(np.array(latest["q"]))[:3, 3] - grasp.position) < 1e-3), latest
    finally:
        client.node.destroy_subscription(sub)
