"""The planner's decision-inputs writer stays flat in memory over a long session.

A transient-local writer keeps each slot of its history at the largest document it ever
held; with the old 1,000 slots and the planner's mix of document sizes (a retrieval answer
about 25 kB, most others 1.5-5 kB) the planner grew about 25 MB per 1,000 goals in a soak,
long after the history was full (ros/recording/inputs.py, HISTORY). Here a publisher with the
topic's own QoS sends that mix, 5 documents a goal as a single grasp makes; its resident set
after a warm-up of 200 goals must not grow by more than the soak's bound (20 MB per 1,000
goals) over the next 1,000 goals.
"""
from __future__ import annotations

import os
import random

import rclpy
from std_msgs.msg import String

from agentic_grasp.ros.recording import inputs

#: A single grasp's documents (bytes), as measured on the planner's topic: goal, perceive,
#: retrieve, infer_constraints, execute.
GOAL_DOCUMENTS = (4900, 1540, 25000, 1300, 1790)
WARM_UP_GOALS = 200
GOALS = 1000
#: The bound the soak holds every node to (MB per 1,000 goals after warm-up).
GROWTH_MB = 20.0


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return int(next(r for r in status if r.startswith("VmRSS:")).split()[1]) / 1024.0


def test_the_decision_inputs_writer_does_not_grow_after_warm_up(ros_domain):
    node = rclpy.create_node(f"inputs_writer_probe_{os.getpid()}")
    topic = f"decision_inputs_probe_{os.getpid()}"
    pub = node.create_publisher(String, topic, inputs.qos())
    received = []
    node.create_subscription(String, topic, lambda m: received.append(len(m.data)),
                             inputs.qos())
    rnd = random.Random(0)

    def goals(count: int) -> None:
        for _ in range(count):
            for size in GOAL_DOCUMENTS:
                # a document's size varies with the scene: +-50 %
                pub.publish(String(data="x" * int(size * rnd.uniform(0.5, 1.5))))
            rclpy.spin_once(node, timeout_sec=0.0)
    try:
        goals(WARM_UP_GOALS)
        before = _rss_mb()
        goals(GOALS)
        grew = _rss_mb() - before
        print(f"decision-inputs writer: {grew:+.1f} MB over {GOALS} goals after "
              f"{WARM_UP_GOALS} (history {inputs.HISTORY})")
        assert grew < GROWTH_MB, f"grew {grew:.1f} MB over {GOALS} goals"
    finally:
        node.destroy_node()
