"""Aggregation and confidence intervals of the paper's tables, on hand-made records."""
import math

import pytest

from agentic_grasp_lab.evaluation.records import TrialRecord
from agentic_grasp_lab.evaluation.tables import (RecordIndex, failure_histogram, format_table_ii,
                                                 format_table_iii, format_table_v, level_histogram,
                                                 ood_table, per_task, table_ii, table_iii, table_v)
from agentic_grasp_lab.evaluation.confidence import mean_ci, student_t_cdf, t_quantile


def rec(conf, seed, task, trial, success, category=None, **kw):
    category = category or task[:2].upper()
    base = dict(task_id=task, category=category, configuration=conf, seed=seed, trial=trial,
                trial_seed=1000 * seed + trial, success=success, n_attempts=1, n_subgoals=1,
                n_targets=1, n_grasped=int(success), order_ok=True)
    base.update(kw)
    return TrialRecord(**base)


def outcomes(conf, seed, task, pattern, **kw):
    return [rec(conf, seed, task, k, bool(ok), **kw) for k, ok in enumerate(pattern)]


def test_t_quantiles_match_the_published_table():
    # Student t two-sided 95 % critical values (any statistics table).
    for df, value in ((1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042)):
        assert t_quantile(0.975, df) == pytest.approx(value, abs=1e-3)
    assert t_quantile(0.975, 1e7) == pytest.approx(1.960, abs=1e-3)
    assert t_quantile(0.995, 4) == pytest.approx(4.604, abs=1e-3)
    assert student_t_cdf(0.0, 4) == pytest.approx(0.5)
    assert student_t_cdf(-2.776445, 4) == pytest.approx(0.025, abs=1e-6)


def test_mean_ci_by_hand():
    # mean 80; sd = sqrt((0 + 100 + 100 + 25 + 25) / 4) = 7.9057; half = 2.7764 * sd / sqrt(5)
    ci = mean_ci([80, 70, 90, 75, 85])
    assert ci.mean == pytest.approx(80.0)
    assert ci.sd == pytest.approx(math.sqrt(62.5))
    assert ci.half_width == pytest.approx(2.776445 * math.sqrt(62.5) / math.sqrt(5), rel=1e-6)
    assert ci.half_width == pytest.approx(9.8161, abs=1e-3)
    assert (ci.lo, ci.hi) == pytest.approx((80 - 9.8161, 80 + 9.8161), abs=1e-3)
    one = mean_ci([42.0])
    assert one.mean == 42.0 and math.isnan(one.half_width)
    assert mean_ci([50, 50, 50]).half_width == 0.0


def _synthetic():
    recs = []
    # seed 0: sg_a 3/4, sg_b 1/4, it_c 2/4;  seed 1: sg_a 4/4, sg_b 2/4, it_c 0/4
    recs += outcomes("full", 0, "sg_a", [1, 1, 1, 0]) + outcomes("full", 0, "sg_b", [1, 0, 0, 0])
    recs += outcomes("full", 0, "it_c", [1, 1, 0, 0])
    recs += outcomes("full", 1, "sg_a", [1, 1, 1, 1]) + outcomes("full", 1, "sg_b", [1, 1, 0, 0])
    recs += outcomes("full", 1, "it_c", [0, 0, 0, 0])
    recs += outcomes("no_recovery", 0, "sg_a", [0, 0, 0, 0])
    recs += outcomes("no_recovery", 1, "sg_a", [1, 0, 0, 0])
    return recs


def test_table_ii_means_over_tasks_then_seeds():
    index = RecordIndex(_synthetic())
    assert index.rate("full", 0, "sg_a") == 75.0
    table = table_ii(index, ["full", "no_recovery", "heuristic"])
    full = table["rows"]["full"]
    # SG per seed: (75 + 25) / 2 = 50 and (100 + 50) / 2 = 75 -> 62.5, sd 17.678, t(1) 12.706
    assert full["SG"]["mean"] == pytest.approx(62.5)
    assert full["SG"]["values"] == [50.0, 75.0]
    assert full["SG"]["half_width"] == pytest.approx(12.7062 * 17.6777 / math.sqrt(2), rel=1e-4)
    # overall per seed: mean(75, 25, 50) = 50 and mean(100, 50, 0) = 50
    assert full["overall"]["mean"] == pytest.approx(50.0)
    assert full["overall"]["half_width"] == pytest.approx(0.0)
    assert full["IT"]["mean"] == pytest.approx(25.0)
    assert "LH" not in full and "heuristic" not in table["rows"]
    assert table["rows"]["no_recovery"]["SG"]["mean"] == pytest.approx(12.5)
    text = format_table_ii(table)
    assert "Full system" in text and "62.5 ±" in text and "(91.7)" in text
    tasks = per_task(index)
    assert tasks["full"]["sg_b"]["values"] == [25.0, 50.0]


def test_table_iii_recovery_rate_attempts_and_time():
    recs = [
        rec("full", 0, "sg_a", 0, True, n_attempts=1, sim_time_s=2.0),
        rec("full", 0, "sg_a", 1, True, n_attempts=3, first_attempt_failed=True,
            sim_time_s=4.0, failure_types=["slip", "slip"], retry_levels=[0, 1, 1]),
        rec("full", 0, "sg_a", 2, False, n_attempts=4, first_attempt_failed=True,
            sim_time_s=6.0, failure_types=["width_mismatch"] * 4, retry_levels=[0, 1, 1, 2]),
        rec("full", 0, "sg_a", 3, True, n_attempts=2, first_attempt_failed=True,
            sim_time_s=4.0, failure_types=["collision"], retry_levels=[0, 1]),
        rec("no_recovery", 0, "sg_a", 0, False, first_attempt_failed=True, sim_time_s=1.0),
    ]
    table = table_iii(RecordIndex(recs))
    full = table["rows"]["full"]
    assert full["SG"]["success"]["mean"] == pytest.approx(75.0)
    assert full["SG"]["time_s"]["mean"] == pytest.approx(4.0)
    assert full["attempts_per_trial"]["mean"] == pytest.approx(2.5)
    # 3 trials started with a failed attempt, 2 of them still succeeded
    assert full["first_attempt_failed"] == 3 and full["recovered_after_first_failure"] == 2
    assert full["recovery_rate"]["mean"] == pytest.approx(200.0 / 3.0)
    assert table["rows"]["no_recovery"]["recovery_rate"]["mean"] == pytest.approx(0.0)
    assert "2.50 attempts" in format_table_iii(table)
    index = RecordIndex(recs)
    assert failure_histogram(index)["full"] == {"width_mismatch": 4, "slip": 2, "collision": 1}
    assert level_histogram(index)["SG"] == {0: 3, 1: 5, 2: 1}   # 2 + 2 + 1 level-1 attempts


def test_table_v_constraint_columns():
    recs = [
        rec("no_scene_graph", 0, "it_x", 0, True, constraint_satisfied=True),
        rec("no_scene_graph", 0, "it_x", 1, False, constraint_satisfied=False),
        rec("full", 0, "it_x", 0, True, constraint_satisfied=True, n_constraints=2),
        rec("full", 0, "it_x", 1, True, constraint_satisfied=True, n_constraints=0),
        rec("full", 0, "sg_y", 0, False),                   # not an interactive task
    ]
    table = table_v(RecordIndex(recs))
    assert table["tasks"] == ["it_x"]
    assert table["rows"]["no_scene_graph"]["success"]["mean"] == 50.0
    assert table["rows"]["no_scene_graph"]["constraint_satisfaction"]["mean"] == 50.0
    assert table["rows"]["no_scene_graph"]["inferred_and_kept"]["mean"] == 0.0
    assert table["rows"]["full"]["constraint_satisfaction"]["mean"] == 100.0
    assert table["rows"]["full"]["inferred_and_kept"]["mean"] == 50.0
    assert "no_constraint_inference" not in table["rows"]
    assert "+ constraint inference" in format_table_v(table)


def test_ood_table_groups_by_split():
    recs = (outcomes("full", 0, "sg_a", [1, 1], split="in_distribution")
            + outcomes("full", 0, "ood_far_x", [1, 0], category="SG", split="far_ood")
            + outcomes("full", 0, "ood_far_y", [0, 0], category="SG", split="far_ood"))
    table = ood_table(RecordIndex(recs), ["in_distribution", "near_ood", "far_ood"])
    assert table["rows"]["in_distribution"]["success"]["mean"] == 100.0
    assert table["rows"]["far_ood"]["success"]["mean"] == 25.0
    assert set(table["rows"]["far_ood"]["objects"]) == {"ood_far_x", "ood_far_y"}
    assert "near_ood" not in table["rows"]
