"""core.sim.world_state: the simulated world kept in a file, for a restarted simulator."""
import json
import os

import numpy as np
import pytest

from agentic_grasp.core.sim import Simulator
from agentic_grasp.core.sim import world_state
from agentic_grasp.core.sim.world_state import WorldStateError

from test_sim_simulator import grasps_for_table, state, top_down


@pytest.fixture()
def sim():
    return Simulator.from_config()


def _progress(sim):
    """lh_clear_table after its first grasp (the cup in the bin, if it held) and a knock."""
    sim.load_task("lh_clear_table", trial_seed=4)
    target, grasp = grasps_for_table(sim)[0]
    sim.execute_attempt(target, grasp)
    sim.place_held_object()
    return sim


def test_a_world_round_trips_through_its_file_and_replays_the_same_next_attempt(sim, tmp_path):
    _progress(sim)
    path = tmp_path / "world.json"
    world_state.write(path, world_state.capture(sim, "lh_clear_table", 4, world_version=7,
                                                changes_since_load=3))
    restored = Simulator.from_config()
    restored.load_task("sg_banana", trial_seed=0)              # whatever it started on
    kept = world_state.read(path)
    spec = world_state.restore(restored, kept)
    assert spec.task_id == "lh_clear_table"
    assert (kept.world_version, kept.changes_since_load, kept.trial_seed) == (7, 3, 4)
    assert state(restored) == state(sim)
    every_field = [world_state._object_to_dict(o) for o in sim.objects() + sim.binned()]
    assert [world_state._object_to_dict(o) for o in restored.objects() + restored.binned()] \
        == every_field
    # the noise generator continues where it was: the same next attempt, the same outcome
    apple = sim.get("apple_1")
    grasp = top_down(apple, width=0.08, dz=0.03)
    first, second = sim.execute_attempt("apple_1", grasp), restored.execute_attempt("apple_1",
                                                                                   grasp)
    assert first.success == second.success and first.quality == second.quality
    assert np.array_equal(first.phi, second.phi)
    assert state(restored) == state(sim)


def test_a_held_object_and_the_bin_are_kept(sim, tmp_path):
    for seed in range(20):                    # a trial whose cube is lifted (held, not binned)
        sim.load_task("sg_cube", trial_seed=seed)
        if sim.execute_attempt("cube_1", top_down(sim.get("cube_1"))).success:
            break
    held = sim.held_id
    assert held == "cube_1"
    path = tmp_path / "w.json"
    world_state.write(path, world_state.capture(sim, "sg_cube", seed))
    restored = Simulator.from_config()
    world_state.restore(restored, world_state.read(path))
    assert restored.held_id == held and state(restored) == state(sim)


def test_writes_are_atomic_and_leave_no_temporary_file(sim, tmp_path):
    sim.load_task("sg_cube", trial_seed=0)
    path = tmp_path / "run" / "world.json"                    # the folder is made
    for seed in range(3):
        world_state.write(path, world_state.capture(sim, "sg_cube", seed))
    assert os.listdir(path.parent) == ["world.json"]
    assert world_state.read(path).trial_seed == 2


def test_no_file_is_no_world(tmp_path):
    assert world_state.read(tmp_path / "absent.json") is None


@pytest.mark.parametrize("text, words", [
    ("{not json", "not JSON"),
    ("[]", "expected a JSON object"),
    ('{"format": "other", "version": 1}', "not a agentic_grasp.sim_world file"),
])
def test_a_file_that_is_not_a_world_is_refused_by_name(tmp_path, text, words):
    path = tmp_path / "world.json"
    path.write_text(text)
    with pytest.raises(WorldStateError) as err:
        world_state.read(path)
    assert str(path) in str(err.value) and words in str(err.value)


def test_a_damaged_world_is_refused(sim, tmp_path):
    sim.load_task("sg_cube", trial_seed=0)
    data = world_state.capture(sim, "sg_cube", 0).to_dict()
    path = tmp_path / "world.json"
    for broken, words in ((dict(data, held="ghost_1"), "held object 'ghost_1'"),
                          (dict(data, trial_seed="3"), "'trial_seed' must be int"),
                          (dict(data, objects=[dict(data["objects"][0], size=[0, 1, 1])]),
                           "size must be positive"),
                          (dict(data, objects=[dict(data["objects"][0], wings=2)]),
                           "unknown fields ['wings']")):
        path.write_text(json.dumps(broken))
        with pytest.raises(WorldStateError, match=None) as err:
            world_state.read(path)
        assert words in str(err.value), str(err.value)


def test_the_world_file_moves_a_bad_file_aside_and_says_a_failed_write_once(sim, tmp_path):
    path = tmp_path / "world.json"
    path.write_text("{half a world")
    kept, problem = world_state.WorldFile(path).load()
    assert kept is None and "not JSON" in problem and "moved to" in problem
    assert (tmp_path / "world.json.unreadable").read_text() == "{half a world"  # nothing lost
    assert world_state.WorldFile(path).load() == (None, "")                   # no file now

    sim.load_task("sg_cube", trial_seed=0)
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    keeper = world_state.WorldFile(blocked / "world.json")     # its folder cannot be made
    state = world_state.capture(sim, "sg_cube", 0)
    assert "cannot keep the world in" in keeper.save(state)
    assert keeper.save(state) == ""                                 # said once
    keeper.path = path
    assert keeper.save(state) == "" and world_state.read(path).task == "sg_cube"
