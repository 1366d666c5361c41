"""The planner's clients of its peer nodes: perception, retrieval, the scene graph and the
executor (its arm and its wrist camera). Each is imported only when its peer is used."""
