"""The episodic memory at a goal's start, as data, exactly (decision inputs).

A goal's first grasp may come from memory (core/planner/memory.py), which holds what the
session's earlier goals learned, including goals before the recording began. The planner
node records the memory it hands to the goal; replay rebuilds that memory from the record,
so the recall is the live one. :meth:`EpisodicMemory.to_dict` is a summary (rounded, no
perceived keys); this is the whole state, every float at full precision.

ROS-free: plain data in, an EpisodicMemory out.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any, Dict, Mapping, Optional

from agentic_grasp.core.planner.memory import (EpisodicMemory, LearnedCorrections, MemoryEntry,
                                               ObjectKey, _StoredKey)
from agentic_grasp.core.planner.sections import TransferRules


def _plain(value: Any) -> Any:
    """Tuples and numpy values as JSON's lists and numbers."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _key_data(stored: Optional[_StoredKey]) -> Optional[Dict[str, Any]]:
    if stored is None:
        return None
    return {"key": _plain(asdict(stored.key)), "size": _plain(stored.size),
            "fit": _plain(stored.fit), "local_grasp": _plain(stored.local_grasp),
            "placed": bool(stored.placed)}


def _key_from(data: Optional[Mapping[str, Any]]) -> Optional[_StoredKey]:
    if data is None:
        return None
    k = dict(data["key"])
    k["extents"] = tuple(float(v) for v in k["extents"])
    return _StoredKey(ObjectKey(**k), tuple(float(v) for v in data["size"]), dict(data["fit"]),
                      None if data["local_grasp"] is None else dict(data["local_grasp"]),
                      bool(data["placed"]))


def _entry_data(entry: MemoryEntry) -> Dict[str, Any]:
    return {"category": entry.category, "grasp": _plain(entry.grasp),
            "object_id": entry.object_id, "attempts": int(entry.attempts),
            "uses": int(entry.uses), "key": _key_data(entry.key),
            "corrections": _plain(asdict(entry.corrections)), "serial": int(entry.serial)}


def _entry_from(data: Mapping[str, Any]) -> MemoryEntry:
    return MemoryEntry(str(data["category"]), dict(data["grasp"]), str(data["object_id"]),
                       int(data["attempts"]), int(data["uses"]), _key_from(data["key"]),
                       LearnedCorrections(**data["corrections"]), int(data["serial"]))


def memory_state(memory: Optional[EpisodicMemory]) -> Optional[Dict[str, Any]]:
    """The whole state of ``memory`` (None: the goal ran without one)."""
    if memory is None:
        return None
    entries = list(memory._all)
    latest = {category: entry.serial for category, entry in memory._entries.items()}
    return {"enabled": bool(memory.enabled), "rules": _plain(asdict(memory.rules)),
            "entries": [_entry_data(e) for e in entries], "latest": latest,
            "failed": sorted([int(s), str(o)] for s, o in memory._failed),
            "serial": int(memory._serial)}


def memory_from_state(state: Optional[Mapping[str, Any]]) -> Optional[EpisodicMemory]:
    """The EpisodicMemory :func:`memory_state` described (None for None)."""
    if state is None:
        return None
    memory = EpisodicMemory(bool(state["enabled"]), TransferRules(**state["rules"]))
    entries = [_entry_from(e) for e in state["entries"]]
    by_serial = {e.serial: e for e in entries}
    memory._all = entries
    memory._entries = {str(c): by_serial[int(s)] for c, s in state["latest"].items()}
    memory._failed = {(int(s), str(o)) for s, o in state["failed"]}
    memory._serial = int(state["serial"])
    return memory


__all__ = ["memory_from_state", "memory_state"]
