"""What a trial took off the table besides its targets, judged from the simulator's truth.

The paper's rule counts a trial a success when every target was grasped, whatever else was
grasped too: a planner that picks up the vase in "the cup next to the vase" scores like one
that leaves it. The strict rule (``TrialRecord.success``) also asks that nothing but the
targets was taken:

- a non-target taken that is fragile (ground-truth fragility at or above the scene graph's
  fragile threshold, the one the constraints protect), or that the instruction names (a
  landmark, the object "everything but the Y" keeps, the other of two mugs when it says "the
  mug on the left"), fails the trial (``wrong``);
- a sturdy neighbour the instruction does not name, taken out of the way, does not
  (``moved_aside``, its own column): moving it aside is how a hand reaches into clutter.

Evaluation only: the planner never sees this. The ids taken come from the simulator's bin
(in process) or the graph's grasped ids (every object lifted is put away).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Mapping, Sequence

from agentic_grasp.core.instructions import SYNONYMS, find, words
from agentic_grasp.core.types import ObjectInstance


@dataclass
class Taken:
    """The non-targets a trial took: those that fail it, those moved aside."""

    wrong: List[str] = field(default_factory=list)
    moved_aside: List[str] = field(default_factory=list)


def named_in(instruction: str, obj: ObjectInstance) -> bool:
    """Whether the instruction names ``obj`` by its id, name, category or a synonym of it
    (whole words, plural allowed): a landmark, a kept object or a same-category other."""
    text = words(instruction)
    names = [obj.id, obj.name, obj.category] + list(SYNONYMS.get(obj.category.lower(), ()))
    return any(name and find(name, text) >= 0 for name in names)


def judge_taken(instruction: str, targets: Sequence[str], taken: Sequence[str],
                truth: Mapping[str, ObjectInstance], fragile_threshold: float) -> Taken:
    """Sort the non-targets in ``taken`` (module docstring). ``truth``: every object of the
    scene as it was loaded, by id (its fragility and names are the ground truth)."""
    out = Taken()
    wanted = set(targets)
    for oid in taken:
        if oid in wanted or oid in out.wrong or oid in out.moved_aside:
            continue
        obj = truth.get(oid)
        if obj is None or obj.fragility >= fragile_threshold or named_in(instruction, obj):
            out.wrong.append(oid)
        else:
            out.moved_aside.append(oid)
    return out


__all__ = ["Taken", "judge_taken", "named_in"]
