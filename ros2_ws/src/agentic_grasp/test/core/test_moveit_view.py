"""The MoveIt wrist-camera view (ros/executor/moveit/view.py) without MoveIt: the camera-frame
pose goal, the camera reached, the error mapping, and the view motion against stand-ins of
the backend's planning calls."""
import math
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest

from agentic_grasp.ros.executor.moveit import config as mc
from agentic_grasp.ros.executor.moveit import outcome as mo
from agentic_grasp.ros.executor.moveit.view import (MoveItViewMixin, MoveItWristCamera,
                                                    reached_camera, view_error, view_link_pose)
from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.camera import look_at
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.arm.kinematics import PandaKinematics
from agentic_grasp.core.sim.params import WristCameraMount

CFG = mc.MoveItBackendConfig()
MOUNT = WristCameraMount()
#: A view from above the region behind the benchmark's box (the first of
#: core/planner/instruction/uncover.py).
VIEW = look_at([0.62, 0.0, 0.45], [0.62, 0.0, 0.02], [-1.0, 0.0, 0.0])


def test_the_link_goal_puts_the_optical_frame_at_the_view():
    link = view_link_pose(VIEW, MOUNT, CFG).matrix()
    camera = link @ CFG.link_to_tcp() @ MOUNT.T_tcp_cam
    assert np.allclose(camera, VIEW, atol=1e-9)
    # the same TCP pose as the simulator's view (core/sim/view.plan_view) asks its IK for
    tcp = VIEW @ np.linalg.inv(MOUNT.T_tcp_cam)
    assert np.allclose(link @ CFG.link_to_tcp(), tcp, atol=1e-9)
    # and that TCP pose is one the arm can reach (the simulator's own IK)
    assert PandaKinematics().ik(tcp) is not None


def test_the_camera_reached_is_where_the_measured_link_is():
    link = view_link_pose(VIEW, MOUNT, CFG).matrix()
    moved = link.copy()
    moved[:3, 3] += [0.002, -0.001, 0.0]          # the arm stopped 2 mm off the goal
    camera = reached_camera(moved, MOUNT, CFG)
    assert np.allclose(camera.T_world_cam[:3, 3], VIEW[:3, 3] + [0.002, -0.001, 0.0])
    assert (camera.width, camera.height, camera.fx) == (MOUNT.width, MOUNT.height, MOUNT.fx)
    assert camera.frame_id == "wrist_camera_color_optical_frame"


@pytest.mark.parametrize("name, error, words", [
    ("NO_IK_SOLUTION", ArmError.OUT_OF_WORKSPACE, "reach"),
    ("PLANNING_FAILED", ArmError.OUT_OF_WORKSPACE, "reach"),
    ("GOAL_IN_COLLISION", ArmError.INVALID_PARAMETERS, "touch"),
    ("INVALID_LINK_NAME", ArmError.BACKEND_FAILURE, "cannot plan"),
    ("PREEMPTED", ArmError.INVALID_PARAMETERS, "not planned"),
])
def test_planning_errors_map_like_a_grasps(name, error, words):
    got, message = view_error(mo.MOVEIT_ERROR_CODES[name])
    assert got == error and words in message and name in message


def test_no_camera_unless_the_set_up_says_so():
    assert MoveItWristCamera().mount() is None
    mount = MoveItWristCamera(enabled=True).mount()
    assert mount.T_tcp_cam[:3, 3].tolist() == list(MOUNT.offset_m)
    with pytest.raises(ConfigError):
        MoveItWristCamera(enabled=True, fx=-1.0).mount()


class _Arm(MoveItViewMixin):
    """MoveItArmBackend's planning calls, recorded; the arm 'reaches' the planned goal."""

    def __init__(self, mount, plan_code=None, fail="", cancel_in_execute=False):
        self.cfg, self.wrist_mount = CFG, mount
        self.calls, self._goal = [], None
        self._plan_code, self._fail, self._cancel_in = plan_code, fail, cancel_in_execute
        self.canceled = False
        clock = SimpleNamespace(now=lambda: SimpleNamespace(nanoseconds=123))
        self._node = SimpleNamespace(get_clock=lambda: clock)

        @contextmanager
        def read_only():
            p, q = self._goal.position, self._goal.orientation
            pose = SimpleNamespace(position=SimpleNamespace(x=p[0], y=p[1], z=p[2]),
                                   orientation=SimpleNamespace(x=q[0], y=q[1], z=q[2], w=q[3]))
            yield SimpleNamespace(current_state=SimpleNamespace(get_pose=lambda link: pose))

        self._psm = SimpleNamespace(read_only=read_only)

    def _update_scene(self, target_id, _is_canceled):
        self.calls.append(("scene", target_id))

    def _plan_to(self, pose, request, scaling):
        self.calls.append(("plan", request, scaling))
        self._goal = pose
        return (None, self._plan_code) if self._plan_code is not None else ("traj", None)

    def _execute(self, trajectory, is_canceled):
        self.calls.append(("execute", trajectory))
        if self._cancel_in:
            self.canceled = True
            raise RuntimeError("stand-in for _Canceled")
        return self._fail


def test_a_view_is_a_collision_checked_transit_to_the_camera_goal():
    arm = _Arm(MOUNT)
    result = arm.move_camera_to(VIEW, lambda: arm.canceled)
    assert result.reached, result.message
    assert arm.calls[0] == ("scene", "")            # every perceived object an obstacle
    assert arm.calls[1] == ("plan", CFG.transit_request, None)
    assert np.allclose(result.camera.T_world_cam, VIEW, atol=1e-9)
    assert result.reached_ns == 123 and math.isnan(result.clearance_m)
    info = arm.wrist_camera()
    assert info.min_range_m == MOUNT.min_range_m and np.allclose(info.T_tcp_cam,
                                                                 MOUNT.T_tcp_cam)


def test_view_refusals_and_cancel():
    arm = _Arm(MOUNT, plan_code=mo.MOVEIT_ERROR_CODES["NO_IK_SOLUTION"])
    result = arm.move_camera_to(VIEW, lambda: False)
    assert result.error == ArmError.OUT_OF_WORKSPACE and not result.reached
    assert [c[0] for c in arm.calls] == ["scene", "plan"]     # nothing executed
    arm = _Arm(MOUNT, fail="CONTROL_FAILED")
    assert arm.move_camera_to(VIEW, lambda: False).error == ArmError.BACKEND_FAILURE
    arm = _Arm(MOUNT, cancel_in_execute=True)
    assert arm.move_camera_to(VIEW, lambda: arm.canceled).error == ArmError.CANCELED
    arm = _Arm(None)
    result = arm.move_camera_to(VIEW, lambda: False)
    assert result.error == ArmError.BACKEND_UNAVAILABLE and "wrist_camera.enabled" in \
        result.message
    assert arm.wrist_camera() is None and arm.calls == []
