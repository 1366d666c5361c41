"""The lab's ROS layer: every module of agentic_grasp_lab that imports rclpy lives here
(:mod:`.benchmarks`: latency through ROS; :mod:`.testing`: the in-process node harness)."""
