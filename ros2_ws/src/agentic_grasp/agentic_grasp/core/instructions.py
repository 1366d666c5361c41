"""Reading an instruction: which objects it names, and whether it asks for all or a sort.

Language understanding that both a perception backend (the oracle and ``vlm_sim`` answer
which object an instruction refers to) and the planner (long-horizon task decomposition)
need. It lives here, apart from the oracle, because the planner may know only what
perception reports: it must not import the module that reads simulator ground truth.
"""
from __future__ import annotations

import re
from typing import Dict, List, Sequence, Tuple

from agentic_grasp.core.types import ObjectInstance

#: Words that name the same thing in instructions (both directions are searched).
SYNONYMS: Dict[str, Tuple[str, ...]] = {
    "cup": ("mug",), "mug": ("cup",),
    "smartphone": ("phone", "cellphone", "mobile"), "phone": ("smartphone",),
    "cube": ("block",), "block": ("cube",),
    "ball": ("tennis ball",), "vase": ("flower vase",),
    "wine glass": ("glass",), "screwdriver": ("driver",),
}

ALL_WORDS = ("clear the table", "clear the desk", "clear everything", "all objects",
              "all the objects", "all items", "everything", "every object", "clean the table",
              "tidy the table", "remove all")
SORT_FRAGILITY = re.compile(r"\bsort\b.*\bfragil|\bfragil\w*\b.*\border\b|\border\b.*\bfragil")
DESCENDING = re.compile(r"most fragile first|descending|from (the )?most fragile|"
                         r"fragile ones first|highest fragility first")
SORT_SIZE = re.compile(r"\bsort\b.*\bsize\b|\bsize\b.*\border\b|\border\b.*\bsize\b")
LARGEST_FIRST = re.compile(r"\b(largest|biggest|largest ones|big ones|descending)\b.*\bfirst\b|"
                           r"\bdescending\b|from (the )?(largest|biggest)")
#: Words after which a whole-scene instruction names what to leave ("everything but the vase").
EXCEPT = re.compile(r" (but|except|except for|apart from|other than|save) (the )?")


def is_sort(text: str) -> bool:
    """A sorting instruction (by fragility or by size): its order is the goal."""
    return bool(SORT_FRAGILITY.search(text) or SORT_SIZE.search(text))


def object_volume(obj: ObjectInstance) -> float:
    """Bounding-box volume (m^3): the "size" a sort by size orders by."""
    return float(abs(obj.size[0] * obj.size[1] * obj.size[2]))


def words(text: str) -> str:
    """Lowercase, punctuation to spaces, single-spaced, padded (for whole-word search)."""
    return " " + " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split()) + " "


def find(phrase: str, text: str) -> int:
    """Index of ``phrase`` as whole words in padded ``text`` (plural -s allowed), or -1."""
    phrase = " ".join(re.sub(r"[^a-z0-9]+", " ", phrase.lower()).split())
    if not phrase:
        return -1
    for variant in (phrase, phrase + "s", phrase + "es"):
        idx = text.find(" " + variant + " ")
        if idx >= 0:
            return idx
    return -1


def resolve_targets(instruction: str, objects: Sequence[ObjectInstance]) -> List[str]:
    """Ids of the objects an instruction is about, in the order to handle them.

    - "clear the table" (and similar, see ``ALL_WORDS``): every object, in scene order;
    - "... everything but the vase" (``EXCEPT``): every object but those named after it;
    - "sort ... by fragility": every object, least fragile first ("most fragile first" or
      "descending" reverses it);
    - "sort ... by size": every object, smallest bounding box first ("largest first"
      reverses it);
    - otherwise the objects named, in the order the instruction mentions them. An object is
      named by its id, its full name ("ceramic cup"), its category ("cup"), or a synonym of
      the category ("mug"). Among objects of one category, those named by full name or id
      win over those matched by category alone ("the ceramic cup" vs. "the plastic cup");
      otherwise all of them are returned. A synonym counts only for a word that names no
      object directly ("the cup" picks the cup, not also the mug).

    Returns [] when nothing in the instruction names an object in ``objects``.
    """
    text = words(instruction)
    if any(find(phrase, text) >= 0 for phrase in ALL_WORDS):
        kept = set()
        cut = EXCEPT.search(text)
        if cut is not None:         # "everything but the vase": the vase stays
            kept = set(resolve_targets(text[cut.end() - 1:], objects))
        return [o.id for o in objects if o.id not in kept]
    if SORT_FRAGILITY.search(text):
        descending = bool(DESCENDING.search(text))
        ordered = sorted(objects, key=lambda o: (o.fragility, o.id), reverse=descending)
        return [o.id for o in ordered]
    if SORT_SIZE.search(text):
        descending = bool(LARGEST_FIRST.search(text))
        ordered = sorted(objects, key=lambda o: (object_volume(o), o.id), reverse=descending)
        return [o.id for o in ordered]

    # (position in the text, strength, id): 2 = id or full name, 1 = category, 0 = synonym.
    found: List[Tuple[int, int, str]] = []
    for obj in objects:
        strong = [p for p in (find(obj.id, text), find(obj.name, text)) if p >= 0]
        category = find(obj.category, text)
        synonyms = [p for p in (find(s, text) for s in SYNONYMS.get(obj.category.lower(), ()))
                    if p >= 0]
        if strong:
            found.append((min(strong), 2, obj.id))
        elif category >= 0:
            found.append((category, 1, obj.id))
        elif synonyms:
            found.append((min(synonyms), 0, obj.id))
    # A synonym only stands in for a word no object answers to directly ("mug" with no mug
    # in the scene), so "the cup" does not also select a mug.
    direct = {pos for pos, strength, _ in found if strength > 0}
    found = [e for e in found if e[1] > 0 or e[0] not in direct]
    by_category: Dict[str, List[Tuple[int, int, str]]] = {}
    cat_of = {o.id: o.category.lower() for o in objects}
    for entry in found:
        by_category.setdefault(cat_of[entry[2]], []).append(entry)
    kept: List[Tuple[int, int, str]] = []
    for entries in by_category.values():
        best = max(e[1] for e in entries)
        kept.extend(e for e in entries if e[1] == best)
    order = {o.id: k for k, o in enumerate(objects)}
    kept.sort(key=lambda e: (e[0], order[e[2]]))
    return [e[2] for e in kept]


__all__ = ["ALL_WORDS", "DESCENDING", "EXCEPT", "LARGEST_FIRST", "SORT_FRAGILITY", "SORT_SIZE",
           "SYNONYMS", "find", "is_sort", "object_volume", "resolve_targets", "words"]
