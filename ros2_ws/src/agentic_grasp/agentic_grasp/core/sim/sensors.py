"""The simulated Panda's sensors: the truth of one attempt, reported as a real arm reports it.

:func:`plan_attempt` computes what happens (events, forces, margins: the simulator's truth).
:func:`observe` turns that into an :class:`~agentic_grasp.core.arm.observation.ArmObservation`,
the only thing the robot's mind receives: finger widths, the grasp action's result, the
external wrench estimate, reflexes with the end-effector pose, planning errors. The truth
itself stays in the simulator's trial record (evaluation only).

The sensor model (each number's source):

- **Finger width** (franka_gripper/joint_states): Gaussian noise of 0.1 mm a finger, the
  Franka Hand's stated width repeatability class (its encoder resolves far finer);
- **End-effector pose** (O_T_EE): 0.1 mm, the Panda's stated pose repeatability;
- **External wrench** (O_F_ext_hat_K): a bias drawn once per attempt (the estimate's model
  error at a pose: libfranka issue #112 shows an at-rest, unloaded reading of
  (-2.06, 0.46, -0.15) N and (-0.48, -1.39, 0.11) N m, so sigma 2 N and 0.8 N m here), plus
  white noise on each reading (0.3 N, 0.03 N m: the 1 kHz estimate averaged over the 100 ms
  a reading is held steady). The robot removes the bias by differencing readings of the
  same attempt, as a real controller would (a free-motion reading and a gripped one);
- **Reflexes** (franka_msgs/Errors cartesian_reflex): the contact that stopped the hand
  pushes it back along the approach with the impact force of the hand's effective mass
  stopped over the reflex time (config/sim.yaml), applied where the hand met it;
- **Crushing**: the material gives way when the grip force, rising over the grasp's build-up,
  passes its crush (or dent) limit; the fingers then close on: half the material's width
  for a crush (a buckled wall or broken shell packs as the grip goes on: an assumption, any
  collapse beyond the threshold of the diagnosis reads the same) and 5 mm for a dent (a
  plastic wall gives way by a few millimetres without breaking).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from agentic_grasp.core.arm.observation import (CLOSE_TRACE_SAMPLES, ArmObservation, Reflex,
                                                Wrench)
from agentic_grasp.core.types import GraspParameters, Phase

#: Normals drawn per attempt, always all of them, so the sensor stream does not depend on
#: what happened: 6 bias, 4 readings x 6 white, 6 for the reflex, 3 pose, 4 widths, the trace.
_DRAWS = 6 + 4 * 6 + 6 + 3 + 4 + CLOSE_TRACE_SAMPLES


@dataclass(frozen=True)
class SensorModel:
    """Noise of the simulated Panda's sensors (module docstring gives each source)."""

    width_sigma_m: float = 0.0001 * math.sqrt(2.0)      # two fingers, 0.1 mm each
    pose_sigma_m: float = 0.0001
    force_bias_sigma_n: float = 2.0
    torque_bias_sigma_nm: float = 0.8
    force_sigma_n: float = 0.3
    torque_sigma_nm: float = 0.03
    crush_collapse_fraction: float = 0.5
    dent_m: float = 0.005


@dataclass
class AttemptTruth:
    """What the physics computed that the sensors can see (filled by plan_attempt)."""

    reachable: bool = True
    unreachable_pose: str = ""           # "pre-grasp" | "grasp"
    #: the first contact of the approach: where the TCP stopped and where the hand was
    #: touched (world), the impact force (N); None when the approach was free
    stop_tcp: Optional[np.ndarray] = None
    contact_point: Optional[np.ndarray] = None
    impact_n: float = 0.0
    #: closing: the width of material between the pads (NaN: closed on nothing)
    contact_width_m: float = math.nan
    #: the force at which the material gave way (inf: it did not) and how
    yield_force_n: float = math.inf
    crushed: bool = False
    #: lifting: the load the pads carried at lift-off (N, vertical), the object's centre of
    #: mass (world) and mass (kg) after any spill, and what happened
    carried_n: float = 0.0
    com: Optional[np.ndarray] = None
    mass_kg: float = 0.0
    mass_after_kg: float = 0.0
    lost_at_liftoff: bool = False
    lost_in_lift: bool = False
    #: the attempt ended in the approach without a contact the arm could feel (a finger in
    #: a container's liquid: the simulator stops the attempt there)
    ended_unfelt: bool = False


def _wrench(force: np.ndarray, at: np.ndarray, tcp: np.ndarray) -> Wrench:
    return Wrench(np.asarray(force, dtype=float), np.cross(np.asarray(at) - tcp, force))


def observe(truth: AttemptTruth, g: GraspParameters, p_exec: np.ndarray, failed: Optional[Phase],
            duration_s: float, gravity: float, model: SensorModel,
            rng: np.random.Generator) -> ArmObservation:
    """The attempt as the arm's sensors report it (module docstring)."""
    z = rng.standard_normal(_DRAWS)
    k = 0

    def take(n: int) -> np.ndarray:
        nonlocal k
        out = z[k:k + n]
        k += n
        return out

    b = take(6)
    bias = Wrench(b[:3] * model.force_bias_sigma_n, b[3:] * model.torque_bias_sigma_nm)

    def reading(true: Wrench) -> Wrench:
        n = take(6)
        return Wrench(true.force + bias.force + n[:3] * model.force_sigma_n,
                      true.torque + bias.torque + n[3:] * model.torque_sigma_nm)

    zero = Wrench(np.zeros(3), np.zeros(3))
    free = reading(zero)
    gripped_true = zero
    obs = ArmObservation(commanded_width_m=float(g.width), commanded_speed_mps=float(g.speed),
                         commanded_force_n=float(g.force), duration_s=float(duration_s))
    obs.wrench_free = free
    reflex_noise = take(6)
    pose_noise = take(3) * model.pose_sigma_m
    wn = take(4) * model.width_sigma_m
    trace_noise = take(CLOSE_TRACE_SAMPLES) * model.width_sigma_m
    if not truth.reachable:
        obs.planning_error = f"NO_IK_SOLUTION at the {truth.unreachable_pose} pose"
        obs.phase_reached = Phase.APPROACH
        return obs
    if truth.stop_tcp is not None:
        force = -np.asarray(g.approach, dtype=float) * truth.impact_n
        true = _wrench(force, truth.contact_point, truth.stop_tcp)
        obs.reflexes.append(Reflex(Phase.APPROACH, truth.stop_tcp + pose_noise,
                                   Wrench(true.force + bias.force
                                          + reflex_noise[:3] * model.force_sigma_n,
                                          true.torque + bias.torque
                                          + reflex_noise[3:] * model.torque_sigma_nm)))
        obs.execution_error = "cartesian_reflex: motion stopped on contact"
        obs.phase_reached = Phase.APPROACH
        return obs
    if truth.ended_unfelt:
        obs.phase_reached = Phase.APPROACH
        return obs
    # ---- close
    obs.phase_reached = Phase.CLOSE
    w0 = truth.contact_width_m
    if not math.isfinite(w0):
        closed = abs(wn[1])                    # the fingers meet
        obs.width_after_close_m = closed
        obs.close_trace_m = [abs(v) for v in trace_noise]
        obs.is_grasped = False
        obs.wrench_gripped = reading(gripped_true)
        return obs
    obs.width_at_contact_m = w0 + wn[0]
    after = w0
    trace: List[float] = []
    for i in range(CLOSE_TRACE_SAMPLES):
        f = (i + 1) / CLOSE_TRACE_SAMPLES * float(g.force)
        if f >= truth.yield_force_n:
            after = (w0 * (1.0 - model.crush_collapse_fraction) if truth.crushed
                     else max(w0 - model.dent_m, 0.0))
        trace.append(after + trace_noise[i])
    obs.close_trace_m = trace
    obs.width_after_close_m = after + wn[1]
    obs.is_grasped = True
    obs.wrench_gripped = reading(gripped_true)
    if failed == Phase.CLOSE:
        return obs
    # ---- lift
    obs.phase_reached = Phase.LIFT
    com = truth.com if truth.com is not None else p_exec
    load = np.array([0.0, 0.0, -truth.carried_n])
    obs.wrench_liftoff = reading(_wrench(load, com, p_exec))
    if truth.lost_at_liftoff:
        obs.width_at_liftoff_m = abs(wn[2])
        obs.width_after_lift_m = abs(wn[3])
        obs.wrench_lifted = reading(zero)
        return obs
    obs.width_at_liftoff_m = after + wn[2]
    if truth.lost_in_lift:
        obs.width_after_lift_m = abs(wn[3])
        obs.wrench_lifted = reading(zero)
        return obs
    obs.width_after_lift_m = after + wn[3]
    weight = np.array([0.0, 0.0, -truth.mass_after_kg * gravity])
    obs.wrench_lifted = reading(_wrench(weight, com, p_exec))
    return obs


__all__ = ["AttemptTruth", "SensorModel", "observe"]
