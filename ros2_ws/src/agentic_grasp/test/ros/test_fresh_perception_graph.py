"""Fresh perception over DDS: sim, perception (vlm_sim) and executor as processes.

The probes: a client loads a scene and perceives at once, alternating scenes
so that consecutive ones differ, and perceives right after an attempt ends. Every answer
must describe the world as it is now: the objects of the new scene at their places (the
layout a trial seed gives is known in process), never the previous scene's, and never
the object the attempt has just lifted away. Stale answers counted: zero allowed.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from agentic_grasp.ros.conversions.fields import from_xyz
from agentic_grasp.core.grasping.heuristic import heuristic_grasp
from agentic_grasp.core.sim.simulator import Simulator
from agentic_grasp_interfaces.srv import Perceive

from .test_sim_executor_graph import held

WAIT_S = 30.0
#: An object perceived farther than this from where the new scene has it is stale: vlm_sim's
#: point and box noise move a located object by about 1 cm (config/perception.yaml
#: vlm_sim.point_std), the previous scenes' objects were 4-19 cm off.
STALE_M = 0.035
#: 24 rounds, as the first probe had; consecutive scenes differ (layout and objects), and
#: seeds vary too.
SCENES = ["sg_banana", "it_cup_near_vase", "sg_bottle", "lh_clear_table", "sg_cube",
          "it_phone_near_wine_glass", "sg_cup", "it_ball_behind_box", "sg_apple",
          "lh_sort_by_fragility", "sg_bowl", "it_screwdriver_side_grasp"]
ROUNDS = [(task, k) for k in range(2) for task in SCENES]
#: The probe checks what an answer shows, not how soon the camera delivers: the capture wait
#: is widened from the default 2 s (4 / camera_rate_hz) so that a sim delayed on a loaded CI
#: machine (seen: no capture within 2 s after a scene load) answers late, not stale.
CAPTURE_WAIT_S = 10.0


@pytest.fixture(scope="module")
def graph():
    from agentic_grasp.ros.client.graph_client import GraphClient
    from agentic_grasp.ros.graph.launcher import Launcher

    launcher = Launcher({"acquired": "none", "perception": "vlm_sim"},
                        only=["sim", "perception", "executor"],
                        extra_params={"perception": {"capture_wait_s": CAPTURE_WAIT_S}})
    launcher.start()
    client = GraphClient("fresh_perception_probe")
    try:
        client.load_scene("sg_banana", 0, timeout_s=WAIT_S)
        yield client
    finally:
        client.close()
        launcher.stop()


def _perceive(client, instruction: str, not_before=None):
    perceive = getattr(client, "_probe_perceive", None)
    if perceive is None:
        perceive = client._probe_perceive = client.node.create_client(Perceive, "perceive")
        assert perceive.wait_for_service(timeout_sec=WAIT_S), "perceive not found"
    request = Perceive.Request(instruction=instruction)
    if not_before is not None:
        request.not_before = not_before
    future = perceive.call_async(request)
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(WAIT_S), "perceive did not answer"
    return future.result().result


def _ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def _layout(task: str, seed: int):
    sim = Simulator.from_config()
    sim.load_task(task, trial_seed=seed)
    return {o.id: o for o in sim.objects()}


def _stale(result, truth) -> list:
    """What in the answer does not fit the scene ``truth`` (empty: a fresh answer)."""
    problems = []
    for obs in result.objects:
        if obs.id not in truth:
            problems.append(f"{obs.id} is not in this scene")
            continue
        off = float(np.linalg.norm(from_xyz(obs.pose.position)[:2] - truth[obs.id].position[:2]))
        if off > STALE_M:
            problems.append(f"{obs.id} is {off * 100:.1f} cm from its place")
    return problems


def test_perceiving_at_once_after_each_scene_load_is_never_stale(graph):
    stale = []
    for task, seed in ROUNDS:
        asked_at = graph.node.get_clock().now().nanoseconds
        loaded = graph.load_scene(task, seed, timeout_s=WAIT_S)
        result = _perceive(graph, loaded.instruction)       # at once: no wait, no settle
        assert result.error == "", f"{task}: {result.error}"
        problems = _stale(result, _layout(task, seed))
        # the load's own capture (taken before it answers, declared current since) or later
        if _ns(result.capture_stamp) < asked_at:           # it names a capture before the load
            problems.append(f"capture at {_ns(result.capture_stamp)} < load start {asked_at}")
        if problems or not result.objects:
            stale.append(f"{task} seed {seed}: {problems or 'nothing perceived'}")
    assert stale == [], stale


def test_perceiving_right_after_an_attempt_sees_its_outcome(graph):
    versions = []
    for seed in (0, 1):
        loaded = graph.load_scene("sg_banana", seed, timeout_s=WAIT_S)
        before = _perceive(graph, loaded.instruction)
        assert before.error == "" and "banana_1" in {o.id for o in before.objects}
        banana = _layout("sg_banana", seed)["banana_1"]
        result = graph.execute_grasp("banana_1", heuristic_grasp(banana))
        ended_at = graph.node.get_clock().now().nanoseconds
        after = _perceive(graph, loaded.instruction)     # at once after the attempt's end
        assert after.error == "", after.error
        assert _ns(after.capture_stamp) >= ended_at      # a capture of the world after it
        assert after.world_version > before.world_version         # a newer world
        versions.append(after.world_version)
        if held(result):                           # lifted away: it must not be seen
            assert "banana_1" not in {o.id for o in after.objects}, after.objects
    assert versions[1] > versions[0]


def test_an_unchanged_world_is_not_captured_again(graph):
    """Nothing moved: the simulator declares its capture still current (CaptureCurrent), no
    new render and no frames sent again; the answer names that capture, and is fresh."""
    loaded = graph.load_scene("sg_cup", 1, timeout_s=WAIT_S)
    first = _perceive(graph, loaded.instruction)
    now = graph.node.get_clock().now()
    second = _perceive(graph, loaded.instruction, not_before=now.to_msg())
    assert first.error == "" and second.error == "", (first.error, second.error)
    assert _ns(second.capture_stamp) == _ns(first.capture_stamp) < now.nanoseconds
    assert second.world_version == first.world_version
    assert _stale(second, _layout("sg_cup", 1)) == []
