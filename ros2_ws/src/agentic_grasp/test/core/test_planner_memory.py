"""Episodic memory's lifetime: one policy for the planner node and the episode runner."""
from agentic_grasp.core.planner.memory import MemoryLifetime


def test_memory_lifetime_keeps_one_memory_per_configuration_for_the_session_only():
    lifetime = MemoryLifetime()
    kept = lifetime.memory_for("full", True, "session")
    assert lifetime.memory_for("full", True, "session") is kept
    assert lifetime.memory_for("no_recovery", True, "session") is not kept
    off = lifetime.memory_for("no_episodic_memory", False, "session")
    assert not off.enabled
    for per_run in ("goal", "trial"):
        fresh = lifetime.memory_for("full", True, per_run)
        assert fresh is not kept and fresh.enabled and not len(fresh)
    lifetime.clear()
    assert lifetime.memory_for("full", True, "session") is not kept


# ---------------------------------------------------------------- transfer
import pytest  # noqa: E402

from agentic_grasp.core.grasping.config import GraspSynthesisConfig  # noqa: E402
from agentic_grasp.core.planner import (EpisodicMemory, PlannerConfig,  # noqa: E402
                                        ReflectivePlanner)
from agentic_grasp.core.planner.memory import (LEVEL_CATEGORY, LEVEL_CORRECTIONS,  # noqa: E402
                                               LEVEL_SIMILAR)
from agentic_grasp.core.planner.sections import TransferRules  # noqa: E402
from agentic_grasp.core.types import Shape  # noqa: E402

from test_planner_fakes import (FixedRetriever, ScriptedArm, experience,  # noqa: E402
                                make_object, never, ok, perception_of, slip)

GRASP = {"position": [0.0, 0.0, 0.02], "width": 0.07, "force": 20.0, "grasp_type": "power"}


def _planner():
    retriever = FixedRetriever([experience("x-001", "x", GRASP)])
    synth = GraspSynthesisConfig(constraint_mode="paper", fit_strategies=False)
    return ReflectivePlanner(PlannerConfig(seed=1, grasp_synthesis=synth), retriever,
                             configuration="full")


def _goal(obj, script, memory):
    arm = ScriptedArm(list(script))
    goal = _planner().plan_and_execute(perception_of([obj], obj.id), obj.id, arm, memory,
                                       never)
    return goal, arm


def _block(oid, category, size=(0.05, 0.05, 0.05), material="wood", fragility=0.0,
           aff="Graspable_Body"):
    return make_object(oid, category, size=size, material=material, fragility=fragility,
                       aff_type=aff)


def test_a_slip_correction_carries_to_an_object_of_the_same_material_and_size():
    memory = EpisodicMemory()
    first, arm = _goal(_block("cube_1", "cube"), [slip(), ok()], memory)
    assert first.success and arm.grasps[1].force == pytest.approx(20.0 * 1.2)
    # another category, another affordance type: no whole grasp, but the force learned
    later, arm = _goal(_block("peg_1", "peg", size=(0.05, 0.052, 0.055), aff="Tool_Handle"),
                       [ok()], memory)
    assert arm.grasps[0].force == pytest.approx(20.0 * 1.2)
    assert later.memory_recalled and later.initial_source == "retrieval"
    assert "level 3" in later.initial_detail and "slip on cube_1" in later.initial_detail
    assert later.attempts[0].memory == later.attempts[0].to_dict()["memory"]
    assert "force x 1.20" in later.attempts[0].memory


def test_nothing_carries_to_an_object_that_shares_no_key():
    memory = EpisodicMemory()
    _goal(_block("cube_1", "cube"), [slip(), ok()], memory)
    other = _block("can_1", "can", size=(0.05, 0.05, 0.05), material="metal")
    goal, arm = _goal(other, [ok()], memory)               # other material: friction differs
    assert arm.grasps[0].force == pytest.approx(20.0) and not goal.memory_recalled
    big = _block("crate_1", "crate", size=(0.05, 0.05, 0.08))   # 30 mm taller: heavier
    goal, arm = _goal(big, [ok()], memory)
    assert arm.grasps[0].force == pytest.approx(20.0) and goal.attempts[0].memory == ""


def test_a_similar_object_gets_the_whole_grasp_and_a_same_category_one_level_1():
    memory = EpisodicMemory()
    _goal(_block("cube_1", "cube"), [slip(), ok()], memory)
    twin = _block("block_1", "block", size=(0.045, 0.05, 0.052), fragility=0.2)
    goal, arm = _goal(twin, [ok()], memory)
    assert goal.initial_source == "memory" and "level 2" in goal.initial_detail
    assert arm.grasps[0].force == pytest.approx(24.0)
    goal, _ = _goal(_block("cube_2", "cube", size=(0.07, 0.07, 0.07)), [ok()], memory)
    assert "level 1" in goal.initial_detail


def test_a_transfer_that_failed_is_not_proposed_again_for_that_object():
    memory = EpisodicMemory()
    _goal(_block("cube_1", "cube"), [slip(), ok()], memory)
    peg = _block("peg_1", "peg", aff="Tool_Handle")
    goal, arm = _goal(peg, [slip(), slip(), slip(), slip()], memory)
    assert arm.grasps[0].force == pytest.approx(24.0) and not goal.success
    again, arm = _goal(peg, [ok()], memory)
    assert arm.grasps[0].force == pytest.approx(20.0) and not again.memory_recalled
    other, arm = _goal(_block("dowel_1", "dowel", aff="Clampable"), [ok()], memory)
    assert arm.grasps[0].force == pytest.approx(24.0)      # another object still gets it


def test_memory_keys_are_perceived_and_bands_follow_the_rules():
    rules = TransferRules()
    assert rules.same_fragility_band(0.22, 0.3) and rules.same_fragility_band(0.0, 0.3)
    assert not rules.same_fragility_band(0.3, 0.6) and rules.same_fragility_band(0.88, 0.9)
    memory = EpisodicMemory()
    cup = make_object("cup_1", "cup", size=(0.08, 0.08, 0.09), material="ceramic",
                      fragility=0.3, shape=Shape.CYLINDER, aff_type="Graspable_Handle")
    memory.store("cup", _planner().default_grasp(cup), cup)
    mug = make_object("mug_1", "mug", size=(0.071, 0.071, 0.10), material="ceramic",
                      fragility=0.25, shape=Shape.CYLINDER, aff_type="Graspable_Handle")

    def fit(local, spec, record):
        from agentic_grasp.core.grasping.fit import fit_strategy
        from agentic_grasp.core.grasping.hand import HandModel
        synth = GraspSynthesisConfig()
        return fit_strategy(local, spec, record, mug, synth, HandModel(synth.hand))

    recall = memory.recall_for(mug, fit)
    assert recall.level == LEVEL_SIMILAR and "cup_1" in recall.text
    assert memory.recall_for(mug, None) is None             # no fitter: no level 2
    assert EpisodicMemory(enabled=False).recall_for(mug, fit) is None
    glass = make_object("vase_1", "vase", size=(0.08, 0.08, 0.09), material="glass",
                        fragility=0.8, shape=Shape.CYLINDER, aff_type="Graspable_Handle")
    assert memory.recall_for(glass, fit) is None
    assert memory.recall_for(cup, fit).level == LEVEL_CATEGORY
    assert LEVEL_CORRECTIONS == 3


def test_a_handle_grasp_stored_without_its_side_is_never_copied_whole():
    # a round cup whose yaw was arbitrary and whose handle was not seen: the angle of the
    # stored grasp around the body means nothing on the next cup (it would land anywhere)
    cup = make_object("cup_1", "cup", size=(0.08, 0.08, 0.09), material="ceramic",
                      fragility=0.3, shape=Shape.CYLINDER, aff_type="Graspable_Handle",
                      region="handle")
    grasp = _planner().default_grasp(cup)
    blind = EpisodicMemory()
    blind.store("cup", grasp, cup, yaw_known=False)
    assert blind.recall_for(cup) is None
    seen = EpisodicMemory()
    seen.store("cup", grasp, cup, yaw_known=False, handle_yaw=0.3)
    assert seen.recall_for(cup).level == LEVEL_CATEGORY           # no fitter: object frame
    apple = make_object("apple_1", "apple", size=(0.08, 0.08, 0.08), material="organic",
                        shape=Shape.SPHERE, aff_type="Wrappable")
    plain = EpisodicMemory()
    plain.store("apple", _planner().default_grasp(apple), apple, yaw_known=False)
    assert plain.recall_for(apple).level == LEVEL_CATEGORY        # round, no handle: fine


def test_a_session_memory_keeps_a_bounded_number_of_successes():
    # A planner node keeps its memory for its life and records it with every goal: it must
    # not grow with every success (core/planner/memory.py, MAX_ENTRIES).
    from agentic_grasp.core.planner.memory import MAX_ENTRIES
    from agentic_grasp.ros.recording.memory_state import memory_from_state, memory_state

    memory = EpisodicMemory()
    planner = _planner()
    cup = make_object("cup_1", "cup", size=(0.08, 0.08, 0.09), material="ceramic",
                      fragility=0.3, shape=Shape.CYLINDER, aff_type="Graspable_Handle")
    memory.store("cup", planner.default_grasp(cup), cup)          # the cup's only success
    for i in range(3 * MAX_ENTRIES):
        block = _block(f"block_{i}", "block")
        memory.store("block", planner.default_grasp(block), block)
    assert len(memory._all) <= MAX_ENTRIES + 1
    assert memory.recall("cup").object_id == "cup_1"          # level 1 of each category kept
    assert memory.recall("block").object_id == f"block_{3 * MAX_ENTRIES - 1}"
    # a replay rebuilds it from the goal's record
    again = memory_from_state(memory_state(memory))
    assert again.recall("cup").object_id == "cup_1"
