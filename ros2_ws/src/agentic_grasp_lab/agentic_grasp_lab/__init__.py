"""agentic_grasp_lab: the lab of agentic_grasp, kept out of what a robot installs.

- :mod:`.evaluation`: the paper's evaluation in process (Tables II-V, OOD) and the studies
  beyond it (learning, fleet, procedural scenes);
- :mod:`.benchmarks`: the ROS-free latency and accuracy benchmarks;
- :mod:`.testing`: test servers (scripted VLM, vLLM on the CPU, PostgreSQL, Ray) and a tiny
  Qwen3-VL;
- :mod:`.ros`: the benchmarks through ROS and the in-process node harness (every rclpy
  import of the lab);
- :mod:`.commands`: ``agentic-grasp bench`` and ``agentic-grasp eval``, registered in the
  ``agentic_grasp.commands`` entry-point group that the runtime's CLI reads.

The lab imports the runtime (agentic_grasp); the runtime never imports the lab.
"""
