"""ROS-facing implementations of the core's interfaces: arm backends and the planner's
adapters to its peer nodes (perception, retrieval, scene graph, executor).

Each is imported only when its backend is selected, so MoveIt is never needed for the
simulator path.
"""
