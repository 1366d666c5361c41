"""agentic_grasp: affordance-aware retrieval, scene-graph reasoning and reflective grasping."""
