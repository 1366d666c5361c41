"""Pinhole camera model: intrinsics, extrinsics, projection and depth back-projection.

Conventions follow sensor_msgs/CameraInfo and REP 103/105: the optical frame
``camera_color_optical_frame`` has z forward, x right, y down. ``T_world_cam`` maps points
from the optical frame into ``world`` (panda_link0). Depth images are float32 metres along
the optical z axis (REP 118), 0 or NaN where nothing was hit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Sequence, Tuple

import numpy as np

from agentic_grasp.core.errors import ValidationError


def look_at(eye: Sequence[float], target: Sequence[float],
            up: Sequence[float] = (0.0, 0.0, 1.0)) -> np.ndarray:
    """4x4 pose of an optical frame at ``eye`` whose z axis points at ``target``."""
    eye = np.asarray(eye, dtype=float)
    z = np.asarray(target, dtype=float) - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, np.asarray(up, dtype=float))
    if np.linalg.norm(x) < 1e-9:
        raise ValidationError("camera up vector is parallel to the viewing direction")
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    pose = np.eye(4)
    pose[:3, 0], pose[:3, 1], pose[:3, 2], pose[:3, 3] = x, y, z, eye
    return pose


@dataclass
class Camera:
    """A calibrated pinhole camera (no distortion: plumb_bob with zero coefficients)."""

    width: int = 640
    height: int = 480
    fx: float = 554.26
    fy: float = 554.26
    cx: float = 319.5
    cy: float = 239.5
    T_world_cam: np.ndarray = field(
        default_factory=lambda: look_at((1.15, 0.0, 0.75), (0.5, 0.0, 0.0)))
    frame_id: str = "camera_color_optical_frame"

    @classmethod
    def from_config(cls, cfg: Dict) -> "Camera":
        """Build from a ``camera:`` mapping (width, height, fx, fy, cx, cy, eye, target)."""
        pose = look_at(cfg.get("eye", (1.15, 0.0, 0.75)), cfg.get("target", (0.5, 0.0, 0.0)))
        return cls(width=int(cfg.get("width", 640)), height=int(cfg.get("height", 480)),
                   fx=float(cfg.get("fx", 554.26)), fy=float(cfg.get("fy", 554.26)),
                   cx=float(cfg.get("cx", 319.5)), cy=float(cfg.get("cy", 239.5)),
                   T_world_cam=pose)

    @property
    def K(self) -> np.ndarray:
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def position(self) -> np.ndarray:
        return self.T_world_cam[:3, 3].copy()

    def world_to_cam(self, points: np.ndarray) -> np.ndarray:
        pts = np.atleast_2d(np.asarray(points, dtype=float))
        R, t = self.T_world_cam[:3, :3], self.T_world_cam[:3, 3]
        return (pts - t) @ R

    def cam_to_world(self, points: np.ndarray) -> np.ndarray:
        pts = np.atleast_2d(np.asarray(points, dtype=float))
        R, t = self.T_world_cam[:3, :3], self.T_world_cam[:3, 3]
        return pts @ R.T + t

    def project(self, points_world: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Pixel coordinates (u, v) of world points and their optical-frame depth z."""
        pc = self.world_to_cam(points_world)
        z = pc[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            u = self.fx * pc[:, 0] / z + self.cx
            v = self.fy * pc[:, 1] / z + self.cy
        return np.stack([u, v], axis=1), z

    def pixel_rays(self) -> np.ndarray:
        """Unit ray directions in world frame for every pixel centre, shape (H, W, 3)."""
        u, v = np.meshgrid(np.arange(self.width, dtype=float),
                           np.arange(self.height, dtype=float))
        d = np.stack([(u - self.cx) / self.fx, (v - self.cy) / self.fy,
                      np.ones_like(u)], axis=-1)
        d /= np.linalg.norm(d, axis=-1, keepdims=True)
        return d @ self.T_world_cam[:3, :3].T

    def backproject(self, u: float, v: float, depth: float) -> np.ndarray:
        """World point seen at pixel (u, v) with optical-frame depth ``depth`` (m)."""
        if not np.isfinite(depth) or depth <= 0.0:
            raise ValidationError(f"no valid depth at pixel ({u:.1f}, {v:.1f})")
        pc = np.array([(u - self.cx) * depth / self.fx, (v - self.cy) * depth / self.fy, depth])
        return self.cam_to_world(pc)[0]


def backproject_many(camera: Camera, us: np.ndarray, vs: np.ndarray,
                     zs: np.ndarray) -> np.ndarray:
    """World points of many pixels at once (the vectorised :meth:`Camera.backproject`)."""
    pc = np.stack([(us - camera.cx) * zs / camera.fx, (vs - camera.cy) * zs / camera.fy, zs],
                  axis=-1)
    return camera.cam_to_world(pc)
