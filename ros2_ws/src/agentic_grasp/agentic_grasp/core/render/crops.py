"""Square crops of an object from a rendered or camera image, as a visual embedding takes them.

:func:`crop_object` cuts around an object's visible pixels in a :class:`RenderResult`,
:func:`crop_box` around any pixel box (the planner's crop of the camera image at a perceived
box); with the camera that took the image, both cut in the object-facing view, the image
panned until the object stands on the middle column (:func:`_facing_homography`).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import cv2
import numpy as np

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.render.raycast import RenderResult


def object_bbox(result: RenderResult, index: int) -> Optional[Tuple[int, int, int, int]]:
    """(u_min, v_min, u_max, v_max), inclusive, of the visible pixels of object ``index``."""
    mask = result.instance == index
    cols = np.flatnonzero(mask.any(axis=0))
    if cols.size == 0:
        return None
    rows = np.flatnonzero(mask.any(axis=1))
    return int(cols[0]), int(rows[0]), int(cols[-1]), int(rows[-1])


def crop_object(result: RenderResult, index: int, size: int = 64,
                pad: float = 0.15, camera: Optional[Camera] = None) -> Optional[np.ndarray]:
    """Square RGB crop (size x size, uint8) around object ``index``, or None if not visible.

    The square's side is the larger side of the visible bounding box grown by ``pad`` of it
    on each side, centred on the box; parts outside the image repeat the border pixels.
    Resized with area interpolation, as a visual-embedding backend expects a fixed size.
    With ``camera`` (the camera that rendered ``result``) the crop is cut in the object-facing
    view of :func:`crop_box`.
    """
    if size < 1 or not math.isfinite(pad) or pad < 0.0:
        raise ValidationError(f"crop size must be >= 1 and pad >= 0, got {size}, {pad}")
    box = object_bbox(result, index)
    if box is None:
        return None
    return crop_box(result.rgb, box, size=size, pad=pad, camera=camera)


def crop_box(rgb: np.ndarray, box: Tuple[int, int, int, int], size: int = 64,
             pad: float = 0.15, camera: Optional[Camera] = None) -> np.ndarray:
    """Square crop (size x size) of ``rgb`` around the inclusive pixel box ``box``.

    The crop :func:`crop_object` makes from a render, made from any box: the planner crops
    the camera image at the perceived box with it, so a camera query and a knowledge-base
    entry are cut and scaled the same way.

    ``camera`` (the camera that took ``rgb``): cut the crop in the object-facing view, the
    image the same camera would take turned about the vertical through its optical centre
    until the box centre lies on its middle column (:func:`_facing_homography`). Without it,
    the crop is cut from ``rgb`` as it is.
    """
    if size < 1 or not math.isfinite(pad) or pad < 0.0:
        raise ValidationError(f"crop size must be >= 1 and pad >= 0, got {size}, {pad}")
    u_min, v_min, u_max, v_max = (int(b) for b in box)
    if u_max < u_min or v_max < v_min:
        raise ValidationError(f"empty crop box {box}")
    if camera is not None:
        return _facing_crop(rgb, (u_min, v_min, u_max, v_max), size, pad, camera)
    side = max(u_max - u_min + 1, v_max - v_min + 1) * (1.0 + 2.0 * pad)
    half = max(1, int(round(side / 2.0)))
    cu, cv = (u_min + u_max + 1) // 2, (v_min + v_max + 1) // 2
    a0, a1, b0, b1 = cu - half, cu + half, cv - half, cv + half
    h, w = rgb.shape[:2]
    border = max(0, -a0, -b0, a1 - w, b1 - h)
    image = rgb
    if border:
        image = cv2.copyMakeBorder(image, border, border, border, border, cv2.BORDER_REPLICATE)
    patch = image[b0 + border:b1 + border, a0 + border:a1 + border]
    interp = cv2.INTER_AREA if patch.shape[0] >= size else cv2.INTER_LINEAR
    return np.ascontiguousarray(cv2.resize(patch, (size, size), interpolation=interp))


def _facing_homography(camera: Camera, u: float, v: float) -> np.ndarray:
    """3x3 map from pixels of the object-facing view to pixels of ``camera``'s image.

    Why: an object's vertical edges converge towards the vertical vanishing point, which for
    this downward-looking camera lies below the image on its middle column; an object off that
    column is therefore drawn leaning (about 9 deg at the Table IV query's place, 7.6 cm of
    image off centre), and a crop-level descriptor reads the lean as another silhouette and
    other edge orientations. Turning the camera about the world vertical through its optical
    centre (a pan) changes no ray, only which image pixel a ray lands on: the new image is an
    exact homography of the old one, K R^T Rz(theta) R K^-1, for any scene. Panned until the
    pixel (u, v) lies on the middle column, the object is seen as one standing on that column
    is: upright. What a pan cannot undo is physical: the object is still seen from its own
    side (azimuth) and height (elevation). A camera looking straight down has no pan to make
    (every ray's lean is radial): the identity then.
    """
    K = np.array([[camera.fx, 0.0, camera.cx], [0.0, camera.fy, camera.cy], [0.0, 0.0, 1.0]])
    R = np.asarray(camera.T_world_cam, dtype=float)[:3, :3]          # camera -> world
    ray = R @ np.array([(u - camera.cx) / camera.fx, (v - camera.cy) / camera.fy, 1.0])
    axis = R[:, 2]
    if math.hypot(axis[0], axis[1]) < 1e-6 or math.hypot(ray[0], ray[1]) < 1e-6:
        return np.eye(3)
    theta = math.atan2(ray[1], ray[0]) - math.atan2(axis[1], axis[0])
    c, s = math.cos(theta), math.sin(theta)
    Rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return K @ R.T @ Rz @ R @ np.linalg.inv(K)


def _facing_crop(rgb: np.ndarray, box: Tuple[int, int, int, int], size: int, pad: float,
                 camera: Camera) -> np.ndarray:
    """crop_box in the object-facing view (see :func:`crop_box`): the square of the same
    side (the box's larger side grown by ``pad``, scaled by the view change's local
    magnification), centred on the box centre's image in the facing view, sampled through
    the homography at no less than the camera's resolution and area-resized to ``size``.
    The square's side comes from the camera's box, not from the box's corners mapped into
    the facing view: those outline the leaning silhouette, which is wider than the upright
    one by its height times the lean."""
    u_min, v_min, u_max, v_max = box
    cu, cv = (u_min + u_max) / 2.0, (v_min + v_max) / 2.0       # pixel centres are integers
    to_camera = _facing_homography(camera, cu, cv)
    to_facing = np.linalg.inv(to_camera)

    def facing(u: float, v: float) -> np.ndarray:
        p = to_facing @ np.array([u, v, 1.0])
        return p[:2] / p[2]

    centre = facing(cu, cv)
    jac = np.column_stack([(facing(cu + 0.5, cv) - facing(cu - 0.5, cv)),
                           (facing(cu, cv + 0.5) - facing(cu, cv - 0.5))])
    magnification = math.sqrt(abs(float(np.linalg.det(jac))))
    side = max(u_max - u_min + 1, v_max - v_min + 1) * (1.0 + 2.0 * pad) * magnification
    n = max(int(size), int(math.ceil(side)))
    step = side / n
    # output pixel j (centre j) covers facing-view [left + j step, left + (j + 1) step]
    corner = centre - side / 2.0 + 0.5 * step
    to_patch = np.array([[step, 0.0, corner[0]], [0.0, step, corner[1]], [0.0, 0.0, 1.0]])
    patch = cv2.warpPerspective(rgb, to_camera @ to_patch, (n, n),
                                flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                borderMode=cv2.BORDER_REPLICATE)
    if n != size:
        patch = cv2.resize(patch, (size, size), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(patch)
