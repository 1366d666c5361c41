"""The paper's evaluation in process (Sec. V): Table II-V, the OOD study, figures.

Public API::

    from agentic_grasp_lab.evaluation import (
        SweepConfig, run_sweep, trial_seed,             # the sweep (sweep.py)
        TrialRecord, write_records, read_records,       # JSONL / CSV (records.py)
        RecordIndex, mean_ci, table_ii, table_iii, table_v, ood_table,   # tables.py
        load_splits, validate_splits, run_ood,          # OOD splits (ood.py)
        PaperBenchOptions, run_paper_benchmark)         # everything (report.py)

Typical use::

    result = run_sweep(["full", "no_recovery"], ["sg_cup", "it_cup_near_vase"], trials=30,
                       seeds=[0, 1, 2, 3, 4], workers=2)
    print(format_table_ii(table_ii(RecordIndex(result.records))))

Modules: sweep (trials in parallel, paired seeds), records (one flat record per trial and
its files), tables (aggregation, CIs over seeds, the paper's numbers, formatting), ood
(splits as data), figures (matplotlib PNGs), timing (where a trial's time goes), report
(the whole benchmark). Every trial is one call of the planner core's ``run_trial``.
"""
from agentic_grasp_lab.evaluation.studies.ood import (OODSplits, load_splits, run_ood,
                                                      validate_splits)
from agentic_grasp_lab.evaluation.records import (TrialRecord, read_records, sort_records,
                                                  write_records)
from agentic_grasp_lab.evaluation.report import (PaperBenchOptions, load_records,
                                                 run_paper_benchmark, tabulate)
from agentic_grasp_lab.evaluation.sweep import (SweepConfig, SweepResult, TrialRunner, make_units,
                                                run_sweep, run_units, trial_seed)
from agentic_grasp_lab.evaluation.confidence import MeanCI, mean_ci, t_quantile
from agentic_grasp_lab.evaluation.tables import (RecordIndex, format_ood, format_table_ii,
                                                 format_table_iii, format_table_v, ood_table,
                                                 per_task, table_ii, table_iii, table_v)

__all__ = [
    "MeanCI", "OODSplits", "PaperBenchOptions", "RecordIndex", "SweepConfig", "SweepResult",
    "TrialRecord", "TrialRunner", "format_ood", "format_table_ii", "format_table_iii",
    "format_table_v", "load_records", "load_splits", "make_units", "mean_ci", "ood_table",
    "per_task", "read_records", "run_ood", "run_paper_benchmark", "run_sweep", "run_units",
    "sort_records", "t_quantile", "table_ii", "table_iii", "table_v", "tabulate",
    "trial_seed", "validate_splits", "write_records",
]
