"""Thin rclpy wrappers around the core, one class per node."""
