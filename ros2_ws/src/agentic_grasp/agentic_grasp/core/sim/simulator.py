"""The analytical Panda grasp simulator (paper Sec. V-A): scene state plus attempt physics.

One :class:`Simulator` holds the objects on the table, the object held by the gripper and
the ones already put away (the bin), and one numpy Generator for execution noise, reseeded by
:meth:`Simulator.load_task`; a given (task, trial seed, grasp sequence) therefore replays
exactly. An attempt either runs in one call (:meth:`execute_attempt`) or phase by phase
(:meth:`begin_attempt`, :meth:`advance`, :meth:`abort`) for the ROS sim node's action
feedback; both draw the same noise and give the same outcome.
"""
from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import numpy as np

from agentic_grasp.core import paths
from agentic_grasp.core.arm.closing_axis import wrist_yaw_for_closing_axis
from agentic_grasp.core.arm.kinematics import PandaKinematics
from agentic_grasp.core.config import node_params
from agentic_grasp.core.errors import UnknownTargetError, ValidationError, WorkspaceError
from agentic_grasp.core.geometry import yaw_matrix
from agentic_grasp.core.sim.objects import Catalogue, load_catalogue
from agentic_grasp.core.sim.params import PhysicsParams, QualityParams
from agentic_grasp.core.sim.physics.bodies import AttemptNoise, AttemptPlan, Body
from agentic_grasp.core.sim.physics.attempt import plan_attempt
from agentic_grasp.core.sim.scenes import TaskSpec, load_task
from agentic_grasp.core.sim.view import ViewMotion, plan_view
from agentic_grasp.core.sim.params import WristCameraMount
from agentic_grasp.core.stats import percentiles
from agentic_grasp.core.types import (GRIPPER_MAX_FORCE_N, GRIPPER_MAX_WIDTH_M, AttemptOutcome,
                                      GraspParameters, ObjectInstance, Phase)

logger = logging.getLogger(__name__)

__all__ = ["PhysicsParams", "QualityParams", "Simulator", "bench_attempt"]

_PHASES = (Phase.APPROACH, Phase.CLOSE, Phase.LIFT)


@dataclass
class _Attempt:
    target_id: str
    plan: AttemptPlan
    next_index: int = 0
    finished: bool = False
    duration_s: float = 0.0


class Simulator:
    """Scene state and grasp physics of the benchmark (see module docstring)."""

    def __init__(self, params: Optional[PhysicsParams] = None, seed: int = 0,
                 kinematics: Any = None, quality: Optional[QualityParams] = None,
                 catalogue: Optional[Catalogue] = None,
                 wrist_camera: Optional[WristCameraMount] = None) -> None:
        if kinematics is None:
            kinematics = PandaKinematics()
        self.params = params or PhysicsParams()
        self.quality_params = quality or QualityParams()
        self.kinematics = kinematics
        self.catalogue = catalogue or load_catalogue()
        self.wrist_camera = wrist_camera or WristCameraMount()
        self.task: Optional[TaskSpec] = None
        self._rng = np.random.default_rng(seed)
        self._sensor_rng = np.random.default_rng([int(seed), 1])
        #: the simulator's truth of every finished attempt since the task was loaded, for
        #: evaluation only: the robot's mind gets :attr:`last_observation`
        self.truth_log: List[AttemptOutcome] = []
        #: what the arm's sensors reported of the last phase run (ArmObservation)
        self.last_observation = None
        self._objects: Dict[str, ObjectInstance] = {}
        self._bodies: Dict[str, Body] = {}
        self._held: Optional[str] = None
        self._binned: List[ObjectInstance] = []
        self._attempts: Dict[str, _Attempt] = {}
        self._counter = 0
        #: recent jittered layouts by (scene, trial seed): load_task
        self._layouts: Dict[tuple, List[ObjectInstance]] = {}

    @classmethod
    def from_config(cls, path: Union[str, Path, None] = None, seed: int = 0) -> "Simulator":
        """Simulator configured by config/sim.yaml (``sim: ros__parameters:``)."""
        cfg_path = Path(path) if path else paths.config_file("sim")
        cfg = node_params("sim", cfg_path)
        physics = PhysicsParams.from_mapping(cfg.get("physics") or {}, str(cfg_path))
        qual = QualityParams.from_mapping(cfg.get("quality") or {}, str(cfg_path))
        cat_path = Path(str(cfg.get("catalogue_file", "objects.yaml")))
        if not cat_path.is_absolute():          # next to the parameter file, else in config/
            beside = cfg_path.parent / cat_path
            cat_path = beside if beside.is_file() else paths.config_dir() / cat_path
        mount = WristCameraMount.from_mapping(cfg.get("wrist_camera"), str(cfg_path))
        return cls(physics, seed, quality=qual, catalogue=load_catalogue(cat_path),
                   wrist_camera=mount)

    # ------------------------------------------------------------------ scene
    def load_task(self, task_id_or_path: str, trial_seed: int) -> TaskSpec:
        """Set up one trial: the task's scene with this seed's jitter, noise reseeded."""
        spec = load_task(task_id_or_path, self.catalogue)
        # the third child only feeds the arm's sensor noise: the first two are what spawn(2)
        # gives, so scene jitter and execution noise are those of the same seed as before
        layout_seq, noise_seq, sensor_seq = np.random.SeedSequence(int(trial_seed)).spawn(3)
        # The jittered layout is a function of the scene and the seed alone; a sweep's
        # configurations load trial k of a task with the same seed (set_objects copies).
        key = (id(spec.catalogue), spec.task_id, spec.source, tuple(spec.objects_spec),
               int(trial_seed))
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts[key] = spec.instantiate(np.random.default_rng(layout_seq))
            if len(self._layouts) > 64:
                self._layouts.pop(next(iter(self._layouts)))
        self.set_objects(layout)
        self._rng = np.random.default_rng(noise_seq)
        self._sensor_rng = np.random.default_rng(sensor_seq)
        self.truth_log = []
        self.task = spec
        return spec

    def set_objects(self, objects: List[ObjectInstance]) -> None:
        """Replace the scene (tests build scenes by hand); held and binned are cleared."""
        ids = [o.id for o in objects]
        if len(set(ids)) != len(ids):
            raise ValidationError(f"duplicate object ids in {ids}")
        self._objects = {o.id: o.copy() for o in objects}
        self._bodies = {}
        self._held, self._binned, self._attempts = None, [], {}
        for object_id in self._objects:            # geometry is built once per scene change
            self._body(object_id)

    def objects(self) -> List[ObjectInstance]:
        """Copies of the objects in the workspace: on the table and the one held."""
        return [o.copy() for o in self._objects.values()]

    def get(self, object_id: str) -> ObjectInstance:
        if object_id not in self._objects:
            raise UnknownTargetError(f"no object {object_id!r} in the scene "
                                     f"(present: {', '.join(self._objects) or 'none'})")
        return self._objects[object_id].copy()

    @property
    def held_id(self) -> Optional[str]:
        return self._held

    def binned(self) -> List[ObjectInstance]:
        """Objects already put away (in task order)."""
        return [o.copy() for o in self._binned]

    def place_held_object(self) -> Optional[str]:
        """Put the held object into the bin (off the table); returns its id."""
        held, self._held = self._held, None
        if held is not None:
            self._binned.append(self._objects.pop(held))
            self._bodies.pop(held, None)
        return held

    def snapshot(self) -> Dict[str, Any]:
        """Deep copy of the scene state and of the noise generator."""
        return {"objects": copy.deepcopy(self._objects), "held": self._held,
                "binned": copy.deepcopy(self._binned),
                "rng": copy.deepcopy(self._rng.bit_generator.state),
                "sensor_rng": copy.deepcopy(self._sensor_rng.bit_generator.state)}

    def restore(self, snap: Dict[str, Any]) -> None:
        self._objects = copy.deepcopy(snap["objects"])
        self._held = snap["held"]
        self._binned = copy.deepcopy(snap["binned"])
        self._rng.bit_generator.state = copy.deepcopy(snap["rng"])
        if "sensor_rng" in snap:
            self._sensor_rng.bit_generator.state = copy.deepcopy(snap["sensor_rng"])
        self._bodies, self._attempts = {}, {}
        for object_id in self._objects:
            self._body(object_id)

    # ------------------------------------------------------------------ validation
    def validate(self, target_id: str, grasp: GraspParameters) -> None:
        """Reject malformed or out-of-range requests without touching the state."""
        if target_id not in self._objects:
            self.get(target_id)                  # raises UnknownTargetError with the list
        if not isinstance(grasp, GraspParameters):
            raise ValidationError(f"expected GraspParameters, got {type(grasp).__name__}")
        p = self.params
        if not 0.0 < grasp.force <= GRIPPER_MAX_FORCE_N:
            raise ValidationError(f"force {grasp.force} N outside (0, {GRIPPER_MAX_FORCE_N}]")
        if not 0.0 <= grasp.width <= GRIPPER_MAX_WIDTH_M:
            raise ValidationError(f"width {grasp.width} m outside [0, {GRIPPER_MAX_WIDTH_M}]")
        lo, hi = p.speed_range_mps
        if not lo <= grasp.speed <= hi:
            raise ValidationError(f"speed {grasp.speed} m/s outside [{lo}, {hi}]")
        lo, hi = p.approach_height_range_m
        if not lo <= grasp.approach_height <= hi:
            raise ValidationError(f"approach_height {grasp.approach_height} m outside "
                                  f"[{lo}, {hi}]")
        x, y, z = (float(v) for v in grasp.position)
        mg = p.workspace_margin_m
        if not (p.table_x_range_m[0] - mg <= x <= p.table_x_range_m[1] + mg
                and p.table_y_range_m[0] - mg <= y <= p.table_y_range_m[1] + mg):
            raise WorkspaceError(f"grasp point ({x:.3f}, {y:.3f}) is outside the table "
                                 f"workspace (margin {mg} m)")
        if z < 0.0:
            raise WorkspaceError(f"grasp point z = {z:.3f} m is below the table")
        if z > p.max_grasp_height_m:
            raise WorkspaceError(f"grasp point z = {z:.3f} m above {p.max_grasp_height_m} m")

    # ------------------------------------------------------------------ attempts
    def execute_attempt(self, target_id: str, grasp: GraspParameters) -> AttemptOutcome:
        """All phases of one attempt, state committed (same as begin + advance x3)."""
        attempt_id = self.begin_attempt(target_id, grasp)
        outcome = None
        for phase in _PHASES:
            outcome = self.advance(attempt_id, phase)
            if self._attempts.get(attempt_id) is None:
                break
        return outcome

    def begin_attempt(self, target_id: str, grasp: GraspParameters,
                      attempt_id: Optional[str] = None) -> str:
        """Draw this attempt's noise and compute its physics; nothing is committed yet.

        A still-open attempt is aborted and an object still held is put in the bin first
        (the robot drops it off before the next grasp). ``attempt_id`` lets a caller that
        pipelines the phases name the attempt itself; by default one is generated.
        """
        self.validate(target_id, grasp)
        for open_id in list(self._attempts):
            self.abort(open_id)
        if self._held is not None:
            if self._held == target_id:
                raise UnknownTargetError(f"{target_id!r} is already held")
            self.place_held_object()
        noise = AttemptNoise.draw(self._rng, self.params)
        target = self._body(target_id)
        others = [self._body(oid) for oid in self._objects if oid != target_id]
        plan = plan_attempt(target, others, grasp, self.params, self.quality_params, noise,
                            self.kinematics, sensor_rng=self._sensor_rng)
        self._counter += 1
        attempt_id = attempt_id or f"attempt_{self._counter}"
        self._attempts[attempt_id] = _Attempt(target_id, plan)
        return attempt_id

    def advance(self, attempt_id: str, phase: Union[Phase, str]) -> AttemptOutcome:
        """Commit the consequences of ``phase`` and report the attempt so far.

        Phases must come in order. The returned outcome's ``success`` is True only for the
        LIFT phase of a successful attempt; a failure ends the attempt (its events are in the
        outcome), after which the attempt id is no longer valid.
        """
        att = self._attempts.get(attempt_id)
        if att is None:
            raise ValidationError(f"no open attempt {attempt_id!r}")
        phase = Phase(phase)
        expected = _PHASES[att.next_index]
        if phase != expected:
            raise ValidationError(f"{attempt_id}: expected phase {expected.value}, "
                                  f"got {phase.value}")
        report = att.plan.reports.get(phase)
        att.next_index += 1
        if report is not None:
            for object_id, change in report.changes:
                self._apply(object_id, change)
            att.duration_s += report.duration_s
        finished = att.plan.failed_phase == phase or phase == Phase.LIFT
        events = [e for p in _PHASES[:att.next_index]
                  for e in (att.plan.reports[p].events if p in att.plan.reports else [])]
        outcome = AttemptOutcome(
            success=bool(phase == Phase.LIFT and att.plan.success), quality=att.plan.quality,
            phi=att.plan.phi.copy(), events=events, phase_reached=phase,
            measurements=dict(att.plan.measurements), duration_s=att.duration_s)
        observation = att.plan.observation.up_to(phase)
        observation.duration_s = att.duration_s
        self.last_observation = observation
        if finished:
            del self._attempts[attempt_id]
            self.truth_log.append(outcome)
        return outcome

    def attempt_finished(self, attempt_id: str) -> bool:
        """True once the attempt has failed, completed its lift or been aborted."""
        return attempt_id not in self._attempts

    def abort(self, attempt_id: str) -> None:
        """Cancel: the gripper opens and nothing further happens (committed phases stay)."""
        self._attempts.pop(attempt_id, None)

    # ------------------------------------------------------------------ wrist camera
    def move_camera_to(self, T_world_cam: np.ndarray) -> ViewMotion:
        """Point the wrist camera: IK to the pose, the hand checked against the scene
        (core/sim/view.py). Contact-free: nothing in the scene changes, no noise is drawn,
        so the grasp attempts after a view replay as without it."""
        for open_id in list(self._attempts):
            self.abort(open_id)
        if self._held is not None:
            self.place_held_object()
        bodies = [self._body(oid) for oid in self._objects]
        return plan_view(T_world_cam, self.wrist_camera, self.kinematics, bodies, self.params)

    # ------------------------------------------------------------------ internals
    def _body(self, object_id: str) -> Body:
        body = self._bodies.get(object_id)
        if body is None:
            inst = self._objects[object_id]
            body = Body.build(inst, self.catalogue.model_for(inst))
            self._bodies[object_id] = body
        return body

    def _apply(self, object_id: str, change: Dict[str, Any]) -> None:
        inst = self._objects[object_id]
        for key, value in change.items():
            if key == "held":
                self._held = object_id
            elif key == "position":
                inst.position = np.array(value, dtype=float)
            else:
                setattr(inst, key, value)
        self._bodies.pop(object_id, None)


def bench_attempt(n: int = 500, task: str = "sg_banana", seed: int = 0) -> Dict[str, float]:
    """Wall time of ``execute_attempt`` over ``n`` trials of ``task`` (p50 / p99 / mean, ms).

    Each trial loads the task with a new seed (scene set-up is not timed) and executes a
    top-down grasp at the target's centre closing across the object's y axis.
    """
    sim = Simulator.from_config(seed=seed)
    times, successes = [], 0
    for i in range(n):
        spec = sim.load_task(task, trial_seed=seed + i)
        target = sim.get(spec.targets[0])
        across = yaw_matrix(target.yaw) @ np.array([0.0, 1.0, 0.0])
        grasp = GraspParameters(position=target.position.copy(), width=0.07, force=20.0,
                                wrist_yaw=wrist_yaw_for_closing_axis((0, 0, -1), across))
        t0, c0 = time.perf_counter(), time.process_time()
        outcome = sim.execute_attempt(target.id, grasp)
        times.append((time.perf_counter() - t0, time.process_time() - c0))
        successes += outcome.success
    wall, cpu = (np.array(col) * 1e3 for col in zip(*times))
    # CPU time is what the attempt costs this process; wall time also counts waiting for a
    # core when the machine is shared.
    (p50, p99), (cpu_p50, cpu_p99) = percentiles(wall, (50, 99)), percentiles(cpu, (50, 99))
    return {"n": float(n), "p50_ms": p50, "p99_ms": p99, "mean_ms": float(wall.mean()),
            "max_ms": float(wall.max()), "cpu_p50_ms": cpu_p50, "cpu_p99_ms": cpu_p99,
            "success_rate": successes / n}


if __name__ == "__main__":  # pragma: no cover
    print(bench_attempt())
