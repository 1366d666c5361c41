"""Uncover a hidden target: look behind what could hide it (paper task b).

When a named instruction's target is not in view (perception answers ``target_found``
false), the planner does not grasp whatever else the instruction mentions ("the ball
*behind the box*": the box only says where the ball is). It asks the scene graph which
perceived object could hide the target, looks behind it with the wrist camera, perceives
that frame, and only then plans the grasp, with the occluder kept as a perceived neighbour
(so the occlusion constraint and the clearance search steer the approach around it).

Why a view, not moving the occluder: a view is contact-free. Nothing in the scene changes,
so it cannot damage, topple or spill anything, a fragile occluder included (it is never
pushed or moved, and the planner says so in its thought), and it works whatever the
occluder's size: the benchmark's 12 x 20 x 14 cm box is wider than the 80 mm hand in every
direction, so picking it up is impossible and a push would need a contact model the grasp
physics does not have. A wrist camera is standard on Franka set-ups.

Which object could hide it (:func:`occluders`): for every perceived object a probe, the
smallest object the camera would surely have reported (``probe_size_m``), is placed on the
table just behind it as seen from the fixed camera; the scene graph is built with the probe
and the object is a candidate when it ``Occludes`` the probe (the graph's own line-of-sight
test, core/scene_graph.py). Objects the instruction mentions (the landmark of "behind the
box") come first, then the ones whose shadow on the table is largest.

Where to look from (:func:`view_poses`): the hidden region is the occluder's shadow on the
table, from its far face to where the line of sight over its top meets the table (capped at
the scene graph's Near band, delta_check). The wrist camera looks at the region's centre
straight down from above it first (no ray from there to the region passes through the
occluder), then from the occluder's right and left flanks and its far side at the fixed
camera's elevation; its distance makes the region fill the narrower field of view (never
closer than the camera's minimum depth range). Each side is offered with the image upright
and turned a half turn (a roll the wrist may reach when the other is beyond joint 7's
limits).

Bounded: at most ``max_views`` views reached (motions) in all, and at most the three sides
of each candidate occluder requested (a request the arm refuses, out of reach or touching
something, moves nothing); the goal then ends with ERROR_TARGET_NOT_FOUND and a message
naming every view tried and why it did not show the target.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.arm.backend import ArmError, ViewResult
from agentic_grasp.core.camera import Camera, look_at
from agentic_grasp.core.instructions import resolve_targets
from agentic_grasp.core.perception.backend import PerceivedObject, PerceptionResult
from agentic_grasp.core.planner.events import UncoverEvent
from agentic_grasp.core.planner.instruction.tasks import names_only_landmarks
from agentic_grasp.core.planner.outcomes import ViewRecord
from agentic_grasp.core.planner.sections import UncoverConfig
from agentic_grasp.core.scene_graph.relations import OCCLUDES
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.scene_graph.graph import build_scene_graph
from agentic_grasp.core.types import (GRIPPER_MAX_WIDTH_M, GraspParameters, GraspType,
                                      ObjectInstance, Shape)

PROBE_ID = "hidden_target_probe"
#: Where the region behind an occluder is looked at from, in order (view_poses).
SIDES = ("above", "right flank", "left flank", "far side")


@dataclass
class Occluder:
    """A perceived object that could hide the target, and the region behind it."""

    object: ObjectInstance
    forward: np.ndarray            # horizontal unit, fixed camera -> occluder
    region_centre: np.ndarray      # centre of the hidden region on the table (world)
    region_half: Tuple[float, float]   # half extents along forward and across (m)
    shadow_m: float                # shadow length behind the far face (m)
    mentioned: bool                # the instruction names it (a landmark)

    @property
    def id(self) -> str:
        return self.object.id


@dataclass
class UncoverOutcome:
    """What uncovering found: the merged perception with the target, or why not."""

    perception: Optional[PerceptionResult]
    views: List[ViewRecord]
    message: str
    occluders: List[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.perception is not None


# ------------------------------------------------------------------ geometry
def _support(obj: ObjectInstance, direction: np.ndarray) -> float:
    """Half extent of the object's footprint along a horizontal unit ``direction``."""
    half = np.asarray(obj.size, dtype=float)[:2] / 2.0
    if Shape(obj.shape) != Shape.BOX:
        return float(max(half))
    c, s = math.cos(obj.yaw), math.sin(obj.yaw)
    ax, ay = np.array([c, s]), np.array([-s, c])
    return float(abs(direction @ ax) * half[0] + abs(direction @ ay) * half[1])


def occluders(objects: Sequence[ObjectInstance], camera_position: Sequence[float],
              instruction: str, cfg: UncoverConfig,
              sg_config: Optional[SceneGraphConfig] = None) -> List[Occluder]:
    """The perceived objects that could hide the target, best first (module docstring)."""
    sg = sg_config or SceneGraphConfig()
    cam = np.asarray(camera_position, dtype=float)
    mentioned = set(resolve_targets(instruction, list(objects))) if instruction else set()
    probe = cfg.probe_size_m
    found: List[Occluder] = []
    for obj in objects:
        delta = np.asarray(obj.position[:2], dtype=float) - cam[:2]
        dist = float(np.linalg.norm(delta))
        if dist < 1e-6:
            continue
        fwd = delta / dist
        right = np.array([fwd[1], -fwd[0]])
        depth_half = _support(obj, fwd)
        top = float(obj.position[2] + obj.size[2] / 2.0)
        far_face = np.asarray(obj.position[:2], dtype=float) + fwd * depth_half
        gap = sg.touch_tolerance            # not Touching: the probe stands apart
        centre = far_face + fwd * (gap + probe / 2.0)
        test = ObjectInstance(id=PROBE_ID, category="object", shape=Shape.BOX,
                              position=np.array([centre[0], centre[1], probe / 2.0]),
                              size=np.full(3, probe), yaw=math.atan2(fwd[1], fwd[0]))
        graph = build_scene_graph([o for o in objects if o.id != PROBE_ID] + [test],
                                  cam, sg)
        if not graph.has_relation(obj.id, OCCLUDES, PROBE_ID):
            continue
        reach = dist + depth_half
        shadow = (sg.near_gap if cam[2] <= top + 1e-6
                  else min(sg.near_gap, top * reach / (cam[2] - top)))
        along = (shadow + probe) / 2.0
        across = _support(obj, right) + probe / 2.0
        mid = far_face + fwd * along
        found.append(Occluder(obj, np.array([fwd[0], fwd[1], 0.0]),
                              np.array([mid[0], mid[1], probe / 2.0]), (along, across),
                              float(shadow), obj.id in mentioned))
    found.sort(key=lambda o: (not o.mentioned, -o.shadow_m * o.region_half[1], o.id))
    return found


def view_poses(occ: Occluder, camera_position: Sequence[float],
               intrinsics: Camera, min_range_m: float = 0.0
               ) -> List[Tuple[str, List[np.ndarray]]]:
    """(side, [optical-frame poses]) to look at the region behind ``occ`` from, in order.

    First straight down from above the region: every ray from there to a point of the
    region stays between the region's centre and the occluder's face, so none passes
    through the occluder, and the table shows between objects (what the depth geometry
    separates surfaces by). Then the occluder's right and left flanks and its far side at
    the fixed camera's elevation. Each side holds the upright pose and the one rolled by a
    half turn about the view axis.
    """
    cam = np.asarray(camera_position, dtype=float)
    m = occ.region_centre
    horiz = float(np.linalg.norm(cam[:2] - m[:2]))
    elevation = math.atan2(float(cam[2] - m[2]), max(horiz, 1e-6))
    half_fov = min(math.atan2(intrinsics.width / 2.0, intrinsics.fx),
                   math.atan2(intrinsics.height / 2.0, intrinsics.fy))
    radius = math.hypot(*occ.region_half)
    distance = max(radius / math.tan(half_fov), float(min_range_m))
    fwd = occ.forward
    right = np.array([fwd[1], -fwd[0], 0.0])
    up = np.array([0.0, 0.0, 1.0])
    out: List[Tuple[str, List[np.ndarray]]] = []
    for side, u, el in zip(SIDES, (None, right, -right, fwd),
                           (math.pi / 2, elevation, elevation, elevation)):
        if u is None:
            eye, image_up = m + distance * up, fwd     # image up = away from the camera
        else:
            eye, image_up = m + distance * (math.cos(el) * u + math.sin(el) * up), up
        upright = look_at(eye, m, image_up)
        rolled = upright.copy()
        rolled[:3, 0], rolled[:3, 1] = -upright[:3, 0], -upright[:3, 1]
        out.append((side, [upright, rolled]))
    return out


def pose_marker(T_world_cam: np.ndarray) -> GraspParameters:
    """The view as GraspParameters (position = optical centre, approach = view axis), so the
    attempt records and markers carry it as they carry a grasp. Gripper fully open, minimum
    force: nothing is grasped."""
    axis = np.asarray(T_world_cam[:3, 2], dtype=float)
    pos = np.asarray(T_world_cam[:3, 3], dtype=float)
    return GraspParameters(position=pos, approach=axis / np.linalg.norm(axis),
                           width=GRIPPER_MAX_WIDTH_M,
                           force=1.0, grasp_type=GraspType.POWER, approach_height=0.0,
                           speed=0.1, wrist_yaw=0.0)


# ------------------------------------------------------------------ merging views
#: Depth-geometry notes (core/perception/geometry.py) saying the pointed pixel is not on a
#: surface of the pointed-at object: its 3-D estimate then comes from another surface.
_MISLOCATED = ("the point is not on an object surface", "the point is outside the box",
               "the point lies on a surface that spans")
#: How far (px) the nearest surface may lie from a pointed pixel that is on no surface and
#: still be the pointed-at object: 3 sigma of the VLM's pointing error, radially (a miss of
#: the object by more has a chance of exp(-9/2) ~ 1 %). The error: 9 units of Qwen's 0..1000
#: per axis (config/perception.yaml vlm_sim.point_std, the assumed pointing accuracy of the
#: VLM), i.e. 9 / 1000 x 640 px = 5.8 px across the camera's 640-px frame
#: (config/camera.yaml): 3 x 5.8 = 17 px. A point inside the VLM's box that misses by less
#: than that lands in the cut band beside a depth step on the object itself (a handle in
#: front of the cup's body), so the surface found is the object's, unless it is centred on
#: another perceived object (the occluder's top beside a sliver), which is still poorly
#: located; so is a point outside the VLM's own box.
POINT_MISS_PX = 17.0
_NEAREST_PX = re.compile(r"used the nearest surface in the box, (\d+(?:\.\d+)?) px away")
#: Notes (core/perception/depth.py) that the surface was found outside the VLM's box: the
#: surface outgrew the box, or there was no usable box and the point's surroundings were
#: searched. Mislocated when the estimate is then centred on another perceived object.
_OUTGREW = ("the object runs past its box", "no box")
#: A sliver's bottom lies above its occluder's by at least this: the scene graph's
#: resting-contact tolerance (config/scene_graph.yaml contact_tolerance, 10 mm).
SLIVER_ABOVE_M = 0.01
#: Note (core/perception/geometry.py) that the VLM's box ran past the frame's edge: the
#: estimate is of the part in view only.
_CLIPPED = "box partly outside the image"
#: A clipped estimate lying within this of an object of its category seen whole is a part
#: of it: the scene graph's resting-contact tolerance (config/scene_graph.yaml
#: contact_tolerance, 10 mm), the gap below which two perceived surfaces are one contact.
CLIPPED_PART_TOLERANCE_M = 0.01


def _inside_footprint(point: np.ndarray, obj: PerceivedObject, grow: float = 0.0) -> bool:
    """Whether a world point lies (in top view) on ``obj``'s perceived footprint, grown by
    ``grow`` on every side."""
    if obj.position is None or obj.size is None:
        return False
    rel = np.asarray(point[:2], dtype=float) - np.asarray(obj.position[:2], dtype=float)
    c, s = math.cos(obj.yaw), math.sin(obj.yaw)
    x, y = c * rel[0] + s * rel[1], -s * rel[0] + c * rel[1]
    return abs(x) <= obj.size[0] / 2.0 + grow and abs(y) <= obj.size[1] / 2.0 + grow


def poorly_located(obj: Optional[PerceivedObject],
                   others: Sequence[PerceivedObject] = ()) -> str:
    """Why ``obj``'s position was not measured on it ("" when it was): the pointed pixel was
    on no surface of it and the surface found lies farther than the VLM's pointing error
    from it (POINT_MISS_PX), or the surface found (outgrown its box, or within that error of
    the point) is centred on another perceived object (a sliver seen over an occluder,
    measured as the occluder's top).

    When both outgrew their boxes and are centred on each other, both estimates measured one
    surface: the sliver's segment, grown over the occluder's top, starts at that top, while
    the occluder's own estimate reaches down to what it stands on, so the one whose bottom
    is higher is the sliver and the other keeps its place."""
    if obj is None:
        return ""
    for note in obj.warnings:
        if note.startswith(_MISLOCATED) and not _near_miss(note):
            return note
        if (note.startswith(_OUTGREW) or note.startswith(_MISLOCATED)) \
                and obj.position is not None:
            for other in others:
                if other.id != obj.id and _inside_footprint(obj.position, other) \
                        and not _measured_over(other, obj):
                    return f"{note}, and it is centred on {other.id}"
    return ""


def _near_miss(note: str) -> bool:
    """The note says the pointed pixel, inside the VLM's box, was on no surface and the
    nearest surface lay within the VLM's pointing error of it (POINT_MISS_PX). A point
    outside the VLM's own box is not excused: point and box disagree about where the object
    is (a sliver seen over an occluder, hid_block_behind_box_left)."""
    m = _NEAREST_PX.search(note)
    return note.startswith(_MISLOCATED[0]) and m is not None \
        and float(m.group(1)) <= POINT_MISS_PX


def _measured_over(sliver: PerceivedObject, obj: PerceivedObject) -> bool:
    """``sliver`` outgrew its box too, is centred on ``obj`` and its bottom is higher: it
    is the one measured on ``obj``'s top (poorly_located)."""
    if sliver.position is None or sliver.size is None or obj.size is None \
            or obj.position is None or not _inside_footprint(sliver.position, obj) \
            or not any(n.startswith(_OUTGREW) for n in sliver.warnings):
        return False
    bottom = float(sliver.position[2]) - float(sliver.size[2]) / 2.0
    return bottom > float(obj.position[2]) - float(obj.size[2]) / 2.0 + SLIVER_ABOVE_M


def merge_views(fixed: PerceptionResult, wrist: PerceptionResult) -> PerceptionResult:
    """The wrist view's target, the fixed view's other objects, and the wrist view's objects
    the fixed view does not show.

    The fixed camera sees the whole scene, the wrist camera only the region it looked at (an
    occluder may be cut by the frame's edge), so the fixed view's estimates are kept for the
    objects both show (a poorly located one dropped); the wrist view adds the target and
    what else was hidden. Two estimates are one object when either centre lies on the
    other's footprint.
    Ids already used are suffixed (a VLM names each frame's objects on its own).
    """
    target = wrist.target
    pool = ([fixed.target] if fixed.target is not None else []) + [
        o for o in fixed.objects if fixed.target is None or o.id != fixed.target.id]
    kept = [o for o in pool if o.position is not None and not poorly_located(o, pool)
            and not (target is not None and _same(o, target))]
    ids = {o.id for o in kept} | ({target.id} if target is not None else set())
    merged = list(kept)
    for obj in wrist.objects:
        if obj.position is None or (target is not None and obj.id == target.id) \
                or any(_same(obj, o) or _clipped_part_of(obj, o) for o in kept):
            continue
        if obj.id in ids:
            k = 2
            while f"{obj.id}_{k}" in ids:
                k += 1
            obj = PerceivedObject(**{**obj.__dict__, "id": f"{obj.id}_{k}"})
        ids.add(obj.id)
        merged.append(obj)
    return PerceptionResult(backend=wrist.backend, target_found=wrist.target_found,
                            target=target, objects=merged,
                            warnings=list(fixed.warnings) + list(wrist.warnings),
                            error=wrist.error, raw=wrist.raw)


def _clipped_part_of(part: PerceivedObject, whole: PerceivedObject) -> bool:
    """``part`` was cut by the wrist frame's edge and lies on (or within
    CLIPPED_PART_TOLERANCE_M of) ``whole``'s footprint, an object of its category: the part
    of ``whole`` in that view (the wrist camera looks past an occluder's edge), not
    another object."""
    if part.size is None or part.position is None or whole.category != part.category \
            or not any(n.startswith(_CLIPPED) for n in part.warnings):
        return False
    c, s = math.cos(part.yaw), math.sin(part.yaw)
    hx, hy = float(part.size[0]) / 2.0, float(part.size[1]) / 2.0
    for u, v in ((0, 0), (1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1)):
        x, y = u * hx, v * hy
        point = np.asarray(part.position[:2], float) + np.array([c * x - s * y, s * x + c * y])
        if _inside_footprint(point, whole, CLIPPED_PART_TOLERANCE_M):
            return True
    return False


def _same(a: PerceivedObject, b: PerceivedObject) -> bool:
    """One object seen twice: either centre lies on the other's perceived footprint."""
    if a.position is None or b.position is None:
        return False
    return _inside_footprint(a.position, b) or _inside_footprint(b.position, a)


# ------------------------------------------------------------------ the search
Look = Callable[[str, Camera], PerceptionResult]


def _describe(occ: Occluder, fragile_threshold: float, hand_width_m: float) -> str:
    """Why this occluder is looked behind and never moved."""
    o = occ.object
    size = " x ".join(f"{v * 1e3:.0f}" for v in o.size)
    if o.fragility >= fragile_threshold:
        why = (f"it is fragile (fragility {o.fragility:.2f}): it is never pushed or moved")
    elif min(o.size[0], o.size[1]) > hand_width_m:
        # one decimal: a side perceived at 80.4 mm is over an 80 mm opening, but both print
        # as 80 at whole millimetres
        why = (f"its narrowest side is perceived at {min(o.size[0], o.size[1]) * 1e3:.1f} mm, "
               f"more than the {hand_width_m * 1e3:.1f} mm the hand opens: it is not moved, "
               "a view needs no contact")
    else:
        why = "it is not moved: a view needs no contact"
    return (f"{o.id} ({o.category}, {size} mm) occludes the region "
            f"{occ.shadow_m * 1e3:.0f} mm behind it from the camera; {why}")


def uncover(instruction: str, first: PerceptionResult, objects: Sequence[ObjectInstance],
            arm: Any, look: Optional[Look], camera_position: Sequence[float],
            cfg: UncoverConfig, sg_config: Optional[SceneGraphConfig] = None,
            hand_width_m: float = GRIPPER_MAX_WIDTH_M,
            on_view: Optional[Callable[[ViewRecord], None]] = None,
            on_thought: Optional[Callable[[ViewRecord], None]] = None,
            cancel: Callable[[], bool] = lambda: False,
            reason: str = "perception did not report it in the fixed camera's frame"
            ) -> UncoverOutcome:
    """Look behind the candidate occluders until the target is seen (module docstring).

    ``objects`` are the perceived objects that may hide it (a poorly located target itself
    left out); ``reason`` says why the target counts as not seen.
    """
    sg = sg_config or SceneGraphConfig()
    if not cfg.enabled or cfg.max_views == 0:
        return UncoverOutcome(None, [], "uncovering is off (planner.uncover)")
    info = arm.wrist_camera() if arm is not None else None
    if info is None or look is None:
        name = getattr(arm, "name", "this")
        return UncoverOutcome(None, [], f"the {name} arm has no wrist camera to look "
                              "behind an occluder with")
    cands = occluders(objects, camera_position, instruction, cfg, sg)
    if not cands:
        return UncoverOutcome(None, [], "no perceived object could hide it from the camera")
    views: List[ViewRecord] = []

    def motions() -> int:
        return sum(v.reached for v in views)

    for occ in cands:
        why = _describe(occ, sg.fragile_threshold, hand_width_m)
        for side, poses in view_poses(occ, camera_position, info.camera, info.min_range_m):
            if motions() >= cfg.max_views or cancel():
                break
            where = "above the region behind it" if side == SIDES[0] else f"its {side}"
            thought = (f"Uncover (view {motions() + 1} of at most {cfg.max_views}): the target "
                       f"is not in view ({reason}); {why}. Looking from {where} with the "
                       "wrist camera.")
            record = ViewRecord(len(views), occ.id, side, thought, pose_marker(poses[0]),
                                poses[0], False)
            if on_thought is not None:
                on_thought(record)
            result: ViewResult = ViewResult(ArmError.BACKEND_FAILURE, "no pose")
            for pose in poses:
                result = arm.move_camera_to(pose, cancel)
                record.camera_pose, record.pose = pose, pose_marker(pose)
                if result.reached or result.error == ArmError.CANCELED:
                    break
            record.reached, record.error, record.message = (result.reached, result.error,
                                                            result.message)
            record.duration_s, record.clearance_m = result.duration_s, result.clearance_m
            views.append(record)
            if not result.reached:
                if on_view is not None:
                    on_view(record)
                if result.error == ArmError.CANCELED:
                    return UncoverOutcome(None, views, "canceled while uncovering",
                                          [c.id for c in cands])
                continue
            seen = look(instruction, result.camera)
            record.seen_ids = [o.id for o in ([seen.target] if seen.target else [])
                               + list(seen.objects)]
            target = seen.target if seen.ok and seen.target_found else None
            if target is not None and names_only_landmarks(
                    instruction, [t for t in [target.to_object_instance()] if t is not None]):
                target = None               # "found" as the landmark: not the target
            record.target_seen = target is not None and target.position is not None
            note = poorly_located(target, seen.objects) if record.target_seen else ""
            if note:
                record.target_seen = False
                record.message = f"{target.id} seen but not measured ({note})"
            if on_view is not None:
                on_view(record)
            if record.target_seen:
                return UncoverOutcome(merge_views(first, seen), views,
                                      f"{target.id} seen behind {occ.id} from {where}",
                                      [c.id for c in cands])
            if not note:
                break                       # the region was in view: not behind this one
            # seen but its depth is another surface's: look from the next side
        if motions() >= cfg.max_views:
            break
    tried = "; ".join(v.summary() for v in views) or "no view was tried"
    return UncoverOutcome(None, views, f"not found after {motions()} view(s) of "
                          f"{len(cands)} possible occluder(s): {tried}",
                          [c.id for c in cands])


def run_uncover(planner: Any, instruction: str, first: PerceptionResult, arm: Any,
                look: Optional[Look], emit: Callable[[Any], None],
                cancel: Callable[[], bool]) -> UncoverOutcome:
    """:func:`uncover` with the planner's configuration, for a target that is not seen or
    seen so little that depth did not measure it (:func:`poorly_located`).

    It needs the scene graph (Table II "w/o Scene Graph" cannot tell what hides the target)
    and reports every view as an UncoverEvent (thought before the motion, record after).
    """
    if not planner.configuration.scene_graph:
        return UncoverOutcome(None, [], "without the scene graph nothing tells which object "
                              "could hide it")
    objects = first.to_object_instances()
    reason = "perception did not report it in the fixed camera's frame"
    note = poorly_located(first.target, first.objects) if first.target_found else ""
    if note:
        objects = [o for o in objects if o.id != first.target.id]
        reason = f"{first.target.id} is seen only in part, its depth is another surface's: {note}"
    return uncover(instruction, first, objects, arm, look, planner.camera_position,
                   planner.config.uncover, planner.scene_graph_config,
                   planner.hand.cfg.max_opening_m,
                   on_view=lambda rec: emit(UncoverEvent(rec, True)),
                   on_thought=lambda rec: emit(UncoverEvent(rec, False)), cancel=cancel,
                   reason=reason)


__all__ = ["Occluder", "PROBE_ID", "SIDES", "UncoverOutcome",
           "merge_views", "occluders", "poorly_located", "pose_marker", "run_uncover",
           "uncover", "view_poses"]
