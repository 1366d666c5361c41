"""The simulated world as a file, so a restarted simulator comes back in the world it had.

A real world does not change when its driver restarts: the cup that was moved stays moved,
the apple put in the bin stays there. The sim node (ros/sim/node.py) writes a
:class:`WorldState` on every change of its world (a scene load, an arm phase that moved
something, an attempt aborted) and, started again on the same file (a respawn), restores it
instead of loading its ``task`` parameter's scene.

What is kept: the task (as it was loaded: a task id or a scene file), the trial seed, every
object's pose and state on the table (position, yaw, upright, damaged, filled/stacked, ...),
the object held, the objects in the bin (in order), the execution-noise generator's state (the
attempts after a restart draw the noise they would have drawn without it), and the sim node's
world version and number of changes since the load (its captures' depth noise follows them).
Not kept: an attempt still open when the process died. Like a robot controller that
restarts, the restarted simulator has none open: the commander's next phase of it is refused,
and its next attempt starts afresh.

Writes are atomic (:func:`write`): the JSON goes to a temporary file in the same folder, which
then replaces the old one (``os.replace``), so a reader finds the previous world or the new
one, never half of one. No fsync: the file outlives the process (SIGKILL), which is what a
respawn needs, not a power cut. A file that cannot be read back (corrupt, another format)
raises :class:`WorldStateError` naming the file and the problem; the caller decides (the sim
node starts its configured scene and keeps the bad file aside).
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.sim.scenes import TaskSpec
from agentic_grasp.core.types import AffordanceDescriptor, ObjectInstance

FORMAT = "agentic_grasp.sim_world"
VERSION = 1

__all__ = ["FORMAT", "VERSION", "WorldFile", "WorldState", "WorldStateError", "capture", "read",
           "restore", "write"]


class WorldStateError(ValidationError):
    """A world-state file that cannot be used (it names the file and what is wrong)."""


@dataclass
class WorldState:
    """One simulated world (module docstring)."""

    task: str                              # what Simulator.load_task was given
    trial_seed: int
    objects: List[ObjectInstance]          # on the table, the held one included
    held: Optional[str] = None
    binned: List[ObjectInstance] = field(default_factory=list)
    rng_state: Dict[str, Any] = field(default_factory=dict)
    world_version: int = 0
    changes_since_load: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "task": self.task,
                "trial_seed": int(self.trial_seed),
                "objects": [_object_to_dict(o) for o in self.objects],
                "held": self.held, "binned": [_object_to_dict(o) for o in self.binned],
                "rng_state": self.rng_state, "world_version": int(self.world_version),
                "changes_since_load": int(self.changes_since_load)}

    @classmethod
    def from_dict(cls, data: Any) -> "WorldState":
        if not isinstance(data, dict):
            raise WorldStateError(f"expected a JSON object, got {type(data).__name__}")
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise WorldStateError(f"not a {FORMAT} file of version {VERSION} (format "
                                  f"{data.get('format')!r}, version {data.get('version')!r})")
        try:
            state = cls(task=_typed(data, "task", str), trial_seed=_typed(data, "trial_seed", int),
                        objects=[_object_from_dict(o) for o in _typed(data, "objects", list)],
                        held=data.get("held"),
                        binned=[_object_from_dict(o) for o in _typed(data, "binned", list)],
                        rng_state=_typed(data, "rng_state", dict),
                        world_version=_typed(data, "world_version", int),
                        changes_since_load=_typed(data, "changes_since_load", int))
        except (TypeError, ValueError, KeyError) as exc:
            raise WorldStateError(str(exc)) from None
        ids = [o.id for o in state.objects]
        if len(set(ids)) != len(ids):
            raise WorldStateError(f"duplicate object ids {ids}")
        if state.held is not None and state.held not in ids:
            raise WorldStateError(f"held object {state.held!r} is not among the objects {ids}")
        if not state.task:
            raise WorldStateError("empty task")
        return state


def capture(sim, task: str, trial_seed: int, world_version: int = 0,
            changes_since_load: int = 0) -> WorldState:
    """The world of ``sim`` (a core.sim.simulator.Simulator; hold its lock), which was loaded
    from ``task`` with ``trial_seed``."""
    snap = sim.snapshot()
    return WorldState(task=str(task), trial_seed=int(trial_seed),
                      objects=list(snap["objects"].values()), held=snap["held"],
                      binned=list(snap["binned"]), rng_state=_plain(snap["rng"]),
                      world_version=world_version, changes_since_load=changes_since_load)


def restore(sim, state: WorldState) -> TaskSpec:
    """Put ``state`` into ``sim``: its task is loaded (scene spec, catalogue), then the objects,
    the held one, the bin and the noise generator are set as they were."""
    spec = sim.load_task(state.task, trial_seed=state.trial_seed)
    try:
        sim.restore({"objects": {o.id: o.copy() for o in state.objects}, "held": state.held,
                     "binned": [o.copy() for o in state.binned], "rng": state.rng_state})
    except (KeyError, TypeError, ValueError) as exc:
        raise WorldStateError(f"cannot restore the world: {exc}") from None
    return spec


def write(path: Union[str, Path], state: WorldState) -> None:
    """Write ``state`` to ``path`` atomically (module docstring); the folder is made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(state.to_dict(), out, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read(path: Union[str, Path]) -> Optional[WorldState]:
    """The world kept in ``path``; None when there is no such file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WorldStateError(f"{path}: cannot read: {exc}") from None
    try:
        return WorldState.from_dict(json.loads(text))
    except json.JSONDecodeError as exc:
        raise WorldStateError(f"{path}: not JSON ({exc})") from None
    except ValidationError as exc:
        raise WorldStateError(f"{path}: {exc}") from None


class WorldFile:
    """The file one simulator keeps its world in: read once at start, written on each change.

    Neither a bad file nor a failed write stops the simulator: a file that is not a world is
    moved aside (``<name>.unreadable``, nothing lost) and the simulator starts its configured
    scene; a write that fails (disk full, folder removed) is reported once, and the next
    change tries again."""

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        self._failing = False

    def load(self) -> Tuple[Optional[WorldState], str]:
        """The kept world (None when there is none or it is unusable) and what went wrong."""
        try:
            return read(self.path), ""
        except WorldStateError as exc:
            aside = self.path.with_name(self.path.name + ".unreadable")
            try:
                os.replace(self.path, aside)
                where = f"moved to {aside}"
            except OSError as move_error:
                where = f"left in place ({move_error})"
            return None, f"{exc}; {where}"

    def save(self, state: WorldState) -> str:
        """Write ``state``; a message the first time writing fails ("" otherwise)."""
        try:
            write(self.path, state)
        except OSError as exc:
            first, self._failing = not self._failing, True
            return f"cannot keep the world in {self.path}: {exc}" if first else ""
        self._failing = False
        return ""


# ---- objects ------------------------------------------------------------------------------------
def _object_to_dict(obj: ObjectInstance) -> Dict[str, Any]:
    out = {}
    for f in fields(ObjectInstance):
        value = getattr(obj, f.name)
        if isinstance(value, AffordanceDescriptor):
            value = {"type": value.type.value, "material": value.material,
                     "fragility": float(value.fragility), "region": value.region}
        out[f.name] = _plain(value)
    return out


def _object_from_dict(data: Any) -> ObjectInstance:
    if not isinstance(data, dict):
        raise WorldStateError(f"an object must be a JSON object, got {type(data).__name__}")
    known = {f.name for f in fields(ObjectInstance)}
    unknown = set(data) - known
    if unknown:
        raise WorldStateError(f"object {data.get('id')!r}: unknown fields {sorted(unknown)}")
    values = dict(data)
    if values.get("affordance") is not None:
        values["affordance"] = AffordanceDescriptor(**values["affordance"])
    if "color" in values:
        values["color"] = tuple(int(c) for c in values["color"])
    for name in ("position", "size"):
        if name in values:
            values[name] = np.asarray(values[name], dtype=float)
    try:
        return ObjectInstance(**values)
    except TypeError as exc:
        raise WorldStateError(f"object {data.get('id')!r}: {exc}") from None


def _plain(value: Any) -> Any:
    """JSON-ready: enums by value, arrays and tuples as lists, numpy scalars as Python's."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _typed(data: Dict[str, Any], key: str, kind: type) -> Any:
    if key not in data:
        raise WorldStateError(f"missing {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise WorldStateError(f"{key!r} must be {kind.__name__}, got {type(value).__name__}")
    return value
