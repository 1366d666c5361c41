"""Latency of scene-graph construction plus constraint inference (paper Sec. III-B).

The reasoner runs once per grasp attempt inside the planner's loop, so it must stay far below
the motion time: the targets are p50 <= 2 ms for a 10-object tabletop and <= 50 ms for a
200-object scene. Scenes are random, non-overlapping Table I objects; the table grows with the
object count (area 0.48 m^2 per 10 objects) so the density, and with it the number of close
pairs per object, stays that of the real tabletop.

Run: ``python -m agentic_grasp_lab.benchmarks.scene_graph [--repeats N]``.
"""
from __future__ import annotations

import argparse
import math
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from agentic_grasp.core.scene_graph.constraints import infer_constraints
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.scene_graph.graph import build_scene_graph
from agentic_grasp.core.types import ObjectInstance, ObjectState

#: Table I objects: (category, shape, size (m), fragility).
TABLE_I = (
    ("cup", "cylinder", (0.08, 0.08, 0.09), 0.3),
    ("apple", "sphere", (0.08, 0.08, 0.08), 0.1),
    ("bottle", "cylinder", (0.07, 0.07, 0.22), 0.1),
    ("banana", "box", (0.18, 0.04, 0.04), 0.2),
    ("bowl", "cylinder", (0.12, 0.12, 0.06), 0.3),
    ("cube", "box", (0.05, 0.05, 0.05), 0.0),
    ("vase", "cylinder", (0.08, 0.08, 0.15), 0.8),
    ("wine glass", "cylinder", (0.07, 0.07, 0.20), 0.9),
    ("screwdriver", "box", (0.20, 0.03, 0.03), 0.0),
    ("phone", "box", (0.07, 0.15, 0.01), 0.5),
    ("tennis ball", "sphere", (0.065, 0.065, 0.065), 0.0),
    ("toy block", "box", (0.04, 0.04, 0.04), 0.0),
)

#: p50 targets (ms) per object count.
TARGET_P50_MS = {10: 2.0, 200: 50.0}


def random_scene(n: int, rng: np.random.Generator, clearance: float = 0.01,
                 x_max: float = 0.8) -> List[ObjectInstance]:
    """n non-overlapping Table I objects on a table of 0.48 m^2 per 10 objects."""
    scale = math.sqrt(max(1.0, n / 10.0))
    lx, ly = 0.6 * scale, 0.8 * scale
    placed: List[ObjectInstance] = []
    centres: List[np.ndarray] = []
    radii: List[float] = []
    for k in range(n):
        for _ in range(10000):
            cat, shape, size, frag = TABLE_I[int(rng.integers(len(TABLE_I)))]
            radius = 0.5 * math.hypot(size[0], size[1])
            xy = np.array([rng.uniform(x_max - lx + radius, x_max - radius),
                           rng.uniform(-ly / 2 + radius, ly / 2 - radius)])
            if all(np.linalg.norm(xy - c) >= radius + r + clearance
                   for c, r in zip(centres, radii)):
                break
        else:
            raise RuntimeError(f"cannot place {n} objects on a {lx:.2f} x {ly:.2f} m table")
        state = ObjectState.FILLED if cat in ("cup", "bowl") and rng.random() < 0.3 \
            else ObjectState.EMPTY
        placed.append(ObjectInstance(
            id=f"{cat.replace(' ', '_')}_{k}", category=cat, shape=shape,
            position=(xy[0], xy[1], size[2] / 2.0), size=size,
            yaw=float(rng.uniform(-math.pi, math.pi)), fragility=frag, state=state))
        centres.append(xy)
        radii.append(radius)
    return placed


def run_bench(sizes: Sequence[int] = (10, 200), repeats: int = 200, scenes: int = 10,
              seed: int = 0, config: Optional[SceneGraphConfig] = None) -> List[Dict]:
    """Time build_scene_graph + infer_constraints per repeat; one dict per scene size.

    Each repeat uses one of ``scenes`` random scenes and a different target. Returned keys:
    objects, repeats, p50_ms, p99_ms, build_p50_ms, infer_p50_ms, mean_edges,
    target_p50_ms (None when no target is set for that size), meets_target.
    """
    if repeats < 1 or scenes < 1:
        raise ValueError("repeats and scenes must be >= 1")
    rng = np.random.default_rng(seed)
    results: List[Dict] = []
    for n in sizes:
        pool = [random_scene(n, rng) for _ in range(scenes)]
        # warm-up: imports, numpy dispatch caches
        for objs in pool[:2]:
            infer_constraints(build_scene_graph(objs, config=config), objs[0].id)
        total, build, infer, edges = [], [], [], []
        for r in range(repeats):
            objs = pool[r % scenes]
            target = objs[(r // scenes) % n].id
            t0 = time.perf_counter()
            graph = build_scene_graph(objs, config=config)
            t1 = time.perf_counter()
            infer_constraints(graph, target)
            t2 = time.perf_counter()
            build.append((t1 - t0) * 1e3)
            infer.append((t2 - t1) * 1e3)
            total.append((t2 - t0) * 1e3)
            edges.append(graph.graph.number_of_edges())
        target_ms = TARGET_P50_MS.get(n)
        p50 = float(np.percentile(total, 50))
        results.append({
            "objects": n, "repeats": repeats,
            "p50_ms": p50, "p99_ms": float(np.percentile(total, 99)),
            "build_p50_ms": float(np.percentile(build, 50)),
            "infer_p50_ms": float(np.percentile(infer, 50)),
            "mean_edges": float(np.mean(edges)),
            "target_p50_ms": target_ms,
            "meets_target": None if target_ms is None else p50 <= target_ms,
        })
    return results


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 200])
    args = parser.parse_args(argv)
    print(f"{'objects':>8} {'p50 ms':>8} {'p99 ms':>8} {'build':>7} {'infer':>7} "
          f"{'edges':>7} {'target':>7}")
    for row in run_bench(sizes=args.sizes, repeats=args.repeats):
        target = "-" if row["target_p50_ms"] is None else (
            f"{'ok' if row['meets_target'] else 'MISS'} {row['target_p50_ms']:g}")
        print(f"{row['objects']:>8} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} "
              f"{row['build_p50_ms']:>7.2f} {row['infer_p50_ms']:>7.2f} "
              f"{row['mean_edges']:>7.0f} {target:>7}")


if __name__ == "__main__":
    main()
