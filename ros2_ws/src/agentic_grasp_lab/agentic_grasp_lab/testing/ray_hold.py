"""A bench driver whose Ray tasks wait at their start until a test releases them, so a test
can kill a node while one of its tasks is known to be running there.

Why: a node kill "mid-sweep" decided by polling races the sweep. On a quiet machine the
units finish before the poll ever sees one on the worker node. Here every task, once
started on a Ray worker, writes ``<dir>/<name>.held`` (its pid) and runs its units only
when ``<dir>/<name>.go`` or ``<dir>/all.go`` exists. Ray itself places the tasks (1 CPU
each): while a held task occupies one node's CPU, the next one is run on the other node.

``python test/core/ray_hold_driver.py BENCH-ARGS...`` runs ``bench`` (the
:mod:`agentic_grasp_lab.commands.bench_paper` entry point) with :func:`held_unit_task` in place
of :func:`agentic_grasp_lab.evaluation.sweep._ray_task` (the driver lives beside the test:
core never imports commands/). The folder is ``$%s`` on the
nodes (:class:`.ray_cluster.LocalRayCluster` ``extra_env``). Test code only.
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from agentic_grasp_lab.evaluation import sweep

#: The nodes' variable naming the hold folder.
HOLD_ENV = "AGENTIC_GRASP_RAY_HOLD_DIR"

__doc__ = __doc__ % HOLD_ENV


def held_unit_task(group: Any) -> Tuple[List[List[Dict[str, Any]]], Dict[str, Any]]:
    """The sweep's Ray task body, held at its start (module docstring)."""
    folder = Path(os.environ[HOLD_ENV])
    name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    tmp = folder / f"{name}.tmp"
    tmp.write_text(str(os.getpid()))
    tmp.rename(folder / f"{name}.held")          # never seen half-written
    while not (folder / f"{name}.go").exists() and not (folder / "all.go").exists():
        time.sleep(0.02)
    return sweep._ray_task(group)              # noqa: SLF001 - the body it holds


def held_tasks(folder: Path) -> Dict[str, int]:
    """{marker name: pid} of the tasks that have started (released or not)."""
    out = {}
    for marker in folder.glob("*.held"):
        try:
            out[marker.stem] = int(marker.read_text())
        except (OSError, ValueError):
            continue
    return out


def release(folder: Path, name: Optional[str] = None) -> None:
    """Let the task ``name`` run its units, or every task (now and later) for None."""
    (folder / (f"{name}.go" if name else "all.go")).touch()
