"""Numbers and pictures a person can read: intervals of proportions stay inside [0, 100], the
procedural counts add up to the scenes drawn, the refusal line says in words what it counts,
the legend never covers a bar, and failed_scenes.png names the configuration and the failure
of each scene it shows."""
from __future__ import annotations

import json

import pytest

from agentic_grasp.core.sim.procedural import generate
from agentic_grasp_lab.evaluation import confidence
from agentic_grasp_lab.evaluation.confidence import paired_difference_ci, wilson_ci
from agentic_grasp_lab.evaluation.records import TrialRecord
from agentic_grasp_lab.evaluation.studies import procedural
from agentic_grasp_lab.evaluation.studies.procedural import format_summary, summarise

SEED = 13


def test_wilson_interval_is_inside_zero_one_and_matches_the_formula():
    lo, hi = wilson_ci(9, 10)
    assert lo == pytest.approx(0.5958, abs=1e-4) and hi == pytest.approx(0.9821, abs=1e-4)
    assert wilson_ci(10, 10)[1] == 1.0 and wilson_ci(10, 10)[0] < 1.0
    assert wilson_ci(0, 10)[0] == 0.0 and wilson_ci(0, 10)[1] > 0.0
    # the t interval of the same 0/1 outcomes reaches past 1: what the Wilson one replaces
    assert confidence.mean_ci([1.0] * 9 + [0.0]).hi > 1.0


def test_paired_difference_interval_is_inside_plus_minus_one_and_holds_the_difference():
    for cells in ((0, 5, 0, 1), (3, 2, 1, 4), (7, 0, 0, 0), (0, 0, 6, 0), (2, 9, 3, 17)):
        n = sum(cells)
        diff = (cells[1] - cells[2]) / n
        lo, hi = paired_difference_ci(*cells)
        assert -1.0 <= lo <= diff <= hi <= 1.0, cells
    # five of six pairs better, one the same: the t interval of the differences passes +1
    diffs = [1.0] * 5 + [0.0]
    assert confidence.mean_ci(diffs).hi > 1.0 and paired_difference_ci(0, 5, 0, 1)[1] < 1.0


def _record(scene, conf, success):
    grasped = list(scene.feasible_targets) if success else []
    return TrialRecord(task_id=scene.task_id, category="IT", configuration=conf, seed=0,
                       trial=0, trial_seed=0, success=success, n_attempts=1, n_subgoals=1,
                       n_targets=len(scene.task.targets), n_grasped=len(grasped), order_ok=True,
                       grasped=grasped, refused=list(scene.infeasible_targets),
                       failure_types=[] if success else ["slip", "slip", "position_error"])


@pytest.fixture(scope="module")
def drawn():
    """Twelve scenes of seed 13 (scene K is family K mod 13): eleven with a target the hand
    can take (the first failing under full), and scene 9, which has none (it counts for
    refusals only)."""
    scenes = [generate(SEED, k) for k in range(12)]
    assert not scenes[9].feasible_targets and all(
        s.feasible_targets for k, s in enumerate(scenes) if k != 9)
    records = []
    for k, scene in enumerate(scenes):
        records.append(_record(scene, "full", k != 0))
        records.append(_record(scene, "no_scene_graph", k % 2 == 1))
    return scenes, summarise(records, SEED, len(scenes), ("full", "no_scene_graph"))


def test_intervals_of_the_summary_are_inside_0_100(drawn):
    _, out = drawn
    for conf in out["configurations"].values():
        rates = [conf["overall"], *conf["categories"].values(), *conf["families"].values()]
        for rate in rates:
            assert 0.0 <= rate["ci95"][0] <= rate["mean"] <= rate["ci95"][1] <= 100.0, rate
    for effect in out["scene_graph"].values():
        assert -100.0 <= effect["ci95"][0] <= effect["gain"] <= effect["ci95"][1] <= 100.0


def test_the_counts_add_up_to_the_scenes_drawn(drawn):
    scenes, out = drawn
    full = out["configurations"]["full"]
    counted = sum(f["n"] for f in full["families"].values())
    assert counted == full["overall"]["n"] == 11
    assert counted + sum(full["not_counted"].values()) == len(scenes)
    assert full["not_counted"] == {scenes[9].family: 1}
    text = format_summary(out)
    assert f"11 of 12 scenes count: 1 hold no target the hand can take ({scenes[9].family} 1)" \
        in text


def test_the_refusal_line_says_what_it_counts(drawn):
    _, out = drawn
    text = format_summary(out)
    r = out["configurations"]["full"]["refusals"]
    assert (f"of {r['infeasible_targets']} targets beyond the hand, {r['correct']} refused "
            "at planning") in text
    assert f"of {r['feasible_targets']} targets the hand can take, 0 refused" in text
    json.dumps(out)


def test_why_each_scene_failed_is_in_the_summary(drawn):
    scenes, out = drawn
    full = out["configurations"]["full"]
    assert full["failed_scenes"] == [0]
    n = len(scenes[0].feasible_targets)
    assert full["why_failed"] == {"0": f"grasped 0 of {n}; slip, position_error"}


def test_figures_keep_the_legend_off_the_bars_and_name_each_failure(drawn, tmp_path,
                                                                    monkeypatch):
    scenes, out = drawn
    figs = {}
    real = procedural._save

    def keep(fig, path):
        fig.canvas.draw()
        figs[path.name] = (fig, fig.canvas.get_renderer())
        return real(fig, path)

    monkeypatch.setattr(procedural, "_save", keep)
    files = procedural.write_figures(out, tmp_path, SEED)
    assert set(files) == {"success_per_family", "failed_scenes"}
    fig, renderer = figs["success_per_family.png"]
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [p.get_window_extent(renderer) for p in ax.patches]
    assert bars and not any(legend.overlaps(b) for b in bars)
    fig, _ = figs["failed_scenes.png"]
    assert len(fig.axes) == 1                                  # one failed scene, no blank cell
    title = fig.axes[0].get_title(loc="left")
    assert title.startswith(f"#0 {scenes[0].family}: full failed")
    assert "slip, position_error" in title


def test_the_failed_scenes_grid_leaves_few_empty_cells():
    from agentic_grasp_lab.evaluation.studies.procedural import _columns

    # the old grid was always 4 wide: 6 scenes left 2 of 8 cells blank (a quarter)
    assert _columns(6) == 3 and _columns(4) == 2 and _columns(3) == 3
    assert all((-n) % _columns(n) <= 2 and _columns(n) <= 4 for n in range(1, 13))
