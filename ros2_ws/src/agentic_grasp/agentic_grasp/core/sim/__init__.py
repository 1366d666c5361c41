"""Analytical Panda grasp simulator (paper Sec. V-A): catalogue, scenes, physics, quality.

Public entry points: :class:`Simulator` (scene state, one-shot and phased attempts),
:func:`load_task` / :func:`list_tasks` (benchmark scenes), :func:`load_catalogue`
(object physical properties) and :func:`compute_phi` (Eq. 2 factors).
"""
from agentic_grasp.core.sim.objects import Catalogue, ObjectModel, load_catalogue
from agentic_grasp.core.sim.params import PhysicsParams, QualityParams
from agentic_grasp.core.sim.physics.attempt import MEASUREMENT_KEYS
from agentic_grasp.core.sim.quality import compute_phi, quality_score
from agentic_grasp.core.sim.scenes import TaskSpec, list_tasks, load_task
from agentic_grasp.core.sim import procedural  # noqa: F401,E402 - registers procedural:S:K
from agentic_grasp.core.sim.simulator import Simulator, bench_attempt

__all__ = ["MEASUREMENT_KEYS", "Catalogue", "ObjectModel", "PhysicsParams", "QualityParams",
           "Simulator", "TaskSpec", "bench_attempt", "compute_phi", "list_tasks",
           "load_catalogue", "load_task", "quality_score"]
