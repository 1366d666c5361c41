"""The procedural benchmark: N drawn scenes (core/sim/procedural.py) under the paper's protocol.

Each scene is one draw and one trial per configuration; its trial seed is
:func:`.sweep.trial_seed` of (scene seed, the scene's id ``procedural:S:K``, 0), so it is a
function of (scene seed, index) alone and the same in every configuration (paired). The
trials run through the same sweep (:func:`.sweep.run_units`), records and executors (local
pool, Ray) as the paper's benchmark.

Scoring (from the records and the scenes' geometric labels, never from the planner):

- a scene counts for success when it has a feasible target; it succeeds when every feasible
  target was grasped (in the instruction's order when the order is the goal: sorting) and
  nothing was taken but the targets: a fragile object or one the instruction names (a
  landmark, the object kept, the other of two mugs) taken fails it (the strict rule,
  evaluation/taken.py); ``paper_rule`` is the same without that condition, so the change
  is visible; a sturdy neighbour moved aside is counted apart (``moved_aside``);
- ``instruction``: the instruction parser's target accuracy, the share of scenes whose
  parsed targets (core/planner/instruction/tasks.plan_subgoals over the scene's objects,
  no scene graph) are the scene's true targets (in order, for sorting);
- ``cleared``: the fraction of its feasible targets grasped (the long-horizon column beside
  the paper's all-or-nothing success);
- refusals: an infeasible target refused at planning is a correct refusal; a feasible target
  refused, or an infeasible one attempted, is a wrong one.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from agentic_grasp_lab.evaluation.confidence import paired_difference_ci, wilson_ci
from agentic_grasp_lab.evaluation.studies.diagnosis import (diagnosis_summary, format_diagnosis,
                                                    plot_confusion)
from agentic_grasp_lab.evaluation.records import TrialRecord
from agentic_grasp.core.sim.procedural import (FAMILIES, ProceduralScene, load_procedural,
                                               procedural_id)
from agentic_grasp_lab.evaluation.figures import _pyplot, _save
from agentic_grasp_lab.evaluation.sweep import run_units
from agentic_grasp_lab.evaluation.worker import WorkUnit
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.planner.instruction.tasks import plan_subgoals
from agentic_grasp.core.render.views import render_view

#: Configurations run by default: the full system and the same without the scene graph
#: (the scene graph's contribution is a headline figure of the paper).
DEFAULT_CONFIGURATIONS = ("full", "no_scene_graph")
IT_FAMILIES = tuple(f for f in FAMILIES if f.startswith("it_"))


@dataclass
class SceneScore:
    """One trial's score against its scene's labels (module docstring)."""

    configuration: str
    index: int
    family: str
    counts: bool                    # has a feasible target
    success: bool
    cleared: float
    refused_correct: int
    refused_wrong: int
    feasible_refused: int
    infeasible_attempted: int
    n_infeasible: int
    n_feasible: int
    paper_success: bool = False
    wrongly_taken: int = 0
    moved_aside: int = 0


def score(record: TrialRecord, scene: ProceduralScene) -> SceneScore:
    feasible = scene.feasible_targets
    infeasible = scene.infeasible_targets
    grasped = list(record.grasped)
    done = [t for t in feasible if t in grasped]
    paper_success = bool(feasible) and len(done) == len(feasible)
    if paper_success and _order_matters(scene):
        positions = [grasped.index(t) for t in feasible]
        paper_success = positions == sorted(positions)
    success = paper_success and not record.wrongly_taken
    refused = set(record.refused)
    f_refused = sum(1 for t in feasible if t in refused)
    i_refused = sum(1 for t in infeasible if t in refused)
    return SceneScore(record.configuration, scene.index, scene.family, bool(feasible), success,
                      len(done) / len(feasible) if feasible else 0.0,
                      i_refused, f_refused + (len(infeasible) - i_refused), f_refused,
                      len(infeasible) - i_refused, len(infeasible), len(feasible),
                      paper_success, len(record.wrongly_taken), len(record.moved_aside))


def parsed_targets(scene: ProceduralScene) -> List[str]:
    """The targets the robot's instruction parser reads from the scene's instruction over
    the scene's objects as perception names them (by category: the VLM reports no full
    name) at their true places and sizes (no perception error, no scene graph): what the
    parser alone is judged on."""
    seen = [replace(o, category=o.category.replace("_", " "),
                    name=o.category.replace("_", " ")) for o in scene.task.nominal()]
    return plan_subgoals(scene.task.instruction, seen, None).target_ids


def parser_correct(scene: ProceduralScene) -> bool:
    """The parser's targets are the scene's true targets (in order when sorting)."""
    parsed = parsed_targets(scene)
    if _order_matters(scene):
        return parsed == list(scene.task.targets)
    return sorted(parsed) == sorted(scene.task.targets)


def _order_matters(scene: ProceduralScene) -> bool:
    return scene.family == "lh_sort"


def _pct(values: Sequence[float]) -> Dict[str, Any]:
    """Success % of scenes (0/1 outcomes) with its 95 % Wilson interval, inside [0, 100]."""
    n = len(values)
    k = int(round(sum(values)))
    lo, hi = wilson_ci(k, n)
    return {"mean": round(100.0 * k / n, 2) if n else float("nan"),
            "ci95": [round(100.0 * lo, 2), round(100.0 * hi, 2)], "n": n}


def _why_failed(record: TrialRecord, scene: ProceduralScene, s: SceneScore) -> str:
    """Why a counted scene failed, in a few words, from its record: what was grasped of its
    feasible targets, what was refused, and the failure types of its attempts."""
    feasible = scene.feasible_targets
    done = [t for t in feasible if t in record.grasped]
    if len(done) == len(feasible):
        return "all grasped, out of order"
    parts = [f"grasped {len(done)} of {len(feasible)}"]
    if s.feasible_refused:
        parts.append(f"{s.feasible_refused} refused as beyond the hand")
    kinds = list(dict.fromkeys(record.failure_types))
    if kinds:
        parts.append(", ".join(kinds[:3]) + (" ..." if len(kinds) > 3 else ""))
    elif not record.n_attempts:
        parts.append("no attempt")
    return "; ".join(parts)


def summarise(records: Sequence[TrialRecord], scene_seed: int, scenes: int,
              configurations: Sequence[str]) -> Dict[str, Any]:
    """The JSON of ``bench procedural --json`` (module docstring)."""
    by_conf: Dict[str, List[SceneScore]] = {c: [] for c in configurations}
    why: Dict[str, Dict[str, str]] = {c: {} for c in configurations}
    parsed: Dict[int, ProceduralScene] = {}
    for r in records:
        scene = load_procedural(r.task_id)
        parsed.setdefault(scene.index, scene)
        s = score(r, scene)
        by_conf.setdefault(r.configuration, []).append(s)
        if s.counts and not s.success:
            why.setdefault(r.configuration, {})[str(s.index)] = _why_failed(r, scene, s)
    out: Dict[str, Any] = {"scene_seed": int(scene_seed), "scenes": int(scenes),
                           "configurations": {},
                           "instruction": _parser_accuracy(parsed.values())}
    for conf, rows in by_conf.items():
        counted = [s for s in rows if s.counts]
        families: Dict[str, Any] = {}
        for fam in FAMILIES:
            frows = [s for s in counted if s.family == fam]
            if not frows:
                continue
            stats = _pct([float(s.success) for s in frows])
            families[fam] = {"mean": stats["mean"], "ci95": stats["ci95"], "n": len(frows),
                             "cleared": round(100.0 * sum(s.cleared for s in frows)
                                              / len(frows), 2),
                             "paper_rule": _share(s.paper_success for s in frows),
                             "wrongly_taken": sum(1 for s in frows if s.wrongly_taken),
                             "moved_aside": sum(1 for s in frows if s.moved_aside)}
        categories: Dict[str, Any] = {}
        for cat, fams in (("SG", ("sg",)), ("IT", IT_FAMILIES), ("LH", ("lh_clear",
                                                                          "lh_sort"))):
            crows = [s for s in counted if s.family in fams]
            if crows:
                categories[cat] = _pct([float(s.success) for s in crows])
        n_inf = sum(s.n_infeasible for s in rows)
        n_feas = sum(s.n_feasible for s in rows)
        out["configurations"][conf] = {
            "overall": _pct([float(s.success) for s in counted]),
            "paper_rule": _share(s.paper_success for s in counted),
            "wrongly_taken": sum(1 for s in counted if s.wrongly_taken),
            "moved_aside": sum(1 for s in counted if s.moved_aside),
            "categories": categories,
            "families": families,
            "cleared": round(100.0 * sum(s.cleared for s in counted) / len(counted), 2)
            if counted else None,
            "refusals": {"correct": sum(s.refused_correct for s in rows),
                         "wrong": sum(s.refused_wrong for s in rows),
                         "infeasible_targets": n_inf,
                         "infeasible_refused_pct": round(100.0 * sum(
                             s.refused_correct for s in rows) / n_inf, 2) if n_inf else None,
                         "feasible_targets": n_feas,
                         "feasible_refused": sum(s.feasible_refused for s in rows),
                         "feasible_refused_pct": round(100.0 * sum(
                             s.feasible_refused for s in rows) / n_feas, 2) if n_feas else None,
                         "infeasible_attempted": sum(s.infeasible_attempted for s in rows)},
            "failed_scenes": sorted(s.index for s in counted if not s.success),
            "why_failed": dict(sorted(why.get(conf, {}).items(), key=lambda kv: int(kv[0]))),
            # scenes left out of the success rates: no feasible target (refusals only)
            "not_counted": {fam: n for fam in FAMILIES
                            if (n := sum(1 for s in rows if s.family == fam and not s.counts))},
            "diagnosis": diagnosis_summary(records, conf),
        }
    confs = out["configurations"]
    if "full" in confs and "no_scene_graph" in confs:
        out["scene_graph"] = _scene_graph_effect(by_conf["full"], by_conf["no_scene_graph"])
    return out


def _share(flags) -> Optional[float]:
    values = [bool(f) for f in flags]
    return round(100.0 * sum(values) / len(values), 2) if values else None


def _parser_accuracy(scenes) -> Dict[str, Any]:
    """The instruction parser's target accuracy, overall and per family (module docstring),
    with the first scenes it read wrong."""
    rows = [(s.family, s.index, parser_correct(s)) for s in scenes]
    families = {fam: _share(ok for f, _, ok in rows if f == fam) for fam in FAMILIES
                if any(f == fam for f, _, _ in rows)}
    return {"target_accuracy": _share(ok for _, _, ok in rows), "n": len(rows),
            "families": families,
            "wrong_scenes": sorted(i for _, i, ok in rows if not ok)[:50]}


def _scene_graph_effect(full: Sequence[SceneScore], without: Sequence[SceneScore]
                        ) -> Dict[str, Any]:
    """Paired per-family difference full - no_scene_graph, in points, with its 95 % interval
    (Newcombe's paired score interval: inside [-100, +100])."""
    base = {s.index: s for s in without if s.counts}
    out: Dict[str, Any] = {}
    for fam in FAMILIES + ("it_all",):
        fams = IT_FAMILIES if fam == "it_all" else (fam,)
        pairs = [(s.success, base[s.index].success) for s in full
                 if s.counts and s.family in fams and s.index in base]
        if not pairs:
            continue
        cells = [sum(1 for a, b in pairs if (a, b) == key)
                 for key in ((True, True), (True, False), (False, True), (False, False))]
        lo, hi = paired_difference_ci(*cells)
        gain = 100.0 * (cells[1] - cells[2]) / len(pairs)
        out[fam] = {"gain": round(gain, 2), "ci95": [round(100.0 * lo, 2), round(100.0 * hi, 2)],
                    "n": len(pairs), "worse_beyond_ci": bool(hi < 0.0)}
    return out


def refusal_line(configuration: str, r: Mapping[str, Any]) -> str:
    """The refusals in words (two lines): of the targets beyond the hand, how many were
    refused at planning (right) and attempted (wrong); of the feasible targets, how many
    were refused (wrong)."""
    def pct(value: Any) -> str:
        return "" if value is None else f" ({value:.1f} %)"

    head = f"refusals ({configuration}): "
    return (f"{head}of {r['infeasible_targets']} targets beyond the hand, {r['correct']} "
            f"refused at planning{pct(r['infeasible_refused_pct'])}, "
            f"{r['infeasible_attempted']} attempted;\n{'':<{len(head)}}of "
            f"{r['feasible_targets']} targets the hand can take, {r['feasible_refused']} "
            f"refused{pct(r['feasible_refused_pct'])}; wrong calls in all: {r['wrong']}")


def format_summary(summary: Mapping[str, Any]) -> str:
    """The same figures as a table."""
    confs = summary["configurations"]
    names = list(confs)
    parser = summary.get("instruction") or {"families": {}, "target_accuracy": None}
    lines = [f"Procedural scenes: scene seed {summary['scene_seed']}, "
             f"{summary['scenes']} scenes (one trial per scene and configuration); success "
             "under the strict rule (nothing taken but the targets); parser = the instruction "
             "parser's target accuracy", ""]
    head = f"{'family':<12}" + "".join(f"{n:>22}" for n in names) + f"{'parser':>10}"
    lines += [head, "-" * len(head)]
    for fam in FAMILIES:
        cells = []
        for n in names:
            f = confs[n]["families"].get(fam)
            cells.append(f"{f['mean']:6.1f} % (n {f['n']:>4})" if f else "-")
        acc = parser["families"].get(fam)
        lines.append(f"{fam:<12}" + "".join(f"{c:>22}" for c in cells)
                     + (f"{acc:>8.1f} %" if acc is not None else f"{'-':>10}"))
    lines.append("-" * len(head))
    for n in names[:1]:
        skipped = confs[n].get("not_counted") or {}
        counted = confs[n]["overall"]["n"]
        if skipped:
            lines.append(f"{'':<12}{counted} of {counted + sum(skipped.values())} scenes count: "
                         f"{sum(skipped.values())} hold no target the hand can take ("
                         + ", ".join(f"{k} {v}" for k, v in skipped.items())
                         + "), scored under refusals only")
    for cat in ("SG", "IT", "LH"):
        cells = []
        for n in names:
            c = confs[n]["categories"].get(cat)
            cells.append(f"{c['mean']:6.1f} % (n {c['n']:>4})" if c else "-")
        lines.append(f"{cat:<12}" + "".join(f"{c:>22}" for c in cells))
    cells = [f"{confs[n]['overall']['mean']:6.1f} [{confs[n]['overall']['ci95'][0]:.1f}, "
             f"{confs[n]['overall']['ci95'][1]:.1f}]" for n in names]
    lines.append(f"{'overall':<12}" + "".join(f"{c:>22}" for c in cells))
    cells = [f"{confs[n]['cleared']:6.1f} %" if confs[n]['cleared'] is not None else "-"
             for n in names]
    lines.append(f"{'cleared':<12}" + "".join(f"{c:>22}" for c in cells))
    acc = parser.get("target_accuracy")
    lines.append("instruction parser target accuracy: "
                 + (f"{acc:.1f} % of {parser.get('n')} scenes" if acc is not None else "-"))
    lines += ["", "the paper's rule (every target grasped, whatever else was taken) beside the "
              "strict one; trials that took a fragile or named non-target; trials that moved a "
              "sturdy neighbour aside"]
    for n in names:
        fams = confs[n]["families"]
        cells = "  ".join(f"{fam} {fams[fam]['paper_rule']:.1f}" for fam in FAMILIES
                          if fam in fams and fams[fam].get("paper_rule") is not None)
        lines.append(f"  {n}: overall {confs[n]['overall']['mean']:.1f} strict / "
                     f"{confs[n].get('paper_rule')} paper rule; wrong take "
                     f"{confs[n].get('wrongly_taken')}, moved aside "
                     f"{confs[n].get('moved_aside')}; per family (paper rule): {cells}")
    lines.append("")
    for n in names:
        lines.append(refusal_line(n, confs[n]["refusals"]))
    effect = summary.get("scene_graph")
    if effect:
        lines += ["", "scene graph: full - no_scene_graph, paired, points (95 % Newcombe "
                  "interval)"]
        for fam, e in effect.items():
            flag = "  WORSE" if e["worse_beyond_ci"] else ""
            lines.append(f"  {fam:<12}{e['gain']:+7.1f} [{e['ci95'][0]:+.1f}, "
                         f"{e['ci95'][1]:+.1f}] (n {e['n']}){flag}")
    for name in names:
        if confs[name].get("diagnosis"):
            lines += ["", f"{name}: " + format_diagnosis(confs[name]["diagnosis"])]
    return "\n".join(lines)


def write_figures(summary: Mapping[str, Any], out_dir: Path, scene_seed: int,
                  max_failed: int = 12) -> Dict[str, str]:
    """success_per_family.png (Wilson 95 % intervals, the legend above the bars), and
    failed_scenes.png: the first failing scenes of the full system (else the first
    configuration) rendered from the fixed camera and cropped to the table, each titled with
    its index, family, the configuration that failed and why, and its instruction."""
    plt = _pyplot()
    files: Dict[str, str] = {}
    confs = summary["configurations"]
    names = list(confs)
    fig, ax = plt.subplots(figsize=(10, 4.4))
    width = 0.8 / max(1, len(names))
    for i, n in enumerate(names):
        fams = [confs[n]["families"].get(f) for f in FAMILIES]
        vals = [f["mean"] if f else 0.0 for f in fams]
        err = [[f["mean"] - f["ci95"][0] if f else 0.0 for f in fams],
               [f["ci95"][1] - f["mean"] if f else 0.0 for f in fams]]
        ax.bar([k + i * width for k in range(len(FAMILIES))], vals, width, yerr=err,
               capsize=3, error_kw={"elinewidth": 0.8, "ecolor": "0.25"}, label=n)
    ax.set_xticks([k + width * (len(names) - 1) / 2 for k in range(len(FAMILIES))])
    ax.set_xticklabels([f"{f}\n(n {confs[names[0]]['families'].get(f, {}).get('n', 0)})"
                        for f in FAMILIES] if names else FAMILIES)
    ax.set_ylabel("scenes succeeded, % (95 % Wilson interval)")
    ax.set_ylim(0, 100)
    ax.set_title(f"Procedural scenes, seed {scene_seed}: success per family", pad=30)
    # above the axes, never over a bar: the bars reach 100 %
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=max(1, len(names)),
              frameon=False)
    files["success_per_family"] = str(_save(fig, out_dir / "success_per_family.png"))
    conf = "full" if "full" in confs else names[0]
    if confs[conf].get("diagnosis", {}).get("confusion"):
        written = plot_confusion(confs[conf]["diagnosis"], out_dir / "diagnosis_confusion.png")
        if written:
            files["diagnosis_confusion"] = written
    all_failed = list(confs[conf]["failed_scenes"])
    failed = all_failed[:max_failed]
    why = confs[conf].get("why_failed", {})
    if failed:
        cols = _columns(len(failed))
        rows = (len(failed) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.6 * rows + 0.6),
                                 squeeze=False)
        camera = Camera()
        for ax, index in zip(axes.flat, failed):
            scene = load_procedural(procedural_id(scene_seed, index))
            ax.imshow(_crop_to_scene(render_view(scene.task.nominal(), camera).rgb))
            lines = [f"#{index} {scene.family}: {conf} failed",
                     *textwrap.wrap(why.get(str(index), "") or "(no record)", 46),
                     *textwrap.wrap(f"\u201c{scene.task.instruction}\u201d", 46)]
            ax.set_title("\n".join(lines), fontsize=9, loc="left")
            ax.axis("off")
        for ax in list(axes.flat)[len(failed):]:
            fig.delaxes(ax)                 # no empty cells
        shown = (f"the first {len(failed)} of the {len(all_failed)}"
                 if len(all_failed) > len(failed) else f"the {len(failed)}")
        fig.suptitle(f"Procedural scenes, seed {scene_seed}: {shown} scenes the {conf} "
                     "configuration failed, and why", fontsize=11)
        files["failed_scenes"] = str(_save(fig, out_dir / "failed_scenes.png"))
    return files


def _columns(n: int) -> int:
    """Columns of a grid of ``n`` pictures: one row up to 3, 2 x 2 for 4, else 3 or 4
    columns, whichever leaves fewer empty cells (4 on a tie)."""
    if n <= 3:
        return max(1, n)
    if n == 4:
        return 2
    return min((4, 3), key=lambda c: (-n) % c)


def _crop_to_scene(rgb: Any, margin: int = 12) -> Any:
    """The part of a rendered frame that is not the background (the table and what is on
    it), with a margin: the fixed camera's frame is mostly empty floor at this size."""
    img = np.asarray(rgb)
    background = img[0, 0].astype(int)
    mask = np.abs(img.astype(int) - background).sum(axis=2) > 12
    if not mask.any():
        return img
    ys, xs = np.nonzero(mask)
    y0, y1 = max(0, ys.min() - margin), min(img.shape[0], ys.max() + margin + 1)
    x0, x1 = max(0, xs.min() - margin), min(img.shape[1], xs.max() + margin + 1)
    return img[y0:y1, x0:x1]


def run_procedural(scene_seed: int, scenes: int, configurations: Sequence[str],
                   perception: str = "vlm_sim", visual_query: str = "camera",
                   workers: Optional[int] = None, executor: str = "local",
                   ray_address: str = "", progress: bool = True,
                   only_scene: Optional[int] = None, journal: Optional[Path] = None):
    """Run the scenes (all N, or ``only_scene``) under each configuration; the sweep's
    :class:`.sweep.SweepResult`."""
    indices = [int(only_scene)] if only_scene is not None else list(range(int(scenes)))
    for k in indices:                       # fail before any trial on a scene that cannot
        load_procedural(procedural_id(scene_seed, k))          # be built
    units = [WorkUnit(c, procedural_id(scene_seed, k), int(scene_seed), (0,),
                      perception=perception, visual_query=visual_query)
             for c in configurations for k in indices]
    return run_units(units, workers, progress, executor=executor, ray_address=ray_address,
                     journal=journal)


__all__ = ["DEFAULT_CONFIGURATIONS", "SceneScore", "format_summary", "run_procedural",
           "score", "summarise", "write_figures"]
