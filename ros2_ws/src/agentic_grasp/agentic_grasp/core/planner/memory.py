"""Episodic memory M = {(c_j, g_j*)} (paper Sec. IV-C, Algorithm 1 line 10), and what it
transfers to objects that are not of the same category.

The paper's memory is a session-level cache of successful grasps indexed by object category:
proven parameters for one cup transfer directly to the next cup. It is kept here as level 1.
Two choices the paper leaves open:

- **frame**: a grasp is stored in the *object frame* of the object it succeeded on
  (position relative to the bounding-box centre, approach and wrist relative to its yaw), so
  it transfers to another object of the category wherever it stands and however it is turned;
- **scene adjustment**: what is stored is the grasp *without* the scene graph's Delta g
  (the planner's base grasp, see recovery), because Delta g belongs to the old scene; the new
  scene's constraints are applied to the recalled grasp.

Recall (:meth:`EpisodicMemory.recall_for`), on the PERCEIVED target only (its category,
affordance descriptor, shape and extents; never simulator truth), first level that applies:

1. **category** (the paper): the latest success on an object of the same category; its grasp
   placed on the target's frame.
2. **similar object**: the latest success on an object that shares what the grasp depends
   on physically: the affordance type (which part is held), the material (friction, hence
   the force), the fragility band (the strength, hence the force ceiling) and the size
   (every sorted extent within ``size_tolerance_m``: the hand's fit). Its grasp is *fitted*
   to the target's perceived extents (grasping/fit.py, as a retrieved strategy is).
3. **corrections**: nothing to copy whole, but recovery found corrections on an earlier
   object that share the physics the correction answers; each is applied to the target's
   own initial grasp:

   =====================================  ===============================================
   correction learned (level 1 of          carries to a target with the same
   recovery, on the way to a success)
   =====================================  ===============================================
   force up after SLIP / DROP             material and size (friction pair and weight)
   force down after FORCE_DAMAGE /        material and fragility band (crush / dent limit)
   DEFORMATION
   opening after WIDTH_MISMATCH           shape, affordance type and size (the same part
                                          in the same hand)
   approach height after COLLISION        affordance type and size (the same grasp region
                                          at the same height)
   =====================================  ===============================================

A transfer that failed (the first attempt that executed it failed) is never proposed again
for that object (:meth:`EpisodicMemory.mark_failed`): an entry that does not work on an
object stays in memory for others. The most recent success of a category or key wins.

Lifetime (one policy, :class:`MemoryLifetime`, for the planner node and the episode runner):
"session" keeps one memory per Table II configuration across runs (the paper's session-level
cache: a cup grasped once is grasped from memory the next time); any other lifetime (the
node's "goal", the runner's "trial") gives every run a fresh, empty memory.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from agentic_grasp.core.grasping.fit import fit_record
from agentic_grasp.core.planner.sections import TransferRules
from agentic_grasp.core.retrieval.knowledge_base import grasp_to_object_frame, grasp_to_world
from agentic_grasp.core.types import FailureType, GraspParameters, ObjectInstance

_LOG = logging.getLogger(__name__)

LEVEL_CATEGORY = 1
LEVEL_SIMILAR = 2
LEVEL_CORRECTIONS = 3
#: Successes a memory keeps for levels 2 and 3, the latest first (the latest of each category,
#: level 1, is kept besides). A planner node keeps its memory for its whole life ("session"),
#: and every goal's decision inputs carry all of it (recording/inputs.py), so an unbounded
#: memory grew the process and each goal's record with every success. Recall takes the most
#: recent match, so an older success only answers where no newer one matches; what a robot
#: must keep for good is on disk or in the fleet store (the acquired experiences that
#: retrieval serves), not here. 256 are a few dozen successes for each of the catalogue's
#: categories.
MAX_ENTRIES = 256


def category_key(category: str) -> str:
    """Memory index: lower case, single-spaced, underscores as spaces ("Wine_glass")."""
    return " ".join(str(category).replace("_", " ").lower().split())


@dataclass(frozen=True)
class ObjectKey:
    """What memory knows of an object: all of it perceived."""

    category: str
    affordance: str               # affordance type value, "" when none was perceived
    material: str
    fragility: float
    shape: str
    extents: Tuple[float, float, float]   # horizontal extents sorted (long, short), height

    @classmethod
    def of(cls, obj: ObjectInstance) -> "ObjectKey":
        aff = obj.affordance
        sx, sy, sz = (float(v) for v in obj.size)
        return cls(category_key(obj.category),
                   "" if aff is None else getattr(aff.type, "value", str(aff.type)),
                   str(aff.material if aff is not None else obj.material or "").lower(),
                   float(aff.fragility if aff is not None else obj.fragility),
                   getattr(obj.shape, "value", str(obj.shape)),
                   (max(sx, sy), min(sx, sy), sz))

    def size_close(self, other: "ObjectKey", tol: float) -> Tuple[bool, float]:
        """(every extent within ``tol``, the largest difference)."""
        worst = max(abs(a - b) for a, b in zip(self.extents, other.extents))
        return worst <= tol + 1e-9, worst

    def describe(self, rules: TransferRules) -> str:
        ext = " x ".join(f"{v * 1e3:.0f}" for v in self.extents)
        return (f"{self.affordance or 'no affordance'}, {self.material or 'unknown material'}, "
                f"fragility {self.fragility:.2f}, {self.shape} {ext} mm")


#: Failure types whose level-1 correction memory learns, and the ops key it learns.
_LEARNED = {FailureType.SLIP: "grip_up", FailureType.DROP: "grip_up",
            FailureType.FORCE_DAMAGE: "grip_down", FailureType.DEFORMATION: "grip_down",
            FailureType.WIDTH_MISMATCH: "opening", FailureType.COLLISION: "approach"}


@dataclass
class LearnedCorrections:
    """The level-1 corrections recovery executed on the way to one success (net values)."""

    grip_up: float = 1.0          # force factor from slip / drop corrections
    grip_down: float = 1.0        # force factor from force-damage / deformation corrections
    opening_m: float = 0.0        # opening change from width-mismatch corrections
    approach_height_m: float = 0.0   # stand-off change from collision corrections
    why: Dict[str, str] = field(default_factory=dict)   # kind -> failure types seen

    def any(self) -> bool:
        return (abs(self.grip_up - 1.0) > 1e-9 or abs(self.grip_down - 1.0) > 1e-9
                or abs(self.opening_m) > 1e-9 or abs(self.approach_height_m) > 1e-9)

    @classmethod
    def from_attempts(cls, attempts: Iterable[Any]) -> "LearnedCorrections":
        """From the planner's AttemptRecords of one successful sub-goal: the executed level-1
        corrections of :data:`_LEARNED`'s types since the last level-3 reset (a reset starts
        from g0 again; a level-2 type switch rebuilds the geometry, so only the force
        factors survive it)."""
        out = cls()
        for record in attempts:
            corr, diag = getattr(record, "correction", None), getattr(record, "diagnosis", None)
            if corr is None or diag is None or not getattr(record, "correction_executed", False):
                continue
            ops = corr.ops or {}
            if ops.get("reset"):
                out = cls()
                continue
            if "grasp_type" in ops:
                out.opening_m, out.approach_height_m = 0.0, 0.0
                out.why.pop("opening", None)
                out.why.pop("approach", None)
                continue
            kind = _LEARNED.get(diag.failure_type)
            if corr.level != 1 or kind is None:
                continue
            if kind in ("grip_up", "grip_down") and "force_scale" in ops:
                setattr(out, kind, getattr(out, kind) * float(ops["force_scale"]))
            elif kind == "opening" and "width_delta" in ops:
                out.opening_m += float(ops["width_delta"])
            elif kind == "approach" and "approach_height_delta" in ops:
                out.approach_height_m += float(ops["approach_height_delta"])
            else:
                continue
            seen = out.why.get(kind, "")
            out.why[kind] = seen if diag.failure_type.value in seen.split("+") \
                else "+".join(p for p in (seen, diag.failure_type.value) if p)
        return out


@dataclass
class MemoryEntry:
    """One stored success: the object's perceived key, the object-frame grasp, the
    corrections recovery found for it and where it came from."""

    category: str
    grasp: Dict[str, Any]          # GraspParameters.to_dict() fields, object frame
    object_id: str
    attempts: int                  # attempts the success took (1 = first try)
    uses: int = 0
    key: Optional["_StoredKey"] = None     # perceived key, extents, fit record
    corrections: LearnedCorrections = field(default_factory=LearnedCorrections)
    serial: int = 0                # order of storing (most recent = largest)

    def to_world(self, obj: ObjectInstance) -> GraspParameters:
        """The stored grasp placed on ``obj`` (world frame)."""
        return grasp_to_world(self.grasp, obj)

    def to_dict(self) -> Dict[str, Any]:
        c = self.corrections
        return {"category": self.category, "grasp": dict(self.grasp),
                "object_id": self.object_id, "attempts": self.attempts, "uses": self.uses,
                "serial": self.serial,
                "corrections": {"grip_up": round(c.grip_up, 4),
                                "grip_down": round(c.grip_down, 4),
                                "opening_m": round(c.opening_m, 4),
                                "approach_height_m": round(c.approach_height_m, 4)}}


@dataclass
class Recall:
    """What memory transfers to one target, and why (the text goes to the plan's detail,
    the feedback and the first attempt's record)."""

    level: int
    text: str
    grasp: Optional[GraspParameters] = None          # levels 1-2: the whole base grasp
    ops: Dict[str, float] = field(default_factory=dict)   # level 3: force_scale, ...
    sources: Tuple[int, ...] = ()                    # serials of the entries used

    def apply(self, base: GraspParameters) -> GraspParameters:
        """Level 3: the learned corrections applied to the target's own base grasp."""
        changes: Dict[str, Any] = {}
        if "force_scale" in self.ops:
            changes["force"] = base.force * self.ops["force_scale"]
        if "width_delta" in self.ops:
            changes["width"] = base.width + self.ops["width_delta"]
        if "approach_height_delta" in self.ops:
            changes["approach_height"] = base.approach_height + self.ops["approach_height_delta"]
        return base.copy(**changes)


#: fit(local grasp dict, stored object spec {"shape", "size"}, fit record) -> FitResult
Fitter = Callable[[Dict[str, Any], Dict[str, Any], Dict[str, Any]], Any]


class EpisodicMemory:
    """Successes by category and by perceived key; disabled memory stores and recalls
    nothing (module docstring)."""

    def __init__(self, enabled: bool = True, rules: Optional[TransferRules] = None) -> None:
        self.enabled = bool(enabled)
        self.rules = rules if rules is not None else TransferRules()
        self._entries: Dict[str, MemoryEntry] = {}        # category -> latest success
        self._all: List[MemoryEntry] = []                 # every success, in order
        self._failed: Set[Tuple[int, str]] = set()        # (serial, object id)
        self._serial = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, category: object) -> bool:
        return isinstance(category, str) and category_key(category) in self._entries

    def categories(self) -> List[str]:
        return sorted(self._entries)

    def recall(self, category: str) -> Optional[MemoryEntry]:
        """The stored success of ``category`` (None when absent or disabled): level 1 alone."""
        if not self.enabled:
            return None
        entry = self._entries.get(category_key(category))
        if entry is not None:
            entry.uses += 1
        return entry

    # ------------------------------------------------------------------ transfer
    def recall_for(self, target: ObjectInstance, fit: Optional[Fitter] = None,
                   rules: Optional[TransferRules] = None) -> Optional[Recall]:
        """What memory transfers to the perceived ``target`` (module docstring's levels);
        ``fit`` places a similar object's grasp on the target (None: level 2 is skipped);
        ``rules``: the planner's (config/planner.yaml ``memory``), else the memory's own."""
        if not self.enabled or not self._all:
            return None
        saved = self.rules
        if rules is not None:
            self.rules = rules
        try:
            return self._recall_for(target, fit)
        finally:
            self.rules = saved

    def _recall_for(self, target: ObjectInstance, fit: Optional[Fitter]) -> Optional[Recall]:
        key = ObjectKey.of(target)
        usable = [e for e in reversed(self._all) if (e.serial, target.id) not in self._failed]
        entry = self._entries.get(key.category)
        if entry is not None and (entry.serial, target.id) not in self._failed \
                and entry.key.placed:
            grasp: Optional[GraspParameters] = entry.to_world(target)
            if entry.key.local_grasp is not None and fit is not None:
                # stored on the handle side: placed on the target's perceived handle side
                fitted = fit(dict(entry.key.local_grasp),
                             {"shape": entry.key.shape, "size": list(entry.key.size)},
                             dict(entry.key.fit, offset_rel=list(entry.key.fit["offset_rel"])))
                grasp = None if fitted is None or fitted.skipped else fitted.grasp
            if grasp is not None:
                entry.uses += 1
                return Recall(LEVEL_CATEGORY, f"episodic memory (level 1, same category "
                              f"'{entry.category}'): the grasp that succeeded on "
                              f"{entry.object_id}", grasp=grasp, sources=(entry.serial,))
        rules = self.rules
        if rules.similar_objects and fit is not None:
            for e in usable:
                why = self._similar(key, e.key)
                if why is None or not e.key.placed:
                    continue
                local = e.key.local_grasp if e.key.local_grasp is not None else e.grasp
                fitted = fit(dict(local), {"shape": e.key.shape, "size": list(e.key.size)},
                             e.key.fit)
                if fitted is None or getattr(fitted, "skipped", True):
                    continue
                e.uses += 1
                return Recall(LEVEL_SIMILAR, f"episodic memory (level 2, similar object): "
                              f"the grasp that succeeded on {e.object_id} ({e.category}), "
                              f"fitted to {target.id}'s perceived extents; shared: {why}",
                              grasp=fitted.grasp, sources=(e.serial,))
        if rules.corrections:
            return self._corrections_for(key, usable)
        return None

    def _similar(self, key: ObjectKey, other: Optional["_StoredKey"]) -> Optional[str]:
        """Why ``other`` counts as a similar object for a whole grasp (None: it does not)."""
        if other is None or not key.affordance or key.affordance != other.key.affordance:
            return None
        if not key.material or key.material != other.key.material:
            return None
        if not self.rules.same_fragility_band(key.fragility, other.key.fragility):
            return None
        close, worst = key.size_close(other.key, self.rules.size_tolerance_m)
        if not close or key.shape != other.key.shape:
            return None
        return (f"affordance {key.affordance}, material {key.material}, fragility "
                f"{other.key.fragility:.2f} ~ {key.fragility:.2f}, {key.shape} extents within "
                f"{worst * 1e3:.0f} mm")

    def _corrections_for(self, key: ObjectKey, usable: List[MemoryEntry]) -> Optional[Recall]:
        rules = self.rules
        ops: Dict[str, float] = {}
        parts: List[str] = []
        sources: List[int] = []
        for kind in ("grip_up", "grip_down", "opening", "approach"):
            for e in usable:
                c, other = e.corrections, e.key
                if other is None or kind not in c.why:
                    continue
                close, worst = key.size_close(other.key, rules.size_tolerance_m)
                same_material = bool(key.material) and key.material == other.key.material
                if kind == "grip_up" and same_material and close:
                    why = f"material {key.material}, extents within {worst * 1e3:.0f} mm"
                    ops["force_scale"] = ops.get("force_scale", 1.0) * c.grip_up
                    what = f"force x {c.grip_up:.2f}"
                elif kind == "grip_down" and same_material \
                        and rules.same_fragility_band(key.fragility, other.key.fragility):
                    why = (f"material {key.material}, fragility {other.key.fragility:.2f} ~ "
                           f"{key.fragility:.2f}")
                    ops["force_scale"] = ops.get("force_scale", 1.0) * c.grip_down
                    what = f"force x {c.grip_down:.2f}"
                elif kind == "opening" and close and key.affordance \
                        and key.affordance == other.key.affordance \
                        and key.shape == other.key.shape:
                    why = (f"affordance {key.affordance}, {key.shape} extents within "
                           f"{worst * 1e3:.0f} mm")
                    ops["width_delta"] = c.opening_m
                    what = f"opening {c.opening_m * 1e3:+.0f} mm"
                elif kind == "approach" and close and key.affordance \
                        and key.affordance == other.key.affordance:
                    why = f"affordance {key.affordance}, extents within {worst * 1e3:.0f} mm"
                    ops["approach_height_delta"] = c.approach_height_m
                    what = f"approach height {c.approach_height_m * 1e3:+.0f} mm"
                else:
                    continue
                parts.append(f"{what} (after {c.why[kind]} on {e.object_id}; shared: {why})")
                sources.append(e.serial)
                e.uses += 1
                break                       # the most recent matching entry per kind
        if not parts:
            return None
        return Recall(LEVEL_CORRECTIONS, "episodic memory (level 3, learned corrections): "
                      + "; ".join(parts), ops=ops, sources=tuple(dict.fromkeys(sources)))

    def mark_failed(self, recall: Recall, object_id: str) -> None:
        """The transfer ``recall`` failed on ``object_id``: never propose its entries there
        again."""
        for serial in recall.sources:
            self._failed.add((serial, str(object_id)))

    # ------------------------------------------------------------------ storing
    def store(self, category: str, grasp: GraspParameters, obj: ObjectInstance,
              attempts: int = 1, corrections: Optional[LearnedCorrections] = None,
              handle_yaw: Optional[float] = None, yaw_known: bool = True
              ) -> Optional[MemoryEntry]:
        """M <- M u {(c, g)}: ``grasp`` (world frame, on ``obj``) kept in obj's frame, with
        obj's perceived key and the corrections that led to it. ``handle_yaw``: the handle
        side perceived on obj, so a similar object's fit places a handle grasp on its own;
        ``yaw_known`` False: obj's perceived yaw was arbitrary (round footprint)."""
        if not self.enabled:
            return None
        self._serial += 1
        key = _StoredKey.of(obj, grasp, handle_yaw, yaw_known)
        entry = MemoryEntry(category_key(category), grasp_to_object_frame(grasp, obj), obj.id,
                            int(attempts), key=key,
                            corrections=corrections or LearnedCorrections(),
                            serial=self._serial)
        self._entries[entry.category] = entry
        self._all.append(entry)
        if len(self._all) > MAX_ENTRIES:
            self._forget_oldest()
        _LOG.debug("episodic memory: stored %s from %s", entry.category, obj.id)
        return entry

    def _forget_oldest(self) -> None:
        """Drop the oldest success that is not its category's latest (:data:`MAX_ENTRIES`),
        and the failed transfers that named it."""
        latest = {id(e) for e in self._entries.values()}
        index = next((i for i, e in enumerate(self._all) if id(e) not in latest), None)
        if index is None:
            return
        gone = self._all.pop(index).serial
        self._failed = {(s, o) for s, o in self._failed if s != gone}

    def reset(self) -> None:
        self._entries.clear()
        self._all.clear()
        self._failed.clear()

    def to_dict(self) -> Dict[str, Any]:
        return {"enabled": self.enabled,
                "entries": {k: e.to_dict() for k, e in sorted(self._entries.items())},
                "failed_transfers": sorted(f"{s}@{o}" for s, o in self._failed)}


@dataclass
class _StoredKey:
    """An entry's perceived key, the stored object's extents (for fitting) and the grasp in
    the frame fitting expects (relative to the handle side when one was perceived)."""

    key: ObjectKey
    size: Tuple[float, float, float]
    fit: Dict[str, Any]
    local_grasp: Optional[Dict[str, Any]] = None    # handle frame; None: the object frame
    #: whether the grasp's place around the object is known: False for a grasp on a handled
    #: object whose yaw was arbitrary (round footprint) and whose handle side was not seen,
    #: so its angle around the body means nothing on the next object (never copied whole)
    placed: bool = True

    @property
    def shape(self) -> str:
        return self.key.shape

    @classmethod
    def of(cls, obj: ObjectInstance, grasp: GraspParameters,
           handle_yaw: Optional[float], yaw_known: bool = True) -> "_StoredKey":
        frame = obj
        region = ""
        if handle_yaw is not None and getattr(obj.shape, "value", str(obj.shape)) == "cylinder":
            frame = obj.copy()
            frame.yaw = float(handle_yaw)
            region = "handle"
        local = grasp_to_object_frame(grasp, frame)
        size = tuple(float(v) for v in obj.size)
        spec = {"shape": getattr(obj.shape, "value", str(obj.shape)), "size": list(size)}
        fit = fit_record({"grasp": local, "render_spec": spec, "affordance": {"region": region}})
        key = ObjectKey.of(obj)
        handled = key.affordance == "Graspable_Handle" or (
            obj.affordance is not None and obj.affordance.region == "handle")
        placed = bool(region) or bool(yaw_known) or not handled
        return cls(key, size, fit, local if region else None, placed)


#: The lifetime that keeps memory across runs (goals, trials); every other one starts empty.
SESSION = "session"


class MemoryLifetime:
    """Which episodic memory a run (a goal, a trial) uses: the one policy for its lifetime.

    Holds the session's memories, one per configuration; ``memory_for`` returns the kept
    one for ``lifetime == "session"`` and a fresh one otherwise.
    """

    def __init__(self, rules: Optional[TransferRules] = None) -> None:
        self._kept: Dict[str, EpisodicMemory] = {}
        self.rules = rules

    def memory_for(self, configuration: str, enabled: bool, lifetime: str) -> EpisodicMemory:
        """The memory of one run under ``configuration`` (``enabled``: its memory switch)."""
        if lifetime != SESSION:
            return EpisodicMemory(enabled=enabled, rules=self.rules)
        return self._kept.setdefault(configuration,
                                     EpisodicMemory(enabled=enabled, rules=self.rules))

    def clear(self) -> None:
        """Forget the session's memories (a new session starts)."""
        self._kept.clear()


__all__ = ["EpisodicMemory", "LEVEL_CATEGORY", "LEVEL_CORRECTIONS", "LEVEL_SIMILAR",
           "LearnedCorrections", "MAX_ENTRIES", "MemoryEntry", "MemoryLifetime", "ObjectKey",
           "Recall", "SESSION", "category_key"]
