"""Bring up the agentic_grasp node graph: ros2 launch agentic_grasp bringup.launch.py.

The node list, parameter files and per-argument overrides come from agentic_grasp.graph, the
same table ``agentic-grasp bringup`` uses on machines without ros2 launch, so both start the
same graph from the same configuration.

Examples:
  ros2 launch agentic_grasp bringup.launch.py                      # simulator + oracle
  ros2 launch agentic_grasp bringup.launch.py perception:=vlm vlm_url:=http://gpu:8000/v1
  ros2 launch agentic_grasp bringup.launch.py arm:=moveit          # real Panda via MoveIt
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import Node

from agentic_grasp.graph import DEFAULT_ARGS, RECORD_TOPICS, selected_nodes


def _nodes(context, *_args, **_kwargs):
    share = get_package_share_directory("agentic_grasp")
    args = {name: LaunchConfiguration(name).perform(context) for name in DEFAULT_ARGS}
    actions = []
    for spec in selected_nodes(args):
        parameters = []
        params_file = os.path.join(share, "config", spec.params_file)
        if os.path.isfile(params_file):
            parameters.append(params_file)
        if args.get("params_file"):
            parameters.append(args["params_file"])
        overrides = spec.overrides(args)
        if overrides:
            parameters.append(overrides)
        actions.append(Node(package="agentic_grasp", executable=spec.executable,
                            name=spec.name, parameters=parameters, output="screen",
                            emulate_tty=True))
    return actions


def generate_launch_description() -> LaunchDescription:
    record = LaunchConfiguration("record")
    return LaunchDescription([
        DeclareLaunchArgument("arm", default_value=DEFAULT_ARGS["arm"],
                              choices=["sim", "moveit"],
                              description="Executor arm backend: the analytical simulator "
                                          "(sim) or a Panda through MoveIt 2 (moveit)"),
        DeclareLaunchArgument("perception", default_value=DEFAULT_ARGS["perception"],
                              choices=["oracle", "vlm"],
                              description="Perception backend: simulator ground truth with "
                                          "configured noise (oracle) or Qwen3-VL on vLLM (vlm)"),
        DeclareLaunchArgument("vlm_url", default_value=DEFAULT_ARGS["vlm_url"],
                              description="OpenAI-compatible endpoint of the vLLM server"),
        DeclareLaunchArgument("params_file", default_value=DEFAULT_ARGS["params_file"],
                              description="Extra ROS params file applied after "
                                          "config/<node>.yaml (empty: none)"),
        DeclareLaunchArgument("record", default_value="",
                              description="Record the run's topics with ros2 bag to this "
                                          "folder (empty: do not record)"),
        OpaqueFunction(function=_nodes),
        ExecuteProcess(cmd=["ros2", "bag", "record", "-o", record] + RECORD_TOPICS,
                       output="screen",
                       condition=IfCondition(PythonExpression(["'", record, "' != ''"]))),
    ])
