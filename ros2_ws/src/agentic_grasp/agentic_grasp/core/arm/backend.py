"""The executor's arm-backend interface and the request checks it applies before any motion.

Backends (simulator over ROS, simulator in-process, MoveIt) implement :class:`ArmBackend`;
the executor node picks one by its ``arm_backend`` parameter. Error codes mirror
``agentic_grasp_interfaces/action/ExecuteGrasp`` result constants.
"""
from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Dict, Optional

from agentic_grasp.core.errors import UnknownTargetError, ValidationError, WorkspaceError
from agentic_grasp.core.arm.observation import ArmObservation
from agentic_grasp.core.types import (GRIPPER_MAX_FORCE_N, GRIPPER_MAX_WIDTH_M, GraspParameters,
                                      Phase)

LOG = logging.getLogger(__name__)

PHASES = (Phase.APPROACH, Phase.CLOSE, Phase.LIFT)


class ArmError(IntEnum):
    NONE = 0
    INVALID_PARAMETERS = 1
    UNKNOWN_TARGET = 2
    OUT_OF_WORKSPACE = 3
    FORCE_LIMIT = 4
    WIDTH_LIMIT = 5
    CANCELED = 6
    BACKEND_UNAVAILABLE = 7
    BACKEND_FAILURE = 8
    BUSY = 9


@dataclass
class ArmResult:
    """What one ExecuteGrasp request produced: what the arm's sensors observed
    (:mod:`.observation`), or an error code and why."""

    error: ArmError
    message: str = ""
    observation: Optional[ArmObservation] = None

    @property
    def ran(self) -> bool:
        return self.error == ArmError.NONE and self.observation is not None


@dataclass
class ExecutorLimits:
    """Hard limits checked before a grasp reaches any arm (config/executor.yaml)."""

    max_force_n: float = field(default=GRIPPER_MAX_FORCE_N, metadata={
        "description": "Largest grip force a request may ask for (N); the gripper's limit"})
    min_force_n: float = field(default=1.0, metadata={
        "description": "Smallest grip force a request may ask for (N)"})
    max_width_m: float = field(default=GRIPPER_MAX_WIDTH_M, metadata={
        "description": "Largest gripper opening a request may ask for (m); the gripper's "
                       "stroke"})
    min_speed_mps: float = field(default=0.005, metadata={
        "description": "Slowest arm speed a request may ask for (m/s)"})
    max_speed_mps: float = field(default=0.5, metadata={
        "description": "Fastest arm speed a request may ask for (m/s)"})
    max_approach_height_m: float = field(default=0.30, metadata={
        "description": "Largest pre-grasp stand-off along -approach (m)"})
    workspace_min: tuple = field(default=(0.15, -0.45, -0.005), metadata={
        "description": "Lower corner [x, y, z] of the box the grasp point must lie in (m, "
                       "world)"})
    workspace_max: tuple = field(default=(0.85, 0.45, 0.60), metadata={
        "description": "Upper corner [x, y, z] of the box the grasp point must lie in (m, "
                       "world)"})

    @classmethod
    def from_dict(cls, data: Dict) -> "ExecutorLimits":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("workspace_min", "workspace_max"):
            if key in known:
                known[key] = tuple(float(v) for v in known[key])
        return cls(**known)


def check_request(target_id: str, grasp: GraspParameters,
                  limits: ExecutorLimits) -> Optional[ArmResult]:
    """A rejection for a request that must not reach the arm, or None when it may.

    GraspParameters already refuses NaN and infinite values at construction; this adds the
    gripper's and workspace's physical limits.
    """
    if not target_id:
        return ArmResult(ArmError.UNKNOWN_TARGET, "target_id is empty")
    if not limits.min_force_n <= grasp.force <= limits.max_force_n:
        return ArmResult(ArmError.FORCE_LIMIT,
                         f"grip force {grasp.force:.1f} N outside [{limits.min_force_n}, "
                         f"{limits.max_force_n}] N")
    if not 0.0 <= grasp.width <= limits.max_width_m + 1e-9:
        return ArmResult(ArmError.WIDTH_LIMIT,
                         f"gripper width {grasp.width * 1000:.1f} mm outside [0, "
                         f"{limits.max_width_m * 1000:.0f}] mm")
    if not limits.min_speed_mps <= grasp.speed <= limits.max_speed_mps:
        return ArmResult(ArmError.INVALID_PARAMETERS,
                         f"speed {grasp.speed} m/s outside [{limits.min_speed_mps}, "
                         f"{limits.max_speed_mps}] m/s")
    if not 0.0 <= grasp.approach_height <= limits.max_approach_height_m:
        return ArmResult(ArmError.INVALID_PARAMETERS,
                         f"approach height {grasp.approach_height} m outside [0, "
                         f"{limits.max_approach_height_m}] m")
    lo, hi = limits.workspace_min, limits.workspace_max
    for axis, value, a, b in zip("xyz", grasp.position, lo, hi):
        if not a <= value <= b:
            return ArmResult(ArmError.OUT_OF_WORKSPACE,
                             f"grasp position {axis} = {value:.3f} m outside the workspace "
                             f"[{a}, {b}] m")
    if not math.isfinite(grasp.wrist_yaw):
        return ArmResult(ArmError.INVALID_PARAMETERS, "wrist_yaw is not finite")
    return None


def error_for_exception(exc: Exception) -> ArmResult:
    """Map the core's typed exceptions onto executor error codes."""
    if isinstance(exc, UnknownTargetError):
        return ArmResult(ArmError.UNKNOWN_TARGET, str(exc))
    if isinstance(exc, WorkspaceError):
        return ArmResult(ArmError.OUT_OF_WORKSPACE, str(exc))
    if isinstance(exc, ValidationError):
        return ArmResult(ArmError.INVALID_PARAMETERS, str(exc))
    LOG.exception("arm backend failed")
    return ArmResult(ArmError.BACKEND_FAILURE, f"{type(exc).__name__}: {exc}")


@dataclass
class WristCameraInfo:
    """What the planner may know of a wrist camera: its intrinsics (``camera``, a
    core.camera.Camera whose pose is meaningless), its nearest valid depth and its mount
    (``T_tcp_cam``, 4x4: the optical frame in the TCP frame; None when not reported)."""

    camera: Any
    min_range_m: float = 0.0
    T_tcp_cam: Any = None


@dataclass
class ViewResult:
    """What one wrist-camera view request produced (:meth:`ArmBackend.move_camera_to`).

    ``camera`` is the wrist camera at the pose the arm reached (forward kinematics of the
    joints, which the robot knows), None when the view was not reached; ``clearance_m`` the
    hand's smallest gap to the table or an object there, ``nearest`` what it is;
    ``reached_ns`` when the arm reached it (ns, the arm's clock; 0 = not reported): a wrist
    capture at or after it shows the view.
    """

    error: ArmError
    message: str = ""
    camera: Any = None
    duration_s: float = 0.0
    clearance_m: float = float("nan")
    nearest: str = ""
    reached_ns: int = 0

    @property
    def reached(self) -> bool:
        return self.error == ArmError.NONE and self.camera is not None


PhaseCallback = Callable[[Phase, int, int], None]
CancelCheck = Callable[[], bool]


class ArmBackend(ABC):
    """One grasp attempt on some arm: approach, close, lift, with feedback and cancel."""

    name: str = "abstract"

    @abstractmethod
    def execute(self, target_id: str, grasp: GraspParameters, on_phase: PhaseCallback,
                is_canceled: CancelCheck) -> ArmResult:
        """Run the attempt; call on_phase(phase, index, count) as each phase starts and stop
        (leaving the object and the gripper safe) as soon as is_canceled() returns True."""

    def wrist_camera(self) -> Optional[WristCameraInfo]:
        """The wrist camera's model, or None when this arm carries none: then the planner
        cannot look from another viewpoint."""
        return None

    def move_camera_to(self, T_world_cam: Any, is_canceled: CancelCheck) -> ViewResult:
        """Move the arm so the wrist camera's optical frame is at ``T_world_cam`` (4x4)."""
        return ViewResult(ArmError.BACKEND_UNAVAILABLE,
                          f"the {self.name} arm backend has no wrist camera")

    def close(self) -> None:
        """Release resources (connections, planning scene)."""


class InProcessSimArm(ArmBackend):
    """The analytical simulator called directly (benchmarks and tests without ROS)."""

    name = "sim_inprocess"

    def __init__(self, simulator) -> None:
        self.simulator = simulator

    def execute(self, target_id: str, grasp: GraspParameters, on_phase: PhaseCallback,
                is_canceled: CancelCheck) -> ArmResult:
        try:
            self.simulator.validate(target_id, grasp)
            attempt = self.simulator.begin_attempt(target_id, grasp)
        except Exception as exc:  # noqa: BLE001 - mapped to a typed error code
            return error_for_exception(exc)
        observation = None
        for index, phase in enumerate(PHASES, start=1):
            if is_canceled():
                self.simulator.abort(attempt)
                return ArmResult(ArmError.CANCELED, f"canceled before {phase.value}",
                                 observation)
            on_phase(phase, index, len(PHASES))
            self.simulator.advance(attempt, phase)        # the truth stays in the simulator
            observation = self.simulator.last_observation
            if self.simulator.attempt_finished(attempt):
                break
        return ArmResult(ArmError.NONE, "attempt executed", observation)

    def wrist_camera(self) -> Optional[WristCameraInfo]:
        mount = self.simulator.wrist_camera
        return WristCameraInfo(mount.intrinsics(), mount.min_range_m, mount.T_tcp_cam)

    def move_camera_to(self, T_world_cam: Any, is_canceled: CancelCheck) -> ViewResult:
        if is_canceled():
            return ViewResult(ArmError.CANCELED, "canceled before the view motion")
        try:
            motion = self.simulator.move_camera_to(T_world_cam)
        except Exception as exc:  # noqa: BLE001 - mapped to a typed error code
            res = error_for_exception(exc)
            return ViewResult(res.error, res.message)
        if not motion.ok:
            error = (ArmError.OUT_OF_WORKSPACE if motion.q is None
                     else ArmError.INVALID_PARAMETERS)
            return ViewResult(error, motion.message, clearance_m=motion.clearance_m,
                              nearest=motion.nearest)
        return ViewResult(ArmError.NONE, motion.message, motion.camera, motion.duration_s,
                          motion.clearance_m, motion.nearest)
