"""The planner's decision inputs on ``planner/decision_inputs``: every answer that decides.

A goal's decisions depend on its configuration and seed, the episodic memory it starts
with, and every answer its peers give: perception (fixed and wrist camera), HAA-RAG,
the scene graph's constraints, and the arm (attempt outcomes, the wrist camera's model,
the view motions that uncover a hidden target). Attempt records and the goal log say what
was decided, not from what; replay needs the inputs themselves. The planner node publishes
one message per input, as it arrives, so a recording cut mid-goal keeps what came before:

- ``goal``: once per goal, before its first call: the configuration, the goal's seed and
  the generator seed it gave, the memory lifetime and the whole episodic memory
  (recording/memory_state.py), the visual-query and perception-retry settings, the
  planner node's parameters (its PlannerConfig) and, with acquisition on, the
  acquired-experiences file;
- one ``exchange`` per peer call, in call order (``seq``): its ``kind`` (``perceive``,
  ``retrieve``, ``infer_constraints``, ``execute``, ``wrist_camera``, ``move_camera``), the
  request and the answer exactly as the planner received it (recording/codec.py), or the
  error the call raised, and ``motions``: the arm motions of the goal before it (an answer
  about the world is only valid for a replay that moved the arm the same way); a retrieval
  also notes ``acquired_bytes``, how much of the acquired file the retrieval node had read
  (it reads the file before every query), so ``--recompute retrieval`` sees that knowledge
  base again.

Each message is a std_msgs/String holding one JSON document, ``format`` :data:`FORMAT`:
std_msgs needs no interface change, every rosbag2 tool and PyPI's ``mcap-ros2-support``
read it, and the layout is versioned here. QoS: reliable and transient local with a
history of one goal (:data:`HISTORY`), so a recorder that matches late still receives the
goal under way.
"""
from __future__ import annotations

import json
import os
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional

from agentic_grasp.ros.recording.codec import msg_to_data
from agentic_grasp.ros.recording.memory_state import memory_state

TOPIC = "planner/decision_inputs"
#: Layout version of the documents; replay refuses any other (it names what differs).
FORMAT = 1
#: Documents a late subscriber still receives: one goal's worth. A sub-goal has at most 21
#: (perceive, retrieve, infer_constraints; Rmax + 1 = 4 attempts of execute and perceive
#: again; 3 views of wrist_camera, move_camera and perceive), so 64 hold the goal document
#: and three whole sub-goals (a long-horizon goal under way). Not more: the writer keeps
#: each slot of its history at the largest document it ever held (rmw_fastrtps preallocates
#: with realloc), and a retrieval answer is about 25 kB against 1.5 kB for most others, so
#: 1,000 slots grew the planner by about 25 MB per 1,000 goals long after they were full
#: (a publisher of the measured mix of sizes: +44 MB over 9,000 documents past the first
#: 1,000; +3 MB with 50 slots). What must outlive a goal is on disk (a recording, the
#: acquired experiences), not in this history.
HISTORY = 64
#: The peer calls recorded, each a port of the planner (core/planner/ports.py).
KINDS = ("perceive", "retrieve", "infer_constraints", "execute", "wrist_camera",
         "move_camera")
#: Kinds that move the arm: an answer about the world recorded after N of them is only an
#: answer for a replay that made the same N motions.
MOTIONS = ("execute", "move_camera")


def qos() -> Any:
    # on use: importing this module loads no rclpy (a bag is read with rosbags alone)
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=HISTORY, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


class DecisionTap:
    """Publishes one goal's decision inputs (module docstring); the peers' client modules
    call it with each exchange. One goal at a time, as the planner runs them."""

    def __init__(self, publish: Callable[[str], None], acquirer: Any = None) -> None:
        self._publish = publish
        path = getattr(acquirer, "path", None)      # the file store's (not the fleet's)
        self._acquired = (str(path) if path is not None
                          and getattr(acquirer, "store", None) is None else None)
        self._lock = threading.Lock()
        self._goal_id = ""
        self._seq = 0
        self._motions = 0

    def begin(self, goal_id: str, header: Mapping[str, Any]) -> None:
        """A goal starts: its ``goal`` document (configuration, seed, memory, ...)."""
        with self._lock:
            self._goal_id, self._seq, self._motions = goal_id, 0, 0
            self._send({"type": "goal", "acquired_path": self._acquired, **header})

    def end(self) -> None:
        with self._lock:
            self._goal_id = ""

    def __call__(self, kind: str, request: Any, response: Any) -> None:
        """One peer call answered: request and response as messages or plain data."""
        self._exchange(kind, request, {"response": _data(kind, response)})

    def error(self, kind: str, request: Any, exc: BaseException) -> None:
        """One peer call that raised instead of answering (timeout, lost peer, cancel)."""
        self._exchange(kind, request, {"error": {"type": type(exc).__name__,
                                                 "peer": str(getattr(exc, "peer", "")),
                                                 "detail": str(getattr(exc, "detail", exc))}})

    def _exchange(self, kind: str, request: Any, outcome: Dict[str, Any]) -> None:
        with self._lock:
            if not self._goal_id:
                return                      # a call outside a goal decides nothing
            extra = {}
            if kind == "retrieve" and self._acquired is not None:
                # what the retrieval node had picked up: the file up to here (it reads the
                # acquired file before every query, core/retrieval/live.py)
                extra["acquired_bytes"] = _size(self._acquired)
            self._send({"type": "exchange", "kind": kind, "motions": self._motions,
                        "request": _data(kind, request), **extra, **outcome})
            if kind in MOTIONS:
                self._motions += 1

    def _send(self, document: Dict[str, Any]) -> None:
        document = {"format": FORMAT, "goal_id": self._goal_id, "seq": self._seq, **document}
        self._seq += 1
        self._publish(json.dumps(document, separators=(",", ":")))


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0                            # not written yet


def goal_header(instruction: str, requested: str, configuration: str, seed: int,
                rng_seed: Any, memory: Any, node: Any) -> Dict[str, Any]:
    """The ``goal`` document's content (module docstring); ``node``: the planner node (its
    settings: memory lifetime, visual query, perception retries; its parameters, from which
    the PlannerConfig it runs is built again)."""
    settings = node.settings
    params = {name: _plain(p.value)
              for name, p in sorted(node.get_parameters_by_prefix("").items())}
    return {"instruction": instruction, "requested_configuration": requested,
            "configuration": configuration, "seed": int(seed),
            "rng_seed": rng_seed if isinstance(rng_seed, int) else [int(v) for v in rng_seed],
            "memory_lifetime": str(settings.memory_lifetime), "memory": memory_state(memory),
            "visual_query": str(settings.visual_query),
            "perceive_retries": int(settings.perceive_retries), "parameters": params}


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        return [_plain(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]
    return value


def _data(kind: str, value: Any) -> Any:
    if value is None or isinstance(value, (dict, list, str, int, float, bool)):
        return value
    data = msg_to_data(value)
    if kind == "perceive" and isinstance(data, dict) and "target_crop" in data:
        # the crop only feeds the retrieval query, which records its own copy
        data["target_crop"] = None
    return data


def tapped(tap: Optional[Callable[..., None]], kind: str, request: Any,
           call: Callable[[], Any]) -> Any:
    """``call()``'s answer, recorded by ``tap`` (None: not recorded) with ``request``."""
    if tap is None:
        return call()
    try:
        response = call()
    except Exception as exc:
        tap.error(kind, request, exc)
        raise
    tap(kind, request, response)
    return response


# ---- reading ----------------------------------------------------------------------------------

class InputsError(ValueError):
    """Decision inputs replay cannot use (another format, a broken document)."""


def parse_documents(texts: List[str]) -> Dict[str, List[Dict[str, Any]]]:
    """Each goal's documents in ``seq`` order, by goal id; InputsError names a document of
    another format or one that is not a decision-input document."""
    goals: Dict[str, List[Dict[str, Any]]] = {}
    for i, text in enumerate(texts):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise InputsError(f"decision input {i} is not JSON: {exc}") from None
        if not isinstance(doc, dict) or "goal_id" not in doc or "type" not in doc:
            raise InputsError(f"decision input {i} is not a decision-input document")
        if doc.get("format") != FORMAT:
            raise InputsError(f"decision inputs of format {doc.get('format')!r}; this replay "
                              f"reads format {FORMAT} (record the session again)")
        goals.setdefault(str(doc["goal_id"]), []).append(doc)
    for docs in goals.values():
        docs.sort(key=lambda d: int(d["seq"]))
    return goals


__all__ = ["DecisionTap", "FORMAT", "goal_header", "InputsError", "KINDS", "MOTIONS", "TOPIC",
           "parse_documents", "qos", "tapped"]
