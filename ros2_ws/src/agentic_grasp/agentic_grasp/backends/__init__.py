"""ROS-facing implementations of the core's swappable interfaces (arm backends).

Each is imported only when its backend is selected, so MoveIt is never needed for the
simulator path.
"""
