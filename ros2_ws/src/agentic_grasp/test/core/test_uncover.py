"""Uncovering a hidden target: the wrist camera, vlm_sim's visibility,
the scene graph's occluders, and the planner's bounded search on held-out scenes.

The held-out scenes (test/data/hidden_scenes/) are not among the benchmark's 12 tasks: a toy
block behind a turned box, a wood cube behind a fragile glass vase, a banana behind a box
turned 90 deg.
"""
from pathlib import Path

import numpy as np
import pytest

from agentic_grasp.core.arm.backend import ArmBackend, ArmResult, InProcessSimArm
from agentic_grasp.core.camera import Camera
from agentic_grasp_lab.evaluation.sweep import trial_seed
from agentic_grasp.core.perception import create_backend, load_params
from agentic_grasp.core.planner.configurations import PlannerConfig
from agentic_grasp.core.planner.episode import CameraPerception, retriever_for, run_trial
from agentic_grasp.core.planner.memory import EpisodicMemory
from agentic_grasp.core.planner.peers import (FunctionPerceiver, HaaRagRetriever,
                                              SceneGraphReasoner)
from agentic_grasp.core.planner.planner import ReflectivePlanner
from agentic_grasp.core.planner.instruction.uncover import (occluders, poorly_located,
                                                            view_poses)
from agentic_grasp.core.planner.sections import UncoverConfig
from agentic_grasp.core.render.views import render_view
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.sim import Simulator, list_tasks
from agentic_grasp.core.types import ObjectInstance, Shape

HIDDEN = Path(__file__).resolve().parents[1] / "data" / "hidden_scenes"
HELD_OUT = sorted(HIDDEN.glob("hid_*.yaml"))


@pytest.fixture(scope="module")
def sim():
    return Simulator.from_config()


def _vlm_sim(sim, seed=0):
    """vlm_sim without noise over the simulator's current frame (mask per camera)."""
    state = {}

    def segmentation(_camera):
        return state["frame"].instance, state["objects"]

    params = dict(load_params())
    params["backend"] = "vlm_sim"
    backend = create_backend(params, segmentation_provider=segmentation, seed=seed)
    backend.config = backend.config.zero_noise()

    def perceive(camera, instruction):
        state["objects"] = sim.objects()
        state["frame"] = render_view(state["objects"], camera)
        return backend.perceive(state["frame"].rgb, state["frame"].depth, camera, instruction)

    return perceive


def _box(id_="box_1", x=0.58, y=0.0, size=(0.12, 0.20, 0.14), fragility=0.2, yaw=0.0):
    return ObjectInstance(id=id_, category="box", shape=Shape.BOX,
                          position=np.array([x, y, size[2] / 2]), size=np.array(size),
                          yaw=yaw, fragility=fragility)


def test_held_out_scenes_are_not_benchmark_tasks():
    assert len(HELD_OUT) >= 3
    assert not {p.stem for p in HELD_OUT} & set(list_tasks())


def _shown(sim, camera, object_id):
    """Pixels of ``object_id`` in the frame ``camera`` renders (the renderer's mask)."""
    objects = sim.objects()
    index = [o.id for o in objects].index(object_id)
    return int((render_view(objects, camera).instance == index).sum())


def test_vlm_sim_reports_the_hidden_ball_only_from_a_view_that_shows_it(sim):
    instruction = "pick up the tennis ball behind the box"
    hidden = 0
    for seed in range(8):
        sim.load_task("it_ball_behind_box", trial_seed=seed)
        look = _vlm_sim(sim)
        fixed = look(Camera(), instruction)
        reported = "ball_1" in {o.id for o in fixed.objects} | (
            {fixed.target.id} if fixed.target is not None else set())
        # a perfect VLM reports the ball exactly when some pixel of it is in view
        assert reported == (_shown(sim, Camera(), "ball_1") > 0)
        if reported:
            continue
        hidden += 1
        assert not fixed.target_found
        cands = occluders(fixed.to_object_instances(), Camera().position, instruction,
                          UncoverConfig())
        assert [c.id for c in cands] == ["box_1"] and cands[0].mentioned
        side, poses = view_poses(cands[0], Camera().position, sim.wrist_camera.intrinsics(),
                                 sim.wrist_camera.min_range_m)[0]
        motion = sim.move_camera_to(poses[0])
        assert side == "above" and motion.ok, motion.message
        assert _shown(sim, motion.camera, "ball_1") > 0
        seen = look(motion.camera, instruction)
        assert seen.target_found and seen.target.id == "ball_1"
        truth = sim.get("ball_1").position
        assert np.linalg.norm(seen.target.position[:2] - truth[:2]) < 0.01
    assert hidden >= 2            # the jitter hides the ball wholly in most trials


def test_the_wrist_camera_is_where_kinematics_puts_it(sim):
    sim.load_task("it_ball_behind_box", trial_seed=1)
    cands = occluders([_box()], Camera().position, "", UncoverConfig())
    pose = view_poses(cands[0], Camera().position, sim.wrist_camera.intrinsics(),
                      sim.wrist_camera.min_range_m)[0][1][0]
    motion = sim.move_camera_to(pose)
    assert motion.ok
    tcp = sim.kinematics.fk(motion.q)
    np.testing.assert_allclose(motion.camera.T_world_cam, tcp @ sim.wrist_camera.T_tcp_cam,
                               atol=1e-9)
    np.testing.assert_allclose(motion.camera.T_world_cam[:3, 3], pose[:3, 3], atol=2e-3)
    before = {o.id: o.position.copy() for o in sim.objects()}
    inside = pose.copy()
    inside[:3, 3] = sim.get("box_1").position       # the camera inside the box
    refused = sim.move_camera_to(inside)
    assert not refused.ok and refused.camera is None
    far = pose.copy()
    far[:3, 3] = (2.0, 0.0, 0.3)                     # beyond the arm's reach
    assert not sim.move_camera_to(far).ok
    assert all(np.allclose(before[o.id], o.position) for o in sim.objects())   # no contact


def test_only_an_object_that_can_hide_something_is_an_occluder():
    phone = ObjectInstance(id="phone_1", category="smartphone", shape=Shape.BOX,
                           position=np.array([0.55, 0.2, 0.005]),
                           size=np.array([0.15, 0.07, 0.01]))
    cands = occluders([_box(), phone], Camera().position, "pick up the block",
                      UncoverConfig(), SceneGraphConfig())
    assert [c.id for c in cands] == ["box_1"]
    # the region behind it: shadow of a 14 cm top seen from 0.75 m, capped at delta_check
    assert 0.10 < cands[0].shadow_m <= SceneGraphConfig().delta_check


def test_a_target_measured_on_another_surface_is_poorly_located():
    from agentic_grasp.core.perception.backend import PerceivedObject
    from agentic_grasp.core.types import ObjectState

    box = PerceivedObject("box_1", "box", (0, 0), None, np.array([0.58, 0.0, 0.07]),
                          np.array([0.2, 0.12, 0.14]), ObjectState.EMPTY, 0.2, None, 1.0)
    ball = PerceivedObject("ball_1", "tennis ball", (0, 0), None,
                           np.array([0.56, 0.0, 0.145]), np.array([0.16, 0.16, 0.01]),
                           ObjectState.EMPTY, 0.0, None, 1.0,
                           warnings=["the object runs past its box; the box was grown"])
    assert "centred on box_1" in poorly_located(ball, [box])
    ball.position = np.array([0.45, 0.0, 0.03])      # beside the box: measured on itself
    assert poorly_located(ball, [box]) == ""



def test_a_point_that_misses_its_object_by_the_vlms_pointing_error_is_not_poorly_located():
    """it_cup_near_vase: the cup's handle faces the camera, the VLM's point falls in the
    cut band beside the handle's depth step and the nearest surface, 2 px away, is the cup
    (measured whole). Counted as mislocated, the wrist view then replaced it by a sliver of
    the cup cut by that frame's edge (10 of 90 trials). A miss beyond the pointing error,
    or a near miss centred on another object, is still poorly located."""
    from agentic_grasp.core.perception.backend import PerceivedObject
    from agentic_grasp.core.planner.instruction.uncover import POINT_MISS_PX
    from agentic_grasp.core.types import ObjectState

    def note(px):
        return ("the point is not on an object surface (table, gap or no depth); used the "
                f"nearest surface in the box, {px:.0f} px away")

    vase = PerceivedObject("vase_1", "vase", (0, 0), None, np.array([0.50, 0.095, 0.075]),
                           np.array([0.08, 0.08, 0.15]), ObjectState.EMPTY, 0.8, None, 1.0)
    cup = PerceivedObject("cup_1", "cup", (0, 0), None, np.array([0.49, -0.033, 0.045]),
                          np.array([0.08, 0.08, 0.09]), ObjectState.FILLED, 0.3, None, 1.0,
                          warnings=[note(2)])
    assert POINT_MISS_PX == pytest.approx(3 * 9.0 / 1000.0 * 640, abs=0.5)
    assert poorly_located(cup, [vase, cup]) == ""
    cup.warnings = [note(POINT_MISS_PX + 3)]
    assert poorly_located(cup, [vase, cup]).startswith("the point is not on")
    cup.warnings = [note(2).replace("is not on an object surface", "is outside the box")]
    assert poorly_located(cup, [vase, cup]).startswith("the point is outside")
    cup.warnings = [note(2)]
    cup.position = np.array([0.50, 0.09, 0.15])        # measured on the vase's top
    assert "centred on vase_1" in poorly_located(cup, [vase, cup])

def test_of_two_estimates_centred_on_each_other_the_one_above_is_the_sliver():
    """hid_cube_behind_vase: the cube seen over the vase was measured as the vase's top; the
    vase, whose box was grown too, keeps its own estimate (it was dropped, and the wrist
    view's cut-off vase, perceived knocked over and leaning on the cube, was lifted first)."""
    from agentic_grasp.core.perception.backend import PerceivedObject
    from agentic_grasp.core.types import ObjectState

    grown = ["the object runs past its box; the box was grown to hold it"]
    vase = PerceivedObject("vase_1", "vase", (0, 0), None, np.array([0.586, 0.048, 0.075]),
                           np.array([0.08, 0.08, 0.15]), ObjectState.EMPTY, 0.8, None, 1.0,
                           warnings=list(grown))
    cube = PerceivedObject("cube_1", "cube", (0, 0), None, np.array([0.588, 0.052, 0.132]),
                           np.array([0.047, 0.047, 0.036]), ObjectState.EMPTY, 0.2, None,
                           1.0, warnings=list(grown))
    assert "centred on vase_1" in poorly_located(cube, [vase, cube])
    assert poorly_located(vase, [vase, cube]) == ""
    # hid_banana_behind_box_turned: the banana measured as the box's top has the box's
    # footprint (even a little larger); it starts at the top, the box at the table
    box = PerceivedObject("box_1", "box", (0, 0), None, np.array([0.616, -0.101, 0.07]),
                          np.array([0.1997, 0.1199, 0.14]), ObjectState.EMPTY, 0.2, None,
                          1.0, warnings=list(grown))
    banana = PerceivedObject("banana_1", "banana", (0, 0), None,
                             np.array([0.616, -0.101, 0.120]), np.array([0.2, 0.12, 0.039]),
                             ObjectState.EMPTY, 0.1, None, 1.0, warnings=list(grown))
    assert "centred on box_1" in poorly_located(banana, [banana, box])
    assert poorly_located(box, [banana, box]) == ""


def _episode(sim, scene, seed, objects=None, configuration="full", look=True):
    """The in-process trial by hand (objects replaced when given)."""
    spec = sim.load_task(str(scene), trial_seed=seed)
    if objects is not None:
        sim.set_objects(objects(sim.objects()))
    cfg = PlannerConfig.from_config().with_configuration(configuration)
    eyes = CameraPerception(sim, "vlm_sim", seed)
    planner = ReflectivePlanner(cfg, HaaRagRetriever(retriever_for(None)),
                                SceneGraphReasoner(SceneGraphConfig.from_config(),
                                                   Camera().position))
    arm = InProcessSimArm(sim)
    task = planner.run_task(spec.instruction, eyes if look else FunctionPerceiver(eyes.perceive),
                            arm, EpisodicMemory(),
                            after_success=lambda _o: sim.place_held_object())
    return spec, task


@pytest.mark.parametrize("scene", ["hid_block_behind_box_left", "hid_cube_behind_vase"])
def test_a_held_out_hidden_target_is_uncovered_and_grasped(scene):
    path = HIDDEN / f"{scene}.yaml"
    results = [run_trial(str(path), "full", trial_seed(0, scene, k), perception="vlm_sim")
               for k in range(6)]
    assert sum(r.success for r in results) >= 4          # 20/20 and 19/20 measured
    # it looked behind the occluder: the cube, seen but for a sliver with the jitter, was
    # looked for in 3 of these 6 trials (5 before its fixed-view point that missed by 1 px,
    # within the VLM's pointing error, stopped counting as mislocated; 6 of 6 succeed)
    assert sum(bool(r.task.views) for r in results) >= 3
    for r in results:
        assert {v.occluder_id for v in r.task.views} <= {"box_1", "vase_1"}
        # never the occluder as a stand-in for the target: a goal on another object is only
        # a prerequisite of the target's (after the merge of the rendered parts and the
        # one-graph change, 1 trial of 6 lifts the vase that perception says leans on the
        # cube first: README, known issues)
        plan = {s.target_id: s for s in r.task.plan.subgoals}
        assert all(g.target_id == r.targets[0]
                   or plan[g.target_id].prerequisite_for == r.targets[0]
                   for g in r.task.goals)


def test_a_fragile_occluder_is_said_to_stay_untouched():
    path = HIDDEN / "hid_cube_behind_vase.yaml"
    r = run_trial(str(path), "full", trial_seed(0, path.stem, 0), perception="vlm_sim")
    assert r.task.views
    assert "fragile" in r.task.views[0].thought and "never pushed or moved" in \
        r.task.views[0].thought
    assert r.task.views[0].to_dict()["reached"]


def test_nothing_behind_the_occluder_ends_not_found_after_bounded_views(sim):
    scene = HIDDEN / "hid_block_behind_box_left.yaml"
    spec, task = _episode(sim, scene, 11,
                          objects=lambda objs: [o for o in objs if o.id == "box_1"])
    assert not task.success and not task.goals            # the box is never grasped
    assert task.plan is not None and not task.plan.subgoals
    reached = [v for v in task.views if v.reached]
    assert 1 <= len(reached) <= UncoverConfig().max_views
    assert "not found after" in task.message and "box_1" in task.message
    assert "the target the instruction names is not in view" in task.message
    assert "box_1, which it names, is only a landmark" in task.message


def test_without_scene_graph_or_wrist_camera_the_landmark_is_not_grasped(sim):
    scene = HIDDEN / "hid_block_behind_box_left.yaml"
    _, task = _episode(sim, scene, 3, configuration="no_scene_graph")
    assert not task.goals and not task.views and "scene graph" in task.message
    _, task = _episode(sim, scene, 3, look=False)
    assert not task.goals and "no wrist camera" in task.message


def test_an_arm_without_a_wrist_camera_refuses_a_view():
    class Plain(ArmBackend):
        name = "plain"

        def execute(self, target_id, grasp, on_phase, is_canceled):
            return ArmResult(0)

    arm = Plain()
    assert arm.wrist_camera() is None
    res = arm.move_camera_to(np.eye(4), lambda: False)
    assert not res.reached and "no wrist camera" in res.message


def test_uncover_config_rejects_bad_values():
    from agentic_grasp.core.errors import ConfigError

    with pytest.raises(ConfigError):
        UncoverConfig(probe_size_m=0.0)
    with pytest.raises(ConfigError):
        UncoverConfig(max_views=-1)
    with pytest.raises(ConfigError):
        UncoverConfig.from_mapping({"max_view": 3})
    assert PlannerConfig.from_config().uncover == UncoverConfig()    # yaml == defaults


def test_a_wrist_view_cut_by_the_frame_edge_is_the_occluder_not_another_box():
    """hid_banana_behind_box_turned: the wrist view shows the box's edge only (0.12 x 0.01 m,
    clipped at the frame's edge, 10 cm from the box's centre); merged as a second box it was
    planned as a second "cardboard box" named in the instruction."""
    from agentic_grasp.core.perception.backend import PerceivedObject, PerceptionResult
    from agentic_grasp.core.planner.instruction.uncover import merge_views
    from agentic_grasp.core.types import ObjectState

    def seen(oid, cat, pos, size, yaw=0.0, warnings=()):
        return PerceivedObject(oid, cat, (0, 0), None, np.array(pos), np.array(size),
                               ObjectState.EMPTY, 0.2, None, 1.0, yaw=yaw,
                               warnings=list(warnings))

    box = seen("box_1", "box", [0.626, -0.094, 0.07], [0.2, 0.12, 0.14], yaw=1.5708)
    fixed = PerceptionResult("vlm_sim", False, None, [box])
    banana = seen("banana_1", "banana", [0.446, -0.116, 0.02], [0.04, 0.04, 0.18])
    edge = seen("box_1", "box", [0.526, -0.103, 0.049], [0.12, 0.01, 0.098],
                warnings=["box partly outside the image; clipped"])
    merged = merge_views(fixed, PerceptionResult("vlm_sim", True, banana, [banana, edge]))
    assert sorted(o.id for o in merged.objects) == ["box_1"]
    assert merged.objects[0].position[0] == pytest.approx(0.626)
    # a whole (unclipped) box there is another object
    edge.warnings = []
    merged = merge_views(fixed, PerceptionResult("vlm_sim", True, banana, [banana, edge]))
    assert sorted(o.id for o in merged.objects) == ["box_1", "box_1_2"]
