"""RViz markers built from core results (visualization_msgs), one module per producer.

- :mod:`.grasp`: the planned grasp of the planner (approach arrow, fingers, label);
- :mod:`.scene_graph`: objects, relations and constraints of the scene-graph service.

Nodes only publish what these build; nothing here decides anything.
"""
