"""Domain vocabulary shared by every core module (paper Sec. III and IV).

Frames and units, everywhere in core:
- ``world``: the Panda base frame ``panda_link0``; x forward, y left, z up, metres.
  The table top is the plane z = 0 (the robot stands on the table).
- Object positions are the centre of the object's axis-aligned (in its own frame)
  bounding box; ``size`` is the full extent (x, y, z) in the object's frame, which is
  rotated by ``yaw`` about world z.
- Forces in newtons, masses in kilograms, speeds in metres per second, angles in radians.

Nothing here imports ROS; the ROS message conversion lives in ``agentic_grasp.ros.conversions``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.errors import ValidationError

#: Franka Hand: two fingers, 0 to 0.04 m each.
GRIPPER_MAX_WIDTH_M = 0.08
#: Upper bound accepted for a commanded grip force (N); see docs/paper_facts.md and
#: config/executor.yaml.
GRIPPER_MAX_FORCE_N = 140.0


class AffordanceType(str, Enum):
    """The paper's 8 primary affordance types."""

    GRASPABLE_BODY = "Graspable_Body"
    GRASPABLE_HANDLE = "Graspable_Handle"
    GRASPABLE_EDGE = "Graspable_Edge"
    PINCHABLE = "Pinchable"
    WRAPPABLE = "Wrappable"
    FRAGILE = "Fragile"
    TOOL_HANDLE = "Tool_Handle"
    CLAMPABLE = "Clampable"

    @classmethod
    def parse(cls, value: str) -> "AffordanceType":
        try:
            return cls(value)       # the value itself: one dict look-up (10^6 fleet records)
        except ValueError:
            pass
        for member in cls:
            if value == member.value or value.upper() == member.name:
                return member
        raise ValidationError(
            f"unknown affordance type {value!r}; expected one of "
            f"{', '.join(m.value for m in cls)}")


class GraspType(str, Enum):
    """tau in the paper: power (wrap the body), pinch (finger tips), side (lateral)."""

    POWER = "power"
    PINCH = "pinch"
    SIDE = "side"

    @classmethod
    def parse(cls, value: str) -> "GraspType":
        try:
            return cls(value.lower())
        except (ValueError, AttributeError):
            raise ValidationError(
                f"unknown grasp type {value!r}; expected power, pinch or side") from None


class ObjectState(str, Enum):
    """Physical state of an object (scene-graph node attribute)."""

    EMPTY = "empty"
    FILLED = "filled"
    STACKED = "stacked"

    @classmethod
    def parse(cls, value: str) -> "ObjectState":
        try:
            return cls(value.lower())
        except (ValueError, AttributeError):
            raise ValidationError(
                f"unknown object state {value!r}; expected empty, filled or stacked") from None


class Shape(str, Enum):
    """Primitive used for collision, contact width and rendering."""

    BOX = "box"
    CYLINDER = "cylinder"  # axis along object z
    SPHERE = "sphere"


class FailureGroup(str, Enum):
    PRE_CONTACT = "pre_contact"
    CONTACT = "contact"
    POST_GRASP = "post_grasp"
    TASK_LEVEL = "task_level"


class FailureType(str, Enum):
    """The paper's 14-type failure taxonomy (Sec. IV-B)."""

    POSITION_ERROR = "position_error"
    UNREACHABLE_POSE = "unreachable_pose"
    APPROACH_ANGLE = "approach_angle"
    WIDTH_MISMATCH = "width_mismatch"
    COLLISION = "collision"
    ORIENTATION = "orientation"
    SLIP = "slip"
    DROP = "drop"
    FORCE_DAMAGE = "force_damage"
    DEFORMATION = "deformation"
    WRONG_OBJECT = "wrong_object"
    CONSTRAINT_VIOLATION = "constraint_violation"
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"

    @property
    def group(self) -> FailureGroup:
        return _FAILURE_GROUPS[self]


_FAILURE_GROUPS = {
    FailureType.POSITION_ERROR: FailureGroup.PRE_CONTACT,
    FailureType.UNREACHABLE_POSE: FailureGroup.PRE_CONTACT,
    FailureType.APPROACH_ANGLE: FailureGroup.PRE_CONTACT,
    FailureType.WIDTH_MISMATCH: FailureGroup.CONTACT,
    FailureType.COLLISION: FailureGroup.CONTACT,
    FailureType.ORIENTATION: FailureGroup.CONTACT,
    FailureType.SLIP: FailureGroup.POST_GRASP,
    FailureType.DROP: FailureGroup.POST_GRASP,
    FailureType.FORCE_DAMAGE: FailureGroup.POST_GRASP,
    FailureType.DEFORMATION: FailureGroup.POST_GRASP,
    FailureType.WRONG_OBJECT: FailureGroup.TASK_LEVEL,
    FailureType.CONSTRAINT_VIOLATION: FailureGroup.TASK_LEVEL,
    FailureType.TIMEOUT: FailureGroup.TASK_LEVEL,
    FailureType.UNKNOWN: FailureGroup.TASK_LEVEL,
}


def _finite_vector(name: str, value: Sequence[float], length: int = 3) -> np.ndarray:
    arr = np.asarray(value, dtype=float).reshape(-1)
    if arr.shape != (length,):
        raise ValidationError(f"{name} must have {length} components, got {arr.shape[0]}")
    if not np.isfinite(arr).all():          # the method: np.all's dispatch costs 3x more
        raise ValidationError(f"{name} must be finite, got {arr.tolist()}")
    return arr


def _finite(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValidationError(f"{name} must be finite, got {value}")
    return value


@dataclass(frozen=True)
class AffordanceDescriptor:
    """a = (type, material, fragility, graspable region), paper Sec. III-A."""

    type: AffordanceType
    material: str
    fragility: float
    region: str

    def __post_init__(self) -> None:
        if not isinstance(self.type, AffordanceType):
            object.__setattr__(self, "type", AffordanceType.parse(str(self.type)))
        frag = _finite("fragility", self.fragility)
        if not 0.0 <= frag <= 1.0:
            raise ValidationError(f"fragility must be in [0, 1], got {frag}")
        object.__setattr__(self, "fragility", frag)
        if not self.material:
            raise ValidationError("material must be a non-empty string")


@dataclass
class ObjectInstance:
    """One physical object on the table (simulator truth or a perceived estimate)."""

    id: str
    category: str
    shape: Shape
    position: np.ndarray          # bounding-box centre, world frame (m)
    size: np.ndarray              # full extents in the object frame (m)
    yaw: float = 0.0              # rotation of the object frame about world z (rad)
    material: str = "plastic"
    fragility: float = 0.0
    mass: float = 0.1             # kg
    friction: float = 0.5         # Coulomb coefficient against the finger pads
    state: ObjectState = ObjectState.EMPTY
    affordance: Optional[AffordanceDescriptor] = None
    name: str = ""                # human-readable, e.g. "ceramic cup"
    color: Tuple[int, int, int] = (180, 180, 180)  # RGB 0..255, for rendering
    upright: bool = True          # False once knocked over
    damaged: bool = False

    def __post_init__(self) -> None:
        if not self.id:
            raise ValidationError("object id must be a non-empty string")
        self.shape = Shape(self.shape)
        self.position = _finite_vector(f"{self.id}.position", self.position)
        self.size = _finite_vector(f"{self.id}.size", self.size)
        if (self.size <= 0).any():
            raise ValidationError(f"{self.id}.size must be positive, got {self.size.tolist()}")
        self.yaw = _finite(f"{self.id}.yaw", self.yaw)
        self.fragility = _finite(f"{self.id}.fragility", self.fragility)
        if not 0.0 <= self.fragility <= 1.0:
            raise ValidationError(f"{self.id}.fragility must be in [0, 1]")
        if not isinstance(self.state, ObjectState):
            self.state = ObjectState.parse(str(self.state))

    @property
    def top_z(self) -> float:
        return float(self.position[2] + self.size[2] / 2.0)

    @property
    def bottom_z(self) -> float:
        return float(self.position[2] - self.size[2] / 2.0)

    def copy(self) -> "ObjectInstance":
        return replace(self, position=self.position.copy(), size=self.size.copy())


#: GraspParameters' float fields, checked finite by its constructor.
_GRASP_FLOATS = ("width", "force", "approach_height", "speed", "wrist_yaw")


@dataclass
class GraspParameters:
    """g = (p, d, w, f, tau) plus approach height, speed and wrist yaw.

    position: grasp point (TCP target) in world (m). approach: unit vector the TCP moves
    along during the final descent (top-down is [0, 0, -1]). width: commanded opening before
    closing (m, 0..0.08). force: grip force per the Franka Hand grasp action (N).
    approach_height: stand-off of the pre-grasp pose along -approach (m).
    speed: Cartesian speed of descent and lift (m/s). wrist_yaw: rotation of the finger
    closing axis about the approach axis (rad), counter-clockwise as seen looking along the
    approach; for a top-down grasp 0 closes along world y and the closing axis is
    (-sin(wrist_yaw), cos(wrist_yaw), 0). kinematics.wrist_yaw_for_closing_axis inverts it.
    """

    position: np.ndarray
    approach: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -1.0]))
    width: float = 0.08
    force: float = 20.0
    grasp_type: GraspType = GraspType.POWER
    approach_height: float = 0.10
    speed: float = 0.10
    wrist_yaw: float = 0.0

    def __post_init__(self) -> None:
        self.position = _finite_vector("grasp.position", self.position)
        approach = _finite_vector("grasp.approach", self.approach)
        # = float(np.linalg.norm(approach)) bit for bit (norm of a 1-D float array is
        # sqrt(x.dot(x))), without its dispatch: candidate search copies grasps by thousands
        norm = math.sqrt(float(approach.dot(approach)))
        if norm < 1e-9:
            raise ValidationError("grasp.approach must be a non-zero vector")
        self.approach = approach / norm
        for name in _GRASP_FLOATS:
            setattr(self, name, _finite(f"grasp.{name}", getattr(self, name)))
        if not isinstance(self.grasp_type, GraspType):
            self.grasp_type = GraspType.parse(str(self.grasp_type))

    def copy(self, **changes) -> "GraspParameters":
        # What the constructor with every field and then __post_init__ on the changes
        # compute, without the constructor's own pass: its checks hold for this validated
        # grasp, and of its arithmetic only the approach's renormalisation changes a value
        # (kept, so an unchanged approach is divided by its norm twice, as before). Only the
        # changed fields are checked again, as __post_init__ checks them (an unchanged one
        # passes its check unchanged: float(float), a finite float array's view).
        # Candidate search copies grasps by thousands.
        base = object.__new__(type(self))
        position = changes.pop("position", None)
        base.position = self.position.copy() if position is None else \
            _finite_vector("grasp.position", position)
        approach = changes.pop("approach", None)
        if approach is None:
            a = self.approach.copy()
            a = a / math.sqrt(float(a.dot(a)))
        else:
            a = _finite_vector("grasp.approach", approach)
        norm = math.sqrt(float(a.dot(a)))
        if norm < 1e-9:
            raise ValidationError("grasp.approach must be a non-zero vector")
        base.approach = a / norm
        for name in _GRASP_FLOATS:
            value = changes.pop(name, None)
            setattr(base, name, getattr(self, name) if value is None
                    else _finite(f"grasp.{name}", value))
        grasp_type = changes.pop("grasp_type", self.grasp_type)
        base.grasp_type = grasp_type if isinstance(grasp_type, GraspType) \
            else GraspType.parse(str(grasp_type))
        for key, value in changes.items():         # as before: set, not checked
            setattr(base, key, value)
        return base

    def to_dict(self) -> Dict[str, object]:
        return {
            "position": [round(float(v), 6) for v in self.position],
            "approach": [round(float(v), 6) for v in self.approach],
            "width": self.width,
            "force": self.force,
            "grasp_type": self.grasp_type.value,
            "approach_height": self.approach_height,
            "speed": self.speed,
            "wrist_yaw": self.wrist_yaw,
        }

    @classmethod
    def from_dict(cls, data: Dict[str, object]) -> "GraspParameters":
        return cls(
            position=data["position"],
            approach=data.get("approach", [0.0, 0.0, -1.0]),
            width=data.get("width", 0.08),
            force=data.get("force", 20.0),
            grasp_type=data.get("grasp_type", "power"),
            approach_height=data.get("approach_height", 0.10),
            speed=data.get("speed", 0.10),
            wrist_yaw=data.get("wrist_yaw", 0.0),
        )


#: Names of the seven quality factors of Eq. 2, in order phi1..phi7.
QUALITY_FACTOR_NAMES = (
    "position_accuracy",
    "width_compatibility",
    "force_appropriateness",
    "grasp_type_matching",
    "approach_clearance",
    "object_difficulty",
    "grip_security",
)


class Phase(str, Enum):
    """Motion phases of one attempt, in execution order."""

    APPROACH = "approach"
    CLOSE = "close"
    LIFT = "lift"


@dataclass
class PhysicalEvent:
    """Something the simulator (or the robot's sensors) observed during an attempt.

    kind is a FailureType value when the event is a failure mechanism, or a neutral word
    ("knocked_over", "spill") for side effects. other_id names a neighbour when relevant.
    """

    kind: str
    phase: Phase
    detail: str = ""
    other_id: str = ""


def event_to_text(event: PhysicalEvent) -> str:
    """``kind:phase[:other_id]``: how events travel in GraspOutcome.events."""
    return ":".join(p for p in (event.kind, event.phase.value, event.other_id) if p)


def event_from_text(text: str) -> PhysicalEvent:
    """Inverse of :func:`event_to_text` (an unknown phase reads as approach)."""
    parts = text.split(":")
    phase = Phase(parts[1]) if len(parts) > 1 and parts[1] in Phase._value2member_map_ \
        else Phase.APPROACH
    return PhysicalEvent(kind=parts[0], phase=phase, other_id=parts[2] if len(parts) > 2 else "")


@dataclass
class AttemptOutcome:
    """Observation (y, Q, phi) of one executed grasp plus the measured physical quantities."""

    success: bool
    quality: float
    phi: np.ndarray                       # 7 factors in [0, 1]
    events: List[PhysicalEvent] = field(default_factory=list)
    phase_reached: Phase = Phase.APPROACH
    measurements: Dict[str, float] = field(default_factory=dict)
    duration_s: float = 0.0               # simulated motion time

    @property
    def failure_events(self) -> List[PhysicalEvent]:
        names = {f.value for f in FailureType}
        return [e for e in self.events if e.kind in names]
