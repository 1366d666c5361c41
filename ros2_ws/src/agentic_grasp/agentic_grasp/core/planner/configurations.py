"""PlannerConfig (config/planner.yaml; its sections in sections.py) and the Table II switches.

Table II ablates one mechanism at a time. Each :class:`Configuration` is a set of switches the
planner reads; a switch turns off exactly one mechanism and nothing else:

==================  ===============  ===========  ========  ======  ==========================
configuration       initial grasp    scene graph  recovery  memory  what is removed
==================  ===============  ===========  ========  ======  ==========================
full                retrieval (e1)   yes          yes       yes     nothing
no_haa_rag          default          yes          yes       yes     HAA-RAG: one fixed default
                                                                    grasp (config) instead
no_scene_graph      retrieval        no           yes       yes     constraints (and support
                                                                    ordering of sub-goals)
no_recovery         retrieval        yes          no        yes     retries: one attempt
no_episodic_memory  retrieval        yes          yes       no      episodic memory
vlm_only            vlm              no           no        no      everything but perception
heuristic           heuristic        yes (1)      yes       no      retrieval and the VLM's
                                                                    semantics (memory is keyed
                                                                    by them)
heuristic_box       heuristic_box    no           yes       no      retrieval, scene graph,
                                                                    fitting (the box rule)
==================  ===============  ===========  ========  ======  ==========================

(1) ``semantics`` off: the planner strips the VLM's category, affordance, material and
fragility from every perceived object before the scene graph, the clearance search and the
grasp rules see it (heuristic.strip_semantics); the sub-goal plan (which objects, in which
order) is the instruction's, as for every configuration.

Initial grasp sources:

- ``retrieval``: the top HAA-RAG strategy placed on the perceived object (object frame ->
  world), or the stored grasp of episodic memory when the category has one (memory wins,
  Sec. IV-C); the default grasp when retrieval returns nothing.
- ``default``: ``default_grasp`` of config/planner.yaml at the perceived centre.
- ``vlm``: what a VLM proposes from its own semantics with no retrieved experience. With the
  oracle backend it is defined as a generic rule of the perceived category/affordance: the
  default grasp, turned to close across the narrower perceived horizontal side (the VLM's
  wrist orientation), with the grasp type the affordance type names generically
  (``VLM_TYPE_FOR_AFFORDANCE``). No object-specific width, force or grasp point.
- ``heuristic``: :func:`agentic_grasp.core.heuristic.geometric_grasps`, the documented rules
  on the perceived geometry (body across either side, side, rim, handle), the others kept as
  alternatives for replanning, as retrieval's are.
- ``heuristic_box``: :func:`agentic_grasp.core.heuristic.heuristic_grasp` on the perceived
  box (the first baseline).

Table V (scene graph study, interactive tasks) needs one more step between "no scene graph"
and the full system: ``no_constraint_inference`` builds the scene graph and keeps what the
graph itself decides (support ordering of sub-goals, support-dependency prerequisites) but
drops every constraint that changes the grasp (content preservation, collision avoidance,
occlusion: no Delta g). It lives in :data:`STUDY_CONFIGURATIONS`, not in Table II's
:data:`CONFIGURATIONS`; :func:`get_configuration` finds both.

Nothing here, nor in the planner, looks at task ids or object names.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from agentic_grasp.core.config import nested, node_params
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.grasping.config import GraspSynthesisConfig
from agentic_grasp.core.planner.sections import (ClassificationConfig, CorrectionConfig,
                                                 DefaultGrasp, Level2Config, Level3Config,
                                                 Limits, TimeModel, TransferRules,
                                                 UncoverConfig)
from agentic_grasp.core.types import AffordanceType, GraspType

NODE_NAME = "planner"

INITIAL_SOURCES = ("retrieval", "default", "vlm", "heuristic", "heuristic_box")


@dataclass(frozen=True)
class Configuration:
    """One row of Table II: which mechanisms the planner uses."""

    name: str
    initial: str = "retrieval"
    scene_graph: bool = True
    recovery: bool = True
    memory: bool = True
    #: With the scene graph on: infer the grasp-changing constraints (Delta g). Off keeps
    #: only the graph's support dependencies (Table V "+ scene graph").
    constraint_inference: bool = True
    #: The VLM's semantics (category, affordance, material, fragility) reach grasp planning;
    #: off for the heuristic, which sees depth geometry only.
    semantics: bool = True

    def __post_init__(self) -> None:
        if self.initial not in INITIAL_SOURCES:
            raise ConfigError(f"configuration {self.name}: initial must be one of "
                              f"{INITIAL_SOURCES}, got {self.initial!r}")

    @property
    def retrieval(self) -> bool:
        return self.initial == "retrieval"

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "initial": self.initial, "scene_graph": self.scene_graph,
                "recovery": self.recovery, "memory": self.memory,
                "constraint_inference": self.constraint_inference,
                "semantics": self.semantics}


CONFIGURATIONS: Dict[str, Configuration] = {
    c.name: c for c in (
        Configuration("full"),
        Configuration("no_haa_rag", initial="default"),
        Configuration("no_scene_graph", scene_graph=False),
        Configuration("no_recovery", recovery=False),
        Configuration("no_episodic_memory", memory=False),
        Configuration("vlm_only", initial="vlm", scene_graph=False, recovery=False,
                      memory=False),
        Configuration("heuristic", initial="heuristic", memory=False, semantics=False),
        Configuration("heuristic_box", initial="heuristic_box", scene_graph=False,
                      memory=False),
    )
}

#: Configurations of the other studies (Table V), kept apart from Table II's seven.
STUDY_CONFIGURATIONS: Dict[str, Configuration] = {
    c.name: c for c in (
        Configuration("no_constraint_inference", constraint_inference=False),
    )
}

#: Table II order.
TABLE_II_ORDER = ("full", "no_recovery", "no_episodic_memory", "no_scene_graph", "heuristic",
                  "heuristic_box", "no_haa_rag", "vlm_only")

#: The generic grasp type a VLM names for an affordance type (vlm_only's proposal).
VLM_TYPE_FOR_AFFORDANCE: Dict[AffordanceType, GraspType] = {
    AffordanceType.GRASPABLE_BODY: GraspType.POWER,
    AffordanceType.GRASPABLE_HANDLE: GraspType.PINCH,
    AffordanceType.GRASPABLE_EDGE: GraspType.PINCH,
    AffordanceType.PINCHABLE: GraspType.PINCH,
    AffordanceType.WRAPPABLE: GraspType.POWER,
    AffordanceType.FRAGILE: GraspType.SIDE,
    AffordanceType.TOOL_HANDLE: GraspType.POWER,
    AffordanceType.CLAMPABLE: GraspType.PINCH,
}


def get_configuration(name: Union[str, Configuration]) -> Configuration:
    """The Table II (or study) configuration called ``name`` (ConfigError naming the valid
    ones)."""
    if isinstance(name, Configuration):
        return name
    found = CONFIGURATIONS.get(str(name)) or STUDY_CONFIGURATIONS.get(str(name))
    if found is None:
        raise ConfigError(f"unknown planner configuration {name!r}; expected one of "
                          f"{', '.join(list(CONFIGURATIONS) + list(STUDY_CONFIGURATIONS))}")
    return found


def _section(cls, data: Optional[Mapping[str, Any]], where: str):
    data = dict(data or {})
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown parameter(s) {unknown}")
    try:
        return cls(**data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None




def _described(default: Any, description: str) -> Any:
    """A field with its parameter description (agentic_grasp.ros.common.params reads the
    metadata)."""
    return field(default=default, metadata={"description": description})


def _section_field(cls: type, description: str) -> Any:
    """A nested section; its description heads its leaves' (agentic_grasp.ros.common.params)."""
    return field(default_factory=cls, metadata={"description": description})


LEVEL_BY = ("failed_attempt", "next_attempt")
VISUAL_QUERIES = ("none", "render", "camera")
MEMORY_SCOPES = ("trial", "session")


@dataclass
class PlannerConfig:
    """Every constant of the planner; defaults equal config/planner.yaml."""

    configuration: str = _described(
        "full", "Table II configuration run when a goal leaves it empty: "
        + ", ".join(CONFIGURATIONS))
    max_retries: int = _described(
        3, "Rmax: retries after the first attempt (up to Rmax + 1 attempts per sub-goal)")
    seed: int = _described(0, "Seed of the level-3 perturbation generator, reseeded at every "
                              "goal that names no seed of its own (GraspObject.seed -1)")
    level_by: str = _described(
        "failed_attempt", "Attempt index that selects the correction level: failed_attempt "
        "(paper) or next_attempt")
    level1_max_index: int = _described(1, "r <= this gives a level-1 correction")
    level2_index: int = _described(2, "r == this gives a level-2 correction (larger r: "
                                      "level 3)")
    escalate_unchanged: bool = _described(True, "Replace a correction that changes nothing "
                                                "by the next level's")
    memory_scope: str = _described(
        "trial", "Episodic memory scope of the in-process episode runner (trial | session); "
        "this node uses memory_lifetime")
    # The sections' leaves are described "<section text>: <leaf> (<unit>)" by the node
    # (planner_settings.LEAF_DESCRIPTION); config/planner.yaml explains each in full.
    default_grasp: DefaultGrasp = _section_field(
        DefaultGrasp, "Fixed default grasp (w/o HAA-RAG and retrieval fallback)")
    limits: Limits = _section_field(Limits, "Bounds every planned grasp is clipped into")
    classification: ClassificationConfig = _section_field(
        ClassificationConfig, "ClassifyFailure (14-type taxonomy)")
    corrections: CorrectionConfig = _section_field(CorrectionConfig,
                                                   "Level-1 correction rule")
    level2: Level2Config = _section_field(Level2Config, "Level-2 grasp-type rotation")
    level3: Level3Config = _section_field(Level3Config, "Level-3 replan perturbation")
    strategy_direction_tolerance_rad: float = _described(
        math.radians(15.0), "Largest angle between a retrieved strategy's approach and a "
        "constraint-imposed one (rad)")
    rebase_min_shift_m: float = _described(
        0.002, "Target shift after which the grasps follow a re-perceived target (m)")
    rebase_min_yaw_rad: float = _described(
        0.02, "Target turn after which the grasps follow a re-perceived target (rad)")
    continue_after_subgoal_failure: bool = _described(
        True, "Go on with the next sub-goal after one failed, and try a failed one once more "
        "after others were taken away")
    time_model: TimeModel = _section_field(
        TimeModel, "Modelled compute time per stage (episode results)")
    episode_visual_query: str = _described(
        "none", "s_vis source of the in-process episode runner (none | render)")
    grasp_synthesis: GraspSynthesisConfig = _section_field(
        GraspSynthesisConfig, "Grasp fitting, Franka Hand model and clearance-aware "
        "candidates")
    memory: TransferRules = _section_field(
        TransferRules, "Episodic memory transfer beyond the category (similar objects, "
        "learned corrections)")
    uncover: UncoverConfig = _section_field(
        UncoverConfig, "Looking behind what could hide a target that is not in view")

    def __post_init__(self) -> None:
        get_configuration(self.configuration)
        if isinstance(self.grasp_synthesis, Mapping):
            self.grasp_synthesis = GraspSynthesisConfig.from_mapping(self.grasp_synthesis)
        if isinstance(self.uncover, Mapping):
            self.uncover = UncoverConfig.from_mapping(self.uncover)
        for name in ("max_retries", "seed", "level1_max_index", "level2_index"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or int(value) < 0:
                raise ConfigError(f"planner.{name} must be an integer >= 0, got {value!r}")
            setattr(self, name, int(value))
        if self.level2_index <= self.level1_max_index:
            raise ConfigError("planner.level2_index must exceed level1_max_index")
        if self.level_by not in LEVEL_BY:
            raise ConfigError(f"planner.level_by must be one of {LEVEL_BY}, got "
                              f"{self.level_by!r}")
        if self.memory_scope not in MEMORY_SCOPES:
            raise ConfigError(f"planner.memory_scope must be one of {MEMORY_SCOPES}")
        if self.episode_visual_query not in VISUAL_QUERIES:
            raise ConfigError(f"planner.episode_visual_query must be one of {VISUAL_QUERIES}")
        for name in ("rebase_min_shift_m", "rebase_min_yaw_rad"):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value < 0.0:
                raise ConfigError(f"planner.{name} must be >= 0")
            setattr(self, name, value)
        self.continue_after_subgoal_failure = bool(self.continue_after_subgoal_failure)
        self.escalate_unchanged = bool(self.escalate_unchanged)
        if not 0.0 <= self.strategy_direction_tolerance_rad <= math.pi:
            raise ConfigError("planner.strategy_direction_tolerance_rad must be in [0, pi]")

    @classmethod
    def from_params(cls, params: Mapping[str, Any], source: str = "planner parameters"
                    ) -> "PlannerConfig":
        """From the ``ros__parameters`` mapping, nested or with dotted ROS names."""
        cfg = nested(dict(params)) if any("." in str(k) for k in params) else dict(params)
        sections = {"default_grasp": DefaultGrasp, "limits": Limits,
                    "classification": ClassificationConfig, "corrections": CorrectionConfig,
                    "level2": Level2Config, "level3": Level3Config, "time_model": TimeModel,
                    "memory": TransferRules}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown planner parameter(s) {unknown}")
        kwargs: Dict[str, Any] = {}
        for key, value in cfg.items():
            if key == "grasp_synthesis":
                try:
                    kwargs[key] = GraspSynthesisConfig.from_mapping(dict(value))
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"{source}: grasp_synthesis: {exc}") from None
            elif key == "uncover":
                try:
                    kwargs[key] = UncoverConfig.from_mapping(dict(value))
                except (TypeError, ValueError) as exc:
                    raise ConfigError(f"{source}: uncover: {exc}") from None
            elif key in sections:
                kwargs[key] = _section(sections[key], value, f"{source}: {key}")
            else:
                kwargs[key] = value
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    @classmethod
    def from_config(cls, path: Union[str, Path, None] = None) -> "PlannerConfig":
        """Read ``planner: ros__parameters:`` from config/planner.yaml (or ``path``)."""
        return cls.from_params(node_params(NODE_NAME, path),
                               str(path or "config/planner.yaml"))

    def with_configuration(self, name: str) -> "PlannerConfig":
        """A copy running another Table II configuration (nothing else changes)."""
        get_configuration(name)
        return replace(self, configuration=name)


#: The second word of a trial's level-3 seed: a trial's generator is ``[seed, TRIAL_STREAM]``
#: (an arbitrary prime that keeps the planner's stream apart from the simulator's, which is
#: seeded with the bare trial seed), in process (episode.run_trial) and in the graph (a
#: GraspObject goal's seed), so both draw the same perturbations for the same trial.
TRIAL_STREAM = 7919


def trial_rng_seed(seed: int) -> List[int]:
    """The level-3 generator's seed of trial ``seed`` (ReflectivePlanner.reseed)."""
    return [int(seed), TRIAL_STREAM]


__all__ = ["CONFIGURATIONS", "Configuration", "PlannerConfig", "STUDY_CONFIGURATIONS",
           "TABLE_II_ORDER", "TRIAL_STREAM", "trial_rng_seed",
           "VLM_TYPE_FOR_AFFORDANCE", "get_configuration"]
