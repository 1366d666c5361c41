"""Experience acquisition: growing the knowledge base during deployment (paper Sec. VI).

The paper names "scaling the knowledge base through autonomous experience acquisition" as
future work. An attempt's outcome becomes a new experience (object-frame grasp, success
label, render spec of the perceived object) appended to a JSON Lines file that
:meth:`KnowledgeBase.load` reads with ``extra_paths`` (config: acquired_experiences_path).

Appends are crash-safe (see :mod:`.jsonl`): a SIGKILL in the middle of a write loses at most
that record and never leaves a file that fails to load.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.retrieval.jsonl import append_line
from agentic_grasp.core.retrieval.knowledge_base import (Experience, grasp_to_object_frame,
                                                         record_problems)
from agentic_grasp.core.retrieval.taxonomy import Taxonomy
from agentic_grasp.core.types import (AffordanceDescriptor, FailureType, GraspParameters,
                                      ObjectInstance)

_LOG = logging.getLogger(__name__)


def append_experience(path: Union[str, Path], experience: Union[Experience, Mapping[str, Any]],
                      taxonomy: Optional[Taxonomy] = None, fsync: bool = True) -> None:
    """Validate ``experience`` and append it to ``path`` as one atomic JSON line.

    ``taxonomy`` (default: kb_data/taxonomy.yaml) checks the vocabulary, so nothing that the
    loader would reject enters the file. Raises ValidationError naming the field.
    """
    record = experience.to_record() if isinstance(experience, Experience) else dict(experience)
    tax = taxonomy if taxonomy is not None else Taxonomy.load()
    problems = record_problems(record, str(path), tax)
    if problems:
        raise ValidationError("; ".join(problems))
    append_line(path, record, fsync=fsync)


def experience_from_attempt(obj: ObjectInstance, affordance: AffordanceDescriptor,
                            grasp: GraspParameters, success: bool, provenance: str,
                            failure: Union[FailureType, str, None] = None,
                            experience_id: Optional[str] = None) -> Experience:
    """An experience from an executed attempt on ``obj`` (``grasp`` in the world frame).

    The grasp is stored relative to the object's bounding-box centre and yaw, the render spec
    is the object's shape, size, colour and material. ``provenance`` names the task and trial
    ("acquired: " is prefixed when missing). A failed attempt needs its failure type.
    """
    if not success and failure is None:
        raise ValidationError("a failed experience needs its failure type")
    failure_mode = None
    if not success:
        failure_mode = failure.value if isinstance(failure, FailureType) else \
            FailureType(str(failure)).value
    if not provenance.startswith(("acquired: ", "authored: ")):
        provenance = f"acquired: {provenance}"
    eid = experience_id or f"acq-{obj.category}-{time.time_ns()}"
    return Experience(
        id=eid, category=obj.category, affordance=affordance,
        grasp=grasp_to_object_frame(grasp, obj), success=bool(success),
        provenance=provenance,
        render_spec={"shape": obj.shape.value, "size": [round(float(v), 4) for v in obj.size],
                     "color": [int(c) for c in obj.color], "material": obj.material},
        object_name=obj.name, failure_mode=failure_mode)
