"""``agentic-grasp bench learning``: the learning curve of experience acquisition.

Reuses ``--tasks``, ``--perception``, ``--out`` and ``--no-progress`` of the paper benchmark's
options; adds ``--goals``, ``--block``, ``--eval-trials``, ``--check-trials``, ``--groups``
and ``--learn-seed``. See agentic_grasp_lab.evaluation.studies.learning.
"""
from __future__ import annotations

import argparse
from pathlib import Path


def add_learning_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("learning (bench learning)")
    group.add_argument("--goals", type=int, default=100,
                       help="goals per series, in order (default 100)")
    group.add_argument("--block", type=int, default=10, help="goals per block (default 10)")
    group.add_argument("--eval-trials", type=int, default=20,
                       help="held-out seeds per task after the series (default 20)")
    group.add_argument("--check-trials", type=int, default=5,
                       help="held-out seeds per benchmark task for the 12-task check "
                       "(0 = skip; default 5)")
    group.add_argument("--groups", default="far_ood,near_ood,placements",
                       help="series groups: far_ood, near_ood (config/ood/splits.yaml), "
                       "placements (config/scenes/learning/)")
    add_learn_seed(group)


def add_learn_seed(group) -> None:
    """``--learn-seed``, which the fleet benchmark shares."""
    group.add_argument("--learn-seed", type=int, default=0, help="repetition seed")


def run_learning_bench(args: argparse.Namespace) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.evaluation.studies.learning import (format_learning, plot_learning,
                                                               run_learning, save_learning)

    out = Path(args.out) if args.out else Path("results") / "learning"
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    result = run_learning(groups=[g.strip() for g in args.groups.split(",") if g.strip()],
                          goals=args.goals, block=args.block, eval_trials=args.eval_trials,
                          check_trials=args.check_trials, seed=args.learn_seed,
                          perception=args.perception or "vlm_sim", workdir=out, tasks=tasks,
                          progress=not args.no_progress)
    print(format_learning(result))
    saved = save_learning(result, out / "learning.json")
    png = plot_learning(result, out / "learning_curve.png")
    print(f"results: {saved}" + (f", plot: {png}" if png else ""))
    return result.to_dict() if args.json else {}


__all__ = ["add_learn_seed", "add_learning_arguments", "run_learning_bench"]
