"""The ROS-free latency benchmarks, one module each, printed by ``agentic-grasp bench <name>``.

They run the core in process and import no rclpy:

- :mod:`.perception_client`: the VLM client's overhead per call beside the bare HTTP round
  trip (against the fake VLM server of :mod:`agentic_grasp_lab.testing`), and the synthetic
  RGB-D frame the perception tests share;
- :mod:`.retrieval_scale`: HAA-RAG latency and memory at 10^3-10^6 entries beside a
  brute-force scan; :mod:`.fleet_scale`: the same with the PostgreSQL fleet store;
- :mod:`.ray_sweep`: the Ray executor's overhead per unit and a long interrupted sweep;
- :mod:`.scene_graph`: scene graph + constraints for 10 and 200 objects;
- :mod:`.timing`: the timing helpers every benchmark shares (percentiles come from core/stats).

The ones through ROS live in :mod:`agentic_grasp_lab.ros.benchmarks`. Two stay beside what they
measure: ``core/sim/simulator.bench_attempt`` (the simulator is not changed outside bug fixes)
and :mod:`.geometry` (an accuracy benchmark, not a latency one).
"""
