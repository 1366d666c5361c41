"""The executor's one-call attempt (``sim.whole_attempt``, the default) over Fast DDS: the same
grasp as the per-phase path, and a cancel still lands during the call.

Its own module, so that the per-phase graph of test_sim_executor_graph.py (``sim_graph``) is
stopped before this graph starts: pytest keeps a module's fixtures until the module's last
test, and two graphs in one ROS domain serve the same names, so a goal sent to one could be
taken by the other (a fresh-clone run saw the per-phase executor killed at the teardown of
this test, when it still lived in that module).
"""
from __future__ import annotations

import threading

from agentic_grasp.ros.conversions.grasp import grasp_to_msg
from agentic_grasp.core.arm import ArmError
from agentic_grasp.core.heuristic import heuristic_grasp
from agentic_grasp_interfaces.action import ExecuteGrasp

from .test_sim_executor_graph import _truth


def test_one_call_per_attempt_grasps_alike_and_still_cancels(whole_attempt_graph):
    client = whole_attempt_graph.client
    client.load_scene("sg_banana", 0)
    banana = _truth(whole_attempt_graph)["banana_1"]
    phases = []
    result = client.execute_grasp("banana_1", heuristic_grasp(banana),
                                  on_feedback=lambda fb: phases.append(fb.phase))
    assert result.error_code == ArmError.NONE and result.outcome.success, result.message
    assert phases == ["approach", "close", "lift"]           # the last two after the fact

    client.load_scene("sg_banana", 2)                         # a cancel during the call
    banana = _truth(whole_attempt_graph)["banana_1"]
    from agentic_grasp.ros.backends.dependencies import OrderedActionClient as ActionClient

    action = ActionClient(client.node, ExecuteGrasp, "execute_grasp")
    try:
        assert action.wait_for_server(timeout_sec=10.0)
        first_feedback = threading.Event()
        send = action.send_goal_async(ExecuteGrasp.Goal(
            target_id="banana_1", grasp=grasp_to_msg(heuristic_grasp(banana))),
            feedback_callback=lambda fb: first_feedback.set())
        client.wait_future(send, 10.0)
        handle = send.result()
        assert handle.accepted and first_feedback.wait(10.0)
        client.wait_future(handle.cancel_goal_async(), 10.0)
        result_future = handle.get_result_async()
        client.wait_future(result_future, 10.0)
        result = result_future.result().result
    finally:
        action.destroy()
    assert result.error_code == ArmError.CANCELED, result.message
    assert "banana_1" in _truth(whole_attempt_graph)
