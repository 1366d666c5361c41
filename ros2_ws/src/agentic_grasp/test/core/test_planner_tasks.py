"""Instruction -> ordered sub-goals, and whole instructions through run_task."""
import numpy as np
import pytest

from agentic_grasp.core.planner import (EpisodicMemory, FunctionPerceiver, Perceiver,
                                        PlannerConfig, ReflectivePlanner, SceneGraphReasoner,
                                        plan_subgoals)
from agentic_grasp.core.planner.instruction.tasks import KIND_CLEAR, KIND_NAMED, KIND_SORT
from agentic_grasp.core.scene_graph.graph import build_scene_graph
from agentic_grasp.core.types import Shape

from test_planner_fakes import (FixedRetriever, ScriptedArm, experience, make_object, ok,
                                perception_of, slip)


def table():
    return [make_object("glass_1", "wine glass", xy=(0.45, -0.18), fragility=0.9,
                        size=(0.07, 0.07, 0.2), shape=Shape.CYLINDER, name="wine glass"),
            make_object("cup_1", "cup", xy=(0.58, 0.0), fragility=0.3, name="ceramic cup"),
            make_object("block_1", "block", xy=(0.45, 0.18), fragility=0.0, name="toy block")]


def stack():
    """block_1 rests on box_1; cup_1 stands apart."""
    return [make_object("box_1", "box", xy=(0.5, 0.0), size=(0.07, 0.07, 0.06)),  # fits the hand
            make_object("block_1", "block", xy=(0.5, 0.0), size=(0.04, 0.04, 0.04), z=0.08),
            make_object("cup_1", "cup", xy=(0.5, 0.25))]


@pytest.mark.parametrize("instruction, expected, kind", [
    ("sort the objects by fragility", ["block_1", "cup_1", "glass_1"], KIND_SORT),
    ("sort the objects by fragility, most fragile first", ["glass_1", "cup_1", "block_1"],
     KIND_SORT),
    ("clear the table", ["glass_1", "cup_1", "block_1"], KIND_CLEAR),
    ("pick up the toy block, then the wine glass and the cup", ["block_1", "glass_1", "cup_1"],
     KIND_NAMED),
    ("pick up the cup next to the wine glass", ["cup_1"], KIND_NAMED),
    ("pick up the toy block near the cup, and the wine glass", ["block_1", "glass_1"],
     KIND_NAMED),
])
def test_instruction_to_ordered_subgoals(instruction, expected, kind):
    plan = plan_subgoals(instruction, table(), build_scene_graph(table()))
    assert plan.kind == kind
    assert plan.target_ids == expected
    assert plan.order_matters == (kind == KIND_SORT)
    assert all(s.reason for s in plan.subgoals)


def test_support_dependency_goes_first():
    objs = stack()
    plan = plan_subgoals("pick up the box and the cup", objs, build_scene_graph(objs))
    assert plan.target_ids == ["block_1", "box_1", "cup_1"]
    assert plan.subgoals[0].prerequisite_for == "box_1"
    assert "rests on box_1" in plan.subgoals[0].reason
    # a named dependent is not duplicated and still goes first
    plan = plan_subgoals("pick up the box, then the block", objs, build_scene_graph(objs))
    assert plan.target_ids == ["block_1", "box_1"]
    assert plan.subgoals[0].prerequisite_for == ""


def test_support_beats_the_sort_order_and_no_graph_keeps_the_instruction_order():
    objs = stack()
    objs[1].fragility = 0.9                                     # the block on top is fragile
    plan = plan_subgoals("sort the objects by fragility", objs, build_scene_graph(objs))
    assert plan.target_ids.index("block_1") < plan.target_ids.index("box_1")
    plan = plan_subgoals("sort the objects by fragility", objs, None)
    assert plan.target_ids[-1] == "block_1"


def test_nothing_named():
    assert plan_subgoals("pick up the banana", table()).subgoals == []


# ------------------------------------------------------------------ run_task
class World(Perceiver):
    """A tiny stand-in for the simulator: perceive what is left; remove what is grasped."""

    def __init__(self, objects):
        self.objects = {o.id: o for o in objects}
        self.removed = []
        self.instructions = []

    def perceive(self, instruction):
        self.instructions.append(instruction)
        objs = list(self.objects.values())
        target = instruction.split()[2] if instruction.startswith("pick up ") else ""
        if target not in self.objects:
            from agentic_grasp.core.instructions import resolve_targets
            ids = resolve_targets(instruction, objs)
            target = ids[0] if ids else ""
        return perception_of(objs, target)

    def remove(self, oid):
        self.removed.append(oid)
        self.objects.pop(oid)


def planner(**cfg):
    retriever = FixedRetriever([experience("any-001", "cup", {"width": 0.06, "force": 10.0})])
    return ReflectivePlanner(PlannerConfig(**cfg), retriever)


def test_run_task_sorts_and_transfers_memory_between_cups():
    cups = [make_object("cup_a", "cup", xy=(0.45, -0.15), fragility=0.3, name="ceramic cup"),
            make_object("cup_b", "cup", xy=(0.55, 0.15), fragility=0.3, name="ceramic cup"),
            make_object("block_1", "block", xy=(0.6, -0.2), fragility=0.0, name="toy block")]
    world = World(cups)
    arm = ScriptedArm([ok(), slip(), ok(), ok()])      # block, cup_a (slips once), cup_b
    memory = EpisodicMemory()
    task = planner().run_task("sort the objects by fragility", world, arm, memory,
                              after_success=world.remove)
    assert task.success and task.grasped == ["block_1", "cup_a", "cup_b"]
    assert world.removed == task.grasped
    cup_a, cup_b = task.goals[1], task.goals[2]
    assert cup_a.n_attempts == 2 and cup_a.memory_stored
    assert cup_b.initial_source == "memory" and cup_b.n_attempts == 1
    # the second cup starts from the force the first one needed (x1.2), not the retrieved one
    assert arm.grasps[3].force == pytest.approx(arm.grasps[2].force)
    assert arm.grasps[3].force == pytest.approx(1.2 * arm.grasps[1].force)
    # the first sub-goal reuses the instruction's perception (same target, nothing moved)
    assert world.instructions[0] == "sort the objects by fragility"
    assert world.instructions[1].startswith("pick up cup_a")
    assert task.total_perception_calls == len(world.instructions)


def test_run_task_stops_after_a_failed_subgoal_only_when_configured_to():
    objs = table()
    task = planner(continue_after_subgoal_failure=False).run_task(
        "clear the table", World(objs), ScriptedArm([slip()] * 4 + [ok()] * 4),
        EpisodicMemory())
    assert not task.success and len(task.goals) == 1
    # the default goes on, and comes back once to what failed after others were taken away
    # (the arm here fails every attempt of that revisit too)
    task = planner().run_task(
        "clear the table", World(table()), ScriptedArm([slip()] * 4 + [ok()] * 2
                                                        + [slip()] * 4),
        EpisodicMemory())
    assert not task.success and task.grasped == ["cup_1", "block_1"]
    assert [g.target_id for g in task.goals] == ["glass_1", "cup_1", "block_1", "glass_1"]
    assert "left: glass_1 (4 attempt(s) failed, last with slip)" in task.message
    assert "tried again after others were taken away: glass_1" in task.message


def test_a_failed_subgoal_revisited_after_others_can_complete_the_task():
    task = planner().run_task(
        "clear the table", World(table()), ScriptedArm([slip()] * 4 + [ok()] * 3),
        EpisodicMemory())
    assert task.success and task.grasped == ["cup_1", "block_1", "glass_1"]


def test_run_task_inserts_a_support_dependency_found_at_run_time():
    world = World(stack())
    p = planner()
    # the planner's first view shows no stack (perception missed the block and named no
    # target); the sub-goal's view does: the box is blocked, the block is removed first.
    first = {"done": False}

    def perceive(instruction):
        if not first["done"]:
            first["done"] = True
            return perception_of([world.objects["box_1"]], "nothing")
        return world.perceive(instruction)

    arm = ScriptedArm([ok(), ok()])
    task = p.run_task("pick up the box", FunctionPerceiver(perceive), arm, EpisodicMemory(),
                      after_success=world.remove)
    assert task.success and task.grasped == ["block_1", "box_1"]
    assert task.goals[0].status == "blocked_by_prerequisites"
    assert arm.targets == ["block_1", "box_1"]


def test_run_task_cancel_between_subgoals():
    calls = {"n": 0}

    def cancel():
        calls["n"] += 1
        return calls["n"] > 5          # the first sub-goal runs, the next one is not started

    task = planner().run_task("clear the table", World(table()),
                              ScriptedArm([ok()] * 3), EpisodicMemory(), cancel=cancel)
    assert task.status == "canceled" and task.grasped == ["glass_1"]


def test_run_task_with_nothing_to_do():
    task = planner().run_task("pick up the banana", World(table()),
                              ScriptedArm([]), EpisodicMemory())
    assert not task.success and "is not in view" in task.message
    assert "landmark" not in task.message            # the instruction names none


def test_task_trace_is_serialisable():
    import json
    task = planner().run_task("clear the table", World(table()),
                              ScriptedArm([slip(), ok(), ok(), ok()]), EpisodicMemory())
    text = json.dumps(task.to_dict())
    assert "slip" in text and np.isfinite(task.motion_s)


def test_the_plan_uses_the_scene_reasoning_graph_and_size_reaches_retrieval():
    """One graph per perception, of the constraint reasoner's configuration: run_task plans
    on the reasoner's graph (in the node graph, the scene-graph node's), and the perceived
    size and perception backend are always in the retriever's typed request."""
    from agentic_grasp.core.scene_graph.graph import graph_from_relations

    seen = []
    full = build_scene_graph(stack())

    class OnlySupport(SceneGraphReasoner):
        def scene_graph(self, objects):  # the graph a scene-graph node answered, rebuilt
            seen.append(sorted(o.id for o in objects))
            return graph_from_relations(objects, full.relations("Supports")
                                        + full.relations("On_Top_Of"))

    retriever = FixedRetriever([experience("any-001", "box", {"width": 0.06, "force": 10.0})])
    p = ReflectivePlanner(PlannerConfig(), retriever, OnlySupport())
    world = World(stack())
    task = p.run_task("pick up the box", world, ScriptedArm([ok()] * 4),
                      EpisodicMemory(), after_success=world.remove)
    assert seen and seen[0] == ["block_1", "box_1", "cup_1"]
    assert task.plan.target_ids[:2] == ["block_1", "box_1"]     # support order from that graph
    calls = retriever.requests
    assert calls and all(np.asarray(c.size).shape == (3,) for c in calls)
    assert all(c.perception_backend == "test" for c in calls)


def test_graph_from_relations_rejects_unknown_objects_and_relations():
    from agentic_grasp.core.errors import ValidationError
    from agentic_grasp.core.scene_graph.relations import Relation
    from agentic_grasp.core.scene_graph.graph import graph_from_relations

    objs = stack()
    with pytest.raises(ValidationError, match="not in the scene"):
        graph_from_relations(objs, [Relation("box_1", "Supports", "ghost", 0.0)])
    with pytest.raises(ValidationError, match="16 types"):
        graph_from_relations(objs, [Relation("box_1", "Hovers", "cup_1", 0.0)])
