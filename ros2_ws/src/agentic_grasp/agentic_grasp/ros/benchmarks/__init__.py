"""Latency benchmarks that run through the ROS graph (start nodes, talk over DDS).

The ROS-free ones live in agentic_grasp.core.benchmarks; ``agentic-grasp bench
<name>`` prints both.
"""
