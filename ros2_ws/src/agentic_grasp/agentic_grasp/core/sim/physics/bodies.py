"""State the physics works on: an object with its geometry, one attempt's noise draws, and
the per-phase record of what an attempt does (events, state changes, simulated time)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from agentic_grasp.core.geometry import yaw_matrix
from agentic_grasp.core.sim.collision import OBB, Solid, object_obb, place_object, solid_obb
from agentic_grasp.core.sim.objects import ObjectModel
from agentic_grasp.core.sim.params import PhysicsParams
from agentic_grasp.core.types import FailureType, ObjectInstance, ObjectState, Phase, PhysicalEvent

Change = Tuple[str, Dict[str, Any]]


@dataclass
class Body:
    """An object with its physical model and world geometry."""

    instance: ObjectInstance
    model: ObjectModel
    solids: List[Solid]
    obb: OBB
    solid_boxes: List[OBB]

    @classmethod
    def build(cls, instance: ObjectInstance, model: ObjectModel) -> "Body":
        solids = place_object(instance, model)
        return cls(instance, model, solids, object_obb(instance, solids),
                   [solid_obb(s) for s in solids])

    def crush_limit(self, solid: int) -> float:
        own = self.solids[solid].crush_limit_n
        return float(own if own is not None else self.model.crush_limit_n)

    def com_world(self) -> np.ndarray:
        """Centre of mass, content included (liquid centred on the container axis)."""
        inst, com = self.instance, self.model.com
        if inst.state == ObjectState.FILLED and self.model.fill is not None:
            m_f = self.model.fill.mass_kg
            m_e = max(inst.mass - m_f, 1e-6)
            com = com * m_e / (m_e + m_f)
        return inst.position + yaw_matrix(inst.yaw) @ com


@dataclass
class AttemptNoise:
    """Execution noise of one attempt, always drawn in the same order (see :meth:`draw`):
    TCP position error, wrist yaw error, relative errors of the applied force and of the
    friction coefficient (config/sim.yaml), and where in the lift a marginal grip lets go
    (uniform over 10-100 % of the lift height: vibration peaks come anywhere on the way)."""

    tcp: np.ndarray = field(default_factory=lambda: np.zeros(3))
    yaw: float = 0.0
    force_scale: float = 1.0
    friction_scale: float = 1.0
    drop_fraction: float = 0.5

    @classmethod
    def draw(cls, rng: np.random.Generator, p: PhysicsParams) -> "AttemptNoise":
        z = rng.standard_normal(6)
        return cls(tcp=np.array([z[0] * p.tcp_sigma_xy_m, z[1] * p.tcp_sigma_xy_m,
                                 z[2] * p.tcp_sigma_z_m]),
                   yaw=float(z[3] * p.yaw_sigma_rad),
                   force_scale=float(max(0.5, 1.0 + z[4] * p.force_rel_sigma)),
                   friction_scale=float(max(0.3, 1.0 + z[5] * p.friction_rel_sigma)),
                   drop_fraction=float(rng.uniform(0.1, 1.0)))


@dataclass
class PhaseReport:
    """What one phase does: its events, the object changes it commits, its simulated time."""

    events: List[PhysicalEvent] = field(default_factory=list)
    changes: List[Change] = field(default_factory=list)
    duration_s: float = 0.0


@dataclass
class AttemptPlan:
    """Everything one attempt will do, phase by phase, plus phi, Q and the measurements."""

    reports: Dict[Phase, PhaseReport]
    failed_phase: Optional[Phase]
    measurements: Dict[str, float]
    phi: np.ndarray
    quality: float
    #: what the arm's sensors report of it (core.arm.observation.ArmObservation)
    observation: Any = None

    @property
    def success(self) -> bool:
        return self.failed_phase is None


def make_event(kind: Any, phase: Phase, detail: str, other: str = "") -> PhysicalEvent:
    """A PhysicalEvent whose kind is a FailureType value or a side-effect word."""
    return PhysicalEvent(kind.value if isinstance(kind, FailureType) else str(kind), phase,
                         detail, other)
