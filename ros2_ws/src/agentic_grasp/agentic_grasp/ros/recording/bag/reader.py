"""Reading recorded bags (MCAP or sqlite3) without rclpy: summaries and decoded messages.

Messages are decoded with the definitions embedded in the bag (each channel's ``ros2msg``
text, registered into a rosbags typestore per bag), so a bag recorded before an interface
changed still decodes with the fields it was recorded with, and fields added later (by
another release or another package) simply appear as attributes. A channel without an
embedded definition (bags of writers that do not embed one) falls back to the definitions
of the installed agentic_grasp_interfaces and the standard Jazzy types.

A damaged bag (cut mid-file) yields what is readable; ``BagReader.state.stopped`` then says
where it stopped and callers report it (see :mod:`agentic_grasp.ros.recording.bag.bagfile`).
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from rosbags.typesys import Stores, get_typestore, get_types_from_msg
from rosbags.typesys.store import Typestore

from agentic_grasp.ros.recording.bag.bagfile import BagError, BagFile, Channel, ScanState
from agentic_grasp.ros.recording.bag.typestore import interface_types

_LOG = logging.getLogger(__name__)

__all__ = ["BagError", "BagReader", "bag_info", "by_topic", "goals_before", "messages",
           "stamp_ns"]


def _register(store: Typestore, types: Dict[str, Any]) -> None:
    """Register ``types``; ones the store already holds (standard types) are kept as they
    are when their definition differs only there, so a bag from another distro still reads
    the types it embeds that the store lacks."""
    try:
        store.register(types)
    except Exception:  # noqa: BLE001 - TypesysError: a type present with another definition
        fresh = {k: v for k, v in types.items() if k not in store.fielddefs}
        if fresh:
            store.register(fresh)


_HEADER = re.compile(r"^MSG: (\S+)\s*$", re.MULTILINE)


def qualify_nested(text: str) -> str:
    """Field types ``pkg/Name`` that name an action or service part defined in the same text
    (``MSG: pkg/action/Name``) written out in full.

    rosbag2's concatenated layout names nested types ``pkg/Name``, which rosbags resolves to
    ``pkg/msg/Name``; the parts of an action (the ``X_Feedback`` inside the hidden feedback
    topic's ``X_FeedbackMessage``) live under ``pkg/action/`` instead.
    """
    full = {}
    for name in _HEADER.findall(text):
        parts = name.split("/")
        if len(parts) == 3 and parts[1] != "msg":
            full[f"{parts[0]}/{parts[2]}"] = name
    if not full:
        return text
    out = []
    for line in text.splitlines():
        head, sep, rest = line.strip().partition(" ")
        base = head.split("[")[0]
        if sep and base in full and not line.startswith("MSG:"):
            line = f"{full[base]}{head[len(base):]} {rest}"
        out.append(line)
    return "\n".join(out) + "\n"


class BagReader:
    """Decoded messages of one bag, with the bag's own message definitions."""

    def __init__(self, path: Union[str, Path]) -> None:
        self.bag = BagFile(path)
        self.store = get_typestore(Stores.ROS2_JAZZY)
        self._known: Dict[Tuple[str, str], bool] = {}
        self._fallback_done = False
        self.undecodable: Dict[str, str] = {}

    @property
    def state(self) -> ScanState:
        return self.bag.state

    @property
    def storage(self) -> str:
        return self.bag.storage

    def _ensure(self, channel: Channel) -> bool:
        key = (channel.msgtype, channel.msgdef)
        if key in self._known:
            return self._known[key]
        ok = True
        try:
            if channel.msgdef and channel.encoding in ("ros2msg", ""):
                _register(self.store, get_types_from_msg(qualify_nested(channel.msgdef),
                                                         channel.msgtype))
            if channel.msgtype not in self.store.fielddefs and not self._fallback_done:
                self._fallback_done = True
                _register(self.store, interface_types())
            ok = channel.msgtype in self.store.fielddefs
            if not ok:
                self.undecodable[channel.topic] = f"no definition of {channel.msgtype}"
        except Exception as exc:  # noqa: BLE001 - an unparsable embedded definition
            self.undecodable[channel.topic] = f"definition of {channel.msgtype}: {exc}"
            ok = False
        self._known[key] = ok
        return ok

    def messages(self, topics: Optional[Sequence[str]] = None
                 ) -> Iterator[Tuple[str, int, Any]]:
        """(topic, bag time ns, deserialized message) in recorded order.

        Messages of a topic whose type cannot be decoded are skipped (``undecodable`` says
        why); a message whose bytes do not decode ends the scan like a damaged file.
        """
        for channel, stamp, data in self.bag.scan(topics):
            if not self._ensure(channel):
                continue
            try:
                msg = self.store.deserialize_cdr(data, channel.msgtype)
            except Exception as exc:  # noqa: BLE001 - corrupt payload inside a good record
                self.bag.state.stopped = (f"message {self.bag.state.messages} on "
                                          f"{channel.topic} does not decode as "
                                          f"{channel.msgtype} ({type(exc).__name__}: {exc})")
                return
            yield channel.topic, stamp, msg

    def by_topic(self, topics: Optional[Sequence[str]] = None
                 ) -> Dict[str, List[Tuple[int, Any]]]:
        out: Dict[str, List[Tuple[int, Any]]] = {}
        for topic, stamp, msg in self.messages(topics):
            out.setdefault(topic, []).append((stamp, msg))
        return out


def stamp_ns(t: Any) -> int:
    """A builtin_interfaces/Time as integer nanoseconds."""
    return int(t.sec) * 1_000_000_000 + int(t.nanosec)


def goals_before(topics: Dict[str, List[Tuple[int, Any]]], logs: Dict[str, Any],
                 with_feedback: Any, attempts: Sequence[Any] = ()) -> set:
    """Ids of the goals that had ended before the recording began.

    The goal log and the attempt records are kept for late subscribers (goal_log.QOS,
    qos.EVENT_HISTORY), so a recorder started between goals receives earlier goals' logs
    and attempts at once. Such a goal left no action feedback in the bag (``with_feedback``:
    ids that did; a goal still running when the recording began did), and its log ends
    before the bag's first message, or, without its log, each of its ``attempts`` (the
    AttemptRecord messages) was sent before it. ``topics``: what :meth:`BagReader.by_topic`
    returned.
    """
    firsts = [items[0][0] for items in topics.values() if items]
    if not firsts:
        return set()
    start = min(firsts)
    before = {gid for gid, log in logs.items()
              if gid not in with_feedback and stamp_ns(log.end_stamp) < start}
    sent: Dict[str, List[int]] = {}
    for rec in attempts:
        sent.setdefault(rec.goal_id, []).append(stamp_ns(rec.header.stamp))
    before |= {gid for gid, stamps in sent.items()
               if gid not in with_feedback and gid not in logs
               and all(0 < s < start for s in stamps)}
    return before


def bag_info(path: Union[str, Path]) -> Dict[str, Any]:
    """Storage, topics, message counts, start and duration of a bag (``ros2 bag info``).

    ``complete`` is False for a bag that stops early; ``stopped`` then says where and why,
    and the counts are those of the readable part. Raises BagError when nothing is a bag.
    """
    bag = BagFile(path)
    state = bag.count()
    topics: Dict[str, Dict[str, Any]] = {}
    for channel in bag.channels.values():
        entry = topics.setdefault(channel.topic, {"topic": channel.topic,
                                                  "type": channel.msgtype, "count": 0})
        entry["count"] += channel.count
    duration = ((state.end_ns - state.start_ns) / 1e9) if state.messages else 0.0
    return {"path": str(Path(path)), "storage": bag.storage,
            "files": [f.name for f in bag.files],
            "closed": bag.metadata is not None,
            "message_count": state.messages,
            "start_ns": state.start_ns or 0, "duration_s": duration,
            "complete": state.complete, "stopped": state.stopped, "notes": state.notes,
            "topics": sorted(topics.values(), key=lambda t: t["topic"])}


def messages(path: Union[str, Path], topics: Optional[Sequence[str]] = None
             ) -> Iterator[Tuple[str, int, Any]]:
    """(topic, bag time ns, deserialized message) in recorded order (readable part)."""
    yield from BagReader(path).messages(topics)


def by_topic(path: Union[str, Path], topics: Optional[Sequence[str]] = None
             ) -> Dict[str, List[Tuple[int, Any]]]:
    """Every message grouped per topic, each list in recorded order."""
    return BagReader(path).by_topic(topics)
