"""Rule-based Constraint Analyzer (paper Sec. III-B, Fig. 3 right).

Starting from the target node v_t, the analyzer looks at v_t's attributes and at its
neighbours within delta_check (surface gap, see scene_graph) and infers the active
constraints C_vt. Each constraint maps to parameter adjustments; together they form the
adjustment vector Delta g = (Delta d, Delta f, Delta h) applied as g' = g (+) Delta g.

The four constraints (constants in config/scene_graph.yaml):

- CONTENT_PRESERVATION: the target's state is ``filled``. Approach direction is overridden
  to d = [0, 0, -1] and speed capped at content_speed_cap (0.05 m/s, half the default
  descent speed; the paper says "slow velocity" without a number).
- COLLISION_AVOIDANCE: one constraint per neighbour with fragility >= fragile_threshold (0.5)
  whose surface gap to the target is <= delta_safe (0.10 m). The gap, not the centre
  distance, is what the fingers must clear, and it matches the paper's "a cup placed 5 cm
  from a fragile wine glass". Force x collision_force_scale (0.8), approach height
  + collision_height_delta (0.03 m), approach tilted by collision_tilt_angle (20 deg) so the
  hand comes in from the side away from the neighbour.
- SUPPORT_DEPENDENCY: the target Supports s (or s is Leaning_On the target). s must be removed
  first; prerequisites list every dependent, topmost first.
- OCCLUSION: an object within delta_check Occludes the target (blocks the camera's line of
  sight). The approach becomes a lateral path from the side away from the occluder: tilted by
  occlusion_tilt_angle (45 deg), so the hand never passes over the occluder.

Direction bias convention: a bias moves the *hand* toward the horizontal unit vector u (u
points from the neighbour/occluder to the target). With the pre-grasp pose at p - h d, the
hand trails the approach vector, so the bias is Delta d = -tan(theta) u: for a top-down d this
tilts d by exactly theta and displaces the pre-grasp pose by h sin(theta) along +u.

The (+) operator, component by component, with collision avoidance first:

1. Collision avoidance: Delta d_c = sum of the collision biases, rescaled to at most
   tan(collision_tilt_angle) (two neighbours on one side do not double the tilt; neighbours
   on opposite sides cancel, leaving the approach vertical, the safest line between them).
   f' = f * min(force_scale) (0.8 once, not 0.8^k: compounding would invite slip);
   h' = h + max(height_delta) (one 30 mm clearance suffices).
2. Occlusion: its side u_o is chosen at inference time with collision priority: any component
   of u_o toward a fragile neighbour is removed (u_o - min(0, u_o.u_c) u_c), so occlusion
   handling can never swing the hand toward what collision avoidance steers it away from.
   Delta d_o is added to Delta d_c; then d' = normalise(d + Delta d_c + Delta d_o).
3. Content preservation: a hard override, d' = [0, 0, -1], and speed' = min(speed, cap).
   Spilling a filled container is irreversible, while collision avoidance keeps its force
   reduction and +30 mm clearance (the hand goes higher instead of tilting), so the
   override wins over the biases on direction only.
4. Support dependency: no change to g; the planner executes ``prerequisites`` first.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from agentic_grasp.core.scene_graph.relations import LEANING_ON, OCCLUDES, SUPPORTS
from agentic_grasp.core.scene_graph.graph import SceneGraph
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.types import GraspParameters, ObjectState

_LOG = logging.getLogger(__name__)

VERTICAL = np.array([0.0, 0.0, -1.0])


class ConstraintType(str, Enum):
    """The paper's four constraint types."""

    CONTENT_PRESERVATION = "content_preservation"
    COLLISION_AVOIDANCE = "collision_avoidance"
    SUPPORT_DEPENDENCY = "support_dependency"
    OCCLUSION = "occlusion"


#: Order in which constraints are composed (collision avoidance takes priority).
COMPOSITION_ORDER = (ConstraintType.COLLISION_AVOIDANCE, ConstraintType.OCCLUSION,
                     ConstraintType.CONTENT_PRESERVATION, ConstraintType.SUPPORT_DEPENDENCY)


@dataclass
class Constraint:
    """One active constraint with its own share of Delta g and a one-line explanation."""

    type: ConstraintType
    source_id: str
    explanation: str
    direction_override: Optional[np.ndarray] = None
    direction_bias: Optional[np.ndarray] = None
    force_scale: float = 1.0
    height_delta: float = 0.0
    speed_cap: Optional[float] = None
    prerequisite_ids: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        def vec(v: Optional[np.ndarray]) -> Optional[List[float]]:
            return None if v is None else [round(float(x), 6) for x in v]

        return {"type": self.type.value, "source_id": self.source_id,
                "explanation": self.explanation,
                "direction_override": vec(self.direction_override),
                "direction_bias": vec(self.direction_bias), "force_scale": self.force_scale,
                "height_delta": self.height_delta, "speed_cap": self.speed_cap,
                "prerequisite_ids": list(self.prerequisite_ids)}


@dataclass
class ConstraintSet:
    """C_vt: the active constraints of one target, in composition order."""

    target_id: str
    constraints: List[Constraint] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.constraints)

    @property
    def types(self) -> List[ConstraintType]:
        return [c.type for c in self.constraints]

    def of_type(self, kind: ConstraintType) -> List[Constraint]:
        return [c for c in self.constraints if c.type == kind]

    def explanations(self) -> List[str]:
        return [c.explanation for c in self.constraints]

    @property
    def prerequisites(self) -> List[str]:
        """Objects to remove before grasping the target, in removal order (topmost first)."""
        out: List[str] = []
        for c in self.constraints:
            for oid in c.prerequisite_ids:
                if oid not in out:
                    out.append(oid)
        return out

    @property
    def adjustment(self) -> Dict[str, Any]:
        """Delta g = (Delta d, Delta f, Delta h) plus the overrides, composed as documented.

        Keys: delta_d (3-vector added to d before normalising), direction_override (the
        vertical d of content preservation, or None), force_scale (f' = f * force_scale),
        delta_f (relative: f' = f (1 + delta_f)), delta_h (m), speed_cap (m/s or None),
        prerequisites.
        """
        delta_d = np.zeros(3)
        for kind in (ConstraintType.COLLISION_AVOIDANCE, ConstraintType.OCCLUSION):
            biases = [c.direction_bias for c in self.of_type(kind)
                      if c.direction_bias is not None]
            if not biases:
                continue
            total = np.sum(biases, axis=0)
            cap = max(float(np.linalg.norm(b)) for b in biases)
            norm = float(np.linalg.norm(total))
            if norm > cap > 0.0:
                total *= cap / norm
            delta_d += total
        overrides = [c.direction_override for c in self.constraints
                     if c.direction_override is not None]
        force_scale = min((c.force_scale for c in self.constraints), default=1.0)
        caps = [c.speed_cap for c in self.constraints if c.speed_cap is not None]
        return {
            "delta_d": delta_d,
            "direction_override": overrides[-1].copy() if overrides else None,
            "force_scale": force_scale,
            "delta_f": force_scale - 1.0,
            "delta_h": max((c.height_delta for c in self.constraints), default=0.0),
            "speed_cap": min(caps) if caps else None,
            "prerequisites": self.prerequisites,
        }

    def to_dict(self) -> Dict[str, Any]:
        adj = self.adjustment
        return {
            "target_id": self.target_id,
            "constraints": [c.to_dict() for c in self.constraints],
            "adjustment": {
                "delta_d": [round(float(x), 6) for x in adj["delta_d"]],
                "direction_override": (None if adj["direction_override"] is None
                                       else [float(x) for x in adj["direction_override"]]),
                "force_scale": adj["force_scale"], "delta_f": adj["delta_f"],
                "delta_h": adj["delta_h"], "speed_cap": adj["speed_cap"],
                "prerequisites": adj["prerequisites"],
            },
        }


def _away(graph: SceneGraph, target_id: str, other_id: str) -> Optional[np.ndarray]:
    """Horizontal unit vector from other's centre to the target's (None when stacked)."""
    delta = graph.node(target_id)["position"][:2] - graph.node(other_id)["position"][:2]
    norm = float(np.linalg.norm(delta))
    if norm < 1e-6:
        return None
    return np.array([delta[0] / norm, delta[1] / norm, 0.0])


def _removal_order(graph: SceneGraph, target_id: str) -> Dict[str, List[str]]:
    """Per direct dependent of the target, the objects to remove (topmost first)."""
    def dependents(oid: str) -> List[str]:
        return sorted(set(graph.objects_of(oid, SUPPORTS))
                      | set(graph.subjects_of(LEANING_ON, oid)))

    done = {target_id}
    chains: Dict[str, List[str]] = {}

    def visit(oid: str, chain: List[str]) -> None:
        done.add(oid)
        for dep in dependents(oid):
            if dep not in done:
                visit(dep, chain)
        chain.append(oid)

    for dep in dependents(target_id):
        if dep not in done:
            chain: List[str] = []
            visit(dep, chain)
            chains[dep] = chain
    return chains


def infer_constraints(graph: SceneGraph, target_id: str,
                      config: Optional[SceneGraphConfig] = None) -> ConstraintSet:
    """C_vt for the target, in composition order. UnknownTargetError for an unknown id."""
    cfg = config if config is not None else graph.config
    target = graph.node(target_id)                      # raises UnknownTargetError
    neighbours = graph.neighbour_gaps(target_id, cfg.delta_check)
    result = ConstraintSet(target_id)

    # 1. collision avoidance: fragile neighbours within delta_safe
    tilt_c = math.tan(cfg.collision_tilt_angle)
    away_sum = np.zeros(3)
    for oid, gap in neighbours:
        other = graph.node(oid)
        if gap > cfg.delta_safe or other["fragility"] < cfg.fragile_threshold:
            continue
        away = _away(graph, target_id, oid)
        bias = None if away is None else -tilt_c * away
        if away is not None:
            away_sum += away
        result.constraints.append(Constraint(
            ConstraintType.COLLISION_AVOIDANCE, oid,
            f"fragile {oid} ({other['category']}, fragility {other['fragility']:.2f}) is "
            f"{gap:.3f} m from {target_id} (<= delta_safe {cfg.delta_safe:.2f} m): force x"
            f"{cfg.collision_force_scale:.2f}, approach +{cfg.collision_height_delta * 1e3:.0f}"
            f" mm, hand tilted {math.degrees(cfg.collision_tilt_angle):.0f} deg away from it",
            direction_bias=bias, force_scale=cfg.collision_force_scale,
            height_delta=cfg.collision_height_delta))
    u_c = None
    if np.linalg.norm(away_sum) > 1e-6:
        u_c = away_sum / np.linalg.norm(away_sum)

    # 2. occlusion: occluders within delta_check, side chosen with collision priority
    near_ids = {oid for oid, _ in neighbours}
    tilt_o = math.tan(cfg.occlusion_tilt_angle)
    for oid in graph.subjects_of(OCCLUDES, target_id):
        if oid not in near_ids:
            continue
        side = _away(graph, target_id, oid)
        if side is None:        # occluder straight above: approach from the camera's far side
            side = np.append(target["position"][:2] - graph.camera_position[:2], 0.0)
            side /= max(float(np.linalg.norm(side)), 1e-9)
        note = ""
        if u_c is not None and float(side @ u_c) < 0.0:
            side = side - float(side @ u_c) * u_c
            norm = float(np.linalg.norm(side))
            side = u_c.copy() if norm < 1e-6 else side / norm
            note = " (side turned away from the fragile neighbour: collision has priority)"
        result.constraints.append(Constraint(
            ConstraintType.OCCLUSION, oid,
            f"{oid} ({graph.node(oid)['category']}) blocks the camera's line of sight to "
            f"{target_id}: lateral approach tilted {math.degrees(cfg.occlusion_tilt_angle):.0f}"
            f" deg from the side away from it{note}",
            direction_bias=-tilt_o * side))

    # 3. content preservation: a filled target
    if target["state"] == ObjectState.FILLED.value:
        result.constraints.append(Constraint(
            ConstraintType.CONTENT_PRESERVATION, target_id,
            f"{target_id} ({target['category']}) is filled: vertical approach d = [0, 0, -1] "
            f"and speed <= {cfg.content_speed_cap:.2f} m/s to prevent spillage",
            direction_override=VERTICAL.copy(), speed_cap=cfg.content_speed_cap))

    # 4. support dependency: objects resting (or leaning) on the target go first
    for dep, chain in _removal_order(graph, target_id).items():
        relation = "leans on" if graph.has_relation(dep, LEANING_ON, target_id) else "rests on"
        result.constraints.append(Constraint(
            ConstraintType.SUPPORT_DEPENDENCY, dep,
            f"{dep} {relation} {target_id}: remove {', '.join(chain)} first",
            prerequisite_ids=list(chain)))

    _LOG.debug("constraints for %s: %s", target_id, [c.type.value for c in result.constraints])
    return result


def apply_constraints(grasp: GraspParameters, constraints: ConstraintSet) -> GraspParameters:
    """g' = g (+) Delta g (see the module docstring); returns a new GraspParameters."""
    adj = constraints.adjustment
    approach = grasp.approach + adj["delta_d"]
    if float(np.linalg.norm(approach)) < 1e-6:
        approach = grasp.approach.copy()
    if adj["direction_override"] is not None:
        approach = adj["direction_override"]
    speed = grasp.speed if adj["speed_cap"] is None else min(grasp.speed, adj["speed_cap"])
    return grasp.copy(approach=np.asarray(approach, dtype=float),
                      force=grasp.force * adj["force_scale"],
                      approach_height=grasp.approach_height + adj["delta_h"],
                      speed=speed)


def constraint_types(constraints: Sequence[Constraint]) -> List[str]:
    """The type names, for logs and service responses."""
    return [c.type.value for c in constraints]


__all__ = ["ConstraintType", "Constraint", "ConstraintSet", "COMPOSITION_ORDER",
           "infer_constraints", "apply_constraints", "constraint_types"]
