"""The scene-graph node and the RViz markers it publishes."""
