"""Scene graph G = (V, E) of the tabletop and its constraint analyzer (paper Sec. III-B, Fig. 3).

- :mod:`.relations`: the 16 relation types and the edge they label;
- :mod:`.graph`: the graph built from the perceived objects (:func:`~.graph.build_scene_graph`);
- :mod:`.footprints`: the objects' validated geometry and footprint distances it is built on;
- :mod:`.config`: the thresholds of the graph and the analyzer (config/scene_graph.yaml);
- :mod:`.constraints`: the rule-based constraint analyzer and the adjustment Delta g.
"""
