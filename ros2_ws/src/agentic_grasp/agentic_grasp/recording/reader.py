"""Reading recorded bags with rosbags (no rclpy): summaries and deserialized messages."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from rosbags.rosbag2 import Reader

from agentic_grasp.recording.typestore import typestore


@dataclass(frozen=True)
class TopicInfo:
    topic: str
    msgtype: str
    count: int


def _storage(path: Path) -> str:
    """storage_identifier of metadata.yaml (sqlite3 or mcap)."""
    import yaml

    meta = yaml.safe_load((path / "metadata.yaml").read_text())
    return str(meta["rosbag2_bagfile_information"].get("storage_identifier", ""))


def bag_info(path: Union[str, Path]) -> Dict[str, Any]:
    """Topics, message counts, start and duration of a bag (what ``ros2 bag info`` says)."""
    with Reader(Path(path)) as reader:
        topics = sorted((TopicInfo(c.topic, c.msgtype, c.msgcount) for c in reader.connections),
                        key=lambda t: t.topic)
        return {"path": str(Path(path)), "storage": _storage(Path(path)),
                "message_count": reader.message_count,
                "start_ns": reader.start_time if reader.message_count else 0,
                "duration_s": (reader.duration / 1e9) if reader.message_count else 0.0,
                "topics": [{"topic": t.topic, "type": t.msgtype, "count": t.count}
                           for t in topics]}


def messages(path: Union[str, Path], topics: Optional[Sequence[str]] = None
             ) -> Iterator[Tuple[str, int, Any]]:
    """(topic, bag time ns, deserialized message) in recorded order."""
    store = typestore()
    with Reader(Path(path)) as reader:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        for conn, stamp, data in reader.messages(connections=conns):
            yield conn.topic, stamp, store.deserialize_cdr(data, conn.msgtype)


def by_topic(path: Union[str, Path], topics: Optional[Sequence[str]] = None
             ) -> Dict[str, List[Tuple[int, Any]]]:
    """Every message grouped per topic, each list in recorded order."""
    out: Dict[str, List[Tuple[int, Any]]] = {}
    for topic, stamp, msg in messages(path, topics):
        out.setdefault(topic, []).append((stamp, msg))
    return out
