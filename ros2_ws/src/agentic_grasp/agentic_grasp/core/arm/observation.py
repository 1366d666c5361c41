"""What a Panda with a Franka Hand reports after one grasp attempt: the arm's observation.

This is the only thing that crosses from the world (the simulator, or the real robot) into
the robot's mind after an attempt. Every field is something franka_ros2 publishes or a
MoveIt/gripper action returns; the comment of each field names its source on the real
robot. Nothing here is a simulator quantity: no crush limit, no friction or mass, no label
of what failed, no id of what was hit. The planner reads it through one function,
:func:`agentic_grasp.core.planner.recovery.diagnosis.assess`, for both arms.

Frames and units as in :mod:`agentic_grasp.core.types`: world = ``panda_link0``, metres,
newtons, newton-metres, seconds. Wrenches are ``O_F_ext_hat_K`` of libfranka's RobotState
(franka_msgs/FrankaRobotState ``o_f_ext_hat_k``): the estimated external wrench acting on
the stiffness frame K (the TCP by default), expressed in the base frame.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from agentic_grasp.core.types import Phase

#: Finger widths below this mean the fingers met each other: nothing between them. The Franka
#: Hand's fingers close to 0 mm; 1 mm is seven sigma of the width reading (0.1 mm a finger,
#: 0.14 mm the pair: the simulator's sensor model), and a single thin wall (a paper cup's
#: rim) is thicker.
MIN_OBJECT_WIDTH_M = 0.001
#: Widths sampled over the gripper's force build-up after contact (``close_trace_m``). The
#: Franka Hand's grasp action raises the grip force to the commanded value over its
#: build-up; its finger joint states (franka_gripper/joint_states, 30 Hz and faster on
#: the Hand's own interface) sample that build-up; 8 samples resolve it to an eighth.
CLOSE_TRACE_SAMPLES = 8


def _nan3() -> np.ndarray:
    return np.full(3, math.nan)


@dataclass
class Wrench:
    """``O_F_ext_hat_K``: estimated external force (N) and torque (N m), base frame, about
    the TCP. Source: franka_msgs/FrankaRobotState.o_f_ext_hat_k (libfranka
    RobotState::O_F_ext_hat_K)."""

    force: np.ndarray = field(default_factory=_nan3)
    torque: np.ndarray = field(default_factory=_nan3)

    @property
    def known(self) -> bool:
        return bool(np.isfinite(self.force).all())

    def minus(self, other: "Wrench") -> "Wrench":
        return Wrench(self.force - other.force, self.torque - other.torque)

    def to_list(self) -> List[float]:
        return [float(v) for v in (*self.force, *self.torque)]

    @classmethod
    def from_list(cls, values) -> "Wrench":
        vals = [float(v) for v in values] if values is not None else []
        if len(vals) != 6:
            return cls()
        return cls(np.array(vals[:3]), np.array(vals[3:]))


@dataclass
class Reflex:
    """A collision or contact reflex that stopped the motion (franka_msgs/Errors
    ``cartesian_reflex`` / ``joint_reflex`` with FrankaRobotState ``cartesian_collision``),
    with the end-effector pose and the external wrench when it fired. Not what was hit:
    the planner infers that from the pose against what perception reported."""

    phase: Phase
    #: TCP position when the reflex fired (FrankaRobotState.o_t_ee translation), m
    ee_position: np.ndarray = field(default_factory=_nan3)
    #: O_F_ext_hat_K when it fired (the contact's push on the hand)
    wrench: Wrench = field(default_factory=Wrench)


@dataclass
class ArmObservation:
    """One attempt as the robot's sensors report it (module docstring)."""

    #: What was commanded (the executor's own goal: franka_msgs/action/Grasp width, speed,
    #: force; the arm's Cartesian speed), m, m/s, N
    commanded_width_m: float = math.nan
    commanded_speed_mps: float = math.nan
    commanded_force_n: float = math.nan
    #: Last motion phase reached (the executor's own state)
    phase_reached: Phase = Phase.APPROACH
    #: MoveIt planning error ("" none), e.g. "NO_IK_SOLUTION at the pre-grasp pose"
    #: (moveit_msgs/MoveItErrorCodes of the plan request)
    planning_error: str = ""
    #: Execution error ("" none): the controller's ExecutionStatus / franka_msgs/Errors text
    execution_error: str = ""
    #: Reflexes that stopped a motion, in order (franka_msgs/Errors + FrankaRobotState)
    reflexes: List[Reflex] = field(default_factory=list)
    #: Finger width (m, both fingers; franka_gripper/joint_states, 2 x finger joint) when the
    #: fingers stopped on contact, at the end of closing, right after lift-off and at the top
    #: of the lift. NaN where the attempt did not get there.
    width_at_contact_m: float = math.nan
    width_after_close_m: float = math.nan
    width_at_liftoff_m: float = math.nan
    width_after_lift_m: float = math.nan
    #: Widths sampled evenly over the grip force's build-up from contact to the commanded
    #: force (CLOSE_TRACE_SAMPLES of franka_gripper/joint_states); sample k is at force
    #: (k + 1) / CLOSE_TRACE_SAMPLES x commanded
    close_trace_m: List[float] = field(default_factory=list)
    #: The grasp action's result: the width ended inside its epsilon window
    #: (franka_msgs/action/Grasp result.success); None when no grasp was run
    is_grasped: Optional[bool] = None
    #: O_F_ext_hat_K in free motion during the approach (the estimate's bias at no load)
    wrench_free: Wrench = field(default_factory=Wrench)
    #: O_F_ext_hat_K with the object gripped, still on the table (the baseline: the
    #: estimate's bias at this pose), at its peak during lift-off, and at the top of the lift
    wrench_gripped: Wrench = field(default_factory=Wrench)
    wrench_liftoff: Wrench = field(default_factory=Wrench)
    wrench_lifted: Wrench = field(default_factory=Wrench)
    #: Motion time of the attempt (the controller's clock), s
    duration_s: float = 0.0

    def up_to(self, phase: Phase) -> "ArmObservation":
        """The observation as it stands once ``phase`` has run (later phases unknown)."""
        order = (Phase.APPROACH, Phase.CLOSE, Phase.LIFT)
        reached = order.index(phase)
        out = ArmObservation(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        out.reflexes = [r for r in self.reflexes if order.index(r.phase) <= reached]
        if reached < 1:
            out.width_at_contact_m = out.width_after_close_m = math.nan
            out.close_trace_m, out.is_grasped, out.wrench_gripped = [], None, Wrench()
        if reached < 2:
            out.width_at_liftoff_m = out.width_after_lift_m = math.nan
            out.wrench_liftoff, out.wrench_lifted = Wrench(), Wrench()
        out.phase_reached = order[min(reached, order.index(self.phase_reached))]
        return out

    def to_dict(self) -> Dict[str, Any]:
        def num(v: float) -> Optional[float]:
            return None if not math.isfinite(v) else round(float(v), 6)
        return {
            "commanded_width_m": num(self.commanded_width_m),
            "commanded_speed_mps": num(self.commanded_speed_mps),
            "commanded_force_n": num(self.commanded_force_n),
            "phase_reached": self.phase_reached.value,
            "planning_error": self.planning_error, "execution_error": self.execution_error,
            "reflexes": [{"phase": r.phase.value,
                          "ee_position": [num(v) for v in r.ee_position],
                          "wrench": [num(v) for v in r.wrench.to_list()]}
                         for r in self.reflexes],
            "width_at_contact_m": num(self.width_at_contact_m),
            "width_after_close_m": num(self.width_after_close_m),
            "width_at_liftoff_m": num(self.width_at_liftoff_m),
            "width_after_lift_m": num(self.width_after_lift_m),
            "close_trace_m": [num(v) for v in self.close_trace_m],
            "is_grasped": self.is_grasped,
            "wrench_free": [num(v) for v in self.wrench_free.to_list()],
            "wrench_gripped": [num(v) for v in self.wrench_gripped.to_list()],
            "wrench_liftoff": [num(v) for v in self.wrench_liftoff.to_list()],
            "wrench_lifted": [num(v) for v in self.wrench_lifted.to_list()],
            "duration_s": num(self.duration_s),
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ArmObservation":
        def f(v) -> float:
            return math.nan if v is None else float(v)

        def w(v) -> Wrench:
            return Wrench.from_list([f(x) for x in v] if v else None)
        return cls(
            commanded_width_m=f(data.get("commanded_width_m")),
            commanded_speed_mps=f(data.get("commanded_speed_mps")),
            commanded_force_n=f(data.get("commanded_force_n")),
            phase_reached=Phase(data.get("phase_reached", "approach")),
            planning_error=str(data.get("planning_error", "")),
            execution_error=str(data.get("execution_error", "")),
            reflexes=[Reflex(Phase(r["phase"]), np.array([f(v) for v in r["ee_position"]]),
                             w(r["wrench"])) for r in data.get("reflexes", [])],
            width_at_contact_m=f(data.get("width_at_contact_m")),
            width_after_close_m=f(data.get("width_after_close_m")),
            width_at_liftoff_m=f(data.get("width_at_liftoff_m")),
            width_after_lift_m=f(data.get("width_after_lift_m")),
            close_trace_m=[f(v) for v in data.get("close_trace_m", [])],
            is_grasped=data.get("is_grasped"),
            wrench_free=w(data.get("wrench_free")),
            wrench_gripped=w(data.get("wrench_gripped")),
            wrench_liftoff=w(data.get("wrench_liftoff")),
            wrench_lifted=w(data.get("wrench_lifted")),
            duration_s=f(data.get("duration_s", 0.0)),
        )


__all__ = ["ArmObservation", "CLOSE_TRACE_SAMPLES", "MIN_OBJECT_WIDTH_M", "Reflex", "Wrench"]
