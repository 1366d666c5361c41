"""Table IV at catalogue breadth: retrieval judged by what the retrieved strategy does.

The paper's Table IV labels relevance by hand on 12 queries, and on them HAA-RAG and CLIP-only
both reach P@1 100 %. Here a strategy is relevant to a query object when it grasps that object
in the simulator at its first attempt, from the same pose, so relevance is an outcome, not a
label anyone wrote.

- **Queries**: the feasible targets of procedural scenes (core/sim/procedural.py, every
  family, catalogue objects of the knowledge base's categories and objects of categories it
  has no experience of, the *novel* ones), scene 0, 1, 2, ... of a scene seed, until N
  objects. Each stands alone on the table at the pose its scene gave it.
- **What the robot knows of it**: the simulated VLM's perception of the fixed camera's frame
  (category, affordance, extents, handle), and the camera crop at its box, as in a trial.
- **Rankings**: HAA-RAG (``haa``), CLIP-only (``clip_only``: category level, then visual
  similarity) and category-only (the category level alone: s_cat, successful experiences
  first, ties in knowledge-base order). On a category the knowledge base does not know,
  HAA-RAG uses its affordance-and-size fallback, CLIP-only ranks the whole knowledge base by
  visual similarity (a CLIP retriever needs no category), and category-only has nothing.
- **Relevance**: the strategy fitted to the perceived object as the planner fits it
  (core/grasping/fit.py; one the fit skips is not relevant: the planner would not run it),
  executed once by the simulator with the trial's seed: the same pose and the same execution
  noise for every strategy of a query. Each (query, experience) is tried once.
- **Metrics**: P@1, P@3 (relevant among the top 3, over 3), MRR (1 / the rank of the first
  relevant strategy among the first ``MRR_DEPTH``, else 0), each over all queries, known
  ones and novel ones.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from agentic_grasp.core.grasping.fit import fit_strategy, handle_yaw_of
from agentic_grasp.core.grasping.hand import HandModel
from agentic_grasp.core.grasping.operations import clamp_grasp
from agentic_grasp.core.planner.configurations import PlannerConfig
from agentic_grasp.core.planner.episode import (CameraPerception, _default_simulator,
                                                retriever_for)
from agentic_grasp.core.retrieval.priors import load_category_knowledge
from agentic_grasp.core.sim.procedural import load_procedural, procedural_id
from agentic_grasp_lab.evaluation.sweep import trial_seed

_LOG = logging.getLogger(__name__)

MODES = ("haa", "clip_only", "category_only")
LABELS = {"haa": "HAA-RAG", "clip_only": "CLIP-only", "category_only": "category-only"}
#: Ranks tried for MRR: level 1 keeps k1 = 30 candidates (config/retrieval.yaml), so no
#: category ranking is longer; the whole-knowledge-base rankings of a novel object are cut
#: there too, for the same depth in every mode.
MRR_DEPTH = 30
_FULL = 10_000


@dataclass
class BreadthQuery:
    """One query object: its scene, its id there, its category and whether the knowledge base
    has experience of that category (known) or not (novel)."""

    task_id: str
    seed: int
    object_id: str
    category: str
    novel: bool


def draw_queries(n: int, scene_seed: int) -> List[BreadthQuery]:
    """The first ``n`` feasible targets of the procedural scenes of ``scene_seed`` (category
    and novelty are filled in once the simulator has built the object)."""
    out: List[BreadthQuery] = []
    k = 0
    while len(out) < n:
        tid = procedural_id(scene_seed, k)
        for oid in load_procedural(tid).feasible_targets:
            if len(out) < n:
                out.append(BreadthQuery(tid, trial_seed(scene_seed, tid, 0), oid, "", False))
        k += 1
    return out


def _category_only(clip: Sequence[Any], order: Dict[str, int]) -> List[Any]:
    """The category level alone: s_cat with the failure penalty, knowledge-base order."""
    return sorted(clip, key=lambda s: (-s.s_cat * (1.0 - s.penalty),
                                       order.get(s.experience.id, 1 << 30)))


class _Judge:
    """Tries strategies on one query object in the simulator (module docstring)."""

    def __init__(self, sim: Any, query: BreadthQuery, target: Any, perceived: Any,
                 config: PlannerConfig, hand: HandModel, yaw_known: bool) -> None:
        self.sim, self.query, self.target, self.perceived = sim, query, target, perceived
        self.config, self.hand, self.yaw_known = config, hand, yaw_known
        self.handle_yaw = handle_yaw_of(getattr(perceived, "handle_yaw", None))
        self.cache: Dict[str, bool] = {}
        self.tries = 0

    def relevant(self, exp: Any) -> bool:
        if exp.id in self.cache:
            return self.cache[exp.id]
        ok = False
        if exp.grasp:
            synth = self.config.grasp_synthesis
            fitted = fit_strategy(exp.grasp, exp.render_spec, exp.fit, self.target, synth,
                                  self.hand, self.handle_yaw, self.yaw_known)
            if not fitted.skipped and fitted.grasp is not None:
                grasp = clamp_grasp(fitted.grasp, self.config.limits)
                self.sim.load_task(self.query.task_id, self.query.seed)
                self.sim.set_objects([self.sim.get(self.query.object_id)])
                try:
                    outcome = self.sim.execute_attempt(self.query.object_id, grasp)
                    ok = bool(outcome.success)
                except Exception as exc:  # noqa: BLE001 - a grasp the sim refuses fails
                    _LOG.debug("%s on %s: %r", exp.id, self.query.object_id, exc)
                self.tries += 1
        self.cache[exp.id] = ok
        return ok


def _clip_whole_kb(retriever: Any, crop: Optional[np.ndarray]) -> List[Any]:
    """A novel object's CLIP-only ranking: every experience by visual similarity alone."""
    if crop is None:
        return []
    kb = retriever.kb
    vec = retriever._crop_vector(crop)          # the retriever's own embedding of the crop
    sims = np.asarray(kb.vectors, dtype=float) @ vec
    order = np.argsort(-sims, kind="stable")
    return [kb.experiences[int(i)] for i in order]


def evaluate_breadth(n: int, scene_seed: int, perception: str = "vlm_sim",
                     progress: Any = None) -> Dict[str, Any]:
    """P@1, P@3 and MRR of each mode over ``n`` outcome-judged queries (module docstring)."""
    config = PlannerConfig.from_config()
    hand = HandModel(config.grasp_synthesis.hand)
    sim = _default_simulator()
    retriever = retriever_for(None)
    core = retriever                # a core HAARAG: the full rankings and the crop's vector
    known = load_category_knowledge()
    order = {e.id: i for i, e in enumerate(core.kb.experiences)}
    queries = draw_queries(n, scene_seed)
    rows: List[Dict[str, Any]] = []
    for qi, q in enumerate(queries):
        sim.load_task(q.task_id, q.seed)
        sim.set_objects([sim.get(q.object_id)])
        truth = sim.get(q.object_id)
        q.category = truth.category
        q.novel = known.prior(truth.category) is None
        eyes = CameraPerception(sim, perception, q.seed)
        name = sim.get(q.object_id).name or q.category.replace("_", " ")
        result = eyes.perceive(f"pick up the {name}")
        perceived = result.target if result.ok else None
        row: Dict[str, Any] = {"task_id": q.task_id, "object": q.object_id,
                               "category": q.category, "novel": q.novel, "modes": {}}
        if perceived is None or perceived.affordance is None:
            row["not_perceived"] = True
            for mode in MODES:
                row["modes"][mode] = {"top": [], "relevant": [], "first": 0}
            rows.append(row)
            continue
        target = perceived.to_object_instance()
        crop = eyes.crop(target)
        judge = _Judge(sim, q, target, perceived, config, hand,
                       result.backend == "oracle" or bool(getattr(perceived, "yaw_known",
                                                                  True)))
        size = tuple(float(v) for v in np.asarray(target.size, dtype=float).reshape(-1))
        rankings: Dict[str, List[Any]] = {}
        haa = core.retrieve(perceived.category, perceived.affordance, crop=crop, mode="haa",
                            k=_FULL, size=size, perception_backend=result.backend)
        rankings["haa"] = [s.experience for s in haa.strategies]
        clip = core.retrieve(perceived.category, perceived.affordance, crop=crop,
                             mode="clip_only", k=_FULL, size=size,
                             perception_backend=result.backend)
        rankings["clip_only"] = [s.experience for s in clip.strategies] \
            or _clip_whole_kb(core, crop)
        rankings["category_only"] = [s.experience for s in
                                     _category_only(clip.strategies, order)]
        for mode in MODES:
            ranked = rankings[mode][:MRR_DEPTH]
            top = [judge.relevant(e) for e in ranked[:3]]
            first = 0
            for i, exp in enumerate(ranked):
                if judge.relevant(exp):
                    first = i + 1
                    break
            row["modes"][mode] = {"top": [e.id for e in ranked[:3]], "relevant": top,
                                  "first": first}
        row["tries"] = judge.tries
        rows.append(row)
        if progress is not None:
            progress(qi + 1, len(queries))
    return {"scene_seed": int(scene_seed), "n_queries": len(rows),
            "perception": perception, "kb_size": len(core.kb),
            "metrics": _metrics(rows), "queries": rows}


def _metrics(rows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for split, keep in (("all", lambda r: True), ("known", lambda r: not r["novel"]),
                        ("novel", lambda r: r["novel"])):
        chosen = [r for r in rows if keep(r)]
        n = len(chosen)
        out[split] = {"n": n}
        for mode in MODES:
            if not n:
                out[split][mode] = None
                continue
            m = [r["modes"][mode] for r in chosen]
            out[split][mode] = {
                "p_at_1": round(100.0 * sum(bool(x["relevant"][:1] and x["relevant"][0])
                                            for x in m) / n, 2),
                "p_at_3": round(100.0 * sum(sum(x["relevant"]) for x in m) / (3 * n), 2),
                "mrr": round(sum(1.0 / x["first"] for x in m if x["first"]) / n, 4),
            }
    return out


def format_breadth(results: Dict[str, Any]) -> str:
    """The breadth table: each mode's P@1, P@3 and MRR over all, known and novel queries."""
    lines = [f"Table IV at breadth: {results['n_queries']} query objects from procedural "
             f"scene seed {results['scene_seed']} ({results['perception']} perception), "
             f"{results['kb_size']}-entry knowledge base; relevant = grasped at the first "
             "attempt from the same pose",
             f"{'':16}{'split':8}{'n':>5}  {'P@1':>8}{'P@3':>8}{'MRR':>8}"]
    for split in ("all", "known", "novel"):
        block = results["metrics"][split]
        for mode in MODES:
            m = block.get(mode)
            if m is None:
                continue
            lines.append(f"{LABELS[mode]:16}{split:8}{block['n']:>5}  {m['p_at_1']:>7.1f}%"
                         f"{m['p_at_3']:>7.1f}%{m['mrr']:>8.3f}")
    return "\n".join(lines)


__all__ = ["BreadthQuery", "MODES", "draw_queries", "evaluate_breadth", "format_breadth"]
