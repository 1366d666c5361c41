"""QoS profiles used across the graph, defined once."""
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

#: Latest-value topics (camera frames, ground truth, last perception): a late subscriber gets
#: the most recent message.
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)

#: Streams where every message counts (attempt records, feedback-like logs).
RELIABLE_STREAM = QoSProfile(depth=50, history=HistoryPolicy.KEEP_LAST,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.VOLATILE)

#: High-rate state (joint states).
STATE = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                   reliability=ReliabilityPolicy.RELIABLE,
                   durability=DurabilityPolicy.VOLATILE)
