"""The four interactive benchmark scenes, loaded from config/scenes, through the reasoner."""
import numpy as np
import pytest

from agentic_grasp.core.scene_graph.constraints import (ConstraintType, apply_constraints,
                                                        infer_constraints)
from agentic_grasp.core.scene_graph.graph import build_scene_graph
from agentic_grasp.core.sim.scenes import load_task
from agentic_grasp.core.types import GraspParameters

EXPECTED = {
    "it_cup_near_vase": {ConstraintType.COLLISION_AVOIDANCE, ConstraintType.CONTENT_PRESERVATION},
    "it_ball_behind_box": {ConstraintType.OCCLUSION},
    "it_phone_near_wine_glass": {ConstraintType.COLLISION_AVOIDANCE},
    "it_screwdriver_side_grasp": set(),
}


def _constraints(task_id, objects):
    spec = load_task(task_id)
    graph = build_scene_graph(objects)
    return spec, graph, infer_constraints(graph, spec.targets[0])


@pytest.mark.parametrize("task_id", sorted(EXPECTED))
def test_nominal_scene_gives_the_expected_constraints(task_id):
    spec = load_task(task_id)
    _, _, cset = _constraints(task_id, spec.nominal())
    assert {c.type for c in cset.constraints} == EXPECTED[task_id]
    for constraint in cset.constraints:
        assert constraint.explanation


def test_fragile_neighbour_scenes_reduce_force_and_raise_the_approach():
    for task_id in ("it_cup_near_vase", "it_phone_near_wine_glass"):
        spec = load_task(task_id)
        _, graph, cset = _constraints(task_id, spec.nominal())
        target = graph.node(spec.targets[0])
        grasp = GraspParameters(position=np.asarray(target["position"]), force=20.0,
                                approach_height=0.10)
        adjusted = apply_constraints(grasp, cset)
        assert adjusted.force == pytest.approx(16.0)
        assert adjusted.approach_height == pytest.approx(0.13)


def test_the_ball_is_occluded_by_the_box_in_most_jittered_trials():
    spec = load_task("it_ball_behind_box")
    hits = 0
    for seed in range(20):
        _, graph, cset = _constraints("it_ball_behind_box",
                                      spec.instantiate(np.random.default_rng(seed)))
        hits += ConstraintType.OCCLUSION in {c.type for c in cset.constraints}
    assert hits >= 12   # jitter can move the ball out of the box's shadow; 16/20 measured
