"""``agentic-grasp show --live``: record the running graph until the next goal ends.

Attaching is recording: a :class:`~agentic_grasp.ros.recording.recorder.BagRecorder` writes the
recorded topics into a fresh MCAP bag under the output folder (the latched ones arrive at
once: the current camera frame, the last perception answer, the goal log's history), and
what it writes is watched (its ``on_write``) for the log of a goal that ends after the
attach time. Once that goal's attempt records are in the bag (as many as its log counts)
and :data:`SETTLE_S` has passed (the last frames still in flight), the bag is closed and
``show`` draws it like any other recording, so the live and the recorded pictures cannot
drift apart.

Attached means this side has discovered the planner's publishers; the planner may discover
this recorder's subscriptions later (DDS matches each side on its own). Attempt records sent
meanwhile are not lost: the planner keeps its last ones for late subscribers
(qos.EVENT_HISTORY), and they arrive when it matches; :data:`ATTEMPTS_WAIT_S` bounds the wait.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Optional, Tuple, Union

from agentic_grasp.ros.recording.bag.reader import stamp_ns
from agentic_grasp_interfaces.msg import AttemptRecord, GoalLog

ATTEMPTS_TOPIC = "/planner/attempts"
GOAL_LOG_TOPIC = "/planner/goal_log"
#: The planner topics a live recording must be connected to before it says it is attached.
ATTACH_TOPICS = (ATTEMPTS_TOPIC, GOAL_LOG_TOPIC)
#: Time left for messages in flight after the goal log arrived (s): topics are delivered
#: independently, and on a loaded machine attempt records were seen to lag the log.
SETTLE_S = 2.0
#: Longest wait (s) after the goal log for the goal's attempt records. A participant whose
#: first discovery announcements were missed is found at its next periodic one (Fast DDS:
#: every 3 s); three periods.
ATTEMPTS_WAIT_S = 9.0


def record_next_goal(out_dir: Union[str, Path], timeout_s: float,
                     ready: Optional[threading.Event] = None) -> Tuple[Path, str]:
    """(bag folder, goal id) of the next goal that ends; TimeoutError when none does.

    ``ready`` is set once the recorder is attached (tests).
    """
    # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.serialization import deserialize_message

    # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
    from agentic_grasp.ros.recording.recorder import BagRecorder

    bag = Path(out_dir).resolve() / time.strftime("live-%Y%m%d-%H%M%S")
    context = rclpy.Context()
    rclpy.init(context=context)
    node = None
    ended = {}
    attempts = {}                           # attempt records in the bag, by goal id
    attach_ns = time.time_ns()

    def on_write(topic: str, data: bytes) -> None:
        """What the recorder has just written: the goal log and the attempt records."""
        if topic == ATTEMPTS_TOPIC:
            gid = deserialize_message(data, AttemptRecord).goal_id
            attempts[gid] = attempts.get(gid, 0) + 1
        elif topic == GOAL_LOG_TOPIC:
            msg = deserialize_message(data, GoalLog)
            if stamp_ns(msg.end_stamp) >= attach_ns and "goal_id" not in ended:
                ended["goal_id"] = msg.goal_id
                ended["attempts"] = int(msg.attempt_count)
                ended["at"] = time.monotonic()

    def complete() -> bool:
        """The goal's attempts are in the bag, or the wait for them is over."""
        waited = time.monotonic() - ended["at"]
        return waited >= SETTLE_S and (attempts.get(ended["goal_id"], 0) >= ended["attempts"]
                                       or waited >= SETTLE_S + ATTEMPTS_WAIT_S)

    try:
        node = BagRecorder(output=str(bag), storage="mcap", on_write=on_write,
                           context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + timeout_s
        # Attached means this side has discovered the planner's publishers (the planner may
        # match this recorder later; its attempt history covers the gap, module docstring).
        while context.ok() and time.monotonic() < deadline and any(
                node.count_publishers(t) < 1 for t in ATTACH_TOPICS):
            executor.spin_once(timeout_sec=0.05)
        print(f"attached: recording to {bag}; waiting for the next goal to end", flush=True)
        if ready is not None:
            ready.set()
        while context.ok():
            executor.spin_once(timeout_sec=0.05)
            if "at" in ended and complete():
                break
            if "at" not in ended and time.monotonic() > deadline:
                raise TimeoutError(f"no goal ended within {timeout_s:g} s (recorded to {bag})")
    finally:
        if node is not None:
            node.close()
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    return bag, ended["goal_id"]
