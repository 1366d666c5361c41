"""ROS-free test helpers shipped with the package so core and ROS-level tests can share them:
a scripted VLM server, a tiny Qwen3-VL and real vLLM on the CPU, a throw-away PostgreSQL
server and a local two-node Ray cluster.

Nothing here is used at run time by the nodes; no ROS imports (the node harness lives in
:mod:`agentic_grasp_lab.ros.testing`).
"""
