"""Experience acquisition: every executed attempt becomes one acquired experience.

The paper leaves "autonomous experience acquisition" as future work (Sec. VI). Here the
planner hands each finished attempt to an :class:`Acquirer`, which turns it into one
knowledge-base record and appends it with :func:`.experience_store.append_experience` (one
``O_APPEND`` write, fsync-ed: a SIGKILL loses at most the attempt in flight).

Only what the robot perceived and measured goes in, never simulator ground truth:

- category, affordance, shape, size, colour and material are the PERCEIVED target's;
- the grasp is the executed one, in the perceived object's frame (bbox centre, yaw), with a
  ``fit`` block so the next retrieval refits it to the object in front of the robot
  (core/grasping/fit.py);
- outcome, failure type (the planner's diagnosis) and the quality vector are what the
  executor measured (Q and phi of the attempt's outcome);
- provenance: robot, goal id, subgoal, time, perception backend, planner configuration,
  attempt, retry level.

A category the taxonomy does not know (a far-OOD object) cannot be matched at level 1. The
record then carries ``acquisition.superclass``: the superclass of the retrieved strategy the
attempt started from (a thermos grasped with a bottle strategy joins "bottle"), or the
category itself when nothing was retrieved. :func:`extend_taxonomy` adds those links when the
acquired file is loaded, so the next goal on the same object finds its own experiences by
exact category and still sees its superclass's.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional

import numpy as np

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.paths import user_data_dir
from agentic_grasp.core.grasping.fit import fit_record
from agentic_grasp.core.retrieval.acquired.experience_store import append_experience
from agentic_grasp.core.retrieval.knowledge_base import grasp_to_object_frame
from agentic_grasp.core.retrieval.taxonomy import Taxonomy, normalise_word
from agentic_grasp.core.types import FailureType, ObjectInstance

_LOG = logging.getLogger(__name__)

#: File name of the acquired experiences under the per-user data folder.
DEFAULT_FILE = "acquired_experiences.jsonl"
_ID_CHARS = re.compile(r"[^A-Za-z0-9_.:-]+")


def default_acquired_path() -> Path:
    """acquired_experiences.jsonl in the per-user data folder (core/paths.user_data_dir:
    ``$AGENTIC_GRASP_DATA_HOME`` or ``~/.local/share/agentic_grasp``), outside the
    repository."""
    return user_data_dir() / DEFAULT_FILE


def resolve_acquired_path(value: str) -> Optional[Path]:
    """A node parameter's value -> path: '' or 'none' = acquisition off, 'default' = the
    per-user file, anything else is the path itself."""
    text = (value or "").strip()
    if not text or text.lower() in ("none", "off", "false"):
        return None
    if text.lower() == "default":
        return default_acquired_path()
    return Path(text).expanduser()


@dataclass
class AcquisitionContext:
    """What the attempt record does not know: the goal and the robot's configuration."""

    goal_id: str = ""
    perception_backend: str = ""
    configuration: str = ""
    subgoal_index: int = 0
    #: Which robot of the fleet made the attempt (planner parameter acquisition.robot,
    #: default the host name): kb list/prune --robot, and two robots' ids never collide.
    robot: str = ""


def _source_strategy(goal: Any, taxonomy: Taxonomy) -> tuple:
    """(experience id, superclass) of the retrieved strategy the attempt started from."""
    retrieval = getattr(goal, "retrieval", None) or {}
    if getattr(goal, "initial_source", "") != "retrieval":
        return "", ""
    for strategy in retrieval.get("strategies") or ():
        if strategy.get("success"):
            sup = taxonomy.superclass(str(strategy.get("category", ""))) or ""
            return str(strategy.get("id", "")), sup
    return "", ""


def experience_record(attempt: Any, target: ObjectInstance, goal: Any,
                      context: AcquisitionContext, taxonomy: Taxonomy,
                      now: Optional[float] = None) -> Dict[str, Any]:
    """The knowledge-base record of one executed attempt on the PERCEIVED ``target``.

    ``attempt``: the planner's AttemptRecord (grasp in the world frame, outcome, diagnosis);
    ``goal``: its GoalOutcome (retrieval summary, initial source). Raises ValidationError
    when the attempt cannot become an experience (no affordance perceived, no outcome).
    """
    if target.affordance is None:
        raise ValidationError(f"{target.id}: no affordance perceived; not an experience")
    outcome = getattr(attempt, "outcome", None)
    if outcome is None:
        raise ValidationError(f"{target.id} attempt {attempt.index}: the arm never ran the "
                              "grasp (no outcome); not an experience")
    now = time.time() if now is None else float(now)
    category = normalise_word(target.category)
    canonical = taxonomy.canonical(category)
    source_id, source_sup = _source_strategy(goal, taxonomy)
    local = grasp_to_object_frame(attempt.grasp, target)
    size = np.asarray(target.size, dtype=float)
    success = bool(attempt.success)
    failure = None
    if not success:
        diagnosis = getattr(attempt, "diagnosis", None)
        failure = (diagnosis.failure_type.value if diagnosis is not None
                   else FailureType.UNKNOWN.value)
    aff = target.affordance
    material = target.material if taxonomy.is_material(target.material) else aff.material
    # what perceived the target: the perception result's own backend (the planner keeps it
    # in the goal), else what the context was told; oracle experiences are ground truth
    backend = str(getattr(goal, "perception_backend", "") or context.perception_backend)
    goal8 = (context.goal_id or "local")[:12]
    robot = (context.robot or "")[:64]
    who = f"{robot[:24]}-" if robot else ""
    eid = _ID_CHARS.sub("_", f"acq-{who}{goal8}-{context.subgoal_index}-{target.id}-"
                             f"{attempt.index}-{time.time_ns() % 10**9:09d}")[:128]
    acquisition: Dict[str, Any] = {
        "goal_id": context.goal_id[:64], "time": round(now, 3),
        "perception_backend": backend[:40],
        "configuration": (context.configuration or getattr(goal, "configuration", ""))[:40],
        "attempt": int(attempt.index), "retry_level": int(attempt.retry_level),
        "subgoal": int(context.subgoal_index),
        "target_id": str(target.id)[:80],
        "initial_source": str(getattr(goal, "initial_source", ""))[:40],
        "quality": round(float(outcome.quality), 4),
        "phi": [round(float(v), 4) for v in np.asarray(outcome.phi).reshape(-1)][:16],
        "perceived_size": [round(float(v), 4) for v in size]}
    if robot:
        acquisition["robot"] = robot
    if source_id:
        acquisition["source_experience"] = source_id[:128]
    if canonical is None:
        acquisition["superclass"] = source_sup or category
    record: Dict[str, Any] = {
        "id": eid, "category": canonical or category,
        "object_name": (target.name or target.category)[:80],
        "affordance": {"type": aff.type.value, "material": aff.material,
                       "fragility": float(aff.fragility), "region": aff.region},
        "grasp": local, "fit": None,
        "success": success, "failure_mode": failure,
        "provenance": (f"acquired: goal {goal8} attempt {attempt.index} "
                       f"({backend or 'unknown perception'}, "
                       f"{acquisition['configuration'] or 'unknown configuration'})"),
        "render_spec": {"shape": target.shape.value,
                        "size": [round(float(min(max(v, 1e-3), 1.0)), 4) for v in size],
                        "color": [int(c) for c in target.color], "material": material},
        "acquisition": acquisition}
    # the same derivation as the authored entries' migration (offsets / half extents, an
    # opening at least the closing extent is an 'extent' grasp refitted to the next object)
    fit = fit_record(record)
    fit["offset_rel"] = [round(float(np.clip(v, -5.0, 5.0)), 4) for v in fit["offset_rel"]]
    record["fit"] = fit
    return record


def extend_taxonomy(taxonomy: Taxonomy, records: Iterable[Mapping[str, Any]]) -> Taxonomy:
    """``taxonomy`` plus the categories acquired records introduced, each under the
    superclass its FIRST record names (file order: a restart gives the same links)."""
    links: Dict[str, str] = {}
    for record in records:
        if not isinstance(record, Mapping):
            continue
        cat = normalise_word(str(record.get("category", "")))
        if not cat or cat in taxonomy.superclass_of or cat in links:
            continue
        acq = record.get("acquisition") or {}
        sup = normalise_word(str(acq.get("superclass") or cat)) if isinstance(acq, Mapping) \
            else cat
        if sup != cat and sup not in taxonomy.superclass_of:
            sup = cat
        links[cat] = taxonomy.superclass_of.get(sup, sup)
    if not links:
        return taxonomy
    superclass_of = dict(taxonomy.superclass_of)
    superclass_of.update(links)
    return replace(taxonomy, superclass_of=superclass_of)


@dataclass
class Acquirer:
    """Appends one experience per finished attempt to ``path`` (the planner's attempt sink),
    or to ``store`` when one is given (:mod:`.store`: the file or the PostgreSQL fleet store;
    ``last_where`` says where the last record went: 'file', 'db' or 'spool').

    Never raises into the planner: a record that cannot be made or written is logged and
    counted in ``skipped`` (the goal goes on; the robot just does not learn from it).
    """

    path: Path
    taxonomy: Taxonomy = field(default_factory=Taxonomy.load)
    context: AcquisitionContext = field(default_factory=AcquisitionContext)
    fsync: bool = True
    store: Any = None
    last_where: str = ""
    written: int = 0
    skipped: int = 0
    last_error: str = ""

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def __call__(self, attempt: Any, target: ObjectInstance, goal: Any) -> Optional[str]:
        """Record ``attempt``; returns the new experience id (None when skipped)."""
        try:
            record = experience_record(attempt, target, goal, self.context, self.taxonomy)
            tax = extend_taxonomy(self.taxonomy, [record])
            if self.store is not None:
                self.last_where = self.store.append(record, taxonomy=tax)
            else:
                append_experience(self.path, record, taxonomy=tax, fsync=self.fsync)
                self.last_where = "file"
        except (ValidationError, OSError, ValueError) as exc:
            self.skipped += 1
            self.last_error = str(exc)
            _LOG.warning("experience acquisition skipped an attempt: %s", exc)
            return None
        self.written += 1
        return record["id"]


__all__ = ["AcquisitionContext", "Acquirer", "DEFAULT_FILE", "default_acquired_path",
           "experience_record", "extend_taxonomy", "resolve_acquired_path"]
