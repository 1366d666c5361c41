"""The tables as text: each value with its confidence interval, beside the paper's number."""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from agentic_grasp_lab.evaluation.tables.paper import CATEGORIES, LABELS, TABLE_V_LABELS


# ----------------------------------------------------------------- formatting
def _cell(ci: Optional[Mapping[str, Any]], paper: Optional[float], digits: int = 1,
          width: int = 21) -> str:
    if not ci:
        text = "-"
    else:
        n, half = ci["n"], ci["half_width"]
        text = f"{ci['mean']:.{digits}f}"
        if n >= 2 and half is not None and math.isfinite(half):
            text += f" ± {half:.{digits}f}"
    if paper is not None:
        text += f" ({paper:.{digits}f})"
    return text.ljust(width)


def format_table_ii(table: Mapping[str, Any], per_object: Optional[Mapping[str, Any]] = None
                    ) -> str:
    seeds = table["seeds"]
    lines = [f"Table II: success % per category, ours: mean ± {table['confidence']:.0%} CI "
             f"over {len(seeds)} seed(s) x {table['trials_per_task']} trials per task "
             "(paper's number in parentheses); Overall = mean over the "
             f"{len(table['tasks'])} tasks",
             f"{'Configuration':<22}" + "".join(f"{c:<21}" for c in CATEGORIES + ("Overall",))]
    for conf, row in table["rows"].items():
        paper = table["paper"].get(conf, {})
        cells = [_cell(row.get(c), paper.get(c)) for c in CATEGORIES]
        cells.append(_cell(row.get("overall"), paper.get("overall")))
        lines.append(f"{LABELS.get(conf, conf):<22}" + "".join(cells).rstrip())
    full = table["rows"].get("full", {}).get("overall")
    if full:
        p = table["paper_full_seeds"]
        lines.append(f"Full system over seeds: {full['mean']:.1f} ± {full['half_width']:.1f} % "
                     f"({table['confidence']:.0%} CI {full['lo']:.1f} to {full['hi']:.1f}); "
                     f"paper {p['mean']:.1f} ± {p['half_width']:.1f} % "
                     f"(CI {p['lo']:.1f} to {p['hi']:.1f})")
    if per_object:
        paper = per_object["paper"]
        parts = [f"{task.replace('sg_', '')} {_cell(ci, paper.get(task), width=0).strip()}"
                 for task, ci in per_object["rows"].items()]
        lines.append(f"SG per object ({LABELS.get(per_object['configuration'])}; paper quotes "
                     "banana, cube, apple, cup): " + "; ".join(parts))
    return "\n".join(lines)


def format_success_rules(table: Mapping[str, Any]) -> str:
    """Per task, success under the strict rule beside the paper's rule (module of
    evaluation/taken.py says what each counts)."""
    lines = ["Success under two rules, per task: strict (every target grasped and nothing "
             "else taken but a sturdy neighbour moved aside) / the paper's (every target "
             "grasped, whatever else was taken); trials that took a fragile or named "
             "non-target, and trials that moved a sturdy neighbour aside"]
    for conf, tasks in table["rows"].items():
        lines.append(f"{LABELS.get(conf, conf)}:")
        for task, row in tasks.items():
            wrong = ", ".join(f"{k} x{v}" for k, v in sorted(row["wrongly_taken"].items()))
            lines.append(f"  {task:<28}{_num(row['strict']):>7} /{_num(row['paper_rule']):>7}"
                         f"   wrong take {row['wrongly_taken_trials']:>3} of {row['trials']}"
                         + (f" ({wrong})" if wrong else "")
                         + f"   moved aside {row['moved_aside_trials']}")
    paper_rule = table["table_ii_paper_rule"]
    lines.append("Table II under the paper's rule:")
    for conf, row in paper_rule["rows"].items():
        cells = "  ".join(f"{c} {row[c]['mean']:.1f}" for c in CATEGORIES + ("overall",)
                          if c in row)
        lines.append(f"  {LABELS.get(conf, conf):<22}{cells}")
    return "\n".join(lines)


def _num(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f}"


def format_per_task(table: Mapping[str, Mapping[str, Any]]) -> str:
    confs = list(table)
    if not confs:
        return ""
    tasks = list(next(iter(table.values())))
    lines = ["Success % per task (mean over seeds):",
             f"{'task':<28}" + "".join(f"{c[:11]:>12}" for c in confs)]
    for task in tasks:
        lines.append(f"{task:<28}" + "".join(
            f"{table[c][task]['mean']:>12.1f}" if task in table[c] else f"{'-':>12}"
            for c in confs))
    return "\n".join(lines)


def format_table_iii(table: Mapping[str, Any]) -> str:
    lines = ["Table III: recovery; success % / mean time per trial (s) per category "
             "(paper in parentheses); time = simulated motion + the planner's compute-time "
             "model",
             f"{'':<16}" + "".join(f"{c:<34}" for c in CATEGORIES)]
    for conf, row in table["rows"].items():
        paper = table["paper"].get(conf, {})
        cells = []
        for cat in CATEGORIES:
            if cat not in row:
                cells.append(f"{'-':<34}")
                continue
            s, t = row[cat]["success"], row[cat]["time_s"]
            ps, pt = paper.get(cat, (None, None))
            text = f"{s['mean']:.1f} / {t['mean']:.2f}"
            if ps is not None:
                text += f" ({ps:.1f} / {pt:.1f})"
            cells.append(f"{text:<34}")
        label = "with Recovery" if conf == "full" else LABELS.get(conf, conf)
        lines.append(f"{label:<16}" + "".join(cells).rstrip())
    full = table["rows"].get("full")
    if full:
        a, rr = full["attempts_per_trial"], full["recovery_rate"]
        per_cat = ", ".join(f"{c} {full[c]['attempts']['mean']:.2f}" for c in CATEGORIES
                            if c in full)
        lines.append(f"Full system: {a['mean']:.2f} attempts per trial ({per_cat}; paper "
                     f"{table['paper_attempts']:.2f}); recovery rate {rr['mean']:.1f} ± "
                     f"{rr['half_width']:.1f} % = {full['recovered_after_first_failure']} of "
                     f"{full['first_attempt_failed']} trials whose first attempt failed "
                     f"(paper {table['paper_recovery_rate']:.1f} %)")
    vlm_rows = [(conf, row) for conf, row in table["rows"].items()
                if any(row.get(c, {}).get("vlm_calls", {}).get("mean") for c in CATEGORIES)]
    if vlm_rows:
        lines.append("VLM calls per trial / perception looks per trial / modelled VLM time per "
                     "trial (s, in the time above): the re-perception policy asks the VLM "
                     "only when the depth changed around the target")
        for conf, row in vlm_rows:
            label = "with Recovery" if conf == "full" else LABELS.get(conf, conf)
            cells = []
            for cat in CATEGORIES:
                if cat not in row:
                    cells.append(f"{'-':<34}")
                    continue
                text = (f"{row[cat]['vlm_calls']['mean']:.2f} / "
                        f"{row[cat]['perception_calls']['mean']:.2f} / "
                        f"{row[cat]['vlm_s']['mean']:.2f}")
                cells.append(f"{text:<34}")
            lines.append(f"{label:<16}" + "".join(cells).rstrip())
    return "\n".join(lines)


def format_perception_per_task(table: Mapping[str, Any]) -> str:
    name = table["perception"]
    lines = [f"Success % per task, {LABELS.get(table['configuration'], table['configuration'])}"
             f": {name} (the benchmark's perception) vs oracle (ground truth)",
             f"{'task':<28}{name:>12}{'oracle':>12}{'diff':>8}"]
    for task, row in table["rows"].items():
        d, o = row["default"], row["oracle"]
        if d is None or o is None:
            continue
        lines.append(f"{task:<28}{d['mean']:>12.1f}{o['mean']:>12.1f}"
                     f"{d['mean'] - o['mean']:>+8.1f}")
    d, o = table["overall"].get("default"), table["overall"].get("oracle")
    if d and o:
        lines.append(f"{'overall (mean of tasks)':<28}{d['mean']:>12.1f}{o['mean']:>12.1f}"
                     f"{d['mean'] - o['mean']:>+8.1f}")
    return "\n".join(lines)


def format_table_v(table: Mapping[str, Any], constraint_mode: str = "") -> str:
    mode = f", constraint_mode {constraint_mode}" if constraint_mode else ""
    lines = [f"Table V: scene graph on the {len(table['tasks'])} interactive tasks{mode} "
             "(paper in parentheses)",
             f"{'':<26}{'Success %':<21}{'Constraint sat. %':<21}{'inferred & kept %':<18}"]
    for conf, row in table["rows"].items():
        ps, pc = table["paper"].get(conf, (None, None))
        lines.append(f"{TABLE_V_LABELS.get(conf, conf):<26}"
                     + _cell(row["success"], ps) + _cell(row["constraint_satisfaction"], pc)
                     + _cell(row["inferred_and_kept"], None).rstrip())
    lines.append("Constraint sat.: trials with no violation / spill / fragile-neighbour "
                 "contact; inferred & kept: the same, counting only trials where "
                 "grasp-changing constraints were inferred (the paper's 0 % without "
                 "inference suggests this reading).")
    return "\n".join(lines)


def format_ood(table: Mapping[str, Any], labels: Optional[Mapping[str, str]] = None) -> str:
    labels = labels or {}
    lines = [f"OOD generalisation ({LABELS.get(table['configuration'])}), success %, mean ± "
             f"{table['confidence']:.0%} CI over seeds (paper in parentheses)"]
    for split, row in table["rows"].items():
        paper = table["paper"].get(split)
        lines.append(f"{labels.get(split, split):<18}" + _cell(row["success"], paper).rstrip())
        objs = ", ".join(f"{t.replace('ood_', '').replace('near_', '').replace('far_', '')}"
                         f" {ci['mean']:.0f}" for t, ci in row["objects"].items())
        lines.append(f"{'':<18}per object: {objs}")
    return "\n".join(lines)


def format_histograms(failures: Mapping[str, Mapping[str, int]],
                      levels: Mapping[str, Mapping[int, int]],
                      refusals: Optional[Mapping[str, Mapping[str, int]]] = None) -> str:
    lines = ["Failure types (failed attempts, all seeds):"]
    for conf, counts in failures.items():
        total = sum(counts.values())
        top = ", ".join(f"{k} {v}" for k, v in list(counts.items())[:6])
        lines.append(f"  {LABELS.get(conf, conf):<22} {total:>6}  {top}")
    if refusals:
        lines.append("Refused at planning, beyond the hand (trials, zero attempts):")
        for conf, counts in refusals.items():
            lines.append(f"  {LABELS.get(conf, conf):<22} {sum(counts.values()):>6}  "
                         + ", ".join(f"{k} {v}" for k, v in counts.items()))
    lines.append("Retry level of executed attempts, full system (0 = g0):")
    for cat, counts in levels.items():
        lines.append(f"  {cat}: " + ", ".join(f"L{k} {v}" for k, v in counts.items()))
    return "\n".join(lines)



__all__ = ["format_histograms", "format_ood", "format_per_task", "format_perception_per_task",
           "format_table_ii", "format_table_iii", "format_table_v"]
