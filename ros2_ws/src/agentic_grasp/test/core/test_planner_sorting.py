"""A sort's order from what each category is known to be, weighed against perception."""
import math

import pytest

from agentic_grasp.core.planner import PlannerConfig, ReflectivePlanner
from agentic_grasp.core.planner.instruction.sorting import (BY_FRAGILITY, BY_SIZE,
                                                            PerceptionError, estimate,
                                                            perception_error, sort_view)
from agentic_grasp.core.retrieval.priors import (CategoryKnowledge, inverse_variance,
                                                 load_category_knowledge)

from test_planner_fakes import FixedRetriever, ScriptedArm, experience, make_object, ok
from test_planner_tasks import World

VLM = PerceptionError(fragility_sd=0.1, depth_sd_m=0.001)


def knowledge():
    """cube 0.0 and 0.0, cup 0.2 and 0.4: pooled spread sqrt(0.02 / 1) = 0.141."""
    exps = [experience("cube-001", "cube", {"width": 0.06}, fragility=0.0),
            experience("cube-002", "cube", {"width": 0.06}, fragility=0.0),
            experience("cup-001", "cup", {"width": 0.06}, fragility=0.2),
            experience("cup-002", "cup", {"width": 0.06}, fragility=0.4)]
    return CategoryKnowledge(exps)


def test_priors_pool_the_spread_of_every_category():
    kb = knowledge()
    assert kb.fragility_spread == pytest.approx(math.sqrt(0.02 / 2))
    cup = kb.prior("cup")
    assert cup.fragility == pytest.approx(0.3)
    assert cup.fragility_sd == pytest.approx(kb.fragility_spread * math.sqrt(1.5))
    assert kb.prior("kettle") is None


def test_inverse_variance_weighs_the_surer_measurement_more():
    value, sd = inverse_variance([(0.0, 0.1), (1.0, 0.2)])
    assert value == pytest.approx(0.2)
    assert sd == pytest.approx(math.sqrt(1.0 / (100.0 + 25.0)))
    assert inverse_variance([(0.3, 0.0), (1.0, 0.1)]) == (0.3, 0.0)


def test_a_noisy_fragility_is_pulled_towards_its_category():
    # perception swapped them: the cube read 0.25, the cup 0.20
    cube = make_object("cube_1", "cube", fragility=0.25)
    cup = make_object("cup_1", "cup", fragility=0.20)
    view, notes = sort_view([cup, cube], BY_FRAGILITY, knowledge(), VLM)
    by_id = {o.id: o.fragility for o in view}
    assert by_id["cube_1"] < by_id["cup_1"]
    assert "known for cube" in notes["cube_1"].note
    # perception alone keeps the swap
    alone, _ = sort_view([cup, cube], BY_FRAGILITY, None, VLM)
    assert {o.id: o.fragility for o in alone}["cube_1"] > 0.2
    # the objects themselves keep what perception measured
    assert cube.fragility == 0.25


def test_an_instance_unlike_its_category_keeps_what_perception_measured():
    glass_bottle = make_object("cup_1", "cup", fragility=0.9)     # far beyond 0.3 +- 0.17
    est = estimate(glass_bottle, BY_FRAGILITY, knowledge(), VLM)
    assert est.value == pytest.approx(0.9)
    assert "not this instance" in est.note


def test_size_is_led_by_depth_and_the_object_is_not_changed():
    small = make_object("cup_1", "cup", size=(0.05, 0.05, 0.05))
    est = estimate(small, BY_SIZE, knowledge(), VLM)
    # the knowledge base's rendered cup is 5 cm too, and depth is far surer than its spread
    assert math.exp(est.value) == pytest.approx(0.05 ** 3, rel=1e-6)
    view, _ = sort_view([small], BY_SIZE, knowledge(), VLM)
    assert view[0].size[0] == pytest.approx(0.05)


def test_stated_errors_come_from_the_perception_configuration():
    assert perception_error("vlm_sim").fragility_sd == pytest.approx(0.1)
    assert perception_error("oracle").fragility_sd == pytest.approx(0.0)
    assert perception_error("vlm_sim").depth_sd_m == pytest.approx(0.001)


def test_the_shipped_knowledge_base_knows_a_cube_is_sturdier_than_a_cup():
    kb = load_category_knowledge()
    assert kb.prior("cube").fragility < kb.prior("cup").fragility
    assert kb.prior("ceramic cup").category == "cup"          # through the aliases


def test_run_task_sorts_by_the_weighed_fragility():
    # perceived swapped (cube 0.25 > cup 0.20): the shipped knowledge base sets it right
    objs = [make_object("cup_1", "cup", xy=(0.45, -0.15), fragility=0.20),
            make_object("cube_1", "cube", xy=(0.55, 0.15), fragility=0.25)]
    world = World(objs)
    retriever = FixedRetriever([experience("any-001", "cup", {"width": 0.06, "force": 10.0})])
    task = ReflectivePlanner(PlannerConfig(), retriever).run_task(
        "sort the objects by fragility", world, ScriptedArm([ok(), ok()]),
        after_success=world.remove)
    assert task.grasped == ["cube_1", "cup_1"]
    assert "known for cube" in task.plan.subgoals[0].reason


# ------------------------------------------------------------------ long tasks
class HidingWorld(World):
    """The block stands behind the box: it is in view only once the box is taken."""

    def perceive(self, instruction):
        self.instructions.append(instruction)
        objs = [o for o in self.objects.values()
                if o.id != "block_1" or "box_1" not in self.objects]
        target = instruction.split()[2] if instruction.startswith("pick up ") else ""
        if target not in {o.id for o in objs}:
            from agentic_grasp.core.instructions import resolve_targets
            ids = resolve_targets(instruction, objs)
            target = ids[0] if ids else ""
        from test_planner_fakes import perception_of
        return perception_of(objs, target)


def test_clearing_looks_again_for_what_the_taken_objects_hid():
    objs = [make_object("box_1", "box", xy=(0.45, 0.0)),
            make_object("block_1", "block", xy=(0.55, 0.0)),
            make_object("cup_1", "cup", xy=(0.45, 0.2))]
    world = HidingWorld(objs)
    retriever = FixedRetriever([experience("any-001", "cup", {"width": 0.06, "force": 10.0})])
    task = ReflectivePlanner(PlannerConfig(), retriever).run_task(
        "clear the table", world, ScriptedArm([ok(), ok(), ok()]),
        after_success=world.remove)
    assert sorted(task.grasped) == ["block_1", "box_1", "cup_1"] and task.success
    assert task.plan.subgoals[-1].target_id == "block_1"
    assert task.plan.subgoals[-1].reason == "seen once others were taken away"


def test_a_list_whose_first_object_is_a_landmark_has_an_unseen_target():
    from agentic_grasp.core.planner.instruction.run import _unseen_subject

    objs = [make_object("box_1", "box", xy=(0.45, 0.0)),
            make_object("cup_1", "cup", xy=(0.45, 0.2)),
            make_object("bowl_1", "bowl", xy=(0.55, 0.2))]
    text = "put away the ball behind the box, then the cup and the bowl"
    assert _unseen_subject(text, objs)
    assert not _unseen_subject("put away the cup behind the box, then the bowl", objs)
