"""Table II switches (each removes exactly its mechanism) and config/planner.yaml."""
import math
from dataclasses import asdict

import numpy as np
import pytest

from agentic_grasp.core import paths
from agentic_grasp.core.config import load_yaml
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.grasping.heuristic import heuristic_grasp
from agentic_grasp.core.grasping.config import GraspSynthesisConfig
from agentic_grasp.core.planner import (CONFIGURATIONS, TABLE_II_ORDER, EpisodicMemory,
                                        PlannerConfig, ReflectivePlanner, SceneGraphReasoner)
from agentic_grasp.core.types import GraspType, Shape

from test_planner_fakes import (FixedRetriever, ScriptedArm, experience, make_object, never,
                                ok, perception_of, slip)

GRASP = {"position": [0.0, 0.0, 0.02], "width": 0.07, "force": 25.0, "grasp_type": "power"}


def scene():
    target = make_object("box_1", "box", xy=(0.5, 0.0), size=(0.05, 0.07, 0.08),
                         yaw=0.2, fragility=0.1)
    vase = make_object("vase_1", "vase", xy=(0.5, 0.12), size=(0.08, 0.08, 0.15),
                       fragility=0.8, shape=Shape.CYLINDER, aff_type="Fragile")
    return [target, vase]


class Spy(SceneGraphReasoner):
    """The in-process scene-graph reasoning, counting the constraint questions."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def constraints(self, objects, target_id):
        self.calls += 1
        return super().constraints(objects, target_id)


def run(configuration, script, memory=None):
    retriever = FixedRetriever([experience("box-001", "box", GRASP)])
    spy = Spy()
    # the paper's fixed adjustments, stored grasps copied (test_grasping.py: clearance mode)
    paper = GraspSynthesisConfig(constraint_mode="paper", fit_strategies=False)
    p = ReflectivePlanner(PlannerConfig(seed=1, grasp_synthesis=paper), retriever, spy,
                          configuration=configuration)
    arm = ScriptedArm(list(script))
    memory = memory if memory is not None else EpisodicMemory()
    goal = p.plan_and_execute(perception_of(scene(), "box_1"), "box_1", arm, memory, never)
    return goal, arm, retriever, spy, memory


def test_table_ii_has_eight_configurations():
    # the paper's seven and heuristic_box, the box rule the heuristic used at first
    assert set(TABLE_II_ORDER) == set(CONFIGURATIONS) and len(CONFIGURATIONS) == 8
    with pytest.raises(ConfigError):
        ReflectivePlanner(configuration="no_such_thing")


def test_full_uses_every_mechanism():
    goal, arm, retriever, spy, memory = run("full", [slip()] * 4)
    assert retriever.calls and spy.calls == 1
    assert goal.n_attempts == 4
    assert arm.grasps[0].force == pytest.approx(25.0 * 0.8)        # collision avoidance
    goal, *_, memory = run("full", [ok()])
    assert "box" in memory


def test_no_recovery_makes_exactly_one_attempt_and_nothing_else_changes():
    full, full_arm, *_ = run("full", [slip()] * 4)
    goal, arm, retriever, spy, _ = run("no_recovery", [slip()] * 4)
    assert goal.n_attempts == 1 and len(arm.grasps) == 1
    assert arm.grasps[0].to_dict() == full_arm.grasps[0].to_dict()
    assert retriever.calls and spy.calls == 1
    assert goal.attempts[0].diagnosis is not None                  # still diagnosed
    assert not goal.attempts[0].correction_executed


def test_no_scene_graph_passes_no_constraints_to_the_grasp():
    goal, arm, retriever, spy, _ = run("no_scene_graph", [ok()])
    assert spy.calls == 0 and len(goal.constraints) == 0
    g = arm.grasps[0]
    assert g.force == pytest.approx(25.0) and g.approach_height == pytest.approx(0.10)
    assert np.allclose(g.approach, [0, 0, -1])
    assert retriever.calls and goal.initial_source == "retrieval"
    goal, arm, *_ = run("no_scene_graph", [slip()] * 4)
    assert goal.n_attempts == 4


def test_no_haa_rag_uses_the_default_grasp_and_keeps_the_rest():
    goal, arm, retriever, spy, memory = run("no_haa_rag", [slip()] * 4)
    assert not retriever.calls and spy.calls == 1
    g = arm.grasps[0]
    d = PlannerConfig().default_grasp
    assert g.width == pytest.approx(d.width_m) and g.force == pytest.approx(d.force_n * 0.8)
    assert g.grasp_type == GraspType.POWER
    assert np.allclose(g.position, scene()[0].position)
    assert goal.n_attempts == 4 and goal.initial_source == "default"


def test_no_episodic_memory_only_drops_memory():
    memory = EpisodicMemory()
    goal, arm, retriever, spy, _ = run("no_episodic_memory", [ok()], memory)
    assert len(memory) == 0 and not goal.memory_stored
    full, full_arm, *_ = run("full", [ok()])
    assert arm.grasps[0].to_dict() == full_arm.grasps[0].to_dict()
    assert spy.calls == 1 and retriever.calls


def test_vlm_only_is_one_generic_proposal():
    memory = EpisodicMemory()
    goal, arm, retriever, spy, _ = run("vlm_only", [slip()] * 4, memory)
    assert not retriever.calls and spy.calls == 0 and goal.n_attempts == 1
    assert len(memory) == 0
    g = arm.grasps[0]
    target = scene()[0]
    assert g.width == pytest.approx(0.04) and g.force == pytest.approx(20.0)
    assert g.grasp_type == GraspType.POWER                       # Graspable_Body -> power
    # closes across the narrower side (object x, 5 cm): wrist = yaw - 90 deg
    assert g.wrist_yaw == pytest.approx(0.2 - math.pi / 2)
    assert np.allclose(g.position, target.position)
    assert goal.initial_source == "vlm"


def test_heuristic_box_is_the_size_rule_with_recovery():
    goal, arm, retriever, spy, memory = run("heuristic_box", [slip()] * 4)
    assert not retriever.calls and spy.calls == 0 and goal.n_attempts == 4
    expected = heuristic_grasp(scene()[0])
    assert arm.grasps[0].to_dict() == expected.to_dict()
    assert len(memory) == 0 and goal.initial_source == "heuristic_box"


class _Seen(Spy):
    """A constraint reasoner that remembers the objects it was given."""

    def constraints(self, objects, target_id):
        self.objects = list(objects)
        return super().constraints(objects, target_id)


def test_heuristic_uses_the_scene_graph_and_recovery_on_geometry_alone():
    from agentic_grasp.core.grasping.heuristic import geometric_grasps, holding_force
    retriever = FixedRetriever([experience("box-001", "box", GRASP)])
    seen = _Seen()
    cfg = PlannerConfig(seed=1)
    p = ReflectivePlanner(cfg, retriever, seen, configuration="heuristic")
    arm = ScriptedArm([slip()] * 4)
    memory = EpisodicMemory()
    goal = p.plan_and_execute(perception_of(scene(), "box_1"), "box_1", arm, memory, never)
    assert not retriever.calls and seen.calls == 1 and goal.n_attempts == 4
    # the VLM's semantics never reach grasp planning: the vase is not known to be fragile
    assert all(o.affordance is None and o.fragility == 0.0 and o.material == "unknown"
               for o in seen.objects)
    assert len(goal.constraints) == 0 and goal.initial_source == "heuristic"
    assert len(memory) == 0 and "rule 1" in goal.initial_detail
    box = scene()[0]
    # rule 1 across the 50 mm side, opening 50 + 20 mm; force holds 1000 kg/m^3 x volume
    first = geometric_grasps(box, cfg.grasp_synthesis, cfg.level2, cfg.limits)[0][0]
    assert first.width == pytest.approx(0.07) and first.force == pytest.approx(
        holding_force(box, p.heuristic_config))
    assert arm.grasps[0].force == pytest.approx(first.force)
    assert arm.grasps[1].force == pytest.approx(first.force * 1.2)     # recovery: slip


def test_planner_yaml_matches_the_defaults():
    from_file = PlannerConfig.from_config()
    assert asdict(from_file) == asdict(PlannerConfig())
    raw = load_yaml(paths.config_file("planner"))["planner"]["ros__parameters"]
    assert raw["max_retries"] == 3 and raw["corrections"]["slip_force_scale"] == 1.2
    assert raw["level3"]["perturbation_m"] == 0.01


def test_the_gripper_bounds_have_one_home():
    """The gripper's force ceiling and stroke are stated once (core/types.py): the planner's
    limits, its hand model and the executor's hard limits default to them, and the config
    files that name them (keys kept for ros2 param) hold the same values."""
    from agentic_grasp.core.arm.backend import ExecutorLimits
    from agentic_grasp.core.config import node_params
    from agentic_grasp.core.grasping.config import HandConfig
    from agentic_grasp.core.planner.sections import Limits
    from agentic_grasp.core.types import GRIPPER_MAX_FORCE_N, GRIPPER_MAX_WIDTH_M

    assert Limits().max_force_n == ExecutorLimits().max_force_n == GRIPPER_MAX_FORCE_N
    assert Limits().max_width_m == ExecutorLimits().max_width_m == GRIPPER_MAX_WIDTH_M
    assert HandConfig().max_opening_m == GRIPPER_MAX_WIDTH_M
    planner = node_params("planner")
    executor = node_params("executor")["limits"]
    assert planner["limits"]["max_force_n"] == executor["max_force_n"] == GRIPPER_MAX_FORCE_N
    assert planner["limits"]["max_width_m"] == executor["max_width_m"] == GRIPPER_MAX_WIDTH_M
    assert planner["grasp_synthesis"]["hand"]["max_opening_m"] == GRIPPER_MAX_WIDTH_M


def test_dotted_ros_parameters_are_accepted():
    cfg = PlannerConfig.from_params({"configuration": "no_recovery",
                                     "corrections.slip_force_scale": 1.5,
                                     "classification.phi_thresholds.width_compatibility": 0.3})
    assert cfg.corrections.slip_force_scale == 1.5
    assert cfg.classification.phi_thresholds["width_compatibility"] == 0.3


@pytest.mark.parametrize("params", [
    {"configuration": "nope"}, {"max_retries": -1}, {"level_by": "sometimes"},
    {"corrections": {"slip_force_scale": 0}}, {"limits": {"min_force_n": 200}},
    {"classification": {"phi_thresholds": {"bogus": 0.1}}}, {"unknown_key": 1},
    {"level2": {"grasp_type_order": ["power", "power"]}},
])
def test_bad_parameters_are_rejected(params):
    with pytest.raises(ConfigError):
        PlannerConfig.from_params(params)


def test_level_thresholds():
    from agentic_grasp.core.planner.recovery import retry_level

    cfg = PlannerConfig()
    assert [retry_level(r, cfg) for r in range(5)] == [1, 1, 2, 3, 3]
