"""Fit a retrieved strategy to the perceived object.

A stored experience keeps, besides its object-frame grasp, a ``fit`` record (kb_data schema):

- ``offset_rel``: the grasp point relative to the object's half extents (x / (sx / 2), ...),
  so a handle pinch 52.5 mm off the centre of an 8 cm cup lands 1.31 half-widths off the
  centre of the cup in front of the robot, whatever its size;
- ``opening``: ``extent`` when the fingers close around the whole body (the stored width was
  at least the body's extent across the closing axis; ``margin_m`` is what it left), or
  ``part`` when they close on a part narrower than the body (handle, rim, stem, neck, cap):
  then the stored width is the part's opening and is kept;
- ``yaw_ref``: ``principal`` (wrist yaw and offsets relative to the object's principal
  axes) or ``handle`` (relative to the side the handle sticks out on, object +x).

Fitting: the object frames are matched by their axis order (the stored and the perceived
object's longer horizontal axis correspond), the offsets are scaled by the perceived half
extents, the opening of an ``extent`` grasp is the perceived extent across the closing axis
plus ``opening_margin_m``, clamped to the hand's opening (a body wider than the hand is
skipped, with the reason), and a grasp whose fingertips would reach below the table is raised.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

import numpy as np

from agentic_grasp.core.grasping.config import GraspSynthesisConfig
from agentic_grasp.core.geometry import wrap_angle, yaw_matrix
from agentic_grasp.core.grasping.hand import HandModel
from agentic_grasp.core.arm.closing_axis import closing_axis
from agentic_grasp.core.types import GraspParameters, ObjectInstance, Shape

#: Two horizontal extents closer than this are treated as equal (no principal axis).
_SQUARE_M = 0.002
OPENINGS = ("extent", "part")
YAW_REFS = ("principal", "handle")


def extent_at(target: ObjectInstance, grasp: GraspParameters, pad_depth: float) -> float:
    """Perceived extent across the grasp's closing axis where the pads close: a sphere is
    narrower above or below its equator (over the pads' height, its widest line counts)."""
    axis = closing_axis(grasp.approach, grasp.wrist_yaw)
    extent = footprint_extent(target.shape, target.size, axis, float(target.yaw))
    if target.shape == Shape.SPHERE and abs(float(axis[2])) < 0.5:
        r = extent / 2.0
        dz = max(0.0, abs(float(grasp.position[2] - target.position[2])) - pad_depth / 2.0)
        extent = 2.0 * math.sqrt(max(r * r - dz * dz, 0.0))
    return float(extent)


def sphere_chord(target: ObjectInstance, grasp: GraspParameters, pad_depth: float) -> float:
    """Length of the perceived sphere along the grasp's closing line where the pads close
    (over the pads' depth along the approach, the line nearest the centre counts)."""
    axis = closing_axis(grasp.approach, grasp.wrist_yaw)
    approach = np.asarray(grasp.approach, dtype=float)
    approach = approach / max(float(np.linalg.norm(approach)), 1e-12)
    d = np.asarray(grasp.position, dtype=float) - np.asarray(target.position, dtype=float)
    perp = d - float(d @ axis) * axis
    depth = float(perp @ approach)
    rest = perp - depth * approach
    depth = max(0.0, abs(depth) - pad_depth / 2.0)
    r = float(min(target.size)) / 2.0
    dist2 = float(rest @ rest) + depth * depth
    return 2.0 * math.sqrt(max(r * r - dist2, 0.0))


def footprint_extent(shape: str, size, axis: np.ndarray, yaw: float = 0.0) -> float:
    """Width of a box / cylinder / sphere of ``size`` (yaw ``yaw``) along a world axis."""
    c, s = math.cos(yaw), math.sin(yaw)
    ax = float(axis[0]) * c + float(axis[1]) * s
    ay = -float(axis[0]) * s + float(axis[1]) * c
    az = float(axis[2])
    sx, sy, sz = (float(v) for v in size)
    if str(shape) in ("cylinder", "sphere", Shape.CYLINDER, Shape.SPHERE):
        return float(math.hypot(sx * ax, sy * ay) + sz * abs(az))
    return float(sx * abs(ax) + sy * abs(ay) + sz * abs(az))


def upright_frame(target: ObjectInstance) -> ObjectInstance:
    """A lying cylinder (``upright`` False: size (d, d, axis length), turned 90 deg about its
    x as the renderer draws it) in the frame of a standing footprint: x across the axis, y
    along it, z up, so size (d, L, d) at the same yaw. A stored strategy's frame (a banana
    lying along its x) then matches it by axis order like any other long object."""
    if target.upright or target.shape != Shape.CYLINDER:
        return target
    d, length = float(target.size[0]), float(target.size[2])
    out = target.copy()
    out.size = np.array([d, length, float(target.size[1])])
    out.upright = True
    return out


def fit_record(record: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``fit`` record of a KB entry, derived from its grasp and render_spec (migration)."""
    g, spec = record["grasp"], record["render_spec"]
    size = [float(v) for v in spec["size"]]
    pos = [float(v) for v in g["position"]]
    rel = [round(p / (s / 2.0), 4) if s > 0 else 0.0 for p, s in zip(pos, size)]
    axis = closing_axis(g["approach"], float(g["wrist_yaw"]))
    extent = footprint_extent(spec["shape"], size, axis)
    width = float(g["width"])
    if width >= extent - 1e-6:
        opening, margin = "extent", round(width - extent, 4)
    else:
        opening, margin = "part", 0.0
    region = str(record["affordance"]["region"])
    yaw_ref = "handle" if (region == "handle" and spec["shape"] == "cylinder") else "principal"
    return {"offset_rel": rel, "opening": opening, "margin_m": margin, "yaw_ref": yaw_ref}


@dataclass
class FitResult:
    """The fitted world grasp (None when skipped) and what fitting did, for the breakdown."""

    grasp: Optional[GraspParameters]
    breakdown: Dict[str, Any] = field(default_factory=dict)

    @property
    def skipped(self) -> bool:
        return self.grasp is None


def _needs_swap(size) -> bool:
    return float(size[0]) < float(size[1]) - _SQUARE_M


def handle_yaw_of(handle_side: Any) -> Optional[float]:
    """A perceived handle side (angle in rad, or a 2-/3-vector) as a world yaw; None if unknown."""
    if handle_side is None:
        return None
    if isinstance(handle_side, (int, float)):
        return float(handle_side) if math.isfinite(float(handle_side)) else None
    v = np.asarray(handle_side, dtype=float).reshape(-1)
    if v.size < 2 or not np.all(np.isfinite(v[:2])) or float(np.hypot(v[0], v[1])) < 1e-6:
        return None
    return float(math.atan2(v[1], v[0]))


def fit_strategy(record_grasp: Mapping[str, Any], spec: Mapping[str, Any],
                 fit: Optional[Mapping[str, Any]], target: ObjectInstance,
                 cfg: GraspSynthesisConfig, hand: HandModel,
                 handle_yaw: Optional[float] = None, yaw_known: bool = True) -> FitResult:
    """The stored grasp (object frame of ``spec``) fitted to the perceived ``target``.

    ``yaw_known`` False: the perceived yaw is arbitrary (a round footprint); a strategy
    placed relative to a handle is then skipped unless the handle side was perceived.
    """
    local = GraspParameters.from_dict(record_grasp)
    notes = []
    target = upright_frame(target)
    spec = dict(spec or {})
    if "size" not in spec or "shape" not in spec:
        # no stored object (e.g. a strategy received over ROS without its render_spec): the
        # perceived object stands in for it, so offsets stay absolute
        spec = {"shape": getattr(target.shape, "value", str(target.shape)),
                "size": [float(v) for v in target.size]}
        notes.append("no stored object size: offsets kept as stored")
        fit = None
    if fit is None:
        fit = fit_record({"grasp": record_grasp, "render_spec": spec,
                          "affordance": {"region": ""}})
    rel = np.asarray(fit["offset_rel"], dtype=float).copy()
    approach = local.approach.copy()
    wrist = float(local.wrist_yaw)
    # Match the frames by axis order: the longer horizontal axes correspond.
    turn = 0.0
    if fit.get("yaw_ref", "principal") == "principal" \
            and _needs_swap(spec["size"]) != _needs_swap(target.size):
        turn = math.pi / 2.0
        rel = np.array([-rel[1], rel[0], rel[2]])
        approach = yaw_matrix(turn) @ approach
        wrist += turn
        notes.append("stored frame turned 90 deg to match the perceived principal axis")
    yaw = float(target.yaw)
    if fit.get("yaw_ref") == "handle":
        if handle_yaw is not None:
            yaw = float(handle_yaw)
            notes.append(f"frame on the perceived handle side ({math.degrees(yaw):.0f} deg)")
        elif not yaw_known:
            return FitResult(None, {"fitted": False, "yaw_ref": "handle",
                                    "skipped": "handle side not perceived and the object's "
                                               "yaw is unknown: a handle grasp would land on "
                                               "a random side", "notes": notes})
        else:
            notes.append("handle side not perceived: frame on the principal axis")
    half = np.asarray(target.size, dtype=float) / 2.0
    if fit.get("yaw_ref") == "handle" and handle_yaw is not None:
        # the handle direction's half extent of the body: the footprint radius that way
        radius = footprint_extent(target.shape, target.size,
                                  np.array([math.cos(yaw), math.sin(yaw), 0.0]),
                                  float(target.yaw)) / 2.0
        half = np.array([radius, radius, half[2]])
    offset = rel * half
    R = yaw_matrix(yaw)
    grasp = local.copy(position=np.asarray(target.position, dtype=float) + R @ offset,
                       approach=R @ approach, wrist_yaw=wrap_angle(wrist + yaw))
    out: Dict[str, Any] = {"fitted": True, "offset_rel": [round(float(v), 4) for v in rel],
                           "yaw_ref": fit.get("yaw_ref", "principal"),
                           "opening": fit.get("opening", "part"),
                           "stored_width_mm": round(local.width * 1e3, 1)}
    max_w = cfg.hand.max_opening_m
    extent_opening = fit.get("opening") == "extent"
    material: Optional[float] = None
    if extent_opening:
        material = extent_at(target, grasp, cfg.hand.pad_depth_m)
        room = max_w
        why = f"leaves no finger clearance in the hand's {max_w * 1e3:.0f} mm opening"
    else:
        room = float(np.clip(local.width, cfg.min_part_opening_m, max_w))
        if abs(room - local.width) > 1e-9:
            notes.append(f"part opening {local.width * 1e3:.0f} mm clamped to "
                         f"{room * 1e3:.0f} mm")
        if target.shape == Shape.SPHERE:
            # a sphere has no part narrower than its chord: where the pads close, the
            # chord across the closing axis is the material between them, and a part
            # opening narrower than it puts a finger on the ball
            material = sphere_chord(target, grasp, cfg.hand.pad_depth_m)
            why = (f"where the pads close is more than the {room * 1e3:.0f} mm part opening "
                   "(a sphere has no part)")
    if material is not None:
        out["perceived_extent_mm"] = round(material * 1e3, 1)
        if material > room - 2.0 * cfg.finger_clearance_m:
            out["skipped"] = (f"the perceived extent {material * 1e3:.0f} mm across the "
                              f"closing axis {why}")
            out["notes"] = notes
            return FitResult(None, out)
    width = room
    if extent_opening and material is not None:
        width = material + cfg.opening_margin_m
        if width > max_w:
            notes.append(f"opening {width * 1e3:.0f} mm clamped to the hand's "
                         f"{max_w * 1e3:.0f} mm")
            width = max_w
    grasp = grasp.copy(width=float(width))
    low = hand.lowest_point(grasp)
    if low < cfg.table_clearance_m:
        raise_m = cfg.table_clearance_m - low
        pos = grasp.position.copy()
        pos[2] += raise_m
        grasp = grasp.copy(position=pos)
        out["raised_mm"] = round(raise_m * 1e3, 1)
        vertical = abs(float(grasp.approach[2])) >= 0.9
        # a top-down grasp still touches while its pads' lower edge is below the top; a
        # side grasp raised into the object's upper quarter has little left to hold
        limit = (target.top_z + cfg.hand.pad_depth_m / 2.0 if vertical
                 else float(target.position[2]) + float(target.size[2]) / 4.0)
        if pos[2] > limit:
            out["skipped"] = (f"the hand reaches the table unless the grasp point rises "
                              f"{raise_m * 1e3:.0f} mm, out of reach of the perceived object "
                              f"({target.size[2] * 1e3:.0f} mm tall)")
            out["notes"] = notes
            return FitResult(None, out)
        notes.append(f"raised {raise_m * 1e3:.1f} mm so the fingertips stay above the table")
    out["width_mm"] = round(grasp.width * 1e3, 1)
    out["notes"] = notes
    return FitResult(grasp, out)


__all__ = ["FitResult", "OPENINGS", "YAW_REFS", "fit_record", "fit_strategy",
           "footprint_extent", "handle_yaw_of"]
