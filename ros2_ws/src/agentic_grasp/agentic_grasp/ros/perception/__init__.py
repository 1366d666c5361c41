"""The perception node: the node, its parameters, its camera feeds and the capture store."""
