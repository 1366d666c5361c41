"""Bring up the agentic_grasp node graph: ros2 launch agentic_grasp bringup.launch.py.

The node list, parameter files and per-argument overrides come from agentic_grasp.ros.graph.description, the
same table ``agentic-grasp bringup`` uses on machines without ros2 launch, so both start the
same graph from the same configuration.

A node that dies is respawned after ``respawn_delay`` (core/supervision.py's first delay), at
most ``respawn_max_retries`` times over the launch (launch has no backoff and no crash
window; ``agentic-grasp bringup`` has both). A retrieval node stopped by a corrupt knowledge
base prints its message on each try and stays down after those few retries, spaced by the
delay, rather than looping.

Examples:
  ros2 launch agentic_grasp bringup.launch.py                      # simulator + vlm_sim
  ros2 launch agentic_grasp bringup.launch.py perception:=oracle   # ground truth, if asked
  ros2 launch agentic_grasp bringup.launch.py perception:=vlm vlm_url:=http://gpu:8000/v1
  ros2 launch agentic_grasp bringup.launch.py arm:=moveit          # real robot via MoveIt
  ros2 launch agentic_grasp bringup.launch.py arm:=moveit use_mock_hardware:=true
"""
import os
import shutil

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import (DeclareLaunchArgument, ExecuteProcess, OpaqueFunction,
                            RegisterEventHandler)
from launch.event_handlers import OnShutdown
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import Node

from agentic_grasp.core.supervision import DEFAULT_POLICY
from agentic_grasp.ros.graph.description import (DEFAULT_ARGS, RECORD_ACTION_TOPICS, RECORD_TOPICS,
                                                 RECORD_VIEW_TOPICS, new_run_dir, selected_nodes)


def _nodes(context, *_args, **_kwargs):
    share = get_package_share_directory("agentic_grasp")
    args = {name: LaunchConfiguration(name).perform(context) for name in DEFAULT_ARGS}
    # This launch's own folder: the sim keeps its world there, so a respawned sim comes back in
    # it (ros/graph/description.py); removed when the launch shuts down.
    run_dir = str(new_run_dir())
    args["run_dir"] = run_dir
    actions = [RegisterEventHandler(OnShutdown(
        on_shutdown=lambda *_: shutil.rmtree(run_dir, ignore_errors=True)))]
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
                            emulate_tty=True, respawn=True,
                            respawn_delay=DEFAULT_POLICY.delay_s,
                            respawn_max_retries=DEFAULT_POLICY.max_crashes))
    return actions


MOCK_CONFIG = "moveit_resources_panda_moveit_config"


def _mock_hardware(context, *_args, **_kwargs):
    """A Panda on ros2_control mock components, matching the executor's default moveit.*."""
    if LaunchConfiguration("arm").perform(context) != "moveit":
        return []
    from moveit_configs_utils import MoveItConfigsBuilder

    description = (MoveItConfigsBuilder("panda", package_name=MOCK_CONFIG)
                   .robot_description(file_path="config/panda.urdf.xacro")
                   .to_moveit_configs().robot_description)
    controllers = os.path.join(get_package_share_directory(MOCK_CONFIG), "config",
                               "ros2_controllers.yaml")
    return [Node(package="robot_state_publisher", executable="robot_state_publisher",
                 parameters=[description]),
            Node(package="controller_manager", executable="ros2_control_node",
                 parameters=[controllers],
                 remappings=[("/controller_manager/robot_description", "/robot_description")])
            ] + [Node(package="controller_manager", executable="spawner", arguments=[c])
                 for c in ("joint_state_broadcaster", "panda_arm_controller",
                           "panda_hand_controller")]


def generate_launch_description() -> LaunchDescription:
    record = LaunchConfiguration("record")
    return LaunchDescription([
        DeclareLaunchArgument("arm", default_value=DEFAULT_ARGS["arm"],
                              choices=["sim", "moveit"],
                              description="Executor arm backend: the analytical simulator "
                                          "(sim) or a Panda through MoveIt 2 (moveit)"),
        DeclareLaunchArgument("perception", default_value=DEFAULT_ARGS["perception"],
                              choices=["vlm_sim", "vlm", "oracle"],
                              description="Perception backend: the simulated VLM of "
                                          "config/perception.yaml, from pixels (vlm_sim, "
                                          "default), Qwen3-VL on vLLM (vlm) or simulator "
                                          "ground truth with configured noise (oracle, only "
                                          "when asked)"),
        DeclareLaunchArgument("vlm_url", default_value=DEFAULT_ARGS["vlm_url"],
                              description="OpenAI-compatible endpoint of the vLLM server"),
        DeclareLaunchArgument("params_file", default_value=DEFAULT_ARGS["params_file"],
                              description="Extra ROS params file applied after "
                                          "config/<node>.yaml (empty: none)"),
        DeclareLaunchArgument("acquired", default_value=DEFAULT_ARGS["acquired"],
                              description="Experience acquisition: the acquired-experiences "
                                          "file (planner appends, retrieval follows it); "
                                          "default = $XDG_DATA_HOME/agentic_grasp/"
                                          "acquired_experiences.jsonl, none = off"),
        DeclareLaunchArgument("store", default_value=DEFAULT_ARGS["store"],
                              description="Where acquired experiences go: file (the "
                                          "acquired file) or postgres (the fleet store; DSN "
                                          "from AGENTIC_GRASP_PG_DSN or the PG* variables)"),
        DeclareLaunchArgument("robot", default_value=DEFAULT_ARGS["robot"],
                              description="This robot's name in the acquired records' "
                                          "provenance ('' = the host name)"),
        DeclareLaunchArgument("record", default_value="",
                              description="Record the run's topics with ros2 bag to this "
                                          "folder (empty: do not record)"),
        DeclareLaunchArgument("use_mock_hardware", default_value="false",
                              choices=["true", "false"],
                              description="With arm:=moveit, also start a Panda on ros2_control "
                                          "mock hardware (moveit_resources_panda_moveit_config)"),
        OpaqueFunction(function=_nodes),
        OpaqueFunction(function=_mock_hardware,
                       condition=IfCondition(LaunchConfiguration("use_mock_hardware"))),
        ExecuteProcess(cmd=record_command(record), output="screen",
                       condition=IfCondition(PythonExpression(["'", record, "' != ''"]))),
    ])


def record_command(output) -> list:
    """``ros2 bag record`` of the graph's topics, the GraspObject action topics included.

    Checked against rosbag2 jazzy (0.26.x): hidden topics (a name part starting with "_", as
    in /grasp_object/_action/feedback) are dropped even when listed unless
    --include-hidden-topics is given (rosbag2_transport/src/rosbag2_transport/
    topic_filter.cpp:56-66, 188-192); positional topics are deprecated in favour of --topics
    (ros2bag/ros2bag/verb/record.py:63-69), which takes the rest of the line (nargs='+'), so
    it comes last. -s mcap: Jazzy's default storage (rosbag2_storage/src/rosbag2_storage/
    default_storage_id.cpp:21), named so a changed default cannot change the bag format, and
    what ``agentic-grasp bringup --record`` writes.
    """
    return (["ros2", "bag", "record", "-s", "mcap", "--include-hidden-topics", "-o", output,
             "--topics"] + RECORD_TOPICS + RECORD_VIEW_TOPICS + RECORD_ACTION_TOPICS)
