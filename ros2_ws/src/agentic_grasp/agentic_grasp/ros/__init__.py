"""The ROS 2 side of agentic_grasp: every module that imports rclpy or a ROS message.

Nodes (one class each), the ROS implementations of the core's ports (backends/), message
<-> domain conversion, QoS, liveness, parameters, markers, the node graph and its launcher,
recording and replay, and the benchmarks that run through the graph. It imports the
ROS-free core; the core never imports it (test/core/test_house_order.py).
"""
