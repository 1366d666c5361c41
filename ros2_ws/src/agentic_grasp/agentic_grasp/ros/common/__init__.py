"""What every node shares: QoS profiles, liveness, parameter declaration, the one peer call
(and the action client it sends goals with), the runner (every node's ``main()``), future waits
and Fast DDS shared memory. The only place that reaches into rclpy internals
(test/core/test_house_order.py)."""
