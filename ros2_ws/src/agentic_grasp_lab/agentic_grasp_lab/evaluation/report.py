"""The whole paper benchmark in one call: sweeps, tables, figures, files (paper Sec. V).

:func:`run_paper_benchmark` runs

1. the Table II sweep (every configuration x task x trial x seed of config/evaluation.yaml),
   timed on its own: Tables II and III and the per-object SG numbers come from it;
2. the extra Table V row(s) on the interactive tasks (configurations of
   ``table_v_configurations`` the Table II sweep did not run, with the same trial seeds);
3. the OOD study (config/ood/splits.yaml, full system);
4. Table IV (retrieval, no trials);

and writes into the output folder: ``records.jsonl`` (or .csv), ``table_v_records.*``,
``ood_records.*``, ``tables.json`` (every table with its CIs and the paper's numbers),
``report.txt`` (the printed tables) and the PNG figures. :func:`tabulate` recomputes every
table from records already on disk.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from agentic_grasp.core import paths
from agentic_grasp_lab.evaluation.studies.diagnosis import (diagnosis_summary, format_diagnosis,
                                                    plot_confusion)
from agentic_grasp_lab.evaluation import tables as T
from agentic_grasp_lab.evaluation.records import TrialRecord, read_records, write_json
from agentic_grasp_lab.evaluation.sweep import SweepConfig, run_sweep
from agentic_grasp.core.grasping.config import CONSTRAINT_MODES
from agentic_grasp.core.planner.configurations import PlannerConfig
from agentic_grasp_lab.evaluation.figures import ood_success, perception_per_task, write_figures
from agentic_grasp_lab.evaluation import comparisons as C
from agentic_grasp_lab.evaluation.studies.ood import (SPLITS, format_validation, load_splits,
                                                      run_ood, validate_splits)
from agentic_grasp.core.sim import load_task

_LOG = logging.getLogger(__name__)

RECORD_FILES = {"table_ii": "records", "table_v": "table_v_records", "ood": "ood_records",
                "oracle": "oracle_records"}


@dataclass
class PaperBenchOptions:
    """What :func:`run_paper_benchmark` runs; ``config`` carries the protocol."""

    config: SweepConfig = field(default_factory=SweepConfig)
    out_dir: Optional[Path] = None
    table_ii: bool = True
    table_v: bool = True
    ood: bool = True
    retrieval: bool = True
    figures: bool = True
    progress: bool = True
    #: Also run the full system with oracle perception for the per-task oracle vs default
    #: comparison (skipped when the default perception is the oracle).
    oracle_comparison: bool = True
    #: Complete the records files an interrupted run left in the output folder instead of
    #: starting again (agentic_grasp_lab/evaluation/executors.py: the journal).
    resume: bool = False

    def output_dir(self) -> Path:
        out = Path(self.out_dir or self.config.output_dir)
        if not out.is_absolute() and self.out_dir is None:
            out = paths.data_root() / out          # config-relative default: <repo>/out/bench
        return out


def _planner_constraint_mode() -> str:
    """config/planner.yaml's grasp_synthesis.constraint_mode: the mode of every other run."""
    return PlannerConfig.from_config().grasp_synthesis.constraint_mode


def _records_path(out: Path, name: str, fmt: str) -> Path:
    return out / f"{RECORD_FILES[name]}.{fmt}"


def run_paper_benchmark(options: PaperBenchOptions) -> Dict[str, Any]:
    """Run what ``options`` selects; returns {"tables", "totals", "files", "text"}."""
    cfg = options.config
    out = options.output_dir()
    out.mkdir(parents=True, exist_ok=True)
    fmt = cfg.records_format
    records: Dict[str, List[TrialRecord]] = {}
    totals: Dict[str, Any] = {}
    files: Dict[str, str] = {}
    tasks = cfg.task_list()

    def executor(path: Path) -> Dict[str, Any]:
        """run_sweep's executor settings; the sweep journals its records into ``path``."""
        return dict(executor=cfg.executor, ray_address=cfg.ray_address, journal=path,
                    resume=options.resume)

    def sweep(configurations, task_ids, path: Path, **overrides):
        """run_sweep over the protocol's trials and seeds with its settings (``overrides``:
        perception, constraint_mode), its records written to ``path``."""
        kwargs = dict(start_method=cfg.start_method, memory_scope=cfg.memory_scope,
                      perception=cfg.perception, visual_query=cfg.visual_query,
                      **executor(path))
        kwargs.update(overrides)
        return run_sweep(configurations, task_ids, cfg.trials_per_task, cfg.seeds,
                         cfg.workers, options.progress, **kwargs)

    if options.table_ii:
        path = _records_path(out, "table_ii", fmt)
        result = sweep(cfg.configurations, tasks, path)
        records["table_ii"] = result.records
        totals["table_ii_sweep"] = result.totals()
        files["records"] = str(path)
    if options.table_v:
        it_tasks = [t for t in tasks if load_task(t).category == "IT"]
        have = set(cfg.configurations) if options.table_ii else set()
        extra = [c for c in cfg.table_v_configurations if c not in have]
        if extra and it_tasks:
            path = _records_path(out, "table_v", fmt)
            result = sweep(extra, it_tasks, path)
            records["table_v"] = result.records
            totals["table_v_sweep"] = result.totals()
            files["table_v_records"] = str(path)
        # the same rows under each other constraint mode (the paper's fixed
        # adjustments beside the clearance-aware default), same trial seeds
        own_mode = _planner_constraint_mode()
        for mode in cfg.table_v_constraint_modes:
            if not it_tasks or mode == own_mode:
                continue
            path = out / f"table_v_{mode}_records.{fmt}"
            result = sweep(cfg.table_v_configurations, it_tasks, path, constraint_mode=mode)
            records[f"table_v_{mode}"] = result.records
            totals[f"table_v_{mode}_sweep"] = result.totals()
            files[f"table_v_{mode}_records"] = str(path)
    ood_labels: Dict[str, str] = {}
    if options.ood:

        splits = load_splits(paths.config_dir() / cfg.ood_splits_file)
        ood_labels = splits.labels()
        validation = validate_splits(splits)
        result = run_ood(splits, cfg.ood_trials_per_object, cfg.ood_seeds, cfg.workers,
                         options.progress, start_method=cfg.start_method,
                         memory_scope=cfg.memory_scope, perception=cfg.perception,
                         visual_query=cfg.visual_query,
                         **executor(_records_path(out, "ood", fmt)))
        records["ood"] = result.records
        totals["ood_sweep"] = result.totals()
        totals["ood_objects"] = validation
        totals["ood_validation_text"] = format_validation(validation)
        files["ood_records"] = str(_records_path(out, "ood", fmt))
    if options.table_ii and options.oracle_comparison and cfg.perception != "oracle":
        path = _records_path(out, "oracle", fmt)
        result = sweep(["full"], tasks, path, perception="oracle")
        records["oracle"] = result.records
        totals["oracle_sweep"] = result.totals()
        files["oracle_records"] = str(path)
    report = tabulate(records, cfg, retrieval=options.retrieval, ood_labels=ood_labels)
    if "ood_validation_text" in totals:
        report["text"] += "\n\n" + totals.pop("ood_validation_text")
    totals["memory_scope"] = cfg.memory_scope
    totals["perception"] = cfg.perception
    totals["visual_query"] = cfg.visual_query
    report["totals"] = totals
    if options.figures:
        files.update(write_report_figures(report["tables"], out, ood_labels))
    files["tables"] = str(write_json({"tables": report["tables"], "totals": totals},
                                     out / "tables.json"))
    (out / "report.txt").write_text(report["text"] + "\n", encoding="utf-8")
    files["report"] = str(out / "report.txt")
    report["files"] = files
    return report


def tabulate(records: Dict[str, Sequence[TrialRecord]], cfg: SweepConfig,
             retrieval: bool = True, ood_labels: Optional[Dict[str, str]] = None
             ) -> Dict[str, Any]:
    """Every table from the records of each sweep (keys of :data:`RECORD_FILES`)."""
    conf = cfg.confidence
    tables: Dict[str, Any] = {}
    text: List[str] = []
    main = list(records.get("table_ii", []))
    if main:
        index = T.RecordIndex(main)
        tables["table_ii"] = T.table_ii(index, cfg.configurations, conf)
        tables["sg_objects"] = T.sg_objects(index, "full", conf)
        tables["per_task"] = T.per_task(index, cfg.configurations, conf)
        tables["table_iii"] = T.table_iii(index, ("no_recovery", "full"), conf)
        tables["failure_types"] = T.failure_histogram(index)
        tables["recovery_levels"] = T.level_histogram(index, "full")
        tables["comparisons"] = C.comparisons(index, conf)
        tables["refusals"] = T.refusal_table(index)
        tables["diagnosis"] = diagnosis_summary(main, "full" if "full" in cfg.configurations
                                                else None)
        tables["success_rules"] = T.success_rules(index, cfg.configurations, conf)
        text += [T.format_table_ii(tables["table_ii"], tables["sg_objects"]),
                 T.format_success_rules(tables["success_rules"]),
                 C.format_comparisons(tables["comparisons"]),
                 T.format_per_task(tables["per_task"]),
                 T.format_table_iii(tables["table_iii"]),
                 T.format_histograms(tables["failure_types"], tables["recovery_levels"],
                                     tables["refusals"]),
                 format_diagnosis(tables["diagnosis"])]
    if main and records.get("oracle"):
        tables["perception_per_task"] = T.perception_per_task(
            T.RecordIndex(main), T.RecordIndex(records["oracle"]), "full", conf)
        text.append(T.format_perception_per_task(tables["perception_per_task"]))
    v_records = main + list(records.get("table_v", []))
    if v_records:
        index = T.RecordIndex(v_records)
        if index.tasks_of("IT") and any(c in index.configurations
                                        for c in cfg.table_v_configurations):
            tables["table_v"] = T.table_v(index, cfg.table_v_configurations, conf)
            text.append(T.format_table_v(tables["table_v"], _planner_constraint_mode()))
    for mode in cfg.table_v_constraint_modes:
        if records.get(f"table_v_{mode}"):
            index = T.RecordIndex(records[f"table_v_{mode}"])
            tables[f"table_v_{mode}"] = T.table_v(index, cfg.table_v_configurations, conf)
            text.append(T.format_table_v(tables[f"table_v_{mode}"], mode))
    if records.get("ood"):
        if not ood_labels:
            ood_labels = load_splits(paths.config_dir() / cfg.ood_splits_file).labels()
        index = T.RecordIndex(records["ood"])
        conf_name = index.configurations[0]
        tables["ood"] = T.ood_table(index, SPLITS, conf_name, conf)
        tables["ood"]["labels"] = dict(ood_labels or {})
        text.append(T.format_ood(tables["ood"], ood_labels))
    if retrieval:
        results, table_text = T.table_iv()
        tables["table_iv"] = {mode: {k: v for k, v in m.items() if k != "per_query"}
                              for mode, m in results["modes"].items()}
        text.append(table_text)
    return {"tables": tables, "text": "\n\n".join(t for t in text if t)}


def write_report_figures(tables: Dict[str, Any], out: Path,
                         ood_labels: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The PNG figures of whatever tables were computed."""
    if "per_task" not in tables:
        if "ood" in tables:
            return {"ood": str(ood_success(tables["ood"], out / "ood.png", ood_labels))}
        return {}
    files = write_figures(out, tables["per_task"], tables["failure_types"],
                          tables["recovery_levels"], tables.get("ood"), ood_labels)
    if tables.get("diagnosis", {}).get("confusion"):
        written = plot_confusion(tables["diagnosis"], out / "diagnosis_confusion.png")
        if written:
            files["diagnosis_confusion"] = written
    if "perception_per_task" in tables:
        files["perception_per_task"] = str(perception_per_task(
            tables["perception_per_task"], out / "perception_per_task.png"))
    return files


def load_records(out_dir: Path, fmt: str = "") -> Dict[str, List[TrialRecord]]:
    """Records of a previous run found in ``out_dir`` (any of the sweeps)."""
    found: Dict[str, List[TrialRecord]] = {}

    stems = dict(RECORD_FILES, **{f"table_v_{m}": f"table_v_{m}_records"
                                  for m in CONSTRAINT_MODES})
    for name, stem in stems.items():
        for ext in ((fmt,) if fmt else ("jsonl", "csv")):
            path = Path(out_dir) / f"{stem}.{ext}"
            if path.is_file():
                found[name] = read_records(path)
                break
    return found


__all__ = ["PaperBenchOptions", "RECORD_FILES", "load_records", "run_paper_benchmark",
           "tabulate", "write_report_figures"]
