"""Recorder node: RECORD_TOPICS (and the GraspObject action's feedback/status) to rosbag2.

The stand-in for ``ros2 bag record`` on machines with rclpy from PyPI and no rosbag2:
raw subscriptions hand over the CDR bytes unchanged and rosbags writes them into a standard
rosbag2 folder (metadata.yaml version 9) in MCAP storage, the rosbag2 default on Jazzy,
with each topic's full ``ros2msg`` definition embedded as its schema (so Foxglove, the
``mcap`` CLI and PyPI's ``mcap-ros2-support`` decode our own types without a ROS install),
or in sqlite3 storage (parameter ``storage``). ``ros2 bag info/play`` read both on a ROS 2
install; :mod:`agentic_grasp.commands.bag` reads them here.

QoS per topic matches the publisher (a TRANSIENT_LOCAL subscription to a VOLATILE publisher
would get nothing): latched topics are subscribed TRANSIENT_LOCAL so the last message before
the recorder started is kept too. SIGINT and SIGTERM end the spin loop and the bag is closed
(metadata.yaml written) before the process exits.

Run: ``python -m agentic_grasp.ros.recording.recorder --ros-args -p output:=DIR
[-p storage:=mcap|sqlite3]``.
"""
from __future__ import annotations

import importlib
import signal
import sys
import threading
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import rclpy
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rosbags.rosbag2 import StoragePlugin, Writer

from agentic_grasp.core.supervision import enable_stack_dumps
from agentic_grasp.ros.graph.description import (RECORD_ACTION_TOPICS, RECORD_TOPICS,
                                                 RECORD_VIEW_TOPICS)
from agentic_grasp.ros.recording.bag.typestore import connection_args

NODE_NAME = "recorder"
#: Hidden topics of the planner's GraspObject action: per-step feedback with the goal id
#: (stages, thoughts, the final "done" message) and the goal status list.
ACTION_TOPICS: List[str] = list(RECORD_ACTION_TOPICS)
#: Message type of every recorded topic ("latched": published TRANSIENT_LOCAL).
TOPIC_TYPES: Dict[str, Tuple[str, bool]] = {
    "/camera/color/image_raw": ("sensor_msgs/msg/Image", True),
    "/camera/depth/image_raw": ("sensor_msgs/msg/Image", True),
    "/camera/color/camera_info": ("sensor_msgs/msg/CameraInfo", True),
    "/joint_states": ("sensor_msgs/msg/JointState", False),
    "/sim/ground_truth": ("agentic_grasp_interfaces/msg/SceneGraph", True),
    "/perception/result": ("agentic_grasp_interfaces/msg/PerceptionResult", True),
    "/scene_graph/graph": ("agentic_grasp_interfaces/msg/SceneGraph", True),
    "/scene_graph/markers": ("visualization_msgs/msg/MarkerArray", True),
    "/planner/attempts": ("agentic_grasp_interfaces/msg/AttemptRecord", True),
    "/planner/markers": ("visualization_msgs/msg/MarkerArray", True),
    "/planner/goal_log": ("agentic_grasp_interfaces/msg/GoalLog", True),
    "/planner/decision_inputs": ("std_msgs/msg/String", True),
    "/wrist_camera/color/image_raw": ("sensor_msgs/msg/Image", True),
    "/wrist_camera/depth/image_raw": ("sensor_msgs/msg/Image", True),
    "/wrist_camera/color/camera_info": ("sensor_msgs/msg/CameraInfo", True),
    "/wrist_camera/ground_truth": ("agentic_grasp_interfaces/msg/SceneGraph", True),
    "/grasp_object/_action/feedback":
        ("agentic_grasp_interfaces/action/GraspObject_FeedbackMessage", False),
    "/grasp_object/_action/status": ("action_msgs/msg/GoalStatusArray", True),
}
#: Queue depth of every subscription (camera frames come in bursts per scene load).
DEPTH = 50
#: The storage plugins the recorder writes (rosbag2 names).
STORAGE_PLUGINS: Dict[str, StoragePlugin] = {"mcap": StoragePlugin.MCAP,
                                             "sqlite3": StoragePlugin.SQLITE3}


def recorded_topics() -> List[str]:
    """What the recorder subscribes to: RECORD_TOPICS, the wrist camera's, the action's."""
    topics = list(RECORD_TOPICS) + list(RECORD_VIEW_TOPICS)
    return topics + [t for t in ACTION_TOPICS if t not in topics]


def _python_type(ros_type: str):
    """The rclpy message class of ``pkg/msg/Name`` (``pkg/action/X_FeedbackMessage`` too)."""
    package, kind, name = ros_type.split("/")
    if kind == "action":
        action, _, part = name.rpartition("_")
        return getattr(getattr(importlib.import_module(f"{package}.action"), action).Impl, part)
    return getattr(importlib.import_module(f"{package}.msg"), name)


def _qos(latched: bool) -> QoSProfile:
    return QoSProfile(depth=DEPTH, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=(DurabilityPolicy.TRANSIENT_LOCAL if latched
                                  else DurabilityPolicy.VOLATILE))


class BagRecorder(Node):
    """Subscribes raw to the recorded topics and writes every message as it arrives.

    ``on_write(topic, data)``, when given, is called with each message's CDR bytes once it
    is in the bag (``show --live`` watches the goal log and attempt records this way).
    """

    def __init__(self, output: Optional[str] = None, storage: Optional[str] = None,
                 on_write: Optional[Callable[[str, bytes], None]] = None,
                 **node_kwargs) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        self._on_write = on_write
        out = output if output is not None else \
            self.declare_parameter("output", "").get_parameter_value().string_value
        storage = storage if storage is not None else self.declare_parameter(
            "storage", "mcap").get_parameter_value().string_value
        if not out:
            raise ValueError("recorder: parameter 'output' (the bag folder) is empty")
        if storage not in STORAGE_PLUGINS:
            raise ValueError(f"recorder: storage {storage!r} is not one of "
                             f"{', '.join(STORAGE_PLUGINS)}")
        self.storage = storage
        self.path = Path(out).resolve()
        if self.path.exists():
            raise FileExistsError(f"recorder: {self.path} exists; rosbag2 writes a new folder")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._writer: Optional[Writer] = Writer(self.path, version=9,
                                                storage_plugin=STORAGE_PLUGINS[storage])
        self._writer.open()
        self.counts: Dict[str, int] = {}
        self._subs = []
        connections = {}
        try:
            for topic in recorded_topics():
                connections[topic] = self._writer.add_connection(
                    topic, TOPIC_TYPES[topic][0], **connection_args(TOPIC_TYPES[topic][0]))
        except Exception:
            self.close()                # an empty but well-formed bag, not a broken one
            raise
        for topic, conn in connections.items():
            ros_type, latched = TOPIC_TYPES[topic]
            self.counts[topic] = 0
            self._subs.append(self.create_subscription(
                _python_type(ros_type), topic,
                lambda data, _t=topic, _c=conn: self._write(_t, _c, data), _qos(latched),
                raw=True))
        self.get_logger().info(f"recording {len(self._subs)} topics to {self.path} "
                               f"({storage})")

    def _write(self, topic: str, conn, data: bytes) -> None:
        stamp = self.get_clock().now().nanoseconds
        with self._lock:
            if self._writer is None:
                return
            self._writer.write(conn, stamp, bytes(data))
            self.counts[topic] += 1
        if self._on_write is not None:
            self._on_write(topic, data)

    def close(self) -> Dict[str, int]:
        """Close the bag (writes metadata.yaml); idempotent. Returns messages per topic."""
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            total = sum(self.counts.values())
            self.get_logger().info(f"bag closed: {total} messages in {self.path}")
        return dict(self.counts)


def main(args=None) -> None:
    """Spin until SIGINT/SIGTERM, then close the bag and exit 0."""
    enable_stack_dumps()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    node: Optional[BagRecorder] = None
    code = 0
    try:
        node = BagRecorder()
        while not stop.is_set() and rclpy.ok():
            rclpy.spin_once(node, timeout_sec=0.1)
    except (ValueError, FileExistsError) as exc:
        sys.stderr.write(f"{exc}\n")
        code = 2
    finally:
        if node is not None:
            node.close()
            node.destroy_node()
        rclpy.try_shutdown()
    sys.exit(code)


if __name__ == "__main__":
    main()
