"""The latency benchmarks through ROS (they start nodes and talk over DDS), printed by
``agentic-grasp bench <name>``:

- :mod:`.executor_bench`, :mod:`.planner_bench`: one action round trip beside a bare action
  server (:mod:`.bare_action_server`);
- :mod:`.ros_sweep`: benchmark trials end to end through the graph;
- :mod:`.soak`: many goals, RSS per node and latency percentiles;
- :mod:`.executor_probe` (run as a module, not through ``bench``): whether a plain service
  is answered with rclpy's EventsExecutor on either side.

The ROS-free ones, and the timing helpers all of them share, live in
:mod:`agentic_grasp_lab.benchmarks`.
"""
