"""The simulator node: the node, its arm service, its world state file and its wrist camera."""
