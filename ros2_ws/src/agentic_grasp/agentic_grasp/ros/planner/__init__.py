"""The planner node: the node, its parameters (settings), one goal's session, log and peer
bindings, its grasp markers, and its clients of its peers (peers/)."""
