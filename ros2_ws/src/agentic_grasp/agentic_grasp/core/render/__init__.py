"""RGB-D rendering of the simulated table top, seen by a :mod:`agentic_grasp.core.camera`.

- :mod:`.raycast`: exact per-pixel ray casting of a scene (:func:`~.raycast.render_scene`);
- :mod:`.hits`: the ray-primitive intersections it casts; :mod:`.parts`: what it draws of an
  object (its catalogue model's solid parts);
- :mod:`.views`: partial renders (regions around the objects, one object alone);
- :mod:`.crops`: square object crops, as a visual embedding takes them.
"""
