"""Pictures of what the robot saw and decided, from a recording (``agentic-grasp show``).

One PNG per attempt and a contact sheet per goal. Each attempt's picture is the camera image
the attempt was planned from with, drawn over it,

- each perceived object: its point (the pixel perception reported, else its projected
  centre), its box (the projected corners of its oriented extents), id and category;
- the scene-graph relations as labelled edges between the objects (``Far_From`` left out:
  it holds between most pairs and says nothing about the grasp);
- the planned grasp as the projected gripper: both fingers at the commanded opening, the
  closing axis between them, the approach from the pre-grasp pose as an arrow;

and beside it a panel with the goal, the grasp parameters, the active constraints (the
scene-graph node's summary for this sub-goal), the outcome with its physical events and
their details, the failure type, the evidence and the correction.

Which messages belong to an attempt, and the camera model, are views.py's (AttemptView,
GoalView, goal_views). Drawing uses OpenCV. Fields are read by name, so messages with fields
added later render unchanged.
"""
from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import cv2

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.geometry import quaternion_yaw, yaw_matrix
from agentic_grasp.core.arm.closing_axis import closing_axis
from agentic_grasp.core.errors import ValidationError
from agentic_grasp.ros.conversions.fields import GRASP_TYPE_NAMES, enum_value, from_xyz
from agentic_grasp.ros.recording.views import AttemptView, GoalView, goal_views

#: Franka Hand finger geometry drawn (m): plate thickness, length above the pad centre,
#: pad centre beyond the TCP (the finger tips reach past the grasp point).
FINGER_THICKNESS = 0.012
FINGER_LENGTH = 0.055
PAD_BEYOND_TCP = 0.010
PANEL_WIDTH = 420
#: Relations that hold both ways: one label per pair.
SYMMETRIC = frozenset({"Adjacent_To", "Near", "Far_From", "Touching"})
#: Relations stated from both ends (a Left_Of b is b Right_Of a): one label per pair, the
#: first one's.
CONVERSE = {"Left_Of": "Right_Of", "Right_Of": "Left_Of", "Behind": "In_Front_Of",
            "In_Front_Of": "Behind", "On_Top_Of": "Supports", "Supports": "On_Top_Of",
            "Inside": "Contains", "Contains": "Inside"}
#: The contact sheet: each attempt's scene scaled by this, under a caption in CAPTION_SCALE
#: text, so the sheet reads at its own size (a scaled copy of the side panel does not).
SHEET_SCALE = 0.75
CAPTION_SCALE = 0.5
_FONT = 0            # cv2.FONT_HERSHEY_SIMPLEX
_BGR = {"ok": (60, 200, 60), "fail": (60, 60, 230), "object": (235, 200, 60),
        "target": (0, 160, 255), "relation": (200, 200, 200), "approach": (80, 230, 120),
        "finger": (240, 240, 240), "text": (235, 235, 235), "dim": (170, 170, 170),
        "panel": (38, 38, 38)}


# ---- drawing ----------------------------------------------------------------------------------

def _yaw(q: Any) -> float:
    return quaternion_yaw(q.x, q.y, q.z, q.w)


def box_corners(centre: np.ndarray, size: np.ndarray, yaw: float) -> np.ndarray:
    """The 8 corners (world) of a box of full extents ``size`` turned by ``yaw`` about z."""
    R = yaw_matrix(yaw)
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    return centre + (signs * (size / 2.0)) @ R.T


def gripper_lines(position: np.ndarray, approach: np.ndarray, width: float, wrist_yaw: float,
                  standoff: float) -> Dict[str, np.ndarray]:
    """World polylines of the hand: two finger outlines, the palm bar, the closing axis
    between the pads and the approach from the pre-grasp pose."""
    a = approach / max(float(np.linalg.norm(approach)), 1e-9)
    c = closing_axis(a, wrist_yaw)
    tip, top = PAD_BEYOND_TCP, PAD_BEYOND_TCP - FINGER_LENGTH
    lines: Dict[str, np.ndarray] = {}
    for name, side in (("finger_left", 1.0), ("finger_right", -1.0)):
        inner, outer = side * width / 2.0, side * (width / 2.0 + FINGER_THICKNESS)
        lines[name] = np.array([position + inner * c + tip * a, position + outer * c + tip * a,
                                position + outer * c + top * a, position + inner * c + top * a,
                                position + inner * c + tip * a])
    reach = width / 2.0 + FINGER_THICKNESS
    lines["palm"] = np.array([position - reach * c + top * a, position + reach * c + top * a])
    lines["closing_axis"] = np.array([position - width / 2.0 * c, position + width / 2.0 * c])
    lines["approach"] = np.array([position - max(standoff, 0.05) * a, position])
    return lines


def _label(cv2: Any, img: np.ndarray, text: str, org: Tuple[int, int], color, scale=0.42,
           thickness=1) -> None:
    """Text on a dark box, readable on any background. (A halo drawn as the same text with a
    thicker stroke is wider than the text, and reads as the text printed twice.)"""
    (w, h), base = cv2.getTextSize(text, _FONT, scale, thickness)
    x, y = int(org[0]), int(org[1])
    x0, y0 = max(0, x - 2), max(0, y - h - 3)
    x1, y1 = min(img.shape[1], x + w + 2), min(img.shape[0], y + base + 1)
    if x1 > x0 and y1 > y0:
        img[y0:y1, x0:x1] = (img[y0:y1, x0:x1] * 0.35).astype(img.dtype)
    cv2.putText(img, text, (x, y), _FONT, scale, color, thickness, cv2.LINE_AA)


def _object_points(view: AttemptView, cam: Camera) -> Dict[str, np.ndarray]:
    """Each perceived object's point: the pixel perception reported, else its projection."""
    out: Dict[str, np.ndarray] = {}
    if view.perception is None:
        return out
    for obj in view.perception.objects:
        u, v = float(obj.pixel_u), float(obj.pixel_v)
        if u >= 0.0 and v >= 0.0:
            out[obj.id] = np.array([u, v])
            continue
        uv, z = cam.project(from_xyz(obj.pose.position)[None, :])
        if z[0] > 0.0 and np.all(np.isfinite(uv)):
            out[obj.id] = uv[0]
    return out


def _project(cam: Camera, pts: np.ndarray) -> Optional[np.ndarray]:
    uv, z = cam.project(np.asarray(pts, dtype=float))
    if np.any(z <= 0.0) or not np.all(np.isfinite(uv)):
        return None
    return uv


class _Zoom:
    """The part of the image that holds the objects and the hand, scaled to the image size:
    the table fills little of the frame, the fingers would be a few pixels wide."""

    def __init__(self, cam: Camera, points: List[np.ndarray], margin: float = 70.0,
                 max_zoom: float = 3.0) -> None:
        w, h = float(cam.width), float(cam.height)
        pts = np.vstack(points) if points else np.array([[w / 2, h / 2]])
        lo, hi = pts.min(axis=0) - margin, pts.max(axis=0) + margin
        cw = max(hi[0] - lo[0], (hi[1] - lo[1]) * w / h, w / max_zoom)
        cw = min(cw, w)
        ch = cw * h / w
        centre = (lo + hi) / 2.0
        x0 = float(np.clip(centre[0] - cw / 2, 0.0, w - cw))
        y0 = float(np.clip(centre[1] - ch / 2, 0.0, h - ch))
        self.origin, self.scale = np.array([x0, y0]), w / cw
        self.size = (int(cam.width), int(cam.height))
        self.crop = (int(round(x0)), int(round(y0)), int(round(cw)), int(round(ch)))

    def image(self, cv2: Any, img: np.ndarray) -> np.ndarray:
        x, y, cw, ch = self.crop
        part = img[y:y + max(ch, 1), x:x + max(cw, 1)]
        return cv2.resize(part, self.size, interpolation=cv2.INTER_CUBIC)

    def __call__(self, uv: np.ndarray) -> np.ndarray:
        return np.round((np.asarray(uv) - self.origin) * self.scale).astype(np.int32)


def draw_scene(view: AttemptView) -> np.ndarray:
    """The camera image (BGR) with objects, relations and the projected gripper, zoomed to
    the objects and the hand (a view without an attempt record: no gripper, the objects)."""
    cam = view.camera or Camera()
    target = view.record.target_id if view.record is not None else ""
    points = _object_points(view, cam)
    boxes: Dict[str, np.ndarray] = {}
    if view.perception is not None:
        for obj in view.perception.objects:
            size = from_xyz(obj.size)
            if np.all(np.isfinite(size)) and np.all(size > 0.0):
                uv = _project(cam, box_corners(from_xyz(obj.pose.position), size,
                                               _yaw(obj.pose.orientation)))
                if uv is not None:
                    boxes[obj.id] = uv
    g = view.record.grasp if view.record is not None else None
    hand_lines = {name: _project(cam, pts) for name, pts in gripper_lines(
        from_xyz(g.position), from_xyz(g.approach_direction), float(g.gripper_width),
        float(g.wrist_yaw), float(g.approach_height)).items()} if g is not None else {}
    zoom = _Zoom(cam, list(points.values()) + list(boxes.values())
                 + [uv for uv in hand_lines.values() if uv is not None])
    if view.image is not None:
        img = zoom.image(cv2, cv2.cvtColor(view.image, cv2.COLOR_RGB2BGR))
    else:
        img = np.full((cam.height, cam.width, 3), 60, np.uint8)
        _label(cv2, img, "no camera frame recorded", (20, 30), _BGR["dim"], 0.6)
    _label(cv2, img, f"camera image, zoom x{zoom.scale:.1f}", (8, cam.height - 10),
           _BGR["dim"], 0.4)
    # Relations first, under everything else.
    pairs: Dict[Tuple[str, str], List[str]] = {}
    stated = set()
    for subject, relation, obj in view.relations:
        if relation == "Far_From" or subject not in points or obj not in points:
            continue
        if (obj, CONVERSE.get(relation), subject) in stated:
            continue            # the same fact from the other end: labelled once
        stated.add((subject, relation, obj))
        key = tuple(sorted((subject, obj)))
        symmetric = relation in SYMMETRIC
        pairs.setdefault(key, []).append(relation if symmetric or key[0] == subject
                                         else f"{relation} (of {obj})")
    for (a, b), labels in sorted(pairs.items()):
        pa, pb = zoom(points[a]), zoom(points[b])
        cv2.line(img, tuple(pa.tolist()), tuple(pb.tolist()), _BGR["relation"], 1, cv2.LINE_AA)
        mid = (pa + pb) // 2
        for k, text in enumerate(sorted(set(labels))[:3]):
            _label(cv2, img, text, (int(mid[0]) - 30, int(mid[1]) - 4 + 13 * k),
                   _BGR["relation"], 0.38)
    # Objects: box, point, id and category.
    if view.perception is not None:
        for obj in view.perception.objects:
            colour = _BGR["target"] if obj.id == target else _BGR["object"]
            if obj.id in boxes:
                corners = zoom(boxes[obj.id])
                x0, y0 = corners.min(axis=0)
                x1, y1 = corners.max(axis=0)
                cv2.rectangle(img, (int(x0), int(y0)), (int(x1), int(y1)), colour, 1,
                              cv2.LINE_AA)
                org = (int(x0), int(y0) - 6)
            else:
                org = None
            if obj.id in points:
                u, v = zoom(points[obj.id]).tolist()
                cv2.circle(img, (u, v), 4, colour, -1, cv2.LINE_AA)
                org = org or (u + 6, v - 6)
            if org is not None:
                _label(cv2, img, f"{obj.id} ({obj.category})", org, colour, 0.45)
    if g is None:
        return img
    # The planned grasp.
    success = bool(view.record.outcome.success)
    hand = _BGR["ok"] if success else _BGR["fail"]
    approach = hand_lines.pop("approach")
    axis = hand_lines.pop("closing_axis")
    if approach is not None:
        a = zoom(approach)
        cv2.arrowedLine(img, tuple(a[0].tolist()), tuple(a[1].tolist()), _BGR["approach"], 2,
                        cv2.LINE_AA, tipLength=0.15)
        _label(cv2, img, "approach", (int(a[0][0]) + 6, int(a[0][1])), _BGR["approach"], 0.4)
    for name, uv in hand_lines.items():
        if uv is not None:
            cv2.polylines(img, [zoom(uv)], False,
                          _BGR["finger"] if name != "palm" else hand, 2, cv2.LINE_AA)
    if axis is not None:
        ends = zoom(axis)
        mid = tuple(((ends[0] + ends[1]) // 2).tolist())
        for end in ends:
            cv2.arrowedLine(img, tuple(end.tolist()), mid, hand, 2, cv2.LINE_AA,
                            tipLength=0.3)
        right = ends[int(np.argmax(ends[:, 0]))]
        _label(cv2, img, f"open {float(g.gripper_width) * 1e3:.0f} mm",
               (int(right[0]) + 10, int(right[1]) + 4), hand, 0.45)
    return img


def _grasp_type(g: Any) -> str:
    """The grasp type's name by the message's own constants ('?' for a code it lacks)."""
    try:
        return enum_value(g, GRASP_TYPE_NAMES, g.grasp_type, "grasp_type").value
    except ValidationError:
        return "?"


def panel_lines(view: AttemptView, result: str = "") -> List[Tuple[str, str]]:
    """(colour key, text) lines of the side panel."""
    rec = view.record
    g, out, diag = rec.grasp, rec.outcome, rec.diagnosis
    d = from_xyz(g.approach_direction)
    lines: List[Tuple[str, str]] = [
        ("text", f"goal {view.goal_id[:8]}: {view.instruction!r}"),
        ("dim", f"configuration: {view.configuration}"),
        # 1-based, as the terminal's feedback and report number them
        ("text", f"sub-goal {int(rec.subgoal_index) + 1} target {rec.target_id}, attempt "
                 f"{int(rec.attempt) + 1} (retry level {int(rec.retry_level)})"),
        ("dim", f"thought: {rec.thought}"),
        ("head", "planned grasp"),
        ("text", f"{_grasp_type(g)}, opening "
                 f"{float(g.gripper_width) * 1e3:.0f} mm, force {float(g.grip_force):.1f} N"),
        ("text", f"approach ({d[0]:+.2f}, {d[1]:+.2f}, {d[2]:+.2f}), stand-off "
                 f"{float(g.approach_height) * 1e3:.0f} mm, yaw "
                 f"{math.degrees(float(g.wrist_yaw)):.0f} deg"),
        ("head", "active constraints"),
    ]
    lines += [("text", c) for c in view.constraints] or [("dim", "none")]
    lines.append(("head", "outcome"))
    ok = bool(out.success)
    lines.append(("ok" if ok else "fail",
                  f"{'SUCCESS' if ok else 'FAILED'} at {out.phase_reached or '-'}, "
                  f"Q {float(out.quality):.2f}"))
    details = list(getattr(out, "event_details", []) or [])
    if details:
        for e in details:
            other = f" ({e.other_id})" if e.other_id else ""
            lines.append(("text", f"{e.kind}@{e.phase}{other}: {e.detail}"))
    else:
        lines += [("text", e) for e in out.events]
    if diag.failure_type and diag.failure_type != "none":
        lines.append(("fail", f"failure: {diag.failure_type} ({diag.group})"))
        if diag.evidence:
            lines.append(("dim", f"evidence: {diag.evidence}"))
        if diag.correction:
            lines.append(("text", f"correction (level {int(diag.retry_level)}): "
                                  f"{diag.correction}"))
    if result:
        lines += [("head", "goal result"), ("text", result)]
    return lines


def draw_panel(lines: List[Tuple[str, str]], height: int, width: int = PANEL_WIDTH
               ) -> np.ndarray:
    panel = np.full((height, width, 3), _BGR["panel"], np.uint8)
    y = 18
    chars = max(20, (width - 16) // 7)
    for key, text in lines:
        colour = {"head": (120, 200, 255)}.get(key, _BGR.get(key, _BGR["text"]))
        if key == "head":
            y += 6
        for part in textwrap.wrap(text, chars) or [""]:
            if y > height - 8:
                cv2.putText(panel, "...", (8, height - 6), _FONT, 0.4, _BGR["dim"], 1)
                return panel
            cv2.putText(panel, part, (8, y), _FONT, 0.4, colour, 1, cv2.LINE_AA)
            y += 15
    return panel


def attempt_picture(view: AttemptView, result: str = "") -> np.ndarray:
    scene = draw_scene(view)
    return np.hstack([scene, draw_panel(panel_lines(view, result), scene.shape[0])])


def caption(view: AttemptView) -> List[Tuple[str, str]]:
    """(colour key, text) lines under an attempt on the contact sheet: what the side panel
    says first, in numbers the terminal uses."""
    rec = view.record
    g, out, diag = rec.grasp, rec.outcome, rec.diagnosis
    ok = bool(out.success)
    lines = [("text", f"sub-goal {int(rec.subgoal_index) + 1} {rec.target_id}, attempt "
                      f"{int(rec.attempt) + 1} (level {int(rec.retry_level)}): {_grasp_type(g)} "
                      f"{float(g.gripper_width) * 1e3:.0f} mm, {float(g.grip_force):.1f} N"),
             ("ok" if ok else "fail", f"{'SUCCESS' if ok else 'FAILED'} at "
                                      f"{out.phase_reached or '-'}, Q {float(out.quality):.2f}")]
    if diag.failure_type and diag.failure_type != "none":
        lines.append(("fail", f"failure: {diag.failure_type}"
                      + (f"; next: {diag.correction}" if diag.correction else "")))
    return lines


def _text_lines(img: np.ndarray, lines: Sequence[Tuple[str, str]], x: int, y: int, width: int,
                scale: float, step: int, bottom: int) -> int:
    """Write ``lines`` wrapped to ``width`` pixels from (x, y); returns the next free y."""
    char_w = cv2.getTextSize("n", _FONT, scale, 1)[0][0]
    for key, text in lines:
        for part in textwrap.wrap(text, max(20, width // max(1, char_w))) or [""]:
            if y > bottom:
                return y
            cv2.putText(img, part, (x, y), _FONT, scale, _BGR.get(key, _BGR["text"]), 1,
                        cv2.LINE_AA)
            y += step
    return y


def scene_lines(perception: Any, relations: Sequence[Tuple[str, str, str]]
                ) -> List[Tuple[str, str]]:
    """(colour key, text) lines of a scene picture's panel: each perceived object's
    attributes with perception's confidence, then the relations (``Far_From`` counted)."""
    lines: List[Tuple[str, str]] = [("head", f"perception ({perception.backend or '?'}): "
                                             f"{len(perception.objects)} object(s)")]
    if perception.error:
        lines.append(("fail", f"error: {perception.error}"))
    for o in perception.objects:
        a = o.affordance
        lines.append(("text", f"{o.id} ({o.category}): {a.material or 'unknown material'}, "
                              f"{a.type or 'no affordance'}, region {a.graspable_region or '-'}"
                              f", fragility {float(a.fragility):.2f}, confidence "
                              f"{float(o.confidence):.2f}"))
        for w in o.warnings:
            lines.append(("dim", f"  {w}"))
    shown = [r for r in relations if r[1] != "Far_From"]
    lines.append(("head", f"relations: {len(relations)}"
                          + (f" ({len(relations) - len(shown)} Far_From not listed)"
                             if len(shown) != len(relations) else "")))
    lines += [("text", f"{a} {rel} {b}") for a, rel, b in shown] or [("dim", "none")]
    lines += [("dim", f"warning: {w}") for w in perception.warnings]
    return lines


def scene_picture(perception: Any, image: Optional[np.ndarray], camera: Optional[Camera],
                  relations: Sequence[Tuple[str, str, str]]) -> np.ndarray:
    """What the robot perceives before it acts: the camera image with each perceived object
    (point, box, id, category) and the relations drawn on it, and a panel with the perceived
    attributes and their confidence (``agentic-grasp mcp``'s describe_scene)."""
    view = AttemptView("", "", "", 0, None, perception, image, camera, list(relations))
    scene = draw_scene(view)
    return np.hstack([scene, draw_panel(scene_lines(perception, relations), scene.shape[0])])


def contact_sheet(goal: GoalView, scenes: Sequence[np.ndarray],
                  captions: Sequence[Sequence[Tuple[str, str]]], columns: int = 2
                  ) -> np.ndarray:
    """The goal's attempts side by side: each attempt's scene (scaled by SHEET_SCALE) over
    its caption, under a header with the goal's result, all in text of CAPTION_SCALE or
    more, legible at the sheet's own size."""
    small = [cv2.resize(p, None, fx=SHEET_SCALE, fy=SHEET_SCALE, interpolation=cv2.INTER_AREA)
             for p in scenes]
    h, w = small[0].shape[:2]
    step = int(round(34 * CAPTION_SCALE))
    cap_h = 5 * step + 8
    cols = min(columns, len(small))
    rows = (len(small) + cols - 1) // cols
    header = 3 * int(round(36 * CAPTION_SCALE)) + 10
    sheet = np.full((header + rows * (h + cap_h), cols * w, 3), _BGR["panel"], np.uint8)
    for k, (pic, lines) in enumerate(zip(small, captions)):
        r, c = divmod(k, cols)
        top = header + r * (h + cap_h)
        sheet[top:top + h, c * w:(c + 1) * w] = pic
        _text_lines(sheet, lines, c * w + 8, top + h + step, w - 16, CAPTION_SCALE, step,
                    top + h + cap_h - 4)
    ok = goal.result.startswith("succeeded")
    _text_lines(sheet, [("text", f"goal {goal.goal_id[:8]} {goal.instruction!r} "
                                 f"[{goal.configuration}]"),
                        ("ok" if ok else "dim", goal.result)],
                8, int(round(30 * CAPTION_SCALE)) + 4, cols * w - 16, CAPTION_SCALE + 0.05,
                int(round(36 * CAPTION_SCALE)), header - 4)
    return sheet


def write_pictures(path: Union[str, Path], out: Union[str, Path], goal: Optional[str] = None
                   ) -> Dict[str, Any]:
    """Render every attempt of the bag (or of goal ids starting with ``goal``) into ``out``:
    ``<goal8>_attempt<k>.png`` and ``<goal8>_sheet.png``. Returns what was written, where a
    damaged bag stops and the warnings."""
    goals, stopped, warnings = goal_views(path, goal)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: List[str] = []
    for gv in goals:
        scenes, captions = [], []
        for view in gv.attempts:
            last = view is gv.attempts[-1]
            scene = draw_scene(view)
            result = gv.result if last else ""
            pic = np.hstack([scene, draw_panel(panel_lines(view, result), scene.shape[0])])
            name = out / f"{gv.goal_id[:8]}_attempt{view.index}.png"
            cv2.imwrite(str(name), pic, [cv2.IMWRITE_PNG_COMPRESSION, 9])
            written.append(str(name))
            scenes.append(scene)
            captions.append(caption(view))
        if scenes:
            name = out / f"{gv.goal_id[:8]}_sheet.png"
            cv2.imwrite(str(name), contact_sheet(gv, scenes, captions),
                        [cv2.IMWRITE_PNG_COMPRESSION, 9])
            written.append(str(name))
    return {"bag": str(path), "goals": [g.goal_id for g in goals], "written": written,
            "stopped": stopped, "complete": not stopped, "warnings": warnings}
