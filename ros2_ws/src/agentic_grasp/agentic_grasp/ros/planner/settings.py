"""The planner node's parameters and goal checks, apart from the node (which only wires).

Two sections of config/planner.yaml:

- ``planner: ros__parameters:``: the core's PlannerConfig, one ROS parameter per leaf under
  its dotted name (``corrections.slip_force_scale``, ``classification.phi_thresholds.
  grip_security``, ``grasp_synthesis.hand.max_opening_m``), declared by
  :func:`declare_planner_config`;
- ``/**/planner: ros__parameters:``: the node-level :class:`NodeSettings` (``timeouts.*``,
  ``max_instruction_chars``, ...), declared from their field metadata by
  :func:`declare_node_settings` with ``params.declare_config``;
- ``acquisition.*`` (set by bringup): :func:`declare_acquisition` (file or fleet store).

The PlannerConfig leaves are declared by ``params.declare_config(nested=True)``, which
descends into its sections, their dict fields and nested dataclasses; the texts are the
field metadata of core/planner/configurations.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Optional, Tuple

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.planner import PlannerConfig, get_configuration
from agentic_grasp.core.retrieval.acquired.acquisition import (Acquirer, AcquisitionContext,
                                                               resolve_acquired_path)
from agentic_grasp.core.retrieval.acquired.pg_store import StoreConfigError
from agentic_grasp.core.retrieval.acquired.store import (FleetStore, check_store, default_robot,
                                                         resolve_local)
from agentic_grasp.ros.common.params import declare, declare_config, overrides

MEMORY_LIFETIMES = ("session", "goal")
#: Errors that stop the planner at start-up with their message instead of a restart into the
#: same refusal: the fleet store refusing our credentials or schema (planner_node.main).
FATAL_AT_START = (StoreConfigError,)

# ---- the core's PlannerConfig ----------------------------------------------------------------

#: Text of a section leaf without a description of its own: the section's text (the
#: PlannerConfig field's metadata), the leaf below it and its unit, e.g. "Level-1
#: correction rule: slip_force_scale (config/planner.yaml)".
LEAF_DESCRIPTION = "{section}: {path}{unit} (config/planner.yaml)"


def declare_planner_config(node: Any) -> PlannerConfig:
    """Declare every PlannerConfig leaf on ``node`` under its dotted name and read the config.

    ``params.declare_config(nested=True)`` walks the validated ``PlannerConfig()``: its
    fields, the sections' fields, their dict fields (``phi_thresholds``) and nested
    dataclasses (``grasp_synthesis.hand``), described by the fields' metadata.
    """
    return declare_config(node, "", PlannerConfig, nested=True, fallback=LEAF_DESCRIPTION,
                          build=lambda values: PlannerConfig.from_params(
                              values, "planner parameters"))


# ---- the node-level settings -----------------------------------------------------------------

def _described(default: Any, description: str) -> Any:
    return field(default=default, metadata={"description": description})


@dataclass(frozen=True)
class Timeouts:
    """``timeouts.*``: every peer call is bounded (ERROR_DEPENDENCY_TIMEOUT names the peer)."""

    perceive_s: float = _described(30.0, "Timeout of one perceive call (s); above the "
                                         "perception node's own worst case with the VLM")
    retrieve_s: float = _described(5.0, "Timeout of one retrieve_strategies call (s)")
    constraints_s: float = _described(5.0, "Timeout of one infer_constraints call (s)")
    execute_s: float = _described(30.0, "Timeout of one ExecuteGrasp goal: its acceptance, "
                                        "then its result (s)")
    restart_wait_s: float = _described(
        20.0, "How long one goal may wait, in all, for peers that are restarting (s): a "
              "respawn takes the 0.5-8 s delay of core/supervision.py plus 1.5-5 s to start "
              "(retrieval embeds its knowledge base), so 20 s covers the second restart")
    startup_s: float = _described(
        120.0, "Start-up window (s from the node's start): a peer's service or action the "
               "planner never saw is waited for until it ends, instead of failing after the "
               "call's own timeout, so a goal sent while the graph comes up waits for "
               "discovery (common/readiness.py). Retrieval alone took 43 s to start at load 9 "
               "on 2 cores (it embeds its knowledge base), and discovery comes after")

    def check(self) -> None:
        """ConfigError unless every timeout is a finite number > 0 (NodeSettings calls it)."""
        for f in fields(self):
            value = float(getattr(self, f.name))
            if not math.isfinite(value) or value <= 0.0:
                raise ConfigError(f"timeouts.{f.name} must be > 0 s, got {value}")


@dataclass(frozen=True)
class NodeSettings:
    """The node-level parameters (second section of config/planner.yaml)."""

    max_instruction_chars: int = _described(500, "Longer instructions are refused "
                                                 "(ERROR_INVALID_GOAL)")
    result_timeout_s: int = _described(30, "How long a finished goal's result is kept for "
                                           "late clients (s); rclpy's 900 s default keeps "
                                           "every goal in each status message")
    memory_lifetime: str = _described("session", "Episodic memory lifetime: session (kept "
                                                 "across goals, the paper's session-level "
                                                 "cache) or goal")
    world_frame: str = _described("world", "Frame of the scene sent to the scene graph and "
                                           "of the markers (panda_link0 world)")
    perceive_retries: int = _described(1, "A perception answer with an error (no frame pair, "
                                          "an unusable VLM answer) is asked again this many "
                                          "times")
    perceive_retry_delay_s: float = _described(0.5, "Pause before asking perception again "
                                                     "(s)")
    visual_query: str = _described("camera", "s_vis of HAA-RAG: camera (the perception "
                                             "node's crop of the camera frame at the "
                                             "perceived target box, sent as target_crop) or "
                                             "none (s_vis = 0)")
    timeouts: Timeouts = field(default_factory=Timeouts)   # declared as timeouts.*

    def __post_init__(self) -> None:
        if self.visual_query not in ("camera", "none"):
            raise ConfigError(f"visual_query must be camera or none, got {self.visual_query!r}")
        self.timeouts.check()
        if self.max_instruction_chars < 1:
            raise ConfigError("max_instruction_chars must be >= 1")
        if self.result_timeout_s < 1:
            raise ConfigError("result_timeout_s must be >= 1")
        if self.perceive_retries < 0 or not 0.0 <= self.perceive_retry_delay_s < 60.0:
            raise ConfigError("perceive_retries must be >= 0 and perceive_retry_delay_s in "
                              "[0, 60) s")
        if self.memory_lifetime not in MEMORY_LIFETIMES:
            raise ConfigError(f"memory_lifetime must be one of {MEMORY_LIFETIMES}, got "
                              f"{self.memory_lifetime!r}")


def declare_node_settings(node: Any) -> NodeSettings:
    """Declare the node-level parameters on ``node`` (names, types and defaults from the
    fields above) and read them."""
    timeouts = declare_config(node, "timeouts", Timeouts)
    return declare_config(node, "", NodeSettings, extra={"timeouts": timeouts})


def declare_acquisition(node: Any) -> Optional[Acquirer]:
    """Experience acquisition (core/retrieval/acquisition.py): one experience per attempt,
    to the file or to the PostgreSQL fleet store (core/retrieval/store.py)."""
    path = declare(node, "acquisition.path", "",
                   "Acquired-experiences JSONL file the planner appends one experience "
                   "per attempt to (the retrieval node's acquired_experiences_path); '' "
                   "or 'none' = off, 'default' = $XDG_DATA_HOME/agentic_grasp/"
                   "acquired_experiences.jsonl")
    backend = declare(node, "acquisition.perception_backend", "",
                      "Perception backend recorded in each experience's provenance "
                      "(bringup sets it from its perception argument)")
    kind = declare(node, "acquisition.store", "file",
                   "'file' (acquisition.path) or 'postgres' (the fleet store; DSN from "
                   "$AGENTIC_GRASP_PG_DSN or the PG* variables, never a parameter)")
    robot = declare(node, "acquisition.robot", "",
                    "This robot's name in every record's provenance ('' = the host name)")
    spool = declare(node, "acquisition.spool_path", "default",
                    "Where attempts wait while the fleet database is away, replayed when "
                    "it returns ('default' = $XDG_DATA_HOME/agentic_grasp/fleet_spool.jsonl)")
    resolved = resolve_acquired_path(path)
    if resolved is None:
        return None
    robot = robot or default_robot()
    context = AcquisitionContext(perception_backend=backend, robot=robot)
    if check_store(kind) == "postgres":
        store = FleetStore(spool_path=resolve_local(spool, "fleet_spool.jsonl"), robot=robot)
        away = store.check()          # refused credentials / schema: the node stops here
        if away:
            node.get_logger().warning(f"experience acquisition: {away}; attempts spool to "
                                      f"{store.spool_path} until it returns")
        node.get_logger().info(f"experience acquisition on: robot {robot} appending to "
                               f"{store.where} (spool {store.spool_path})")
        return Acquirer(resolved, context=context, store=store)
    node.get_logger().info(f"experience acquisition on: robot {robot} appending to {resolved}")
    return Acquirer(resolved, context=context)


def warn_undeclared(node: Any) -> None:
    """Warn of every parameter given to ``node`` that it did not declare (a typo)."""
    for name in sorted(overrides(node)):
        if not node.has_parameter(name) and name != "use_sim_time":
            node.get_logger().warning(f"parameter '{name}' is not a planner parameter "
                                      "(typo?); ignored")


# ---- goals -----------------------------------------------------------------------------------

def validate_goal(instruction: str, configuration: str, default_configuration: str,
                  max_chars: int) -> Tuple[str, str]:
    """(reason, configuration name): reason is "" for a goal the planner can run."""
    text = instruction.strip()
    if not text:
        return "instruction is empty: say what to grasp, e.g. 'pick up the banana'", ""
    if len(instruction) > max_chars:
        return (f"instruction is {len(instruction)} characters long; at most {max_chars} "
                "are accepted"), ""
    name = configuration.strip() or default_configuration
    try:
        get_configuration(name)
    except ConfigError as exc:
        return str(exc), ""
    return "", name


__all__ = ["MEMORY_LIFETIMES", "NodeSettings", "Timeouts", "declare_acquisition",
           "declare_node_settings", "declare_planner_config", "validate_goal",
           "warn_undeclared"]
