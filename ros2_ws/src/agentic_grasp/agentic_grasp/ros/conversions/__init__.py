"""Message <-> domain conversion, one module per concept, for the nodes and for
replay alike (one converter).

Nodes call these at their boundary: message in -> domain object -> core -> domain -> message.
Bad messages raise ``ValidationError`` with a message that names the field.

- :mod:`.fields`: vectors, quaternions, float32 decimals and the message enums by name;
- :mod:`.grasp`: the grasp g (GraspParameters), its affordance and its outcome;
- :mod:`.perception`: observed objects and PerceptionResult (what perception reports);
- :mod:`.images`: camera frames (Image, CameraInfo) <-> arrays and the core Camera;
- :mod:`.scene`: scene graph, spatial relations and constraints (InferConstraints);
- :mod:`.retrieval`: experiences and retrieved strategies (HAA-RAG);
- :mod:`.records`: the AttemptRecord of one attempt and its FailureDiagnosis.
"""
