"""Depth geometry against the renderer's ground truth, for every catalogue object.

Each trial places one catalogue object (config/objects.yaml: the Table I objects and the
near/far OOD ones) at a random position on the table and a random yaw, optionally knocked
over (cylinders and boxes) and optionally beside a neighbour, renders the RGB-D frame with
:func:`agentic_grasp.core.render.render_scene` and asks :func:`estimate_geometry` for its
geometry from what a perfect VLM would answer: the pixel the object's centre projects to
and the tight box of its visible pixels (optionally with pointing noise). The geometry sees
only the depth image, the camera and that point/box; ground truth is used to score it.

The renderer draws an object's catalogue ``parts`` (what the contact model meets). A handle
is a ``parts`` entry that sticks out of the bounding primitive; ``visible handle fraction`` =
the object's pixels whose depth is the handle's (drawn alone, as a plain box, from the same
camera) over the pixels the handle covers when drawn alone.

Metrics (the issue's bounds in brackets): centre error (3-D distance to the drawn bounding
box centre, p90 <= 5 mm), extent error (worst of |length|, |width|, |height| errors, sorted
footprint extents, p90 <= 8 mm), yaw error of objects whose footprint aspect is >= 1.5
(modulo pi, p90 <= 8 deg), handle-side accuracy (within 45 deg, >= 95 % where at least a
quarter of the handle is visible), and the share of hidden handles reported as unknown.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.geometry import yaw_matrix
from agentic_grasp.core.perception.config import DepthConfig
from agentic_grasp.core.perception.depth import estimate_geometry
from agentic_grasp.core.render.raycast import _object_pose, render_scene  # noqa: PLC2701 (truth)
from agentic_grasp.core.render.raycast import TableSpec
from agentic_grasp.core.render.parts import drawn_parts
from agentic_grasp.core.sim.objects import Catalogue, ObjectModel, load_catalogue
from agentic_grasp.core.types import ObjectInstance, Shape
from agentic_grasp.core.planner.episode import CameraPerception
from agentic_grasp.core.sim import Simulator
from agentic_grasp.core.sim.scenes import list_tasks

BOUNDS = {"centre_p90_mm": 5.0, "extent_p90_mm": 8.0, "yaw_p90_deg": 8.0,
          "handle_accuracy": 0.95, "ms_per_object": 5.0}
#: Region of the table the trials use (m): the camera's view of the table, 5 cm margins.
X_RANGE = (0.30, 0.70)
Y_RANGE = (-0.30, 0.30)
HANDLE_TOLERANCE_RAD = math.radians(45.0)
MIN_HANDLE_VISIBLE = 0.25


@dataclass
class Truth:
    """Ground truth of one drawn object, in the terms perception reports."""

    centre: np.ndarray
    extents: np.ndarray          # length >= width (footprint), height
    axis_yaw: float              # world yaw of the length axis
    aspect: float
    shape: Shape
    upright: bool
    handle_yaw: Optional[float] = None
    handle_visible: float = 0.0
    visible: float = 1.0          # share of the object's pixels not hidden by a neighbour


@dataclass
class Trial:
    key: str
    truth: Truth
    centre_err_m: float
    extent_err_m: float
    yaw_err_deg: Optional[float]
    shape_ok: bool
    upright_ok: bool
    handle_ok: Optional[bool]      # None: no handle in view enough to score
    hidden_handle_unknown: Optional[bool]
    ms: float
    cpu_ms: float = 0.0
    notes: List[str] = field(default_factory=list)
    scene: List[ObjectInstance] = field(default_factory=list)   # what was drawn
    answer: Optional[tuple] = None                                # (point, box) given


def handle_part(model: ObjectModel):
    """The catalogue part named 'handle' that sticks out of the bounding primitive, or None."""
    for part in model.parts:
        if part.name != "handle":
            continue
        reach = np.abs(part.centre) + part.size / 2.0
        if np.any(reach[:2] > model.size[:2] / 2.0 + 1e-6):
            return part
    return None


def truth_of(obj: ObjectInstance, table: TableSpec) -> Truth:
    """Drawn centre, sorted footprint extents, axis yaw (see render._object_pose)."""
    R, centre = _object_pose(obj, table)
    size = np.asarray(obj.size, dtype=float)
    if obj.shape == Shape.SPHERE:
        d = float(size[0])
        return Truth(centre, np.array([d, d, d]), 0.0, 1.0, Shape.SPHERE, True)
    if obj.upright:
        ext_x, ext_y, height = size
        yaw_x = obj.yaw
    else:      # rotated 90 deg about its x: object z lies along world yaw + pi/2
        ext_x, ext_y, height = size[0], size[2], size[1]
        yaw_x = obj.yaw
    if ext_x >= ext_y:
        length, width, axis = ext_x, ext_y, yaw_x
    else:
        length, width, axis = ext_y, ext_x, yaw_x + math.pi / 2.0
    shape, upright = obj.shape, bool(obj.upright)
    parts = drawn_parts(obj)
    if len(parts) == 1 and parts[0].shape != obj.shape:
        # drawn as its one catalogue part (a banana: a cylinder along its x, lying)
        shape = parts[0].shape
        if shape == Shape.CYLINDER and upright and abs(float(parts[0].R[2, 2])) < 0.5:
            upright = False
    return Truth(centre, np.array([length, width, height]), axis, length / width,
                 shape, upright)


def _angle_diff(a: float, b: float, period: float) -> float:
    d = (a - b) % period
    return min(d, period - d)


def perfect_vlm(result, indices: Sequence[int], camera: Camera, centre: np.ndarray,
                rng: np.random.Generator, noise_px: float
                ) -> Optional[Tuple[Tuple[float, float], Tuple[int, int, int, int]]]:
    """(point, box) a perfect VLM gives: the projected centre, the visible pixels' box."""
    mask = np.isin(result.instance, list(indices))
    if not mask.any():
        return None
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    uv, _ = camera.project(centre[None])
    u, v = float(uv[0, 0]), float(uv[0, 1])
    ui, vi = int(round(u)), int(round(v))
    if not (0 <= vi < mask.shape[0] and 0 <= ui < mask.shape[1] and mask[vi, ui]):
        # The centre is hidden (behind a neighbour): a VLM points at what it sees.
        rows_m, cols_m = np.nonzero(mask)
        k = int(np.argmin((cols_m - u) ** 2 + (rows_m - v) ** 2))
        u, v = float(cols_m[k]), float(rows_m[k])
    box = [cols[0], rows[0], cols[-1], rows[-1]]
    if noise_px > 0.0:
        u, v = u + rng.normal(0, noise_px), v + rng.normal(0, noise_px)
        box = [int(round(c + rng.normal(0, noise_px))) for c in box]
    return (u, v), tuple(int(c) for c in box)


def _handle_instance(obj: ObjectInstance, part, index: int) -> ObjectInstance:
    offset = yaw_matrix(obj.yaw) @ part.centre
    return ObjectInstance(id=f"{obj.id}_handle{index}", category="handle", shape=Shape.BOX,
                          position=obj.position + offset, size=part.size.copy(),
                          yaw=obj.yaw, color=obj.color)


def run_trial(model: ObjectModel, rng: np.random.Generator, camera: Camera,
              cfg: DepthConfig, *, noise_px: float = 0.0, fallen: bool = False,
              neighbour: Optional[ObjectModel] = None,
              depth_noise_m: float = 0.0) -> Optional[Trial]:
    """One placement of ``model``; None when it is not visible at all."""
    table = TableSpec()
    x, y = rng.uniform(*X_RANGE), rng.uniform(*Y_RANGE)
    yaw = rng.uniform(-math.pi, math.pi)
    obj = model.instantiate("obj", x, y, yaw)
    part = handle_part(model)
    if fallen and model.shape != Shape.SPHERE and part is None:
        obj.upright = False
    scene = [obj]
    body_ids = [0]
    if neighbour is not None:
        for _ in range(20):
            ang = rng.uniform(-math.pi, math.pi)
            foot = model.size[:2] if obj.upright else model.size[[0, 2]]
            gap = 0.5 * (np.hypot(*foot) + np.hypot(*neighbour.size[:2])) + 0.03
            nx, ny = x + gap * math.cos(ang), y + gap * math.sin(ang)
            if X_RANGE[0] - 0.05 <= nx <= X_RANGE[1] + 0.05 and abs(ny) <= 0.35:
                scene.append(neighbour.instantiate("nb", nx, ny, rng.uniform(-3, 3)))
                break
    truth = truth_of(obj, table)
    frame = render_scene(scene, camera, table, depth_noise_std=depth_noise_m, rng=rng)
    vlm = perfect_vlm(frame, body_ids, camera, truth.centre, rng, noise_px)
    if vlm is None:
        return None
    if part is not None:
        truth.handle_yaw = yaw
        alone = render_scene([_handle_instance(obj, part, 0)], camera, table)
        mine = alone.instance == 0
        full = int(mine.sum())
        seen = mine & (frame.instance == 0) & (np.abs(frame.depth - alone.depth) <= 1e-3)
        truth.handle_visible = float(seen.sum()) / full if full else 0.0
    if len(scene) > len(body_ids):
        alone = render_scene(scene[:len(body_ids)], camera, table)
        full = int(np.isin(alone.instance, body_ids).sum())
        truth.visible = float(np.isin(frame.instance, body_ids).sum()) / full if full else 0.0
    start, cpu = time.perf_counter(), time.process_time()
    geom = estimate_geometry(frame.depth, camera, vlm[0], vlm[1], cfg)
    ms = (time.perf_counter() - start) * 1e3
    cpu_ms = (time.process_time() - cpu) * 1e3
    if geom is None:
        return Trial(model.key, truth, math.inf, math.inf, None, False, False, None, None,
                     ms, cpu_ms, ["no geometry"])
    centre_err = float(np.linalg.norm(geom.position - truth.centre))
    extent_err = float(np.max(np.abs(geom.size - truth.extents)))
    yaw_err = None
    if truth.aspect >= 1.5:
        yaw_err = math.degrees(_angle_diff(geom.yaw, truth.axis_yaw, math.pi))
    handle_ok = hidden_unknown = None
    if truth.handle_yaw is not None:
        if truth.handle_visible >= MIN_HANDLE_VISIBLE:
            handle_ok = (geom.handle_yaw is not None and _angle_diff(
                geom.handle_yaw, truth.handle_yaw, 2 * math.pi) <= HANDLE_TOLERANCE_RAD)
        elif truth.handle_visible == 0.0:
            hidden_unknown = geom.handle_yaw is None
    # Perception reports "knocked over" for cylinders only (a box has no telltale side).
    upright_ok = geom.upright == truth.upright if truth.shape == Shape.CYLINDER else True
    return Trial(model.key, truth, centre_err, extent_err, yaw_err,
                 geom.shape == truth.shape, upright_ok, handle_ok,
                 hidden_unknown, ms, cpu_ms, list(geom.notes), scene, vlm)


def _pct(values: Sequence[float], q: float) -> Optional[float]:
    return float(np.percentile(values, q)) if len(values) else None


def summarise(trials: Sequence[Trial]) -> Dict[str, object]:
    """p50/p90 of the errors, handle accuracy, shape/upright accuracy, time per object."""
    centre = [t.centre_err_m * 1e3 for t in trials]
    extent = [t.extent_err_m * 1e3 for t in trials]
    yaw = [t.yaw_err_deg for t in trials if t.yaw_err_deg is not None]
    handles = [t.handle_ok for t in trials if t.handle_ok is not None]
    hidden = [t.hidden_handle_unknown for t in trials if t.hidden_handle_unknown is not None]
    ms = [t.ms for t in trials]
    cpu = [t.cpu_ms for t in trials]
    return {
        "trials": len(trials),
        "centre_mm": {"p50": _pct(centre, 50), "p90": _pct(centre, 90)},
        "extent_mm": {"p50": _pct(extent, 50), "p90": _pct(extent, 90)},
        "yaw_deg": {"n": len(yaw), "p50": _pct(yaw, 50), "p90": _pct(yaw, 90)},
        "handle_side": {"n": len(handles),
                        "accuracy": (sum(handles) / len(handles)) if handles else None,
                        "hidden_n": len(hidden),
                        "hidden_reported_unknown": (sum(hidden) / len(hidden))
                        if hidden else None},
        "shape_accuracy": sum(t.shape_ok for t in trials) / max(1, len(trials)),
        "upright_accuracy": sum(t.upright_ok for t in trials) / max(1, len(trials)),
        "ms_per_object": {"p50": _pct(ms, 50), "p90": _pct(ms, 90),
                          "mean": float(np.mean(ms)) if ms else None},
        "cpu_ms_per_object": {"p50": _pct(cpu, 50), "p90": _pct(cpu, 90),
                              "mean": float(np.mean(cpu)) if cpu else None},
    }


def run_geometry_bench(poses: int = 12, seed: int = 0, noise_px: float = 0.0,
                       neighbours: bool = False, fallen_share: float = 0.25,
                       min_visible: float = 0.5, depth_noise_m: float = 0.0,
                       catalogue: Optional[Catalogue] = None,
                       camera: Optional[Camera] = None,
                       cfg: Optional[DepthConfig] = None) -> Dict[str, object]:
    """``poses`` trials per catalogue object; returns the summary, per object and overall.

    With ``neighbours`` each trial adds a random catalogue object 3 cm beyond touching
    distance; trials where it hides more than ``1 - min_visible`` of the object are left
    out of the scores (no method recovers the centre of an object it cannot see).
    """
    catalogue = catalogue or load_catalogue()
    camera = camera or Camera()
    cfg = cfg or DepthConfig()
    rng = np.random.default_rng(seed)
    keys = catalogue.keys()
    trials: List[Trial] = []
    per_key: Dict[str, Dict[str, object]] = {}
    for key in keys:
        model = catalogue.get(key)
        mine: List[Trial] = []
        for k in range(poses):
            fallen = rng.random() < fallen_share
            nb = catalogue.get(keys[int(rng.integers(len(keys)))]) if neighbours else None
            trial = run_trial(model, rng, camera, cfg, noise_px=noise_px, fallen=fallen,
                              neighbour=nb, depth_noise_m=depth_noise_m)
            if trial is not None and trial.truth.visible >= min_visible:
                mine.append(trial)
        trials.extend(mine)
        per_key[key] = summarise(mine)
    overall = summarise(trials)
    overall["bounds"] = dict(BOUNDS)
    return {"overall": overall, "per_object": per_key, "poses": poses, "seed": seed,
            "noise_px": noise_px, "neighbours": neighbours, "depth_noise_m": depth_noise_m,
            "_trials": trials}


def scene_handle_sides(trials: int = 30, seed: int = 0, tasks: Optional[Sequence[str]] = None,
                       tolerance_rad: float = HANDLE_TOLERANCE_RAD) -> Dict[str, object]:
    """Handle side as the graph perceives it, on the benchmark scenes' own frames.

    Every benchmark scene (config/scenes) holding a catalogue object with a handle is loaded
    ``trials`` times (the sweep's scene jitter), rendered as the episode renders it and
    perceived by the default ``vlm_sim`` backend (its pointing and box noise, then depth
    geometry). A frame counts where at least ``MIN_HANDLE_VISIBLE`` of the handle is in
    view; it is correct when the perceived handle side is within ``tolerance_rad`` of the
    true one (the object's +x, config/objects.yaml). Hidden handles reported unknown are
    counted apart.
    """
    sim = Simulator.from_config()
    camera = Camera()
    table = TableSpec()
    rows: List[Dict[str, object]] = []
    for task in tasks if tasks is not None else list_tasks():
        spec = sim.load_task(task, trial_seed=0)
        handled = [o.id for o in sim.objects()
                   if handle_part(sim.catalogue.model_for(o)) is not None]
        if not handled:
            continue
        for k in range(trials):
            trial_seed = int(np.random.SeedSequence([seed, k]).generate_state(1)[0])
            sim.load_task(task, trial_seed=trial_seed)
            objects = sim.objects()
            eyes = CameraPerception(sim, "vlm_sim", trial_seed, 64)
            result = eyes.perceive(spec.instruction)
            frame = eyes.frame[0]
            seen = {p.id: p for p in result.objects}
            for index, o in enumerate(objects):
                if o.id not in handled:
                    continue
                part = handle_part(sim.catalogue.model_for(o))
                alone = render_scene([_handle_instance(o, part, 0)], camera, table)
                mine = alone.instance == 0
                full = int(mine.sum())
                vis = mine & (frame.instance == index) & (np.abs(frame.depth - alone.depth)
                                                          <= 1e-3)
                share = float(vis.sum()) / full if full else 0.0
                p = seen.get(o.id)
                yaw = None if p is None else p.handle_yaw
                ok = yaw is not None and _angle_diff(yaw, o.yaw, 2 * math.pi) <= tolerance_rad
                rows.append({"task": task, "trial": k, "object": o.id, "visible": share,
                             "perceived": p is not None, "handle_yaw": yaw,
                             "true_yaw": float(o.yaw), "correct": bool(ok)})
    visible = [r for r in rows if r["visible"] >= MIN_HANDLE_VISIBLE and r["perceived"]]
    hidden = [r for r in rows if r["visible"] == 0.0 and r["perceived"]]
    per_task: Dict[str, Dict[str, object]] = {}
    for r in visible:
        t = per_task.setdefault(str(r["task"]), {"visible": 0, "correct": 0})
        t["visible"] = int(t["visible"]) + 1
        t["correct"] = int(t["correct"]) + int(bool(r["correct"]))
    return {"frames": len(rows), "visible": len(visible),
            "correct": sum(bool(r["correct"]) for r in visible),
            "accuracy": (sum(bool(r["correct"]) for r in visible) / len(visible))
            if visible else None,
            "hidden": len(hidden),
            "hidden_unknown": sum(r["handle_yaw"] is None for r in hidden),
            "per_task": per_task, "rows": rows}


def format_report(report: Dict[str, object]) -> str:
    """The table `agentic-grasp bench geometry` prints."""
    def f(v, unit=""):
        return "-" if v is None else f"{v:.1f}{unit}"

    lines = [f"depth geometry vs renderer truth: {report['poses']} poses per object, "
             f"seed {report['seed']}, pointing noise {report['noise_px']} px, "
             f"neighbours {'on' if report['neighbours'] else 'off'}, depth noise "
             f"{report.get('depth_noise_m', 0.0) * 1e3:g} mm",
             f"{'object':<16}{'n':>4}{'centre p50/p90 mm':>19}{'extent p50/p90 mm':>19}"
             f"{'yaw p50/p90 deg':>17}{'handle':>8}{'shape':>7}{'ms p50':>8}{'cpu ms':>8}"]
    rows = list(report["per_object"].items()) + [("ALL", report["overall"])]
    for key, s in rows:
        hs = s["handle_side"]
        handle = "-" if hs["accuracy"] is None else f"{hs['accuracy']:.0%}"
        lines.append(
            f"{key:<16}{s['trials']:>4}"
            f"{f(s['centre_mm']['p50']) + ' / ' + f(s['centre_mm']['p90']):>19}"
            f"{f(s['extent_mm']['p50']) + ' / ' + f(s['extent_mm']['p90']):>19}"
            f"{f(s['yaw_deg']['p50']) + ' / ' + f(s['yaw_deg']['p90']):>17}"
            f"{handle:>8}{s['shape_accuracy']:>7.0%}{f(s['ms_per_object']['p50']):>8}"
            f"{f(s['cpu_ms_per_object']['p50']):>8}")
    o = report["overall"]
    hs = o["handle_side"]
    unknown = hs["hidden_reported_unknown"]
    lines.append(f"handle side: {hs['n']} trials with >= 25 % of the handle visible; "
                 f"hidden handles reported unknown: "
                 f"{'-' if unknown is None else format(unknown, '.0%')}"
                 f" of {hs['hidden_n']}")
    lines.append("bounds: " + ", ".join(f"{k} {v}" for k, v in BOUNDS.items()))
    return "\n".join(lines)


if __name__ == "__main__":   # pragma: no cover - manual use
    print(format_report(run_geometry_bench()))
