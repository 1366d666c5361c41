"""launch_testing tests of the bringup: they need ros2 launch (launch, launch_ros,
launch_testing), which only a full ROS 2 install provides (the image of docker/ros/Dockerfile,
where ``colcon test`` runs them). Plain pytest elsewhere does not collect them."""
import importlib.util

_NEEDED = ("launch", "launch_ros", "launch_testing", "ament_index_python")

if any(importlib.util.find_spec(name) is None for name in _NEEDED):
    collect_ignore_glob = ["test_*.py"]
