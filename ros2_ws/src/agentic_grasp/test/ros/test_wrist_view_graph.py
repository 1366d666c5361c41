"""The wrist-camera view through the node graph (one system).

Every node a process, the default perception (vlm_sim). ``it_ball_behind_box`` hides the
ball behind a box wider than the hand: the planner must look behind the box with the wrist
camera (MoveCamera on the executor, the sim's wrist capture, Perceive camera=wrist) and then
grasp the ball, as the in-process benchmark does on the same trial seed. A view request the
arm cannot reach, or one that is not a pose, gets a clear error and the graph runs on.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.camera import look_at

from .conftest import assert_stopped

TASK = "it_ball_behind_box"


class _Graph:
    """Every node as a process (vlm_sim, acquisition off) and a client."""

    def __init__(self) -> None:
        from agentic_grasp.ros.client.graph_client import GraphClient
        from agentic_grasp.ros.graph.launcher import Launcher

        # the planner as bench paper --ros runs it (benchmarks/ros_sweep.graph_params)
        self.launcher = Launcher({"arm": "sim", "perception": "vlm_sim", "acquired": "none"},
                                 extra_params={"planner": {"memory_lifetime": "goal",
                                                           "visual_query": "camera"}})
        self.launcher.start()
        self.client = GraphClient("test_wrist_view_client")

    def close(self):
        self.client.close()
        return self.launcher.stop()


@pytest.fixture(scope="module")
def graph():
    g = _Graph()
    yield g
    codes = g.close()
    assert_stopped(codes)


def _move_camera(graph, pose_msg, timeout_s=20.0):
    from agentic_grasp.ros.common.dependencies import OrderedActionClient as ActionClient
    from agentic_grasp_interfaces.action import MoveCamera

    client = ActionClient(graph.client.node, MoveCamera, "move_camera")
    try:
        assert client.wait_for_server(timeout_sec=30.0), "move_camera did not come up"
        # resent while unanswered: a new client's first goal can find the server's response
        # writer not yet matched to it, and that answer is lost
        handle = client.send_goal_resending(MoveCamera.Goal(camera_pose=pose_msg), None,
                                            timeout_s)
        assert handle is not None and handle.accepted
        result = handle.get_result_async()
        graph.client.wait_future(result, timeout_s)
        return result.result().result
    finally:
        client.destroy()


def _perceive(graph, camera, pose_msg=None, timeout_s=20.0):
    from agentic_grasp_interfaces.srv import Perceive

    client = graph.client.node.create_client(Perceive, "perceive")
    try:
        assert client.wait_for_service(timeout_sec=30.0)
        request = Perceive.Request(instruction="pick up the ball", camera=camera)
        if pose_msg is not None:
            request.camera_pose = pose_msg
        future = client.call_async(request)
        graph.client.wait_future(future, timeout_s)
        assert future.done(), "perceive did not answer"
        return future.result().result
    finally:
        graph.client.node.destroy_client(client)


def test_hidden_ball_is_found_by_a_wrist_view_and_grasped(graph):
    from agentic_grasp_lab.evaluation.sweep import trial_seed
    from agentic_grasp.core.planner.episode import run_trial
    from agentic_grasp.core.sim import load_task
    from agentic_grasp.ros.conversions.records import is_view_record
    from agentic_grasp.ros.client.planner import PlannerClient, load_scene

    spec = load_task(TASK)
    seed = trial_seed(0, TASK, 0)
    load_scene(graph.client, TASK, seed, settle_s=0.5)
    planner = PlannerClient(graph.client)
    try:
        assert planner.wait_for_server(60.0)
        result = planner.grasp(spec.instruction, "full", timeout_s=240.0)
    finally:
        planner.close()
    views = [a for a in result.attempts if is_view_record(a)]
    grasps = [a for a in result.attempts if not is_view_record(a)]
    assert result.success, (result.error_code, result.message)
    assert list(result.grasped_ids) == list(spec.targets)
    assert views, "the ball was grasped without a view: it was not hidden?"
    assert views[-1].outcome.success          # the last view saw the target
    assert all(a.target_id in spec.targets for a in grasps)   # never the box
    # the same trial in process: the same views and the same grasps
    inproc = run_trial(TASK, "full", seed, perception="vlm_sim", visual_query="camera")
    assert inproc.success
    assert len(inproc.task.views) == len(views)
    assert inproc.n_attempts == len(grasps)
    assert [v.side for v in inproc.task.views] == [
        a.candidate.split("'s ", 1)[1] for a in views]


def test_bad_view_requests_get_clear_errors_and_the_graph_runs_on(graph):
    from agentic_grasp.ros.conversions.wrist_view import pose_to_msg
    from agentic_grasp_interfaces.srv import Perceive

    graph.client.load_scene(TASK, 0, timeout_s=30.0)
    far = pose_to_msg(look_at([3.0, 0.0, 1.0], [3.0, 0.5, 0.0], [0.0, 0.0, 1.0]))
    result = _move_camera(graph, far)
    assert result.error_code == ArmError.OUT_OF_WORKSPACE, result.message
    assert "reach" in result.message
    bad = pose_to_msg(np.eye(4))
    bad.orientation.w = 2.0                     # not a unit quaternion
    result = _move_camera(graph, bad)
    assert result.error_code == ArmError.INVALID_PARAMETERS
    assert "quaternion" in result.message
    bad.position.x = math.nan
    result = _move_camera(graph, bad)
    assert result.error_code == ArmError.INVALID_PARAMETERS and "finite" in result.message
    # an unknown camera is refused by perception with the reason
    answer = _perceive(graph, "thermal")
    assert answer.error and "camera must be" in answer.error
    # the graph still works: a reachable view above the table is reached and perceived
    above = look_at([0.55, 0.0, 0.60], [0.55, 0.0, 0.0], [-1.0, 0.0, 0.0])
    result = _move_camera(graph, pose_to_msg(above))
    assert result.error_code == ArmError.NONE, result.message
    answer = _perceive(graph, Perceive.Request.CAMERA_WRIST, result.camera_pose)
    assert not answer.error, answer.error
    assert graph.launcher.dead() == []
