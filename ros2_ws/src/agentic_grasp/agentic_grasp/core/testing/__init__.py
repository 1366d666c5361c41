"""Test helpers shipped with the package so core and ROS-level tests can share them.

Nothing here is used at run time by the nodes; no ROS imports.
"""
