"""Bringup with the MoveIt backend on ros2_control mock hardware (no robot, no franka_ros2).

The Panda of moveit_resources_panda_moveit_config (apt, Jazzy) runs on mock_components with its
panda_arm_controller (FollowJointTrajectory) and panda_hand_controller (GripperCommand); the
executor runs arm_backend moveit with the defaults of config/executor.yaml (moveit_py, OMPL
transit, Pilz LIN descent). Mock hardware has no object between the fingers, so a reachable
grasp must end in the CLOSE phase with "fingers closed on nothing" (position_error), and a
grasp beyond the arm's reach with unreachable_pose: both reported as outcomes, not errors.

Runs in the ROS image (docker/ros/); it could not be run where this file was written.
"""
import os
import time
import unittest

import launch
import launch_testing.actions
import launch_testing.asserts
import launch_testing.markers
import pytest
from ament_index_python.packages import get_package_share_directory
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch_ros.actions import Node

MOCK_CONFIG = "moveit_resources_panda_moveit_config"
CONTROLLERS = ("joint_state_broadcaster", "panda_arm_controller", "panda_hand_controller")


def _robot_description() -> str:
    from moveit_configs_utils import MoveItConfigsBuilder

    configs = (MoveItConfigsBuilder("panda", package_name=MOCK_CONFIG)
               .robot_description(file_path="config/panda.urdf.xacro")
               .to_moveit_configs())
    return configs.robot_description["robot_description"]


@pytest.mark.launch_test
@launch_testing.markers.keep_alive
def generate_test_description():
    description = {"robot_description": _robot_description()}
    controllers_yaml = os.path.join(get_package_share_directory(MOCK_CONFIG), "config",
                                    "ros2_controllers.yaml")
    hardware = [
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             parameters=[description], output="log"),
        Node(package="controller_manager", executable="ros2_control_node",
             parameters=[controllers_yaml],
             remappings=[("/controller_manager/robot_description", "/robot_description")],
             output="log"),
    ] + [Node(package="controller_manager", executable="spawner", arguments=[name],
              output="log") for name in CONTROLLERS]
    bringup = os.path.join(get_package_share_directory("agentic_grasp"), "launch",
                           "bringup.launch.py")
    return launch.LaunchDescription(hardware + [
        IncludeLaunchDescription(PythonLaunchDescriptionSource(bringup),
                                 launch_arguments={"arm": "moveit",
                                                   "perception": "oracle"}.items()),
        launch_testing.actions.ReadyToTest(),
    ])


class TestBringupMoveItMock(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        from agentic_grasp.ros.client.graph_client import GraphClient

        cls.client = GraphClient("moveit_mock_launch_test")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def _wait_ready(self, timeout_s=90.0):
        """The executor serves its action once MoveItPy and the controllers are up."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.client._execute.wait_for_server(timeout_sec=1.0):
                return
        self.fail(f"executor action not available after {timeout_s:.0f} s")

    def test_1_reachable_grasp_closes_on_nothing(self):
        from agentic_grasp.core.arm.backend import ArmError
        from agentic_grasp.core.types import GraspParameters

        self._wait_ready()
        phases = []
        grasp = GraspParameters(position=[0.45, 0.0, 0.05], width=0.06, force=20.0,
                                approach_height=0.10, speed=0.05)
        result = self.client.execute_grasp("cube_1", grasp, timeout_s=120.0,
                                           on_feedback=lambda fb: phases.append(fb.phase))
        self.assertEqual(result.error_code, ArmError.NONE, result.message)
        self.assertEqual(phases, ["approach", "close"])
        self.assertFalse(result.outcome.success)
        self.assertEqual([e.split(":")[0] for e in result.outcome.events], ["position_error"])

    def test_2_grasp_beyond_reach_is_an_unreachable_pose(self):
        from agentic_grasp.core.arm.backend import ArmError
        from agentic_grasp.core.types import GraspParameters

        self._wait_ready()
        grasp = GraspParameters(position=[0.84, 0.44, 0.0], width=0.06, approach_height=0.05)
        result = self.client.execute_grasp("cube_1", grasp, timeout_s=120.0)
        self.assertEqual(result.error_code, ArmError.NONE, result.message)
        self.assertEqual([e.split(":")[0] for e in result.outcome.events],
                         ["unreachable_pose"])


#: Clean ends of a process stopped by launch: 0, or killed by SIGINT / SIGTERM.
CLEAN_EXIT_CODES = [0, -2, -15, 130]
#: SIGSEGV, as a negative signal number or a shell's 128 + 11.
SEGFAULT_EXIT_CODES = [-11, 139]


def _executor_output(proc_output) -> str:
    return "".join(io.text.decode(errors="replace") for io in proc_output
                   if io.process_name.startswith("executor"))


@launch_testing.post_shutdown_test()
class TestBringupMoveItMockShutdown(unittest.TestCase):

    def test_processes_exit(self, proc_info, proc_output):
        """Every process ends cleanly, with one allowance: the executor may end with SIGSEGV
        only after its MoveIt backend shut MoveItPy down and began deleting MoveItCpp.

        Why a -11 there is MoveIt's: the executor node's destroy_node() calls the backend's
        close(), which calls MoveItPy.shutdown() and drops the last reference while rclpy is
        still up, logging "MoveItPy shut down; deleting MoveItCpp" first. MoveIt 2.12.4 (Jazzy)
        can still segfault inside that deletion, even after shutdown() (moveit2#3721, open).
        A segfault before that line, or in any other process, fails this test."""
        executor_log = _executor_output(proc_output)
        for info in proc_info:
            allowed = list(CLEAN_EXIT_CODES)
            if info.process_name.startswith("executor") and \
                    "MoveItPy shut down; deleting MoveItCpp" in executor_log:
                allowed += SEGFAULT_EXIT_CODES          # moveit2#3721, see the docstring
            self.assertIn(info.returncode, allowed,
                          f"{info.process_name} exited with {info.returncode}")

    def test_executor_shut_moveit_down_explicitly(self, proc_output):
        self.assertIn("MoveItPy shut down; deleting MoveItCpp", _executor_output(proc_output))
