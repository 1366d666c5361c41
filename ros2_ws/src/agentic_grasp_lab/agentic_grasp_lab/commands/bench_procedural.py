"""``agentic-grasp bench procedural``: N procedural scenes under the paper's protocol.

Draws ``--scenes N`` scenes from the object catalogue in families (core/sim/procedural.py),
one trial per scene and configuration, and prints success per family and configuration, the
cleared fraction, refusals of infeasible targets and the scene graph's paired effect
(evaluation/studies/procedural.py). Without ``--scene-seed`` a seed is drawn at run time and
printed, so a reported figure never comes from a seed chosen in advance;
``--scene-seed S --only-scene K`` reruns one scene. Writes records.jsonl, summary.json,
report.txt and the figures into ``--out`` (default out/procedural).
"""
from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from pathlib import Path


def add_procedural_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("procedural scenes (bench procedural)")
    group.add_argument("--scenes", type=int, default=200,
                       help="procedural: how many scenes to draw (default 200)")
    group.add_argument("--scene-seed", type=int, default=None,
                       help="procedural: the scene seed (default: drawn now and printed)")
    group.add_argument("--only-scene", type=int, default=None, metavar="K",
                       help="procedural: rerun scene K of --scene-seed only")


def run_procedural_bench(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.errors import ConfigError
    from agentic_grasp_lab.evaluation.studies.procedural import (DEFAULT_CONFIGURATIONS,
                                                                 format_summary, run_procedural,
                                                                 summarise, write_figures)
    from agentic_grasp_lab.evaluation.records import write_json
    from agentic_grasp.core.planner.configurations import get_configuration

    as_json = bool(args.json)
    if args.scenes < 1 or (args.only_scene is not None and args.only_scene < 0):
        print("agentic-grasp bench procedural: --scenes must be >= 1 and --only-scene >= 0",
              file=sys.stderr)
        return 2
    if args.only_scene is not None and args.scene_seed is None:
        print("agentic-grasp bench procedural: --only-scene needs the --scene-seed it "
              "belongs to", file=sys.stderr)
        return 2
    seed = args.scene_seed if args.scene_seed is not None else secrets.randbelow(2 ** 31)
    confs = tuple(c.strip() for c in (args.configurations or "").split(",") if c.strip()) \
        or DEFAULT_CONFIGURATIONS
    try:
        for c in confs:
            get_configuration(c)
    except ConfigError as exc:
        print(f"agentic-grasp bench procedural: {exc}", file=sys.stderr)
        return 2
    if not as_json:
        print(f"scene seed {seed}" + ("" if args.scene_seed is not None
                                      else " (drawn at run time)"), flush=True)
    out = Path(args.out) if args.out else Path("out/procedural")
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        result = run_procedural(seed, args.scenes, confs,
                                perception=args.perception or "vlm_sim",
                                visual_query=args.visual_query or "camera",
                                workers=args.workers, executor=args.executor or "local",
                                ray_address=args.ray_address or "",
                                progress=not args.no_progress and not as_json,
                                only_scene=args.only_scene,
                                journal=out / "records.jsonl")
    except ConfigError as exc:
        print(f"agentic-grasp bench procedural: {exc}", file=sys.stderr)
        return 2
    n = 1 if args.only_scene is not None else args.scenes
    summary = summarise(result.records, seed, n, confs)
    summary["totals"] = {**result.totals(), "total_wall_s": round(time.perf_counter() - start,
                                                                   3)}
    if args.only_scene is not None:
        summary["only_scene"] = args.only_scene
    text = format_summary(summary)
    files = {"records": str(out / "records.jsonl"),
             "summary": str(write_json(summary, out / "summary.json"))}
    (out / "report.txt").write_text(text + "\n", encoding="utf-8")
    files["report"] = str(out / "report.txt")
    if not args.no_figures:
        files.update(write_figures(summary, out, seed))
    if as_json:
        print(json.dumps({k: v for k, v in summary.items()}, indent=2, default=str))
        return 0
    print(text)
    t = summary["totals"]
    print(f"\n{t['trials']} trials in {t['wall_s']:.1f} s with {t['workers']} worker(s)")
    for name, path in files.items():
        print(f"wrote {name}: {path}")
    return 0
