"""Benchmarks that need ROS (the in-process ones live next to their core modules)."""
