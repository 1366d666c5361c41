"""Instruction -> ordered sub-goals (long-horizon tasks, paper Sec. V-A LH and Sec. III-B).

The objects an instruction is about come from perception's :func:`resolve_targets` (the same
rules the perceiver uses, so both agree on what "the cup" means):

- "clear the table" and similar: every perceived object, in scene order;
- "sort ... by fragility": every object, ascending fragility, or descending for
  "most fragile first" / "descending"; the order is part of the goal;
- otherwise the objects named, in the order the instruction names them, except *landmarks*:
  an object mentioned right after a spatial relation ("the ball behind the box", "the cup
  nearest the vase", "the mug farther from the bowl") only locates the previous one and is
  not a target. The last connecting word between two mentions decides: a relation
  (``core.instructions.RELATION_WORDS``) makes the later mention a landmark, a conjunction
  ("and", ",", "then") a target, so "the X behind the Y, the Z and the W" asks for X, Z
  and W. Of two objects of one kind, a place or an attribute picks one
  (:func:`core.instructions.read_instruction`).

Then the support dependency (constraint C_support of Sec. III-B) reorders them: an object
that rests on (Supports) or leans on (Leaning_On) another one is removed first, topmost
first; a dependent object the instruction did not name is inserted as a prerequisite
sub-goal. Physical necessity wins over the requested order (a glass standing on a box goes
before the box even when sorting would put the box first). Without a scene graph (Table II
"w/o Scene Graph") the instruction's order is kept as is.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from agentic_grasp.core.instructions import (ALL_WORDS, DESCENDING, LARGEST_FIRST,
                                             SORT_FRAGILITY, SORT_SIZE, find, object_volume,
                                             read_instruction, resolve_targets, words)
from agentic_grasp.core.scene_graph.relations import LEANING_ON, SUPPORTS
from agentic_grasp.core.scene_graph.graph import SceneGraph
from agentic_grasp.core.types import ObjectInstance

KIND_NAMED = "named"
KIND_CLEAR = "clear"
KIND_SORT = "sort_by_fragility"
KIND_SORT_SIZE = "sort_by_size"
SORT_KINDS = (KIND_SORT, KIND_SORT_SIZE)


@dataclass
class SubGoal:
    """Grasp one object; ``reason`` says why it is in the plan at this place."""

    target_id: str
    category: str
    reason: str
    prerequisite_for: str = ""

    def to_dict(self) -> Dict[str, str]:
        return {"target_id": self.target_id, "category": self.category, "reason": self.reason,
                "prerequisite_for": self.prerequisite_for}


@dataclass
class TaskPlan:
    """The ordered sub-goals of one instruction."""

    instruction: str
    kind: str
    subgoals: List[SubGoal] = field(default_factory=list)
    descending: bool = False

    @property
    def target_ids(self) -> List[str]:
        return [s.target_id for s in self.subgoals]

    @property
    def order_matters(self) -> bool:
        """Sorting is about the order itself; clearing and named lists are not."""
        return self.kind in SORT_KINDS

    def to_dict(self) -> Dict[str, object]:
        return {"instruction": self.instruction, "kind": self.kind,
                "descending": self.descending, "order_matters": self.order_matters,
                "subgoals": [s.to_dict() for s in self.subgoals]}


def instruction_kind(instruction: str) -> str:
    """named | clear | sort_by_fragility | sort_by_size, with resolve_targets' own phrase
    rules."""
    text = words(instruction)
    if any(find(phrase, text) >= 0 for phrase in ALL_WORDS):
        return KIND_CLEAR
    if SORT_FRAGILITY.search(text):
        return KIND_SORT
    if SORT_SIZE.search(text):
        return KIND_SORT_SIZE
    return KIND_NAMED


def split_landmarks(instruction: str, ids: Sequence[str],
                    objects: Sequence[ObjectInstance]) -> List[str]:
    """The ids of ``ids`` that are targets, not landmarks (:func:`read_instruction`)."""
    if len(ids) < 2:
        return list(ids)
    targets = set(read_instruction(instruction, objects).targets)
    return [oid for oid in ids if oid in targets]


def names_only_landmarks(instruction: str, objects: Sequence[ObjectInstance]) -> bool:
    """True when every object of ``objects`` the instruction names is a landmark: its first
    mention follows a relation phrase ("pick up the ball *behind the* box" with only the box
    perceived), or it names none of them ("pick up the banana" with only a cup). The
    instruction is then about an object that is not among them: the planner looks for it."""
    if instruction_kind(instruction) != KIND_NAMED:
        return False
    return not read_instruction(instruction, objects).targets


def _dependents(graph: SceneGraph, object_id: str) -> List[str]:
    """Objects resting on or leaning on ``object_id`` (they must go first)."""
    return sorted(set(graph.objects_of(object_id, SUPPORTS))
                  | set(graph.subjects_of(LEANING_ON, object_id)))


def plan_subgoals(instruction: str, objects: Sequence[ObjectInstance],
                  graph: Optional[SceneGraph] = None) -> TaskPlan:
    """Ordered sub-goals of ``instruction`` over the perceived ``objects``.

    ``graph`` (the scene graph of the same objects) enables the support-dependency order;
    None keeps the instruction's order.
    """
    kind = instruction_kind(instruction)
    text = words(instruction)
    descending = (kind == KIND_SORT and bool(DESCENDING.search(text))) \
        or (kind == KIND_SORT_SIZE and bool(LARGEST_FIRST.search(text)))
    by_id = {o.id: o for o in objects}
    requested = resolve_targets(instruction, objects)
    if kind == KIND_NAMED:
        requested = split_landmarks(instruction, requested, objects)
    plan = TaskPlan(instruction, kind, descending=descending)
    if kind == KIND_SORT:
        base_reason = ("sorted by fragility, " + ("most" if descending else "least")
                       + " fragile first")
    elif kind == KIND_SORT_SIZE:
        base_reason = "sorted by size, " + ("largest" if descending else "smallest") + " first"
    elif kind == KIND_CLEAR:
        base_reason = "clearing every object, in scene order"
    else:
        base_reason = "named in the instruction"
    emitted: set = set()
    visiting: set = set()

    def emit(oid: str, reason: str, prerequisite_for: str = "") -> None:
        if oid in emitted or oid in visiting:
            return
        visiting.add(oid)
        if graph is not None and oid in graph:
            for dep in _dependents(graph, oid):
                relation = "leans on" if graph.has_relation(dep, LEANING_ON, oid) \
                    else "rests on"
                dep_reason = (f"{dep} {relation} {oid}: removed first"
                              if dep in requested else
                              f"prerequisite: {dep} {relation} {oid}, which must be cleared")
                emit(dep, dep_reason, "" if dep in requested else oid)
        visiting.discard(oid)
        emitted.add(oid)
        obj = by_id.get(oid)
        plan.subgoals.append(SubGoal(oid, obj.category if obj is not None else "", reason,
                                     prerequisite_for))

    for oid in requested:
        reason = base_reason
        if kind == KIND_SORT and oid in by_id:
            reason += f" (fragility {by_id[oid].fragility:.2f})"
        elif kind == KIND_SORT_SIZE and oid in by_id:
            reason += f" (perceived volume {object_volume(by_id[oid]) * 1e6:.0f} cm^3)"
        emit(oid, reason)
    return plan


__all__ = ["KIND_CLEAR", "KIND_NAMED", "KIND_SORT", "KIND_SORT_SIZE",
           "SORT_KINDS",
           "SubGoal", "TaskPlan", "instruction_kind", "names_only_landmarks", "plan_subgoals",
           "split_landmarks"]
