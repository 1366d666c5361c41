"""The strict success rule: nothing taken but the targets (evaluation/taken.py)."""
from agentic_grasp_lab.evaluation.records import TrialRecord
from agentic_grasp_lab.evaluation.studies.procedural import score
from agentic_grasp_lab.evaluation.tables import RecordIndex, success_rules
from agentic_grasp_lab.evaluation.taken import judge_taken
from agentic_grasp.core.sim import load_catalogue
from agentic_grasp.core.sim.procedural import generate


def _scene():
    cat = load_catalogue()
    objs = [cat.instance("ceramic_cup", "cup_1", 0.5, 0.0),
            cat.instance("glass_vase", "vase_1", 0.5, 0.15),
            cat.instance("wood_cube", "cube_1", 0.6, -0.1),
            cat.instance("toy_block", "block_1", 0.4, -0.1)]
    return {o.id: o for o in objs}


def test_a_landmark_or_a_fragile_object_taken_fails_a_sturdy_unnamed_one_is_moved_aside():
    truth = _scene()
    text = "pick up the cup next to the vase"
    assert judge_taken(text, ["cup_1"], ["cup_1"], truth, 0.5).wrong == []
    landmark = judge_taken(text, ["cup_1"], ["vase_1", "cup_1"], truth, 0.5)
    assert landmark.wrong == ["vase_1"] and landmark.moved_aside == []
    # the wooden cube is sturdy and not named: taken out of the way, it is moved aside
    aside = judge_taken(text, ["cup_1"], ["cube_1", "cup_1"], truth, 0.5)
    assert aside.wrong == [] and aside.moved_aside == ["cube_1"]
    # named as what to keep: taking it fails, sturdy or not
    kept = judge_taken("clear the table except the toy block", ["cup_1", "vase_1", "cube_1"],
                       ["cup_1", "block_1"], truth, 0.5)
    assert kept.wrong == ["block_1"]


def test_a_record_that_took_a_landmark_is_a_failure_under_the_strict_rule_only():
    ok = TrialRecord(task_id="it_x", category="IT", configuration="full", seed=0, trial=0,
                     trial_seed=0, success=True, paper_success=True, n_attempts=1,
                     n_subgoals=1, n_targets=1, n_grasped=1, order_ok=True)
    bad = TrialRecord(**{**ok.to_dict(), "trial": 1, "success": False,
                         "wrongly_taken": ["vase_1"]})
    table = success_rules(RecordIndex([ok, bad]), ["full"])
    row = table["rows"]["full"]["it_x"]
    assert row["strict"] == 50.0 and row["paper_rule"] == 100.0
    assert row["wrongly_taken_trials"] == 1 and row["wrongly_taken"] == {"vase_1": 1}
    assert table["table_ii_paper_rule"]["rows"]["full"]["IT"]["mean"] == 100.0
    # records written before the strict rule read back with both rules equal
    old = ok.to_dict()
    old.pop("paper_success")
    assert TrialRecord.from_dict({**old, "success": True}).paper_success


def test_a_procedural_scene_that_took_a_named_non_target_does_not_succeed():
    scene = generate(11, 1)                # it_near: a target beside a fragile neighbour
    target = scene.task.targets[0]
    other = next(o.id for o in scene.task.objects_spec if o.id != target)
    rec = TrialRecord(task_id=scene.task_id, category="IT", configuration="full", seed=0,
                      trial=0, trial_seed=0, success=True, paper_success=True, n_attempts=2,
                      n_subgoals=2, n_targets=1, n_grasped=2, order_ok=True,
                      grasped=[other, target], wrongly_taken=[other])
    s = score(rec, scene)
    assert s.paper_success is True and s.success is False and s.wrongly_taken == 1


def test_the_sweeps_record_reads_what_was_taken_from_the_simulators_bin(monkeypatch):
    """The worker judges the trial from the simulator's truth: a landmark put in the bin
    fails the trial however the planner scored it."""
    from types import SimpleNamespace

    from agentic_grasp_lab.evaluation import worker
    from agentic_grasp_lab.evaluation.sweep import TrialRunner

    runner = TrialRunner()

    def fake_trial(task, configuration, seed, simulator=None, **_):
        spec = simulator.load_task(task, trial_seed=seed)
        for oid in ("vase_1", "cup_1"):         # the landmark first, then the target
            simulator._held = oid
            simulator.place_held_object()
        return SimpleNamespace(task_id=spec.task_id, category=spec.category,
                               configuration=configuration, success=True, n_attempts=2,
                               targets=list(spec.targets), grasped=["vase_1", "cup_1"],
                               order_ok=True, failure_types=[], retry_levels=[0, 0],
                               recovered=False, constraint_satisfied=True, violations=[],
                               motion_s=0.0, compute_s=0.0, sim_time_s=0.0, wall_s=0.0,
                               task=None)

    monkeypatch.setattr(worker, "run_trial", fake_trial)
    record = runner.run("full", "it_cup_near_vase", 0, 0)
    assert record.paper_success and not record.success
    assert record.wrongly_taken == ["vase_1"] and record.moved_aside == []
