"""What a procedural scene is called: ``procedural:S:K``, scene ``K`` of scene seed ``S``,
and the family it belongs to (scene ``K`` is family ``FAMILIES[K % 13]``).

The name alone rebuilds the scene (:func:`.procedural.generate`); this module reads and
writes it without drawing anything.
"""
from __future__ import annotations

import re
from typing import Tuple

from agentic_grasp.core.errors import ConfigError

PREFIX = "procedural:"
FAMILIES = ("sg", "it_near", "it_between", "it_hidden", "it_handle", "it_lying", "lh_clear",
            "lh_sort", "it_clutter", "it_far", "it_duplicate", "it_novel", "lh_long")
FAMILY_CATEGORY = {"sg": "SG", "lh_clear": "LH", "lh_sort": "LH", "lh_long": "LH"}


def procedural_id(scene_seed: int, index: int) -> str:
    return f"{PREFIX}{int(scene_seed)}:{int(index)}"


_ID = re.compile(r"^procedural:(\d{1,10}):(\d{1,9})$")


def is_procedural(task: str) -> bool:
    return str(task).startswith(PREFIX)


def parse_procedural_id(task: str) -> Tuple[int, int]:
    """(scene seed, index) of ``procedural:S:K``; ConfigError for anything else."""
    m = _ID.match(str(task).strip())
    if not m:
        raise ConfigError(f"{task!r}: a procedural scene is named procedural:SEED:INDEX "
                          "(two non-negative integers)")
    return int(m.group(1)), int(m.group(2))


def family_of(task: str) -> str:
    return FAMILIES[parse_procedural_id(task)[1] % len(FAMILIES)]


__all__ = ["FAMILIES", "FAMILY_CATEGORY", "PREFIX", "family_of", "is_procedural",
           "parse_procedural_id", "procedural_id"]
