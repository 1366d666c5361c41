"""Episodic memory M = {(c_j, g_j*)} (paper Sec. IV-C, Algorithm 1 line 10).

A session-level cache of successful grasps indexed by object category: proven parameters for
one cup transfer directly to the next cup. Two choices the paper leaves open:

- **frame**: a grasp is stored in the *object frame* of the object it succeeded on
  (position relative to the bounding-box centre, approach and wrist relative to its yaw), so
  it transfers to another object of the category wherever it stands and however it is turned;
- **scene adjustment**: what is stored is the grasp *without* the scene graph's Delta g
  (the planner's base grasp, see recovery), because Delta g belongs to the old scene; the new
  scene's constraints are applied to the recalled grasp.

The most recent success of a category wins.

Lifetime (one policy, :class:`MemoryLifetime`, for the planner node and the episode runner):
"session" keeps one memory per Table II configuration across runs (the paper's session-level
cache: a cup grasped once is grasped from memory the next time); any other lifetime (the
node's "goal", the runner's "trial") gives every run a fresh, empty memory.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from agentic_grasp.core.retrieval.knowledge_base import grasp_to_object_frame, grasp_to_world
from agentic_grasp.core.types import GraspParameters, ObjectInstance

_LOG = logging.getLogger(__name__)


def category_key(category: str) -> str:
    """Memory index: lower case, single-spaced, underscores as spaces ("Wine_glass")."""
    return " ".join(str(category).replace("_", " ").lower().split())


@dataclass
class MemoryEntry:
    """One stored success: the category, the object-frame grasp and where it came from."""

    category: str
    grasp: Dict[str, Any]          # GraspParameters.to_dict() fields, object frame
    object_id: str
    attempts: int                  # attempts the success took (1 = first try)
    uses: int = 0

    def to_world(self, obj: ObjectInstance) -> GraspParameters:
        """The stored grasp placed on ``obj`` (world frame)."""
        return grasp_to_world(self.grasp, obj)

    def to_dict(self) -> Dict[str, Any]:
        return {"category": self.category, "grasp": dict(self.grasp),
                "object_id": self.object_id, "attempts": self.attempts, "uses": self.uses}


class EpisodicMemory:
    """Category -> most recent successful grasp; disabled memory stores and recalls nothing."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = bool(enabled)
        self._entries: Dict[str, MemoryEntry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, category: object) -> bool:
        return isinstance(category, str) and category_key(category) in self._entries

    def categories(self) -> List[str]:
        return sorted(self._entries)

    def recall(self, category: str) -> Optional[MemoryEntry]:
        """The stored success of ``category`` (None when absent or disabled)."""
        if not self.enabled:
            return None
        entry = self._entries.get(category_key(category))
        if entry is not None:
            entry.uses += 1
        return entry

    def store(self, category: str, grasp: GraspParameters, obj: ObjectInstance,
              attempts: int = 1) -> Optional[MemoryEntry]:
        """M <- M u {(c, g)}: ``grasp`` (world frame, on ``obj``) kept in obj's frame."""
        if not self.enabled:
            return None
        entry = MemoryEntry(category_key(category), grasp_to_object_frame(grasp, obj), obj.id,
                            int(attempts))
        self._entries[entry.category] = entry
        _LOG.debug("episodic memory: stored %s from %s", entry.category, obj.id)
        return entry

    def reset(self) -> None:
        self._entries.clear()

    def to_dict(self) -> Dict[str, Any]:
        return {"enabled": self.enabled,
                "entries": {k: e.to_dict() for k, e in sorted(self._entries.items())}}


#: The lifetime that keeps memory across runs (goals, trials); every other one starts empty.
SESSION = "session"


class MemoryLifetime:
    """Which episodic memory a run (a goal, a trial) uses: the one policy for its lifetime.

    Holds the session's memories, one per configuration; ``memory_for`` returns the kept
    one for ``lifetime == "session"`` and a fresh one otherwise.
    """

    def __init__(self) -> None:
        self._kept: Dict[str, EpisodicMemory] = {}

    def memory_for(self, configuration: str, enabled: bool, lifetime: str) -> EpisodicMemory:
        """The memory of one run under ``configuration`` (``enabled``: its memory switch)."""
        if lifetime != SESSION:
            return EpisodicMemory(enabled=enabled)
        return self._kept.setdefault(configuration, EpisodicMemory(enabled=enabled))

    def clear(self) -> None:
        """Forget the session's memories (a new session starts)."""
        self._kept.clear()


__all__ = ["EpisodicMemory", "MemoryEntry", "MemoryLifetime", "SESSION", "category_key"]
