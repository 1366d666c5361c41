"""The executor node: the node, its arm backends (sim_arm: the simulator's arm; moveit/: a real
or mock-hardware Franka arm, imported only when selected) and its wrist-camera view server."""
