"""The ROS 2 side of agentic_grasp: every module that imports rclpy or a ROS message.

One folder per node (planner/, perception/, retrieval/, scene_graph/, executor/, sim/,
front/), each with the node, its parameters, its servers and its clients of peers; common/
for what every node shares (QoS, liveness, parameters, the one peer call, the runner);
conversions/ (message <-> domain), graph/ (the node graph and its launcher), client/ (the
client side: CLI, MCP, tests), recording/ (recording and replay), and the benchmarks that
run through the graph. docs/ros-layout.md says where a change goes. It imports the ROS-free
core; the core never imports it (test/core/test_house_order.py).
"""
