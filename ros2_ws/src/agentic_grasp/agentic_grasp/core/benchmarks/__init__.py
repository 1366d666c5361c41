"""Every latency benchmark, one module each, printed by ``agentic-grasp bench <name>``.

ROS-free (they run the core in process and import no rclpy):

- :mod:`.perception_client`: the VLM client's overhead per call beside the bare HTTP round
  trip (against the fake VLM server of :mod:`agentic_grasp.core.testing`), and the synthetic
  RGB-D frame the perception tests share;
- :mod:`.retrieval_scale`: HAA-RAG latency and memory at 10^3-10^6 entries beside a
  brute-force scan;
- :mod:`.scene_graph`: scene graph + constraints for 10 and 200 objects;
- :mod:`.timing`: the timing helpers they share (percentiles come from core/stats).

Through ROS (they start nodes and talk over DDS):

- :mod:`.executor_bench`, :mod:`.planner_bench`: one action round trip beside a bare action
  server (:mod:`.bare_action_server`);
- :mod:`.ros_sweep`: benchmark trials end to end through the graph;
- :mod:`.soak`: many goals, RSS per node and latency percentiles.

Two stay beside what they measure: ``core/sim/simulator.bench_attempt`` (the simulator is not
changed outside bug fixes) and ``core/perception/geometry_bench`` (an accuracy benchmark, not a
latency one).
"""
