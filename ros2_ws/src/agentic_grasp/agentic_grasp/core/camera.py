"""Pinhole camera model: intrinsics, extrinsics, projection and depth back-projection.

Conventions follow sensor_msgs/CameraInfo and REP 103/105: the optical frame
``camera_color_optical_frame`` has z forward, x right, y down. ``T_world_cam`` maps points
from the optical frame into ``world`` (panda_link0). Depth images are float32 metres along
the optical z axis (REP 118), 0 or NaN where nothing was hit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Dict, Sequence, Tuple

import numpy as np

from agentic_grasp.core import paths
from agentic_grasp.core.config import load_yaml, reject_unknown
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.numeric import cross_list

#: Keys of config/camera.yaml's ``camera:`` mapping.
CAMERA_KEYS = ("width", "height", "fx", "fy", "cx", "cy", "eye", "target", "frame_id")


@lru_cache(maxsize=1)
def _fixed_camera_items() -> Tuple[Tuple[str, Any], ...]:
    path = paths.config_file("camera")
    spec = (load_yaml(path) or {}).get("camera")
    if not isinstance(spec, dict):
        raise ConfigError(f"{path}: no 'camera:' mapping")
    reject_unknown(str(path), spec, CAMERA_KEYS)
    missing = [k for k in CAMERA_KEYS if k not in spec]
    if missing:
        raise ConfigError(f"{path}: camera lacks {', '.join(missing)}")
    return tuple((k, tuple(spec[k]) if isinstance(spec[k], list) else spec[k])
                 for k in CAMERA_KEYS)


def fixed_camera_spec() -> Dict[str, Any]:
    """The fixed camera of the cell as config/camera.yaml defines it (a fresh dict; eye and
    target as lists): the one place its intrinsics and pose are written down.
    The file is read once per process."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in _fixed_camera_items()}


def _fixed(key: str, kind: Callable[[Any], Any]) -> Callable[[], Any]:
    return lambda: kind(fixed_camera_spec()[key])


def look_at(eye: Sequence[float], target: Sequence[float],
            up: Sequence[float] = (0.0, 0.0, 1.0)) -> np.ndarray:
    """4x4 pose of an optical frame at ``eye`` whose z axis points at ``target``."""
    eye = np.asarray(eye, dtype=float)
    z = np.asarray(target, dtype=float) - eye
    z /= np.linalg.norm(z)
    x = np.array(cross_list(z.tolist(), np.asarray(up, dtype=float).tolist()))
    if np.linalg.norm(x) < 1e-9:
        raise ValidationError("camera up vector is parallel to the viewing direction")
    x /= np.linalg.norm(x)
    y = np.array(cross_list(z.tolist(), x.tolist()))
    pose = np.eye(4)
    pose[:3, 0], pose[:3, 1], pose[:3, 2], pose[:3, 3] = x, y, z, eye
    return pose


@dataclass
class Camera:
    """A calibrated pinhole camera (no distortion: plumb_bob with zero coefficients)."""

    # Defaults: the fixed camera of config/camera.yaml (fixed_camera_spec).
    width: int = field(default_factory=_fixed("width", int))
    height: int = field(default_factory=_fixed("height", int))
    fx: float = field(default_factory=_fixed("fx", float))
    fy: float = field(default_factory=_fixed("fy", float))
    cx: float = field(default_factory=_fixed("cx", float))
    cy: float = field(default_factory=_fixed("cy", float))
    T_world_cam: np.ndarray = field(
        default_factory=lambda: look_at(fixed_camera_spec()["eye"],
                                        fixed_camera_spec()["target"]))
    frame_id: str = field(default_factory=_fixed("frame_id", str))

    @classmethod
    def from_config(cls, cfg: Dict) -> "Camera":
        """Build from a ``camera:`` mapping (width, height, fx, fy, cx, cy, eye, target); a
        key it lacks takes the fixed camera's value."""
        spec = {**fixed_camera_spec(), **cfg}
        pose = look_at(spec["eye"], spec["target"])
        return cls(width=int(spec["width"]), height=int(spec["height"]),
                   fx=float(spec["fx"]), fy=float(spec["fy"]), cx=float(spec["cx"]),
                   cy=float(spec["cy"]), T_world_cam=pose, frame_id=str(spec["frame_id"]))

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
