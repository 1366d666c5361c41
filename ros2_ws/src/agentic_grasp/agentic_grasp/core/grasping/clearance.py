"""``constraint_mode: clearance``: the scene-graph constraints applied by choosing among
clearance-aware candidates (:mod:`.candidates`) instead of the paper's fixed adjustments.

What is kept from the paper: content preservation (a filled target is approached vertically,
slowly), the occlusion constraint's lateral approach, support dependency (the planner removes
what rests on the target first). What replaces the fixed collision adjustment (+30 mm, force
x 0.8, 20 deg tilt): the candidate whose swept hand keeps the largest clearance to the
*perceived* neighbours. A neighbour whose extent perception could not measure is given
``unknown_neighbour_size_m`` on every side.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.constraints import ConstraintSet, ConstraintType
from agentic_grasp.core.grasping.candidates import Candidate, evaluate, generate_candidates
from agentic_grasp.core.grasping.config import GraspSynthesisConfig
from agentic_grasp.core.grasping.fit import extent_at
from agentic_grasp.core.grasping.hand import Box, HandModel, obb_gap, object_box
from agentic_grasp.core.types import GraspParameters, ObjectInstance, ObjectState


@dataclass
class SceneGeometry:
    """The perceived target and the neighbours its hand must clear."""

    target: ObjectInstance
    neighbours: List[Box] = field(default_factory=list)
    away_dirs: List[np.ndarray] = field(default_factory=list)
    unknown_extent: List[str] = field(default_factory=list)

    @property
    def filled(self) -> bool:
        return self.target.state == ObjectState.FILLED

    @classmethod
    def build(cls, perception: Any, target: ObjectInstance, objects: Sequence[ObjectInstance],
              cfg: GraspSynthesisConfig, constraints: Optional[ConstraintSet] = None
              ) -> "SceneGeometry":
        perceived = {}
        for p in list(getattr(perception, "objects", []) or []):
            perceived[p.id] = p
        skip = set(constraints.prerequisites) if constraints is not None else set()
        scene = cls(target)
        tbox = object_box(target)
        for obj in objects:
            if obj.id == target.id or obj.id in skip:
                continue
            p = perceived.get(obj.id)
            size = getattr(p, "size", obj.size) if p is not None else obj.size
            unknown = size is None or not np.all(np.isfinite(np.asarray(size, dtype=float)))
            box = object_box(obj)
            if unknown:
                box = Box(box.c, box.R, np.full(3, cfg.unknown_neighbour_size_m / 2.0), obj.id)
                scene.unknown_extent.append(obj.id)
            if obb_gap(tbox, box) > cfg.neighbour_radius_m:
                continue
            # resting on / under the target: not a neighbour the approach sweeps past
            d = np.asarray(obj.position[:2]) - np.asarray(target.position[:2])
            if float(np.linalg.norm(d)) < 1e-3:
                continue
            scene.neighbours.append(box)
            scene.away_dirs.append(-d / float(np.linalg.norm(d)))
        return scene


def opening_kind(grasp: GraspParameters, target: ObjectInstance) -> str:
    """'extent' when the opening spans the perceived body across the closing axis."""
    extent = extent_at(target, grasp, 0.02)
    return "extent" if grasp.width >= extent - 1e-3 else "part"


def choose(grasp: GraspParameters, scene: SceneGeometry, cfg: GraspSynthesisConfig,
           hand: HandModel, constraints: ConstraintSet, limits: Any
           ) -> Tuple[GraspParameters, List[GraspParameters], Dict[str, Any], List[str]]:
    """(chosen grasp, next-best candidates for recovery, summary for the record, the
    next-best candidates' labels)."""
    from agentic_grasp.core.planner.recovery import clamp_grasp, with_approach
    g = grasp.copy()
    vertical_only = False
    notes: List[str] = []
    adj = constraints.adjustment if len(constraints) else None
    occl = [c.direction_bias for c in constraints.of_type(ConstraintType.OCCLUSION)
            if c.direction_bias is not None] if len(constraints) else []
    if adj is not None and adj["direction_override"] is not None:
        # content preservation: the container must stay upright; an approach along the
        # strategy's own direction does not tilt it, a tilted one is not generated
        vertical_only = True
    elif occl:
        a = g.approach + np.sum(occl, axis=0)
        if float(np.linalg.norm(a)) > 1e-6:
            g = with_approach(g, a)
        vertical_only = True
        notes.append("occlusion: lateral approach kept, no further tilt")
    if adj is not None and adj["speed_cap"] is not None:
        g = g.copy(speed=min(g.speed, float(adj["speed_cap"])))
    if scene.unknown_extent:
        notes.append("neighbours of unknown extent boxed at "
                     f"{cfg.unknown_neighbour_size_m * 1e3:.0f} mm: "
                     + ", ".join(scene.unknown_extent))
    if not scene.neighbours:
        return clamp_grasp(g, limits), [], {"mode": "clearance", "n_candidates": 0,
                                            "notes": notes + ["no neighbour within "
                                                              f"{cfg.neighbour_radius_m:.2f} m"]
                                            }, []
    cs = generate_candidates(g, scene.target, scene.neighbours, cfg, hand,
                             opening=opening_kind(g, scene.target),
                             vertical_only=vertical_only, filled=scene.filled,
                             away_dirs=scene.away_dirs[:3])
    summary = cs.summary()
    summary["mode"] = "clearance"
    summary["notes"] = notes + summary["notes"]
    if cs.best is None:
        return clamp_grasp(g, limits), [], summary, []
    queue = [c for c in cs.ranked[1:] if c.feasible][:12]
    rest = [clamp_grasp(c.grasp, limits) for c in queue]
    return clamp_grasp(cs.best.grasp, limits), rest, summary, [c.label for c in queue]


def executed_candidate(grasp: GraspParameters, scene: SceneGeometry,
                       cfg: GraspSynthesisConfig, hand: HandModel, label: str
                       ) -> Dict[str, Any]:
    """The grasp about to run, swept against the perceived neighbours as the search sweeps
    its candidates: what the attempt record and the markers report (clearance_m None: no
    neighbour within ``neighbour_radius_m``)."""
    c: Candidate = evaluate(grasp, scene.target, scene.neighbours, cfg, hand,
                            filled=scene.filled, label=label)
    clear = c.clearance_m if math.isfinite(c.clearance_m) else None
    return {"label": label, "clearance_m": None if clear is None else round(clear, 4),
            "nearest": c.nearest, "collision_free": bool(c.feasible)}


def rank_key(summary: Dict[str, Any], cfg: GraspSynthesisConfig) -> Tuple[bool, float]:
    """Order of two strategies' chosen candidates: collision-free first, then clearance
    (counted up to required_clearance_m); ties keep the retrieval order."""
    chosen = summary.get("chosen")
    if not chosen:
        return (True, 0.0)
    clear = chosen.get("clearance_m")
    clear = cfg.required_clearance_m if clear is None else min(clear,
                                                                cfg.required_clearance_m)
    return (not chosen.get("feasible", False), -float(clear))


__all__ = ["SceneGeometry", "choose", "executed_candidate", "opening_kind", "rank_key"]
