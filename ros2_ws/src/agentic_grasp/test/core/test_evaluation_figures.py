"""The evaluation's PNG figures are written from tables."""
from agentic_grasp_lab.evaluation.figures import write_figures
from agentic_grasp_lab.evaluation.records import TrialRecord
from agentic_grasp_lab.evaluation.tables import (RecordIndex, failure_histogram, level_histogram,
                                                 ood_table, per_task)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _records():
    out = []
    for conf in ("full", "no_recovery"):
        for seed in (0, 1):
            for task, split in (("sg_a", "in_distribution"), ("it_b", "far_ood")):
                for k in range(3):
                    ok = (k + seed) % 2 == 0 or conf == "full"
                    out.append(TrialRecord(
                        task_id=task, category=task[:2].upper(), configuration=conf, seed=seed,
                        trial=k, trial_seed=k, success=ok, n_attempts=2 - ok, n_subgoals=1,
                        n_targets=1, n_grasped=int(ok), order_ok=True,
                        failure_types=[] if ok else ["slip"],
                        retry_levels=[0] if ok else [0, 1], split=split))
    return out


def test_figures_are_written(tmp_path):
    index = RecordIndex(_records())
    ood = ood_table(RecordIndex([r for r in _records() if r.configuration == "full"]),
                    ["in_distribution", "near_ood", "far_ood"])
    files = write_figures(tmp_path, per_task(index), failure_histogram(index),
                          level_histogram(index, "full"), ood,
                          {"in_distribution": "In-distribution", "far_ood": "Far-OOD"})
    assert set(files) == {"success_per_task", "failure_types", "recovery_levels", "ood"}
    for path in files.values():
        data = open(path, "rb").read()
        assert data.startswith(PNG_MAGIC) and len(data) > 5_000
