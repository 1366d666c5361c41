"""Reading an instruction: which objects it names, and whether it asks for all or a sort.

Language understanding that both a perception backend (the oracle and ``vlm_sim`` answer
which object an instruction refers to) and the planner (long-horizon task decomposition)
need. It lives here, apart from the oracle, because the planner may know only what
perception reports: it must not import the module that reads simulator ground truth.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.camera import fixed_camera_spec
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


def resolve_targets(instruction: str, objects: Sequence[ObjectInstance],
                    viewpoint: Optional[Sequence[float]] = None) -> List[str]:
    """Ids of the objects an instruction is about, in the order to handle them.

    - "clear the table" (and similar, see ``ALL_WORDS``): every object, in scene order;
    - "... everything but the vase" (``EXCEPT``): every object but those named after it;
    - "sort ... by fragility": every object, least fragile first ("most fragile first" or
      "descending" reverses it);
    - "sort ... by size": every object, smallest bounding box first ("largest first"
      reverses it);
    - otherwise the objects named (targets and landmarks, :func:`read_instruction`), in the
      order the instruction mentions them. An object is named by its id, its full name
      ("ceramic cup"), its category ("cup"), or a synonym of the category ("mug"). Among
      objects of one category, those named by full name or id win over those matched by
      category alone ("the ceramic cup" vs. "the plastic cup"). Where several objects
      answer to one mention, a place ("on the left", "nearest the bowl", "the second from
      the right") or a perceived attribute ("the tall mug") picks one; with neither, all
      of them are returned. A synonym counts only for a word that names no object directly
      ("the cup" picks the cup, not also the mug).

    Returns [] when nothing in the instruction names an object in ``objects``.
    """
    text = words(instruction)
    if any(find(phrase, text) >= 0 for phrase in ALL_WORDS):
        kept = set()
        cut = EXCEPT.search(text)
        if cut is not None:         # "everything but the vase": the vase stays
            kept = set(resolve_targets(text[cut.end() - 1:], objects, viewpoint))
        return [o.id for o in objects if o.id not in kept]
    if SORT_FRAGILITY.search(text):
        descending = bool(DESCENDING.search(text))
        ordered = sorted(objects, key=lambda o: (o.fragility, o.id), reverse=descending)
        return [o.id for o in ordered]
    if SORT_SIZE.search(text):
        descending = bool(LARGEST_FIRST.search(text))
        ordered = sorted(objects, key=lambda o: (object_volume(o), o.id), reverse=descending)
        return [o.id for o in ordered]
    reading = read_instruction(instruction, objects, viewpoint)
    return _unique(oid for m in reading.mentions for oid in m.chosen)


# ------------------------------------------------------------------ reading references
#: Words after which the next object mentioned is a landmark: it says where the target is
#: ("the ball *behind the* box", "the cup *nearest the* bowl", "the mug *farther from the*
#: vase", "the block *from between the* glass *and the* bottle").
RELATION_WORDS = (
    ("next", "to"), ("close", "to"), ("closest", "to"), ("nearest", "to"), ("adjacent", "to"),
    ("in", "front", "of"), ("left", "of"), ("right", "of"), ("on", "top", "of"),
    ("near",), ("nearest",), ("nearer",), ("closest",), ("closer",), ("nearby",),
    ("beside",), ("besides",), ("behind",), ("by",), ("between",), ("farther",),
    ("farthest",), ("further",), ("furthest",), ("from",), ("under",), ("below",),
    ("beneath",), ("above",), ("inside",), ("in",), ("on",), ("against",), ("around",),
    ("at",), ("with",), ("beyond",), ("past",), ("than",), ("of",))
#: Words after which the next object mentioned is another target.
CONJUNCTION_WORDS = (("and",), ("then",), ("also",), ("plus",), ("after", "that"),
                     ("followed", "by"), (",",))
#: "the X farther from the Y": the candidate at the largest distance from the landmark.
_FAR = {"farther", "farthest", "further", "furthest"}
_NEAR = {"near", "nearest", "nearer", "closest", "closer", "next", "beside", "besides", "by",
         "nearby", "adjacent", "close"}
_ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "1st": 0,
             "2nd": 1, "3rd": 2, "4th": 3}
#: Attribute words the camera sees, as (key, largest?): "tall" = the highest top, "big" =
#: the largest bounding box. Read from the perceived extents, never from a catalogue.
_ATTRIBUTES = {"tall": ("height", True), "taller": ("height", True),
               "tallest": ("height", True), "high": ("height", True),
               "short": ("height", False), "shorter": ("height", False),
               "shortest": ("height", False), "low": ("height", False),
               "big": ("volume", True), "bigger": ("volume", True),
               "biggest": ("volume", True), "large": ("volume", True),
               "larger": ("volume", True), "largest": ("volume", True),
               "small": ("volume", False), "smaller": ("volume", False),
               "smallest": ("volume", False), "little": ("volume", False),
               "tiny": ("volume", False), "wide": ("width", True), "wider": ("width", True),
               "widest": ("width", True), "narrow": ("width", False),
               "narrower": ("width", False), "narrowest": ("width", False)}
_PLURAL_CUES = {"both", "all", "two", "three", "four", "five", "six", "several", "these",
                "those"}


@dataclass
class Mention:
    """One noun phrase of the instruction that names objects of the scene."""

    start: int                      # token index of its first word
    end: int                        # one past its last word
    candidates: List[str]           # every object it could name
    plural: bool = False
    role: str = "target"            # target | landmark
    chosen: List[str] = field(default_factory=list)    # the objects it names, resolved


@dataclass
class Reading:
    """What a named instruction asks for: its mentions, targets and landmarks, in order."""

    mentions: List[Mention]

    @property
    def targets(self) -> List[str]:
        return _unique(oid for m in self.mentions if m.role == "target" for oid in m.chosen)

    @property
    def landmarks(self) -> List[str]:
        wanted = set(self.targets)
        return _unique(oid for m in self.mentions if m.role == "landmark"
                       for oid in m.chosen if oid not in wanted)


def _unique(items) -> List[str]:
    return list(dict.fromkeys(items))


def tokens_of(text: str) -> List[str]:
    """Lower-case words and commas, in order."""
    return re.findall(r"[a-z0-9]+|,", str(text).lower())


def _phrases(obj: ObjectInstance) -> List[Tuple[List[str], int]]:
    """(words, strength) an object answers to: 2 id or full name, 1 category, 0 synonym."""
    out = [(tokens_of(obj.id.replace("_", " ")), 2), (tokens_of(obj.id), 2),
           (tokens_of(obj.name), 2), (tokens_of(obj.category.replace("_", " ")), 1)]
    out += [(tokens_of(s), 0) for s in SYNONYMS.get(obj.category.lower(), ())]
    return [(p, k) for p, k in out if p]


def _match(tokens: List[str], i: int, phrase: List[str]) -> Tuple[bool, bool]:
    """(matches at i, with a plural ending on its last word)."""
    n = len(phrase)
    if i + n > len(tokens) or tokens[i:i + n - 1] != phrase[:-1]:
        return False, False
    last, word = tokens[i + n - 1], phrase[-1]
    if last == word:
        return True, False
    if last in (word + "s", word + "es"):
        return True, True
    return False, False


def _mentions(tokens: List[str], objects: Sequence[ObjectInstance]) -> List[Mention]:
    """Noun phrases naming objects, left to right; the longest phrase wins at a position,
    and among equally long ones the strongest (a synonym only where nothing answers
    directly, an object's full name over a category shared by others)."""
    table = [(o, _phrases(o)) for o in objects]
    out: List[Mention] = []
    i = 0
    while i < len(tokens):
        best: Dict[str, Tuple[int, int, bool]] = {}
        for obj, phrases in table:
            for phrase, strength in phrases:
                ok, plural = _match(tokens, i, phrase)
                if ok:
                    cur = best.get(obj.id)
                    cand = (len(phrase), strength, plural)
                    if cur is None or cand[:2] > cur[:2]:
                        best[obj.id] = cand
        if not best:
            i += 1
            continue
        length = max(v[0] for v in best.values())
        strength = max(v[1] for k, v in best.items() if v[0] == length)
        chosen = [k for k, v in best.items() if v[0] == length and v[1] == strength]
        plural = any(best[k][2] for k in chosen) or (i > 0 and tokens[i - 1] in _PLURAL_CUES)
        order = {o.id: n for n, o in enumerate(objects)}
        mention = Mention(i, i + length, sorted(chosen, key=order.get), plural)
        if out and out[-1].end == i:
            # two nouns in a row are one noun phrase whose head is the last: "the glass
            # vase" (the word glass also names a wine glass), "the toy block"
            mention.start = out.pop().start
        out.append(mention)
        i += length
    return out


def _last_connector(gap: Sequence[str]) -> Tuple[str, int]:
    """('relation' | 'conjunction' | '', index of its first word) of the last connecting
    phrase in ``gap``."""
    for end in range(len(gap), 0, -1):
        for phrase, label in ([(p, "relation") for p in RELATION_WORDS]
                              + [(c, "conjunction") for c in CONJUNCTION_WORDS]):
            n = len(phrase)
            if end - n >= 0 and tuple(gap[end - n:end]) == phrase:
                return label, end - n
    return "", -1


def _view_axes(viewpoint: Optional[Sequence[float]]) -> Tuple[np.ndarray, np.ndarray]:
    """(right, away) unit vectors on the table as seen from ``viewpoint`` (default: the
    fixed camera, whose view a person giving the instruction shares)."""
    if viewpoint is None:
        spec = fixed_camera_spec()
        eye, target = np.asarray(spec["eye"], float), np.asarray(spec["target"], float)
    else:
        eye = np.asarray(viewpoint, float)
        target = np.array([0.5, 0.0, 0.0])
    away = (target - eye)[:2]
    away = away / max(float(np.linalg.norm(away)), 1e-9)
    right = np.array([-away[1], away[0]]) * -1.0        # clockwise of the view direction
    return right, away


def _xy(obj: ObjectInstance) -> np.ndarray:
    return np.asarray(obj.position, float)[:2]


def _attribute(obj: ObjectInstance, key: str) -> float:
    if key == "height":
        return float(obj.position[2] + obj.size[2] / 2.0)
    if key == "width":
        return float(max(obj.size[0], obj.size[1]))
    return object_volume(obj)


def _select(candidates: List[str], pre: Sequence[str], post: Sequence[str],
            landmarks: List[List[str]], by_id: Dict[str, ObjectInstance],
            viewpoint: Optional[Sequence[float]]) -> List[str]:
    """The one of ``candidates`` that the words around its mention pick (module text of
    :func:`read_instruction`), or all of them when nothing picks one."""
    if len(candidates) < 2:
        return list(candidates)
    right, away = _view_axes(viewpoint)
    objs = [by_id[c] for c in candidates]
    lateral = {o.id: float(_xy(o) @ right) for o in objs}
    depth = {o.id: float(_xy(o) @ away) for o in objs}
    words_ = list(pre) + list(post)
    ordinal = next((_ORDINALS[w] for w in pre if w in _ORDINALS), None)
    if "last" in pre:
        ordinal = -1
    side = None
    for k, w in enumerate(words_):
        if w in ("left", "leftmost"):
            side = "left"
        elif w in ("right", "rightmost"):
            side = "right"
        elif w in ("front", "nearest", "closest") and k + 1 < len(words_) \
                and words_[k + 1] in ("me", "you", "camera"):
            side = "front"
        elif w in ("back", "rear", "far") and "from" not in words_[max(0, k - 1):k]:
            side = side or "back"
    if landmarks and any(landmarks):
        points = [_xy(by_id[i]) for group in landmarks for i in group if i in by_id]
        rel = set(pre) | set(post)
        if points:
            if "between" in rel and len(points) >= 2:
                a, b = points[0], points[-1]

                def seg(p: np.ndarray) -> float:
                    t = float(np.clip((p - a) @ (b - a) / max(float((b - a) @ (b - a)), 1e-9),
                                      0.0, 1.0))
                    return float(np.linalg.norm(p - (a + t * (b - a))))
                return [min(objs, key=lambda o: seg(_xy(o))).id]
            dist = {o.id: min(float(np.linalg.norm(_xy(o) - p)) for p in points) for o in objs}
            if rel & _FAR:
                return [max(objs, key=lambda o: dist[o.id]).id]
            if "behind" in rel or "front" in rel:
                ref = float(np.mean([p @ away for p in points]))
                sign = 1.0 if "behind" in rel else -1.0
                beyond = [o for o in objs if sign * (depth[o.id] - ref) > 0] or objs
                return [min(beyond, key=lambda o: dist[o.id]).id]
            if ("left" in rel or "right" in rel) and "of" in rel:
                ref = float(np.mean([p @ right for p in points]))
                sign = -1.0 if "left" in rel else 1.0
                beside = [o for o in objs if sign * (lateral[o.id] - ref) > 0] or objs
                return [min(beside, key=lambda o: dist[o.id]).id]
            return [min(objs, key=lambda o: dist[o.id]).id]
    if ordinal is not None:
        if side == "right":
            ranked = sorted(objs, key=lambda o: -lateral[o.id])
        elif side in ("back",):
            ranked = sorted(objs, key=lambda o: -depth[o.id])
        elif side == "front":
            ranked = sorted(objs, key=lambda o: depth[o.id])
        else:
            ranked = sorted(objs, key=lambda o: lateral[o.id])
        if -len(ranked) <= ordinal < len(ranked):
            return [ranked[ordinal].id]
        return list(candidates)
    for w in pre:
        if w in _ATTRIBUTES:
            key, largest = _ATTRIBUTES[w]
            pick = max if largest else min
            return [pick(objs, key=lambda o: _attribute(o, key)).id]
    if side == "left":
        return [min(objs, key=lambda o: lateral[o.id]).id]
    if side == "right":
        return [max(objs, key=lambda o: lateral[o.id]).id]
    if side == "front":
        return [min(objs, key=lambda o: depth[o.id]).id]
    if side == "back":
        return [max(objs, key=lambda o: depth[o.id]).id]
    return list(candidates)


def read_instruction(instruction: str, objects: Sequence[ObjectInstance],
                     viewpoint: Optional[Sequence[float]] = None) -> Reading:
    """The objects a named instruction asks for (targets) and those that only say where they
    are (landmarks), each mention resolved to the objects it names.

    Roles: an object mentioned right after a spatial relation (``RELATION_WORDS``: "behind
    the", "nearest the", "farther from the", "between the A and the B") is a landmark of the
    one before; after a conjunction ("and", ",", "then") it is another target, so "the X
    behind the Y, the Z and the W" asks for X, Z and W. A first mention after a relation
    ("... behind the box" with the ball not among ``objects``) is a landmark too.

    Where several objects answer to one mention ("the mug" with two mugs), the words around
    it pick one: an ordinal ("the second bottle from the right", counted from the left by
    default), a side ("on the left", "the rightmost", "at the back", seen from
    ``viewpoint``, the fixed camera by default), a relation to its landmark ("nearest the
    bowl", "farther from the vase", "between the A and the B", "behind the box") or an
    attribute the camera measures ("the tall mug", "the small bowl"). A plural ("both
    cups") or a mention with none of these keeps them all.
    """
    tokens = tokens_of(instruction)
    mentions = _mentions(tokens, objects)
    by_id = {o.id: o for o in objects}
    between_open = False
    prev_end = 0
    for k, m in enumerate(mentions):
        gap = tokens[prev_end:m.start]
        label, at = _last_connector(gap)
        if k == 0:
            m.role = "landmark" if label == "relation" else "target"
            between_open = label == "relation" and "between" in gap
        elif between_open and label == "conjunction" and gap[at:at + 1] == ["and"] \
                and not any(w in ("then",) for w in gap):
            m.role = "landmark"
            between_open = False
        elif not label and len(mentions[k - 1].candidates) == 1 \
                and mentions[k - 1].candidates[0] in m.candidates:
            # an apposition, "cup_2 (the ceramic cup)": the same object named again
            m.role, m.candidates = mentions[k - 1].role, list(mentions[k - 1].candidates)
        else:
            m.role = "landmark" if label == "relation" else "target"
            between_open = label == "relation" and "between" in gap[at:] and not m.plural
        prev_end = m.end
    # resolve each mention: landmarks first (a target's place is read against them)
    for k, m in enumerate(mentions):
        if m.role == "landmark":
            m.chosen = list(m.candidates) if m.plural else _select(
                m.candidates, _pre(tokens, mentions, k), _post(tokens, mentions, k), [],
                by_id, viewpoint)
    for k, m in enumerate(mentions):
        if m.role != "target":
            continue
        if m.plural:
            m.chosen = list(m.candidates)
            continue
        marks: List[List[str]] = []
        for nxt in mentions[k + 1:]:
            if nxt.role != "landmark":
                break
            marks.append(nxt.chosen)
        m.chosen = _select(m.candidates, _pre(tokens, mentions, k),
                           _post(tokens, mentions, k), marks, by_id, viewpoint)
    # a landmark is never also a target ("the cup nearest the other cup" aside)
    return Reading(mentions)


def _pre(tokens: List[str], mentions: List[Mention], k: int) -> List[str]:
    """Words between the previous mention's connector and mention ``k`` ("the second tall")."""
    start = mentions[k - 1].end if k > 0 else 0
    gap = tokens[start:mentions[k].start]
    label, at = _last_connector(gap)
    if label:
        n = next(len(p) for p in RELATION_WORDS + CONJUNCTION_WORDS
                 if tuple(gap[at:at + len(p)]) == p)
        gap = gap[at + n:]
    return gap


def _post(tokens: List[str], mentions: List[Mention], k: int) -> List[str]:
    """Words after mention ``k`` up to the next target mention (its place and relation)."""
    end = len(tokens)
    for nxt in mentions[k + 1:]:
        if nxt.role == "target":
            end = nxt.start
            break
    out = tokens[mentions[k].end:end]
    cut = [i for i, w in enumerate(out) if w in ("and", ",", "then")]
    # stop at a conjunction that starts another target, not at "between the A and the B"
    if cut and "between" not in out[:cut[0]]:
        out = out[:cut[0]]
    return out


__all__ = ["ALL_WORDS", "CONJUNCTION_WORDS", "DESCENDING", "EXCEPT", "LARGEST_FIRST", "Mention",
           "RELATION_WORDS", "Reading", "SORT_FRAGILITY", "SORT_SIZE", "SYNONYMS", "find",
           "is_sort", "object_volume", "read_instruction", "resolve_targets", "tokens_of",
           "words"]
