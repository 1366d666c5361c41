"""Replay's bookkeeping, ROS-free: recorded answers served in order, divergences, verdicts.

A replayed planner asks its peers the questions the live one asked; :class:`Exchanges`
answers each from the recording, by kind and in order, once it has checked that the
question is the recorded one (:func:`grasp_diff` for a grasp, a caller's comparison for the
rest). An answer about the world (a perception, a retrieval over a knowledge base that
grows with every attempt) also needs the world to be where it was: the recorded answer
came after N arm motions, and a replay that has made another number cannot use it. Any
mismatch is a :class:`Divergence`: the replay stops there, and what follows is
*unobserved*: the recording cannot say what the world would have answered.

:func:`verdict` labels a replayed goal, :func:`summarize` counts a whole replay.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np

from agentic_grasp.core.types import GraspParameters

#: Largest differences for which a planned grasp counts as the recorded one. The recording
#: keeps the planner's own float64 grasp, so an unchanged planner agrees exactly; the
#: tolerances only keep a counterfactual's report from naming rounding noise.
TOLERANCES: Dict[str, float] = {"position_m": 1e-6, "approach_rad": 1e-6, "width_m": 1e-7,
                                "force_n": 1e-6, "approach_height_m": 1e-7,
                                "speed_mps": 1e-7, "wrist_yaw_rad": 1e-6}
#: Kinds whose answer describes the world (or a knowledge base fed by the arm's attempts).
WORLD_KINDS = ("perceive", "retrieve")
#: Kinds that move the arm.
MOTION_KINDS = ("execute", "move_camera")

REPRODUCED = "reproduced"    # recorded configuration: every decision and the result agree
OBSERVED = "observed"        # another configuration, no divergence: its result was observed
UNOBSERVED = "unobserved"    # diverged: what followed cannot be known from the recording
DIFFERS = "differs"          # recorded configuration, no divergence, yet another result


def grasp_diff(planned: GraspParameters, recorded: GraspParameters) -> Dict[str, Any]:
    """Fields of ``planned`` outside TOLERANCES of ``recorded`` ({} when they agree), each as
    ``[planned, recorded]`` (position, approach: the vectors; the rest: the values)."""
    diff: Dict[str, Any] = {}
    p, r = np.asarray(planned.position, float), np.asarray(recorded.position, float)
    if float(np.linalg.norm(p - r)) > TOLERANCES["position_m"]:
        diff["position"] = [_r(p), _r(r)]
    a, b = np.asarray(planned.approach, float), np.asarray(recorded.approach, float)
    cos = float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))
    if math.acos(max(-1.0, min(1.0, cos))) > TOLERANCES["approach_rad"]:
        diff["approach"] = [_r(a), _r(b)]
    for name, key in (("width", "width_m"), ("force", "force_n"),
                      ("approach_height", "approach_height_m"), ("speed", "speed_mps")):
        x, y = float(getattr(planned, name)), float(getattr(recorded, name))
        if abs(x - y) > TOLERANCES[key]:
            diff[name] = [round(x, 6), round(y, 6)]
    yaw = abs(math.remainder(float(planned.wrist_yaw) - float(recorded.wrist_yaw), math.pi))
    if yaw > TOLERANCES["wrist_yaw_rad"]:     # a parallel gripper is symmetric under pi
        diff["wrist_yaw"] = [round(float(planned.wrist_yaw), 6),
                             round(float(recorded.wrist_yaw), 6)]
    if planned.grasp_type != recorded.grasp_type:
        diff["grasp_type"] = [planned.grasp_type.value, recorded.grasp_type.value]
    return diff


def _r(v: Any) -> List[float]:
    return [round(float(x), 6) for x in np.asarray(v).reshape(-1)]


def data_diff(planned: Any, recorded: Any, path: str = "", tol: float = 1e-9,
              out: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Where two JSON-like values differ (numbers within ``tol``): {path: [planned, recorded]}."""
    out = {} if out is None else out
    if isinstance(planned, dict) and isinstance(recorded, dict):
        for key in sorted(set(planned) | set(recorded)):
            data_diff(planned.get(key), recorded.get(key), f"{path}.{key}" if path else key,
                      tol, out)
    elif isinstance(planned, list) and isinstance(recorded, list) \
            and len(planned) == len(recorded):
        for i, (x, y) in enumerate(zip(planned, recorded)):
            data_diff(x, y, f"{path}[{i}]", tol, out)
    elif isinstance(planned, (int, float)) and isinstance(recorded, (int, float)) \
            and not isinstance(planned, bool) and not isinstance(recorded, bool):
        x, y = float(planned), float(recorded)
        if not (x == y or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= tol):
            out[path] = [planned, recorded]
    elif planned != recorded:
        out[path] = [planned, recorded]
    return out


class Divergence(Exception):
    """The replayed planner asked something the recording cannot answer (module docstring):
    ``kind`` of question, the goal's ``attempt`` (grasp attempts made before it, 0-based),
    ``target_id`` (when known) and ``diff`` ({parameter: [replayed, recorded]})."""

    def __init__(self, kind: str, attempt: int, why: str, diff: Optional[Dict[str, Any]] = None,
                 target_id: str = "") -> None:
        super().__init__(f"{kind} at attempt {attempt + 1}: {why}")
        self.kind, self.attempt, self.why = kind, attempt, why
        self.diff = dict(diff or {})
        self.target_id = target_id

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "attempt": self.attempt + 1, "target_id": self.target_id,
                "parameters": sorted(self.diff), "diff": self.diff, "why": self.why}


class Exchanges:
    """One goal's recorded exchanges, answered by kind in recorded order (module docstring).

    ``documents``: the goal's ``exchange`` documents (recording/inputs.py). ``raise_error``
    turns a recorded error (a call that raised live) into the exception to raise again.
    """

    def __init__(self, documents: Iterable[Mapping[str, Any]],
                 raise_error: Optional[Callable[[Mapping[str, Any]], None]] = None) -> None:
        self._queues: Dict[str, List[Mapping[str, Any]]] = {}
        for doc in documents:
            if doc.get("type") == "exchange":
                self._queues.setdefault(str(doc["kind"]), []).append(doc)
        self._served: Dict[str, int] = {}
        self._raise = raise_error
        self.motions = 0          # arm motions the replay has made
        self.attempts = 0         # grasp attempts among them
        self.agreed: List[Dict[str, Any]] = []    # the agreed motions, in order

    def take(self, kind: str, compare: Callable[[Mapping[str, Any]], Dict[str, Any]],
             target_id: str = "", recompute: bool = False) -> Optional[Mapping[str, Any]]:
        """The recorded answer to this ``kind`` of question (``compare(doc)``: how the
        question differs from the recorded one's ``request``, {} when it is the same).
        ``recompute``: the caller computes the answer itself and wants the recorded
        exchange only for the request's recorded inputs (None when there is none)."""
        queue = self._queues.get(kind, [])
        index = self._served.get(kind, 0)
        if index >= len(queue):
            if recompute:
                return None
            raise Divergence(kind, self.attempts, f"the recording has no further {kind} "
                                                  "answer (the live planner did not ask it)",
                             target_id=target_id)
        doc = queue[index]
        if kind in WORLD_KINDS and not recompute and int(doc.get("motions", 0)) != self.motions:
            raise Divergence(kind, self.attempts, f"recorded after {doc.get('motions')} arm "
                                                  f"motion(s), asked after {self.motions}: "
                                                  "the world differs", target_id=target_id)
        diff = compare(doc)
        if diff and not recompute:
            raise Divergence(kind, self.attempts, "the question differs from the recorded "
                                                  "one", diff, target_id)
        self._served[kind] = index + 1
        if kind in MOTION_KINDS:
            self.motions += 1
            self.attempts += kind == "execute"
            self.agreed.append({"kind": kind, "target_id": target_id})
        if "error" in doc and self._raise is not None and not recompute:
            self._raise(doc["error"])
        return doc

    def unserved(self) -> Dict[str, int]:
        """Recorded exchanges the replay never asked for, per kind."""
        left = {kind: len(queue) - self._served.get(kind, 0)
                for kind, queue in self._queues.items()}
        return {kind: n for kind, n in sorted(left.items()) if n > 0}

    def recorded_attempts(self) -> int:
        return len(self._queues.get("execute", []))


def verdict(same_configuration: bool, divergence: Optional[Divergence],
            unserved: Mapping[str, int], result_agrees: bool) -> str:
    """REPRODUCED / OBSERVED / UNOBSERVED / DIFFERS (module constants) of one goal.

    After a divergence nothing is known: UNOBSERVED, whatever the replayed planner went on to
    report. Without one, the recorded configuration must also have asked every recorded
    question and ended the same; another configuration's result was observed (every
    answer it used is the world's), however it compares with the recorded one.
    """
    if divergence is not None:
        return UNOBSERVED
    if not same_configuration:
        return OBSERVED
    return REPRODUCED if result_agrees and not unserved else DIFFERS


def summarize(goals: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Counts of a replay's goal reports (each with ``verdict``, ``metrics``)."""
    counts = {v: 0 for v in (REPRODUCED, OBSERVED, UNOBSERVED, DIFFERS)}
    for g in goals:
        counts[g["verdict"]] += 1
    agreed = sum(g["metrics"]["attempts_agreed"] for g in goals)
    recorded = sum(g["metrics"]["recorded_attempts"] for g in goals)
    positions = [{"goal_id": g["goal_id"][:8], **{k: g["metrics"]["first_divergence"][k]
                                                  for k in ("kind", "attempt", "target_id",
                                                            "parameters")}}
                 for g in goals if g["metrics"]["first_divergence"] is not None]
    return {"goals": len(goals), **counts, "attempts_agreed": agreed,
            "recorded_attempts": recorded, "first_divergences": positions}


__all__ = ["DIFFERS", "Divergence", "Exchanges", "OBSERVED", "REPRODUCED", "TOLERANCES",
           "UNOBSERVED", "data_diff", "grasp_diff", "summarize", "verdict"]
