"""QoS profiles used across the graph, defined once."""
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

#: Latest-value topics (camera frames, ground truth, last perception): a late subscriber gets
#: the most recent message.
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)

#: Event streams a late subscriber must not miss (attempt records): reliable, and the last
#: :data:`EVENT_HISTORY_DEPTH` events are kept for subscribers that match late. DDS matches
#: each side of a publisher-subscriber pair on its own, so a recorder or ``show --live``
#: that already sees the planner's publisher may not yet be seen by it; with a volatile topic,
#: records sent meanwhile never reach it (CI lost both attempts of a goal that way). Readers
#: that must tell old events from new ones compare stamps (recording.reader.goals_before).
EVENT_HISTORY_DEPTH = 50
EVENT_HISTORY = QoSProfile(depth=EVENT_HISTORY_DEPTH, history=HistoryPolicy.KEEP_LAST,
                           reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)

#: Streams where every message counts while connected (feedback-like logs).
RELIABLE_STREAM = QoSProfile(depth=50, history=HistoryPolicy.KEEP_LAST,
                             reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.VOLATILE)

#: High-rate state (joint states).
STATE = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                   reliability=ReliabilityPolicy.RELIABLE,
                   durability=DurabilityPolicy.VOLATILE)

#: Requests that are repeated until answered, and their answers (``camera/capture_request``,
#: ``camera/capture_current``): best effort. A reliable reader delivers in order, so one
#: sample lost on the loaded machine (a full shared-memory port) holds back every later one
#: until the writer's next heartbeat repairs it, seconds later (Fast DDS's default heartbeat
#: period is 3 s): CI saw a perceive wait its whole 2 s for a CaptureCurrent while its
#: requests went out every 0.2 s. A lost request or answer costs one repeat instead.
REQUEST = QoSProfile(depth=5, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.BEST_EFFORT,
                     durability=DurabilityPolicy.VOLATILE)
