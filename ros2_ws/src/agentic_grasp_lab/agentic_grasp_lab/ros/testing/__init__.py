"""Test helpers for ROS-level tests (the in-process node harness).

The ROS-free helpers (fake VLM server, vLLM, PostgreSQL, Ray) live in
agentic_grasp_lab.testing.
"""
