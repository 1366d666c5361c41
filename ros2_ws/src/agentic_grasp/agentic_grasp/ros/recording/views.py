"""What one attempt of a recording shows: the messages that belong to it, read from the bag
as plain values (``agentic-grasp show`` draws them: show.py; the MCP bridge draws the live
graph's last attempt with the same views).

Which messages belong to an attempt (recorded order, within the goal's time span): the last
perception answer before the attempt record (the planner re-perceives after each failed
attempt, before planning the next, so that is the scene the attempt was planned on), the
last colour frame before that answer, and the last scene graph and constraint summary of
the scene-graph node before the record.

The camera model is the recorded CameraInfo's intrinsics and the extrinsics of
config/perception.yaml (the fixed camera; on a robot TF would give them). Fields are read by
name, so messages with fields added later read unchanged.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from agentic_grasp.core.camera import Camera, look_at
from agentic_grasp.core.config import node_params
from agentic_grasp.ros.recording.bag.reader import BagReader, goals_before, stamp_ns

_LOG = logging.getLogger(__name__)

COLOR_TOPIC = "/camera/color/image_raw"
INFO_TOPIC = "/camera/color/camera_info"
PERCEPTION_TOPIC = "/perception/result"
ATTEMPTS_TOPIC = "/planner/attempts"
GRAPH_TOPIC = "/scene_graph/graph"
SG_MARKERS_TOPIC = "/scene_graph/markers"
FEEDBACK_TOPIC = "/grasp_object/_action/feedback"
GOAL_LOG_TOPIC = "/planner/goal_log"
TOPICS = [COLOR_TOPIC, INFO_TOPIC, PERCEPTION_TOPIC, ATTEMPTS_TOPIC, GRAPH_TOPIC,
          SG_MARKERS_TOPIC, FEEDBACK_TOPIC, GOAL_LOG_TOPIC]

# ---- what one attempt shows -----------------------------------------------------------------

@dataclass
class AttemptView:
    """Everything one attempt's picture draws (plain values, no messages)."""

    goal_id: str
    instruction: str
    configuration: str
    index: int                          # attempt number within the goal, 0-based
    record: Any                         # AttemptRecord
    perception: Any = None              # PerceptionResult the attempt was planned on
    image: Optional[np.ndarray] = None  # HxWx3 RGB
    camera: Optional[Camera] = None
    relations: List[Tuple[str, str, str]] = field(default_factory=list)
    constraints: List[str] = field(default_factory=list)


@dataclass
class GoalView:
    goal_id: str
    instruction: str
    configuration: str
    result: str
    attempts: List[AttemptView] = field(default_factory=list)


def _last_before(items: Sequence[Tuple[int, Any]], stamp: int, since: int = -1) -> Any:
    best = None
    for t, msg in items:
        if t > stamp:
            break
        if t >= since:
            best = msg
    return best


def rgb_image(msg: Any) -> Optional[np.ndarray]:
    """HxWx3 RGB of an rgb8 / bgr8 / mono8 Image (None for other encodings)."""
    data = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    if h == 0 or w == 0 or data.size < h * step:
        return None
    rows = data[:h * step].reshape(h, step)
    if msg.encoding in ("rgb8", "bgr8"):
        img = rows[:, :w * 3].reshape(h, w, 3)
        return img[:, :, ::-1].copy() if msg.encoding == "bgr8" else img.copy()
    if msg.encoding == "mono8":
        return np.repeat(rows[:, :w, None], 3, axis=2)
    return None


def default_extrinsics() -> np.ndarray:
    """T_world_cam from config/perception.yaml's camera.eye / camera.target."""
    try:
        params = node_params("perception")
        eye = params.get("camera.eye") or params.get("camera", {}).get("eye")
        target = params.get("camera.target") or params.get("camera", {}).get("target")
        if eye and target:
            return look_at(eye, target)
    except Exception as exc:  # noqa: BLE001 - no config: the default camera of core.camera
        _LOG.debug("camera extrinsics from config failed: %s", exc)
    return Camera().T_world_cam


def camera_of(info: Any, T_world_cam: np.ndarray) -> Camera:
    if info is None:
        return Camera(T_world_cam=T_world_cam)
    k = [float(v) for v in info.k]
    return Camera(width=int(info.width), height=int(info.height), fx=k[0], fy=k[4],
                  cx=k[2], cy=k[5], T_world_cam=T_world_cam)


def constraint_summary(markers: Any) -> List[str]:
    """The lines of the scene-graph node's constraint summary marker ([] when none)."""
    if markers is None:
        return []
    for m in markers.markers:
        if m.ns == "constraint_labels" and m.text:
            return [line for line in m.text.splitlines() if line]
    return []


def goal_views(path: Union[str, Path], goal: Optional[str] = None
               ) -> Tuple[List[GoalView], str, List[str]]:
    """(goals with their attempts, where a damaged bag stops or "", warnings)."""
    reader = BagReader(path)
    t = reader.by_topic(TOPICS)
    warnings = [f"{topic}: {why}" for topic, why in sorted(reader.undecodable.items())]
    logs = {log.goal_id: log for _, log in t.get(GOAL_LOG_TOPIC, [])}
    spans: Dict[str, List[int]] = {}
    for stamp, fb in t.get(FEEDBACK_TOPIC, []):
        gid = bytes(np.asarray(fb.goal_id.uuid, dtype=np.uint8)).hex()
        span = spans.setdefault(gid, [stamp, stamp])
        span[0], span[1] = min(span[0], stamp), max(span[1], stamp)
    for gid, log in logs.items():
        if gid in spans:
            spans[gid][0] = min(spans[gid][0], stamp_ns(log.start_stamp))
    before = goals_before(t, logs, spans, [rec for _, rec in t.get(ATTEMPTS_TOPIC, [])])
    attempts: Dict[str, List[Tuple[int, Any]]] = {}
    for stamp, rec in t.get(ATTEMPTS_TOPIC, []):
        if rec.goal_id in before:
            continue
        # A record that reached the bag late, from the attempt history (qos.EVENT_HISTORY),
        # is placed at the time it was published: its frame and perception are the ones
        # before that.
        sent = stamp_ns(rec.header.stamp)
        attempts.setdefault(rec.goal_id, []).append((min(stamp, sent) if sent else stamp, rec))
    if not t.get(GOAL_LOG_TOPIC) and attempts:
        warnings.append(f"the bag has no goal log ({GOAL_LOG_TOPIC}): configurations and "
                        "results are not known, the attempts are shown")
    T = default_extrinsics()
    info = t[INFO_TOPIC][-1][1] if t.get(INFO_TOPIC) else None
    if info is None:
        warnings.append("no camera_info in the bag: the default intrinsics are used")
    camera = camera_of(info, T)
    views = []
    for gid, recs in attempts.items():
        if goal and not gid.startswith(goal):
            continue
        log = logs.get(gid)
        since = spans[gid][0] if gid in spans else -1     # no feedback: the whole bag
        if log is not None:
            result = ("succeeded" if log.success else f"failed (error {log.error_code})") + \
                f": {log.message}"
        else:
            result = "result not recorded (no goal log)"
        gv = GoalView(gid, log.instruction if log is not None else "",
                      log.configuration if log is not None else "?", result)
        for k, (stamp, rec) in enumerate(recs):
            perception = _last_before(t.get(PERCEPTION_TOPIC, []), stamp, since)
            p_stamp = next((s for s, m in t.get(PERCEPTION_TOPIC, []) if m is perception),
                           stamp)
            frame = _last_before(t.get(COLOR_TOPIC, []), p_stamp) or \
                _last_before(t.get(COLOR_TOPIC, []), stamp)
            graph = _last_before(t.get(GRAPH_TOPIC, []), stamp, since)
            markers = _last_before(t.get(SG_MARKERS_TOPIC, []), stamp, since)
            if not gv.instruction and perception is not None:
                gv.instruction = perception.instruction
            gv.attempts.append(AttemptView(
                gid, gv.instruction, gv.configuration, k, rec, perception,
                rgb_image(frame) if frame is not None else None, camera,
                [(r.subject_id, r.relation, r.object_id) for r in graph.relations]
                if graph is not None else [],
                constraint_summary(markers)))
        views.append(gv)
    if goal and not views:
        warnings.append(f"no goal with attempts matches {goal!r}")
    return views, reader.state.stopped, warnings
