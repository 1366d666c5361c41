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
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.arm.kinematics import PandaKinematics
from agentic_grasp.core.scene_graph.constraints import ConstraintSet, ConstraintType
from agentic_grasp.core.grasping.along import content_grip_force
from agentic_grasp.core.grasping.candidates import (Candidate, CandidateSet, evaluate,
                                                    generate_candidates)
from agentic_grasp.core.grasping.config import GraspSynthesisConfig
from agentic_grasp.core.grasping.fit import extent_at
from agentic_grasp.core.grasping.hand import Box, HandModel, obb_gap, object_box
from agentic_grasp.core.grasping.operations import clamp_grasp, with_approach
from agentic_grasp.core.types import GraspParameters, ObjectInstance, ObjectState


@dataclass
class SceneGeometry:
    """The perceived target and the neighbours its hand must clear."""

    target: ObjectInstance
    neighbours: List[Box] = field(default_factory=list)
    away_dirs: List[np.ndarray] = field(default_factory=list)
    unknown_extent: List[str] = field(default_factory=list)

    @property
    def obstacles(self) -> List[Box]:
        """What the candidates are swept against: the neighbours' boxes. A round
        neighbour stays boxed: the simulator's hand meets its solids' boxes."""
        return list(self.neighbours)

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
    g = grasp.copy()
    vertical_only = False
    notes: List[str] = []
    adj = constraints.adjustment if len(constraints) else None
    occl = [c.direction_bias for c in constraints.of_type(ConstraintType.OCCLUSION)
            if c.direction_bias is not None] if len(constraints) else []
    off_direction = False
    if adj is not None and adj["direction_override"] is not None:
        # content preservation: the container must stay upright; an approach along the
        # strategy's own direction does not tilt it, a tilted one is not generated
        vertical_only = True
        # (15 deg: planner.strategy_direction_tolerance_rad, the same test as the
        # planner's choice of a compatible strategy)
        override = np.asarray(adj["direction_override"], dtype=float)
        off_direction = float(g.approach @ override) < math.cos(math.radians(15.0))
    elif occl:
        a = g.approach + np.sum(occl, axis=0)
        if float(np.linalg.norm(a)) > 1e-6:
            lateral = with_approach(g, a)
            if hand.lowest_point(lateral) < cfg.table_clearance_m:
                # a flat target: tilted, the lower fingertip would reach below the table
                # before the pads reach the grasp point, which the fingers cannot
                notes.append("occlusion: the lateral approach would put a fingertip below "
                             "the table at this grasp; the strategy's approach kept")
            else:
                g = lateral
                notes.append("occlusion: lateral approach kept, no further tilt")
        vertical_only = True
    if adj is not None and adj["speed_cap"] is not None:
        g = g.copy(speed=min(g.speed, float(adj["speed_cap"])))
    if scene.filled:
        need = content_grip_force(g, scene.target, cfg)
        if need > g.force:
            notes.append(f"content preservation: {need:.0f} N grip (was {g.force:.0f} N) so "
                         "the filled container does not turn about the pinched part")
            g = g.copy(force=need)
    if scene.unknown_extent:
        notes.append("neighbours of unknown extent boxed at "
                     f"{cfg.unknown_neighbour_size_m * 1e3:.0f} mm: "
                     + ", ".join(scene.unknown_extent))
    opening = opening_kind(g, scene.target)
    if not scene.neighbours:
        own = evaluate(g, scene.target, [], cfg, hand, filled=scene.filled)
        if own.feasible:
            return clamp_grasp(g, limits), [], {
                "mode": "clearance", "n_candidates": 0,
                "notes": notes + [f"no neighbour within {cfg.neighbour_radius_m:.2f} m"]}, []
        # the strategy's own grasp meets the target itself (a palm over the body's top, a
        # finger in the body): search the other points and yaws for one that clears it
        notes.append(f"the strategy's grasp is not clear of {scene.target.id} itself "
                     f"({own.nearest or 'palm / wrist / table'}): candidates searched")
    cs = _generate(g, scene.target, scene.obstacles, cfg, hand, opening=opening,
                   vertical_only=vertical_only, filled=scene.filled,
                   away_dirs=scene.away_dirs[:3])
    if off_direction:
        # a strategy approaching off the imposed direction is kept only as a last resort
        for c in cs.ranked:
            c.feasible = False
            c.nearest = (c.nearest + "; " if c.nearest else "") + "approach not the " \
                "content constraint's direction"
        cs.collision_free = False
        notes.append("content preservation: the strategy's approach is not the imposed one")
    _drop_unreachable(cs)
    relaxed: List[str] = []
    if cs.best is not None and not cs.best.feasible and not off_direction:
        cs, relaxed = _relax(grasp, g, scene, cfg, hand, cs, opening, vertical_only)
    summary = cs.summary()
    summary["mode"] = "clearance"
    if summary.get("chosen") and (off_direction or "no IK solution" in cs.best.nearest):
        summary["chosen"]["excluded"] = True    # ranks after every strategy that is not
    summary["notes"] = notes + summary["notes"]
    if relaxed:
        summary["relaxed"] = relaxed
        summary["notes"].append("constraints relaxed: " + "; ".join(relaxed))
        if summary.get("chosen"):
            summary["chosen"]["relaxed"] = True     # ranks after every strategy that needs none
            summary["chosen"]["label"] += " [relaxed: " + ", ".join(
                r.split(":")[0] for r in relaxed) + "]"
    if cs.best is None:
        return clamp_grasp(g, limits), [], summary, []
    queue = [c for c in cs.ranked[1:] if c.feasible][:12]
    rest = [clamp_grasp(c.grasp, limits) for c in queue]
    return clamp_grasp(cs.best.grasp, limits), rest, summary, [c.label for c in queue]


#: The order in which the scene graph's constraints give way when together they leave no
#: candidate clear of the perceived neighbours: the clearance the search keeps to them first
#: (a margin, nothing breaks), then the approach side they fix (a lateral approach away from
#: an occluder, the vertical of a filled container's constraint is never given up: the
#: content would spill), then their change of force. After the last, the grasp is the
#: strategy's own, the one the planner runs without the scene graph: the constraints can make
#: no grasp worse than that by the measure they are chosen by.
RELAXATION_ORDER = ("clearance", "approach side", "force")


def _worst(c: Candidate) -> float:
    """The deepest a candidate's swept hand meets anything (neighbour, table, target): the
    measure the least-bad candidate is ranked by."""
    return min(c.clearance_m, c.table_gap_m, c.target_gap_m)


def _relax(strategy: GraspParameters, g: GraspParameters, scene: SceneGeometry,
           cfg: GraspSynthesisConfig, hand: HandModel, cs: CandidateSet, opening: str,
           vertical_only: bool) -> Tuple[CandidateSet, List[str]]:
    """No candidate under the constraints clears the neighbours: relax them in
    :data:`RELAXATION_ORDER` until one does, or until the grasp is the strategy's own.
    ``strategy``: the strategy's grasp before any constraint, ``g`` after the constraints'
    direction, speed and grip. Returns the candidates to rank from and what was relaxed."""
    own = evaluate(strategy, scene.target, scene.obstacles, cfg, hand, filled=scene.filled,
                   label="the strategy's own grasp")
    if own.feasible and not reachable(strategy):
        own.feasible = False
    best = cs.best
    if best.clearance_m > 0.0:
        # the table, the target itself or the arm's reach blocks it, not a neighbour the
        # constraints keep the hand from: nothing of theirs to relax
        return cs, []
    # 1. clearance: the least-bad constrained candidate, when it meets less than the
    # strategy's own grasp would (and the strategy's own is not clear of everything)
    if not own.feasible and _worst(best) >= _worst(own):
        return cs, [f"clearance: no candidate clears every perceived neighbour; the least-bad "
                    f"({best.label}, {-_worst(best) * 1e3:.0f} mm into one) accepted: the "
                    "strategy's own grasp meets them deeper"]
    relaxed = ["clearance: no candidate clears every perceived neighbour, and the least-bad "
               "is no better than the strategy's own grasp"]
    # 2. approach side: the approach the constraints fixed, searched on every side
    if own.feasible:
        relaxed.append("approach side: the strategy's own approach clears every perceived "
                       "neighbour")
    elif vertical_only and not scene.filled:
        free = _generate(strategy, scene.target, scene.obstacles, cfg, hand, opening=opening,
                         vertical_only=False, filled=False, away_dirs=scene.away_dirs[:3])
        _drop_unreachable(free)
        if free.best is not None and free.best.feasible:
            return free, relaxed + [f"approach side: the constraint's approach given up, "
                                    f"{free.best.label} searched on every side"]
        relaxed.append("approach side: no side clears the neighbours either")
    # 3. force: the constraints' grip and speed given back; the strategy's own grasp
    if abs(float(g.force) - float(strategy.force)) > 1e-9 and not scene.filled:
        relaxed.append(f"force: {strategy.force:.0f} N, the strategy's own")
    out = CandidateSet(n_generated=cs.n_generated, collision_free=own.feasible,
                       notes=list(cs.notes))
    keep = strategy if not scene.filled else g
    own = evaluate(keep, scene.target, scene.obstacles, cfg, hand, filled=scene.filled,
                   label="the strategy's own grasp")
    out.ranked = [own] + [c for c in cs.ranked if c.feasible]
    return out, relaxed + ["the strategy's own grasp, as without the scene graph"]


#: Recent candidate searches by everything they read (:func:`_search_key`). The sweep runs
#: trial k of every configuration one after another on the same scene (sweep.run_group);
#: the configurations whose first perception and strategy agree search the same grasp.
_SEARCHES: "OrderedDict[tuple, CandidateSet]" = OrderedDict()
_SEARCHES_SIZE = 32


def _bytes(*values: Any) -> bytes:
    """Floats and float arrays as their exact bits (a repr rounds arrays; -0.0 == 0.0)."""
    return b"".join(np.asarray(v, dtype=float).tobytes() for v in values)


def _search_key(g: GraspParameters, target: ObjectInstance, obstacles: Sequence[Box],
                cfg: GraspSynthesisConfig, hand: HandModel, opening: str,
                vertical_only: bool, filled: bool, away_dirs: Sequence[np.ndarray]
                ) -> tuple:
    """Every input generate_candidates reads (the configs are dataclasses of plain
    numbers, whose repr is exact)."""
    t = target
    return (_bytes(g.position, g.approach, g.width, g.force, g.approach_height, g.speed,
                   g.wrist_yaw), g.grasp_type,
            (t.id, t.category, t.shape, t.material, t.state, t.affordance, t.name, t.color,
             t.upright, t.damaged, _bytes(t.position, t.size, t.yaw, t.fragility, t.mass,
                                          t.friction)),
            tuple((b.name, _bytes(b.c, b.R, b.h)) for b in obstacles),
            repr(cfg), repr(hand.cfg), opening, bool(vertical_only), bool(filled),
            _bytes(*away_dirs) if len(away_dirs) else b"")


def _clone(cs: CandidateSet) -> CandidateSet:
    """A copy the caller may change (choose marks candidates infeasible and re-ranks)."""
    out = CandidateSet(n_generated=cs.n_generated, collision_free=cs.collision_free,
                       notes=list(cs.notes))
    for c in cs.ranked:
        g = object.__new__(GraspParameters)
        g.__dict__.update(c.grasp.__dict__)
        g.position, g.approach = c.grasp.position.copy(), c.grasp.approach.copy()
        copied = object.__new__(Candidate)        # dataclasses.replace without its checks
        copied.__dict__.update(c.__dict__)
        copied.grasp = g
        out.ranked.append(copied)
    return out


def _generate(g: GraspParameters, target: ObjectInstance, obstacles: Sequence[Box],
              cfg: GraspSynthesisConfig, hand: HandModel, opening: str, vertical_only: bool,
              filled: bool, away_dirs: Sequence[np.ndarray]) -> CandidateSet:
    """generate_candidates, memoised on its inputs (:data:`_SEARCHES`); the values are the
    search's own, each caller gets its own copy."""
    key = _search_key(g, target, obstacles, cfg, hand, opening, vertical_only, filled,
                      away_dirs)
    hit = _SEARCHES.get(key)
    if hit is not None:
        _SEARCHES.move_to_end(key)
        return _clone(hit)
    cs = generate_candidates(g, target, obstacles, cfg, hand, opening=opening,
                             vertical_only=vertical_only, filled=filled,
                             away_dirs=away_dirs)
    _SEARCHES[key] = _clone(cs)
    if len(_SEARCHES) > _SEARCHES_SIZE:
        _SEARCHES.popitem(last=False)
    return cs


_KINEMATICS: List[Any] = []
#: Feasible candidates checked for an IK solution before the best reachable one is chosen
#: (each check is one or two IK solves; the ranking rarely needs more than the first).
REACH_CHECKS = 6


def reachable(grasp: GraspParameters) -> bool:
    """The arm reaches the pre-grasp and the grasp pose within its joint limits (the
    robot's own kinematics, core/arm/kinematics.py, as the executor solves it)."""
    if not _KINEMATICS:
        _KINEMATICS.append(PandaKinematics())
    kin = _KINEMATICS[0]
    a = np.asarray(grasp.approach, dtype=float)
    a = a / float(np.linalg.norm(a))
    pos = np.asarray(grasp.position, dtype=float)
    q_pre = kin.solve_grasp(pos - a * float(grasp.approach_height), a, grasp.wrist_yaw)
    return q_pre is not None and kin.solve_grasp(pos, a, grasp.wrist_yaw,
                                                 seed=q_pre) is not None


def _drop_unreachable(cs: Any) -> None:
    """Mark the first feasible candidates the arm cannot reach infeasible (re-ranked), so
    the chosen one is reachable: a side approach from beyond the object points the hand
    back at the robot."""
    checked = 0
    changed = False
    for c in cs.ranked:
        if not c.feasible:
            break
        if checked >= REACH_CHECKS:
            break
        checked += 1
        if reachable(c.grasp):
            break
        c.feasible = False
        c.nearest = (c.nearest + "; " if c.nearest else "") + "no IK solution"
        changed = True
    if changed:
        cs.ranked.sort(key=lambda c: not c.feasible)      # stable: the order otherwise kept
        cs.collision_free = bool(cs.ranked and cs.ranked[0].feasible)


def executed_candidate(grasp: GraspParameters, scene: SceneGeometry,
                       cfg: GraspSynthesisConfig, hand: HandModel, label: str
                       ) -> Dict[str, Any]:
    """The grasp about to run, swept against the perceived neighbours as the search sweeps
    its candidates: what the attempt record and the markers report (clearance_m None: no
    neighbour within ``neighbour_radius_m``)."""
    c: Candidate = evaluate(grasp, scene.target, scene.obstacles, cfg, hand,
                            filled=scene.filled, label=label)
    clear = c.clearance_m if math.isfinite(c.clearance_m) else None
    return {"label": label, "clearance_m": None if clear is None else round(clear, 4),
            "nearest": c.nearest, "collision_free": bool(c.feasible)}


def rank_key(summary: Dict[str, Any], cfg: GraspSynthesisConfig) -> Tuple[bool, float]:
    """Order of two strategies' chosen candidates: collision-free first, then clearance
    (counted up to required_clearance_m); ties keep the retrieval order."""
    chosen = summary.get("chosen")
    if not chosen or chosen.get("excluded"):
        # no candidate at all (none fits the opening), or only ones the arm cannot reach or
        # the content constraint rules out: after every strategy that has another
        return (True, math.inf)
    clear = chosen.get("clearance_m")
    clear = cfg.required_clearance_m if clear is None else min(clear,
                                                                cfg.required_clearance_m)
    # a choice the constraints had to give way for is no better than a blocked one: it does
    # not make its strategy win over another whose candidates the constraints leave clear
    return (not chosen.get("feasible", False) or bool(chosen.get("relaxed")), -float(clear))


__all__ = ["SceneGeometry", "choose", "executed_candidate", "opening_kind", "rank_key"]
