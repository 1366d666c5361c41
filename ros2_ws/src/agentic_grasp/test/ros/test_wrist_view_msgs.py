"""The wrist view's messages (ros/conversions/wrist_view.py): poses, the camera model, view
results."""
import math

import numpy as np
import pytest

from agentic_grasp.ros.conversions.wrist_view import (fill_view_result, fill_wrist_camera,
                                                      pose_from_msg, pose_to_msg,
                                                      view_result_from_msg,
                                                      wrist_camera_from_response)
from agentic_grasp.core.arm.backend import ArmError, ViewResult, WristCameraInfo
from agentic_grasp.core.camera import look_at
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.sim.params import WristCameraMount
from agentic_grasp_interfaces.action import MoveCamera
from agentic_grasp_interfaces.srv import WristCamera

MOUNT = WristCameraMount()


def test_pose_round_trip_and_refusals():
    T = look_at([0.6, 0.1, 0.5], [0.6, 0.0, 0.02], [-1.0, 0.0, 0.0])
    assert np.allclose(pose_from_msg(pose_to_msg(T)), T, atol=1e-12)
    bad = pose_to_msg(T)
    bad.orientation.w += 0.5
    with pytest.raises(ValidationError, match="unit quaternion"):
        pose_from_msg(bad)
    bad = pose_to_msg(T)
    bad.position.z = math.inf
    with pytest.raises(ValidationError, match="not finite"):
        pose_from_msg(bad)


def test_the_camera_model_travels_without_the_scene():
    info = WristCameraInfo(MOUNT.intrinsics(), MOUNT.min_range_m, MOUNT.T_tcp_cam)
    response = fill_wrist_camera(WristCamera.Response(), info)
    back = wrist_camera_from_response(response)
    assert (back.camera.width, back.camera.height) == (MOUNT.width, MOUNT.height)
    assert back.camera.fx == pytest.approx(MOUNT.fx) and back.camera.cx == pytest.approx(319.5)
    assert back.camera.frame_id == "wrist_camera_color_optical_frame"
    assert back.min_range_m == MOUNT.min_range_m
    assert np.allclose(back.T_tcp_cam, MOUNT.T_tcp_cam)
    none = fill_wrist_camera(WristCamera.Response(), None, "the moveit arm has no wrist camera")
    assert not none.available and "no wrist camera" in none.message
    assert wrist_camera_from_response(none) is None


def test_a_view_result_carries_the_pose_reached_and_when():
    info = WristCameraInfo(MOUNT.intrinsics(), MOUNT.min_range_m, MOUNT.T_tcp_cam)
    T = look_at([0.55, 0.0, 0.6], [0.55, 0.0, 0.0], [-1.0, 0.0, 0.0])
    sent = ViewResult(ArmError.NONE, "view pose reached", MOUNT.camera(T), 0.8, 0.05,
                      "palm vs table", 1_700_000_000_123_456_789)
    got = view_result_from_msg(fill_view_result(MoveCamera.Result(), sent), info)
    assert got.reached and got.reached_ns == sent.reached_ns
    assert np.allclose(got.camera.T_world_cam, T, atol=1e-12)
    assert (got.duration_s, got.clearance_m, got.nearest) == (0.8, 0.05, "palm vs table")
    refused = ViewResult(ArmError.OUT_OF_WORKSPACE, "view pose out of the arm's reach")
    got = view_result_from_msg(fill_view_result(MoveCamera.Result(), refused), info)
    assert not got.reached and got.error == ArmError.OUT_OF_WORKSPACE and got.camera is None
    # reached, but no camera model to place it with: not a view the planner can use
    got = view_result_from_msg(fill_view_result(MoveCamera.Result(), sent), None)
    assert got.error == ArmError.BACKEND_FAILURE and not got.reached
