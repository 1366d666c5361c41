"""One diagnosis for both arms: an attempt's observation -> success, failure type, phi and Q.

The arm (simulator or MoveIt) reports an :class:`ArmObservation`: finger widths, the grasp
action's result, the external wrench estimate, reflexes with the end-effector pose,
planning and execution errors. :func:`assess` reads it against what the planner itself
knows (the grasp it commanded, its hand model, the perceived target and neighbours, the
material friction it assumes) and returns the planner's view of the attempt: whether the
object is held, the failure type of the 14-type taxonomy with its evidence, and the paper's
quality factors phi and Q (Eq. 2). Nothing here reads a simulator quantity.

What each failure looks like to the sensors (first that applies wins):

====================  ======================================================================
failure               signature
====================  ======================================================================
UNREACHABLE_POSE      a planning error (no IK / no plan) for the pre-grasp or grasp pose
COLLISION             a reflex stopped the approach where the hand's boxes at the stop pose
                      meet a perceived neighbour (``other_id`` = its perceived id) or the
                      table (``other_id`` "table")
APPROACH_ANGLE        ... meet the perceived target with the palm or wrist
WIDTH_MISMATCH        ... with a finger, and the perceived extent along the closing axis does
                      not pass the opening; or the fingers closed on nothing inside a target
                      perceived wider than the hand around the grasp point
ORIENTATION           ... the same, where the extent across the closing axis would pass
POSITION_ERROR        ... a finger landed where the perceived extent passes the opening (the
                      contact's torque about the TCP says which finger: ``landing_offset_m``);
                      or the fingers closed on nothing
FORCE_DAMAGE          the width fell during the force build-up by a quarter or more of the
                      contact width (the material collapsed); the force at the first fallen
                      sample of the trace is where it gave way (``yield_force_n``)
DEFORMATION           the same by less (2 mm up to a quarter: a dent)
SLIP                  the fingers closed (width lost) at lift-off; the wrench says how much
                      load the pads carried before letting go. Carried load below the
                      friction the pads give at the lowest friction assumed for the
                      material: the object turned out of the pads (``torque_bound``), the
                      weight's moment over the pads' hold (``torque_ratio``) = the estimated
                      weight / the carried load
DROP                  held at lift-off, the width lost by the top of the lift
CONSTRAINT_VIOLATION  held to the top, but the load fell during the lift (content spilled)
UNKNOWN               the approach ended with no reflex, error or contact (what the arm
                      cannot feel: a finger entering a container's liquid)
====================  ======================================================================

Where the sensors cannot tell two types apart, their handling is shared and the
difference says so: a finger landing on the target reads as WIDTH_MISMATCH or
POSITION_ERROR by the *perceived* width, so a width the camera underestimated reads as
POSITION_ERROR; its correction widens the opening where the margin is under the TCP's
error, which is the width correction too. FORCE_DAMAGE and DEFORMATION differ only by how
far the material gave way; both correct the force from the force that crushed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.arm.backend import ArmError, ArmResult
from agentic_grasp.core.arm.kinematics import tcp_rotation
from agentic_grasp.core.arm.observation import (CLOSE_TRACE_SAMPLES, MIN_OBJECT_WIDTH_M,
                                                ArmObservation)
from agentic_grasp.core.grasping.along import on_part
from agentic_grasp.core.grasping.fit import footprint_extent
from agentic_grasp.core.grasping.hand import HandModel, object_box, obb_gap
from agentic_grasp.core.planner.recovery.failure import Diagnosis, classify_arm_error
from agentic_grasp.core.planner.recovery.level1 import is_vertical
from agentic_grasp.core.planner.sections import ClassificationConfig
from agentic_grasp.core.types import (GRIPPER_MAX_WIDTH_M, QUALITY_FACTOR_NAMES, AttemptOutcome,
                                      FailureType, GraspParameters, ObjectInstance, Phase,
                                      PhysicalEvent)

GRAVITY = 9.81
#: Eq. 2 weights, the paper's (docs/paper_facts.md).
PAPER_WEIGHTS = (0.20, 0.15, 0.10, 0.15, 0.15, 0.10, 0.15)
#: Static friction of the hand's rubber-like pads on a material class, (low, high): the
#: spread of handbook values for rubber on dry surfaces (on glass, ceramic and metal
#: 0.3-0.8, on wood and cardboard 0.4-0.8, fruit skins and waxy plastics from 0.3), widened
#: to cover surface finish; the planner uses the low end, so a slip is never blamed on a
#: moment the friction would explain. Unknown material: the widest range.
MATERIAL_FRICTION: Dict[str, Tuple[float, float]] = {
    "glass": (0.3, 0.8), "ceramic": (0.3, 0.8), "metal": (0.3, 0.8),
    "plastic": (0.3, 0.8), "wood": (0.4, 0.8), "cardboard": (0.4, 0.8),
    "paper": (0.4, 0.8), "fabric": (0.4, 0.9), "rubber": (0.6, 1.0),
    "organic": (0.3, 0.8), "mixed": (0.3, 0.9),
}
DEFAULT_FRICTION = (0.3, 0.9)
#: Readings apart by more than this are a change, not noise: 4 sigma of the difference of
#: two wrench readings (0.3 N each, the estimate averaged over a steady 100 ms).
LOAD_CHANGE_N = 4.0 * 0.3 * math.sqrt(2.0)
#: A width change beyond this is the material giving way: 5 sigma of the difference of two
#: width readings (0.14 mm each), so a thin wall's collapse (a paper cup's rim) shows.
YIELD_WIDTH_M = 0.001
#: A collapse of at least this fraction of the contact width is a crush, below it a dent.
CRUSH_FRACTION = 0.25
#: Perception's error on an extent (m): 8 mm at p90 from the fixed camera
#: (config/perception.yaml, docs/perception.md).
PERCEIVED_EXTENT_ERROR_M = 0.008
#: Fingertips stopped more than this below the perceived top went past it: the palm or the
#: wrist met the object (the fingers are 54 mm long; perception's height error 8 mm at p90,
#: twice that leaves the palm's case far beyond it).
FINGERTIP_DEPTH_M = 0.016
#: The hand's lowest point at the stop pose this near the table means the table (m): the
#: pads compress 2 mm, the pose reads within 0.1 mm, and nothing else stands at that height.
TABLE_CONTACT_M = 0.003
#: The hand's boxes at the stop pose are this close to what was hit (m): perception's
#: extent error (8 mm at p90 on the fixed camera) plus the 2 mm the pads compress.
HIT_TOLERANCE_M = 0.01


@dataclass
class Assessment:
    """The planner's view of one attempt: its outcome (y, Q, phi) and, when it failed, the
    diagnosis."""

    outcome: Optional[AttemptOutcome]
    diagnosis: Optional[Diagnosis] = None
    evidence: List[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.outcome is not None and bool(self.outcome.success)


def friction_range(material: str) -> Tuple[float, float]:
    return MATERIAL_FRICTION.get((material or "").lower(), DEFAULT_FRICTION)


#: Density (kg/m^3) that turns a perceived volume into an upper bound of the weight, by
#: material class: the solid material's own (aluminium 2700, glass 2500, porcelain 2400,
#: hard plastics up to 1400, fruit 1100, wood 700); a household object of the class is at
#: most that dense (hollow ones far less; "mixed", electronics, glass and metal over a
#: battery: 2500), so a weight built on it errs high, and a
#: torque ratio built on the weight errs towards moving the grasp over the centre of mass.
MATERIAL_DENSITY: Dict[str, float] = {
    "metal": 2700.0, "glass": 2500.0, "ceramic": 2400.0, "plastic": 1400.0,
    "organic": 1100.0, "wood": 700.0, "cardboard": 700.0, "paper": 700.0, "fabric": 500.0,
    "rubber": 1200.0, "mixed": 2500.0,
}
#: A lift's accelerations and vibration raise the load over the static weight by up to this
#: factor: the commanded lift accelerates at a fraction of g, and jerk adds about as much
#: again. A grasp that held the static weight and lost the object in the lift needed at
#: most this much more hold.
DYNAMIC_LOAD_BOUND = 1.5


def _estimated_weight(obj: ObjectInstance) -> float:
    """An upper bound of the weight (N): the perceived volume at the densest material of
    the object's class (water's for an unknown one)."""
    sx, sy, sz = (float(v) for v in obj.size)
    factor = {"box": 1.0, "cylinder": math.pi / 4.0, "sphere": math.pi / 6.0}.get(
        getattr(obj.shape, "value", str(obj.shape)), 1.0)
    density = MATERIAL_DENSITY.get((obj.material or "").lower(), 1000.0)
    return factor * sx * sy * sz * density * GRAVITY


def _hit(obs_pos: np.ndarray, grasp: GraspParameters, hand: HandModel,
         target: Optional[ObjectInstance], objects: Sequence[ObjectInstance]
         ) -> Tuple[str, str, float]:
    """What the hand met when the reflex stopped it at TCP ``obs_pos``: ("table" | object
    id, hand part, gap). The hand's boxes at that pose against each perceived object's box
    and the table plane: the nearest is what was hit."""
    at = grasp.copy(position=np.asarray(obs_pos, dtype=float))
    boxes = hand.boxes(at, swept=False)
    best = ("", "", math.inf)
    for obj in objects:
        ob = object_box(obj)
        for hb in boxes:
            gap = obb_gap(hb, ob)
            if gap < best[2] - 1e-9 or (abs(gap - best[2]) <= 1e-9 and target is not None
                                        and obj.id == target.id):
                best = (obj.id, hb.name, gap)
    low = hand.lowest_point(at)
    if low <= TABLE_CONTACT_M or (low <= HIT_TOLERANCE_M / 2.0 and best[2] > HIT_TOLERANCE_M):
        return "table", "finger", low
    return best


def contact_offset(obs: ArmObservation, grasp: GraspParameters) -> Tuple[float, float]:
    """(push, y): the force the reflex's contact pushed back with along the approach (N)
    and where it sits along the closing axis (m, gripper frame) from the wrench about the
    TCP: a push -F along the gripper's z at (x, y, z) has tau_x = -y F. The free-motion
    reading is the estimate's bias; y is NaN when the push is within the noise."""
    reflex = obs.reflexes[0]
    R = tcp_rotation(grasp.approach, grasp.wrist_yaw)
    push = reflex.wrench.minus(obs.wrench_free) if obs.wrench_free.known else reflex.wrench
    f_g, t_g = R.T @ push.force, R.T @ push.torque
    fz = -float(f_g[2])
    if fz <= LOAD_CHANGE_N:
        return fz, math.nan
    return fz, -float(t_g[0]) / fz


def _landing(obs: ArmObservation, grasp: GraspParameters, hand: HandModel,
             target: ObjectInstance, cfg: ClassificationConfig) -> Diagnosis:
    """A finger met the perceived target on the way down: which finger (the contact's
    torque about the TCP), and whether the perceived extent passes the opening."""
    R = tcp_rotation(grasp.approach, grasp.wrist_yaw)
    fz, y = contact_offset(obs, grasp)
    side = 0.0 if not math.isfinite(y) else (1.0 if y >= 0.0 else -1.0)
    axis = R[:, 1]
    along = footprint_extent(target.shape, target.size, axis, float(target.yaw))
    across = footprint_extent(target.shape, target.size, R[:, 0], float(target.yaw))
    opening = float(grasp.width)
    evidence = (f"reflex at {fz:.0f} N in the approach; the hand's finger meets the perceived "
                f"{target.id} ({along * 1e3:.0f} mm along the closing axis, opening "
                f"{opening * 1e3:.0f} mm)")
    part = on_part(grasp, target)
    towards_body = False
    if part and side != 0.0:
        # a grasp on a part (a handle, a rim) opens for the part: a finger that lands on
        # the side of the body met the body, too wide for that opening
        towards_body = side * float((target.position - np.asarray(grasp.position)) @ axis) > 0
    # at the hand's full opening the opening cannot grow: where the perceived width is
    # within perception's extent error of the stroke, the landing is read as off position,
    # the one cause a correction can still remove (moving the grasp)
    fits_stroke = opening >= GRIPPER_MAX_WIDTH_M - 0.001 \
        and along <= GRIPPER_MAX_WIDTH_M + PERCEIVED_EXTENT_ERROR_M
    if ((along > opening - 2.0 * 0.001 and not part) or towards_body) and not fits_stroke:
        if along > GRIPPER_MAX_WIDTH_M and across < GRIPPER_MAX_WIDTH_M:
            return Diagnosis(FailureType.ORIENTATION, evidence + f"; across it is "
                             f"{across * 1e3:.0f} mm", "observation", phase="approach",
                             other_id=target.id, detail="finger lands: long side")
        d = Diagnosis(FailureType.WIDTH_MISMATCH, evidence, "observation", phase="approach",
                      other_id=target.id, detail="finger lands on the object")
        d.width_direction = 1
        d.material_width_m = along
        return d
    d = Diagnosis(FailureType.POSITION_ERROR, evidence + "; the opening passes it: off "
                  "position", "observation", phase="approach", other_id=target.id,
                  detail="finger lands on the object")
    d.material_width_m = along
    if side != 0.0:
        # the landing finger sits on the material's edge, which lies between that finger's
        # inner face (w/2 off the TCP) and its outer one: the nearest centre that explains
        # the landing has the edge at the inner face, half the perceived width inward
        d.landing_offset_m = side * max(opening / 2.0 - along / 2.0, 0.0)
        d.offset_explains = abs(d.landing_offset_m) > 0.0
    return d


def _surrounded(grasp: GraspParameters, target: ObjectInstance) -> bool:
    """The perceived target is wider than the hand in both directions across the approach
    around the grasp point (a bowl around the fingers)."""
    R = tcp_rotation(grasp.approach, grasp.wrist_yaw)
    widths = [footprint_extent(target.shape, target.size, R[:, k], float(target.yaw))
              for k in (0, 1)]
    inside = float(np.linalg.norm(np.asarray(grasp.position[:2]) - target.position[:2])) \
        < min(widths) / 2.0
    return inside and min(widths) > GRIPPER_MAX_WIDTH_M


def _phi(obs: ArmObservation, grasp: GraspParameters, target: Optional[ObjectInstance],
         kind: Optional[FailureType], held_ratio: float) -> np.ndarray:
    """phi_1..7 read from the observation (Eq. 2's factors as the sensors show them)."""
    phi = dict.fromkeys(QUALITY_FACTOR_NAMES, 1.0)
    if kind in (FailureType.UNREACHABLE_POSE, FailureType.POSITION_ERROR):
        phi["position_accuracy"] = 0.0
    w0 = obs.width_at_contact_m
    if math.isfinite(w0) and math.isfinite(obs.commanded_width_m):
        margin = (obs.commanded_width_m - w0) / 2.0
        phi["width_compatibility"] = 0.4 + 0.6 * min(1.0, max(0.0, margin / 0.01))
    if kind in (FailureType.WIDTH_MISMATCH,):
        phi["width_compatibility"] = 0.0
    if kind in (FailureType.FORCE_DAMAGE, FailureType.DEFORMATION, FailureType.SLIP):
        phi["force_appropriateness"] = 0.0
    if kind == FailureType.ORIENTATION:
        phi["grasp_type_matching"] = 0.0
    if kind in (FailureType.COLLISION, FailureType.APPROACH_ANGLE):
        phi["approach_clearance"] = 0.0
    if target is not None:
        widths = [float(v) for v in target.size[:2]]
        narrow = min(widths) if widths else GRIPPER_MAX_WIDTH_M
        hard = 0.35 * float(target.fragility) + 0.25 * max(0.0, min(1.0, 1.0 - narrow / 0.02))
        phi["object_difficulty"] = max(0.0, 1.0 - hard)
    if kind in (FailureType.SLIP, FailureType.DROP):
        phi["grip_security"] = 0.0
    elif math.isfinite(held_ratio):
        phi["grip_security"] = max(0.0, min(1.0, held_ratio))
    return np.array([phi[n] for n in QUALITY_FACTOR_NAMES], dtype=float)


def _outcome(obs: ArmObservation, success: bool, grasp: GraspParameters,
             target: Optional[ObjectInstance], diag: Optional[Diagnosis],
             measured: Dict[str, float], held_ratio: float = math.nan) -> AttemptOutcome:
    kind = diag.failure_type if diag is not None else None
    phi = _phi(obs, grasp, target, kind, held_ratio)
    events = [] if diag is None else [PhysicalEvent(
        diag.failure_type.value, Phase(diag.phase) if diag.phase in Phase._value2member_map_
        else obs.phase_reached, diag.evidence,
        diag.other_id if diag.other_id != (target.id if target is not None else "") else "")]
    return AttemptOutcome(success=success, quality=float(np.dot(PAPER_WEIGHTS, phi)), phi=phi,
                          events=events, phase_reached=obs.phase_reached,
                          measurements=measured, duration_s=float(obs.duration_s))


def _measured(obs: ArmObservation) -> Dict[str, float]:
    """The observation's scalar readings (what AttemptRecord.outcome.measurements carries)."""
    m = {"opening_m": obs.commanded_width_m, "applied_force_n": obs.commanded_force_n,
         "width_at_contact_m": obs.width_at_contact_m,
         "width_after_close_m": obs.width_after_close_m,
         "width_at_liftoff_m": obs.width_at_liftoff_m,
         "width_after_lift_m": obs.width_after_lift_m}
    if math.isfinite(obs.width_at_contact_m):
        m["object_extent_m"] = obs.width_at_contact_m
        m["opening_margin_m"] = (obs.commanded_width_m - obs.width_at_contact_m) / 2.0
    base = obs.wrench_gripped
    for name, w in (("liftoff", obs.wrench_liftoff), ("lifted", obs.wrench_lifted)):
        if w.known and base.known:
            m[f"load_{name}_n"] = -float(w.force[2] - base.force[2])
    return {k: float(v) for k, v in m.items()}


def assess(result: ArmResult, grasp: GraspParameters, hand: HandModel,
           target: Optional[ObjectInstance] = None,
           objects: Sequence[ObjectInstance] = (), elapsed_s: Optional[float] = None,
           config: Optional[ClassificationConfig] = None) -> Assessment:
    """The attempt as the planner reads it from the arm's observation (module docstring)."""
    cfg = config or ClassificationConfig()
    if result.error not in (ArmError.NONE, ArmError.CANCELED) or result.observation is None:
        diag = classify_arm_error(result.error, result.message, elapsed_s, cfg)
        return Assessment(None, diag)
    obs = result.observation
    measured = _measured(obs)

    def fail(diag: Diagnosis, ratio: float = math.nan) -> Assessment:
        if elapsed_s is not None and elapsed_s > cfg.attempt_timeout_s:
            diag = Diagnosis(FailureType.TIMEOUT, f"attempt took {elapsed_s:.1f} s > "
                             f"{cfg.attempt_timeout_s:.1f} s", "timeout")
        return Assessment(_outcome(obs, False, grasp, target, diag, measured, ratio), diag)

    if result.error == ArmError.CANCELED:
        return Assessment(_outcome(obs, False, grasp, target, None, measured), None)
    # ---- pre-contact
    if obs.planning_error:
        where = "pre-grasp" if "pre-grasp" in obs.planning_error else "grasp"
        if "GOAL_IN_COLLISION" in obs.planning_error or "lift" in obs.planning_error:
            # the planning scene (the perceived objects) blocks the pose, or no straight
            # path lifts the object out
            return fail(Diagnosis(FailureType.COLLISION, f"planning: {obs.planning_error}",
                                  "observation", phase="approach"
                                  if "lift" not in obs.planning_error else "lift"))
        return fail(Diagnosis(FailureType.UNREACHABLE_POSE, f"planning: {obs.planning_error}",
                              "observation", phase="approach",
                              detail=f"no IK solution for the {where} pose"))
    if obs.reflexes and obs.reflexes[0].phase == Phase.APPROACH:
        reflex = obs.reflexes[0]
        perceived = list(objects)
        if target is not None and all(o.id != target.id for o in perceived):
            perceived.append(target)
        what, part, gap = _hit(reflex.ee_position, grasp, hand, target, perceived)
        where = (f"reflex at TCP ({reflex.ee_position[0]:.3f}, {reflex.ee_position[1]:.3f}, "
                 f"{reflex.ee_position[2]:.3f}) m")
        if what == "table":
            return fail(Diagnosis(FailureType.COLLISION, f"{where}: the fingertips at the "
                                  f"table ({gap * 1e3:.0f} mm)", "observation",
                                  phase="approach", other_id="table", detail="table"))
        if target is not None and what == target.id:
            # how deep the hand went: fingertips stopped level with the perceived top (within
            # perception's height error) met it with the fingers; deeper, the palm or wrist
            # met it. Level: both fingers pushing (a centred contact, the torque says) means
            # material under both, wider than the hand there
            R = tcp_rotation(grasp.approach, grasp.wrist_yaw)
            tips = np.asarray(reflex.ee_position, dtype=float) + R @ np.array(
                [0.0, 0.0, hand.z_tip])
            deep = float(tips[2]) < target.top_z - FINGERTIP_DEPTH_M
            _, y = contact_offset(obs, grasp)
            finger_y = float(grasp.width) / 2.0 + hand.cfg.finger_thickness_m / 2.0
            centred = math.isfinite(y) and abs(y) < finger_y / 2.0
            part = "palm" if (deep and centred) else "finger"
            if part == "finger" and centred and not deep and is_vertical(grasp):
                d = Diagnosis(FailureType.WIDTH_MISMATCH, f"{where}: both fingertips land on "
                              f"the perceived {target.id} (a centred push level with its "
                              "top): material under both fingers, wider than the hand there",
                              "observation", phase="approach", other_id=target.id,
                              detail="fingers land on the object")
                d.width_direction = 1
                return fail(d)
            if part in ("palm", "wrist"):
                return fail(Diagnosis(FailureType.APPROACH_ANGLE, f"{where}: the {part} meets "
                                      f"the perceived {target.id}", "observation",
                                      phase="approach", other_id=target.id,
                                      detail="hand body meets the target"))
            return fail(_landing(obs, grasp, hand, target, cfg))
        if what:
            return fail(Diagnosis(FailureType.COLLISION, f"{where}: the {part} meets the "
                                  f"perceived {what} ({gap * 1e3:.0f} mm)", "observation",
                                  phase="approach", other_id=what, detail=f"hits {what}"))
        return fail(Diagnosis(FailureType.COLLISION, f"{where}: nothing perceived there",
                              "observation", phase="approach"))
    if obs.execution_error:
        return fail(Diagnosis(FailureType.COLLISION, f"execution: {obs.execution_error}",
                              "observation", phase=obs.phase_reached.value))
    if obs.phase_reached == Phase.APPROACH or obs.is_grasped is None:
        return fail(Diagnosis(FailureType.UNKNOWN, "the approach ended with no reflex, error "
                              "or contact", "observation", phase="approach"))
    # ---- contact
    w0, w1 = obs.width_at_contact_m, obs.width_after_close_m
    trace = [v for v in obs.close_trace_m if math.isfinite(v)]
    fallen = [i for i, v in enumerate(trace) if v < w0 - YIELD_WIDTH_M] \
        if math.isfinite(w0) else []
    if fallen:
        # the fingers stopped on material, then closed on through it as the grip rose
        k = fallen[0]
        force = (k + 0.5) / CLOSE_TRACE_SAMPLES * obs.commanded_force_n
        drop = w0 - trace[-1]
        kind = FailureType.FORCE_DAMAGE if drop >= CRUSH_FRACTION * w0 \
            else FailureType.DEFORMATION
        d = Diagnosis(kind, f"the width fell {drop * 1e3:.1f} mm from {w0 * 1e3:.1f} mm as "
                      f"the grip rose past {force:.1f} N (trace sample {k + 1} of "
                      f"{CLOSE_TRACE_SAMPLES})", "observation", phase="close")
        d.yield_force_n = force
        return fail(d)
    if not obs.is_grasped and w1 >= MIN_OBJECT_WIDTH_M:
        # the fingers stopped on material, outside the grasp action's window
        d = Diagnosis(FailureType.WIDTH_MISMATCH, f"the grasp action failed with the fingers "
                      f"stopped at {w1 * 1e3:.1f} mm (opening {obs.commanded_width_m * 1e3:.1f}"
                      " mm)", "observation", phase="close", detail="outside the grasp window")
        d.material_width_m = w1
        too_wide = (obs.commanded_width_m - w1) / 2.0 > cfg.too_wide_margin_m
        d.width_direction = -1 if too_wide else 1
        return fail(d)
    if not obs.is_grasped or not math.isfinite(w0) or w1 < MIN_OBJECT_WIDTH_M:
        if target is not None and _surrounded(grasp, target):
            d = Diagnosis(FailureType.WIDTH_MISMATCH, f"fingers closed to {w1 * 1e3:.1f} mm "
                          f"inside the perceived {target.id}, wider than the hand around "
                          "the grasp point", "observation", phase="close",
                          detail="object surrounds the hand")
            d.width_direction = 1
            return fail(d)
        return fail(Diagnosis(FailureType.POSITION_ERROR, f"fingers closed to {w1 * 1e3:.1f} "
                              "mm: nothing between them", "observation", phase="close",
                              detail="fingers closed on nothing"))
    if obs.phase_reached != Phase.LIFT:
        return fail(Diagnosis(FailureType.UNKNOWN, "the attempt stopped after closing",
                              "observation", phase="close"))
    # ---- post-grasp
    base = obs.wrench_gripped
    carried = -float(obs.wrench_liftoff.force[2] - base.force[2]) \
        if obs.wrench_liftoff.known and base.known else math.nan
    lifted = -float(obs.wrench_lifted.force[2] - base.force[2]) \
        if obs.wrench_lifted.known and base.known else math.nan
    lost_off = obs.width_at_liftoff_m < MIN_OBJECT_WIDTH_M \
        or obs.width_at_liftoff_m < w1 - YIELD_WIDTH_M
    if lost_off:
        d = Diagnosis(FailureType.SLIP, f"the fingers closed at lift-off (width "
                      f"{obs.width_at_liftoff_m * 1e3:.1f} mm after {w1 * 1e3:.1f} mm) after "
                      f"carrying {carried:.1f} N", "observation", phase="lift")
        if target is not None and math.isfinite(carried):
            mu_lo = friction_range(target.material)[0]
            grip = float(obs.commanded_force_n)
            friction_hold = 2.0 * mu_lo * grip
            weight = max(_estimated_weight(target), carried)
            if carried + LOAD_CHANGE_N < friction_hold:
                d.torque_bound = True
                d.torque_ratio = weight / max(carried, LOAD_CHANGE_N)
                d.evidence += (f", below the {friction_hold:.1f} N the pads hold at "
                               f"{grip:.1f} N with friction {mu_lo:g} (the least assumed for "
                               f"{target.material or 'an unknown material'}): it turned out "
                               f"of the pads, estimated weight {weight:.1f} N")
        return fail(d)
    lost_lift = obs.width_after_lift_m < MIN_OBJECT_WIDTH_M \
        or obs.width_after_lift_m < w1 - YIELD_WIDTH_M
    if lost_lift:
        d = Diagnosis(FailureType.DROP, f"held at lift-off ({carried:.1f} N), the width lost "
                      f"by the top of the lift ({obs.width_after_lift_m * 1e3:.1f} mm)",
                      "observation", phase="lift")
        if target is not None and math.isfinite(carried):
            mu_lo = friction_range(target.material)[0]
            friction_hold = 2.0 * mu_lo * float(obs.commanded_force_n)
            if DYNAMIC_LOAD_BOUND * max(carried, 0.0) + LOAD_CHANGE_N < friction_hold:
                # the pads' friction held far more than the lift could ask: the moment did it
                d.torque_bound = True
                d.torque_ratio = DYNAMIC_LOAD_BOUND
                d.evidence += (f"; friction holds {friction_hold:.1f} N at the least friction "
                               f"assumed ({mu_lo:g}), over {DYNAMIC_LOAD_BOUND:g} x the load: "
                               "it turned out of the pads in the lift")
        return fail(d)
    if math.isfinite(carried) and math.isfinite(lifted) and lifted < carried - LOAD_CHANGE_N:
        return fail(Diagnosis(FailureType.CONSTRAINT_VIOLATION, f"spill: the load fell from "
                              f"{carried:.1f} N at lift-off to {lifted:.1f} N at the top of "
                              "the lift", "observation", phase="lift"))
    ratio = 1.0
    return Assessment(_outcome(obs, True, grasp, target, None, measured, ratio), None)


__all__ = ["Assessment", "MATERIAL_FRICTION", "assess", "friction_range"]
