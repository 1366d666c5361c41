"""``agentic-grasp show --live``: record the running graph until the next goal ends.

Attaching is recording: a :class:`~agentic_grasp.recording.recorder.BagRecorder` writes the
recorded topics into a fresh MCAP bag under the output folder (the latched ones arrive at
once: the current camera frame, the last perception answer, the goal log's history), and a
subscription to the goal log watches for a goal that ends after the attach time. Half a
second after it (attempt records and the last frames still in flight), the bag is closed and
``show`` draws it like any other recording, so the live and the recorded pictures cannot
drift apart.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Optional, Tuple, Union

#: The planner topics a live recording must be connected to before it says it is attached.
ATTACH_TOPICS = ("/planner/attempts", "/planner/goal_log")
#: Time left for messages in flight after the goal log arrived (s): topics are delivered
#: independently, and on a loaded machine attempt records were seen to lag the log.
SETTLE_S = 2.0


def record_next_goal(out_dir: Union[str, Path], timeout_s: float,
                     ready: Optional[threading.Event] = None) -> Tuple[Path, str]:
    """(bag folder, goal id) of the next goal that ends; TimeoutError when none does.

    ``ready`` is set once the recorder and the goal-log subscription exist (tests).
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from agentic_grasp import goal_log
    from agentic_grasp.recording.recorder import BagRecorder
    from agentic_grasp_interfaces.msg import GoalLog

    bag = Path(out_dir).resolve() / time.strftime("live-%Y%m%d-%H%M%S")
    context = rclpy.Context()
    rclpy.init(context=context)
    node = None
    ended = {}
    try:
        node = BagRecorder(output=str(bag), storage="mcap", context=context)
        attach_ns = node.get_clock().now().nanoseconds

        def on_log(msg: GoalLog) -> None:
            end = int(msg.end_stamp.sec) * 1_000_000_000 + int(msg.end_stamp.nanosec)
            if end >= attach_ns and "goal_id" not in ended:
                ended["goal_id"] = msg.goal_id
                ended["at"] = time.monotonic()

        node.create_subscription(GoalLog, "/" + goal_log.TOPIC, on_log, goal_log.QOS)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + timeout_s
        # Attached means the planner's publishers are discovered: attempt records are not
        # latched, so a goal that starts before discovery would be recorded without them.
        while context.ok() and time.monotonic() < deadline and any(
                node.count_publishers(t) < 1 for t in ATTACH_TOPICS):
            executor.spin_once(timeout_sec=0.05)
        print(f"attached: recording to {bag}; waiting for the next goal to end", flush=True)
        if ready is not None:
            ready.set()
        while context.ok():
            executor.spin_once(timeout_sec=0.05)
            if "at" in ended and time.monotonic() - ended["at"] >= SETTLE_S:
                break
            if "at" not in ended and time.monotonic() > deadline:
                raise TimeoutError(f"no goal ended within {timeout_s:g} s (recorded to {bag})")
    finally:
        if node is not None:
            node.close()
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    return bag, ended["goal_id"]
