"""The front node: serves the public grasp_object action and forwards each goal to the
planner."""
