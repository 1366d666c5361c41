"""The bench command with its Ray tasks held at their start (agentic_grasp_lab.testing.ray_hold),
for test_sweep_executors.py's node-kill test. It lives beside the test, not in core/, because
it drives the CLI (commands/), which core never imports (the house-order test)."""
from __future__ import annotations

import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from agentic_grasp_lab.commands import bench_paper
    from agentic_grasp_lab.evaluation import sweep
    # the task body by its module's name, not as __main__: Ray pickles it by reference
    from agentic_grasp_lab.testing.ray_hold import held_unit_task

    sweep._ray_task = held_unit_task            # noqa: SLF001 - run_units reads it per call
    return bench_paper.main(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
