"""RViz markers of the grasp the planner is about to execute (``planner/markers``).

One MarkerArray per attempt, in namespace ``planned_grasp``: DELETEALL, the approach arrow from
the pre-grasp pose to the TCP, the two Franka fingers at the commanded opening, and a label
with grasp type, force and width (and, in constraint_mode clearance, the executed candidate
and its clearance to the perceived neighbours).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np
from geometry_msgs.msg import Pose, Quaternion, Vector3
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from agentic_grasp.ros.conversions.fields import point
from agentic_grasp.core.geometry import matrix_to_quaternion
from agentic_grasp.core.arm.closing_axis import closing_axis
from agentic_grasp.core.types import GraspParameters

#: Marker geometry (RViz only): Franka finger plate and pad size, text height (m).
_FINGER_SIZE = (0.012, 0.020, 0.055)
_PAD_BEYOND_TCP = 0.010
_TEXT_HEIGHT = 0.02


def _quaternion(rotation: np.ndarray) -> Quaternion:
    """The rotation as a geometry_msgs Quaternion (core/geometry's, w >= 0)."""
    x, y, z, w = (float(v) for v in matrix_to_quaternion(rotation))
    return Quaternion(x=x, y=y, z=z, w=w)


def grasp_markers(grasp: GraspParameters, header: Header, label: str = "",
                  candidate: Optional[Mapping[str, Any]] = None) -> MarkerArray:
    """The planned grasp for RViz: DELETEALL, approach arrow, two fingers, a label (with the
    chosen candidate and its clearance to the perceived neighbours, in clearance mode)."""
    p = np.asarray(grasp.position, dtype=float)
    a = np.asarray(grasp.approach, dtype=float)
    c = closing_axis(a, grasp.wrist_yaw)
    rotation = np.column_stack([c, np.cross(a, c), a])      # x: closing, z: approach
    ns = "planned_grasp"
    markers = [Marker(header=header, ns=ns, id=0, action=Marker.DELETEALL)]
    standoff = max(float(grasp.approach_height), 0.05)
    markers.append(Marker(header=header, ns=ns, id=1, type=Marker.ARROW, action=Marker.ADD,
                          pose=Pose(), points=[point(p - standoff * a), point(p)],
                          scale=Vector3(x=0.008, y=0.016, z=0.025),
                          color=ColorRGBA(r=0.1, g=0.9, b=0.3, a=1.0)))
    along = _FINGER_SIZE[2] / 2.0 - _PAD_BEYOND_TCP
    for index, side in ((2, 1.0), (3, -1.0)):
        centre = p + side * (grasp.width / 2.0 + _FINGER_SIZE[0] / 2.0) * c - along * a
        markers.append(Marker(header=header, ns=ns, id=index, type=Marker.CUBE,
                              action=Marker.ADD,
                              pose=Pose(position=point(centre),
                                        orientation=_quaternion(rotation)),
                              scale=Vector3(x=_FINGER_SIZE[0], y=_FINGER_SIZE[1],
                                            z=_FINGER_SIZE[2]),
                              color=ColorRGBA(r=0.85, g=0.85, b=0.9, a=0.9)))
    text = (f"{label}{grasp.grasp_type.value}, {grasp.force:.1f} N, "
            f"{grasp.width * 1e3:.0f} mm")
    if candidate:
        clear = candidate.get("clearance_m")
        text += (f"\n{candidate.get('label', '')}: clearance "
                 + ("free (no neighbour near)" if clear is None else f"{clear * 1e3:.0f} mm")
                 + ("" if candidate.get("collision_free") else " NOT collision-free")
                 + (f" ({candidate['nearest']})" if candidate.get("nearest") else ""))
    markers.append(Marker(header=header, ns=ns, id=4, type=Marker.TEXT_VIEW_FACING,
                          action=Marker.ADD,
                          pose=Pose(position=point(p + np.array([0.0, 0.0, 0.08]))),
                          scale=Vector3(z=_TEXT_HEIGHT),
                          color=ColorRGBA(r=1.0, g=1.0, b=1.0, a=1.0), text=text))
    return MarkerArray(markers=markers)


__all__ = ["grasp_markers"]
