"""The paper's tables from trial records, with confidence intervals over seeds, printed beside
the paper's numbers (docs/paper_facts.md; paper Sec. V, Tables II-V, OOD).

Aggregation, as the paper defines it:

- a task's success rate in one repetition (seed) is successes / trials (30 trials);
- a category's (SG / IT / LH) value is the mean over its tasks, and "overall" the mean over
  all 12 tasks (docs/paper_facts.md: "Overall is the mean over the 12 tasks"), not over trials;
- a number "over 5 seeds" is the mean of the 5 per-seed values with the two-sided interval
  mean +- t_{(1+c)/2, n-1} sd / sqrt(n), sd the sample standard deviation (ddof 1) of the
  per-seed values; for c = 0.95 and n = 5, t = 2.776.

Recovery rate (Table III): the share of trials whose first grasp attempt failed that still
succeeded. Constraint satisfaction (Table V): the share of trials with no constraint
violation, spill or contact with a fragile neighbour (episode.py's definition); because
the paper reports 0 % for both rows without constraint inference, a second column counts
only trials in which grasp-changing constraints were inferred and then kept.

Modules: :mod:`.paper` (the paper's numbers and labels), :mod:`.aggregate` (the tables from
records), :mod:`.text` (the tables as text beside the paper's numbers).
"""
from agentic_grasp_lab.evaluation.tables.aggregate import (RecordIndex, failure_histogram,
                                                           level_histogram, ood_table, per_task,
                                                           perception_per_task, refusal_table,
                                                           sg_objects, success_rules, table_ii,
                                                           table_iii,
                                                           table_iv, table_v)
from agentic_grasp_lab.evaluation.tables.paper import (CATEGORIES, LABELS, PAPER_ATTEMPTS,
                                                       PAPER_FULL_SEEDS, PAPER_OOD,
                                                       PAPER_RECOVERY_RATE, PAPER_SG_OBJECTS,
                                                       PAPER_TABLE_II, PAPER_TABLE_III,
                                                       PAPER_TABLE_V, TABLE_V_LABELS)
from agentic_grasp_lab.evaluation.tables.text import (format_histograms, format_ood,
                                                      format_per_task,
                                                      format_perception_per_task,
                                                      format_success_rules,
                                                      format_table_ii, format_table_iii,
                                                      format_table_v)

__all__ = [
    "CATEGORIES", "failure_histogram", "format_histograms", "format_ood", "format_per_task",
    "format_perception_per_task", "format_table_ii", "format_table_iii", "format_table_v",
    "LABELS", "level_histogram", "ood_table", "PAPER_ATTEMPTS", "PAPER_FULL_SEEDS", "PAPER_OOD",
    "PAPER_RECOVERY_RATE", "PAPER_SG_OBJECTS", "PAPER_TABLE_II", "PAPER_TABLE_III",
    "PAPER_TABLE_V", "per_task", "perception_per_task", "RecordIndex", "refusal_table",
    "format_success_rules", "sg_objects", "success_rules",
    "table_ii", "table_iii", "table_iv", "table_v", "TABLE_V_LABELS",
]
