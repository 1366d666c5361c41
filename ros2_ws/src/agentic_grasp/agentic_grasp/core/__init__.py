"""ROS-free core: algorithms, the analytical simulator and the benchmark logic.

Nothing under this package may import rclpy or any ROS message package.
"""
