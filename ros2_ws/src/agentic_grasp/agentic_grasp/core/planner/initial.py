"""InitGrasp(e_1, C, M) of Algorithm 1 (paper Sec. IV-A step 4, Sec. IV-C): the grasp a
sub-goal starts from.

Episodic memory first, then the HAA-RAG strategies fitted to the perceived target (the one
whose approach agrees with a direction the constraints impose), or a Table II
configuration's default, VLM or heuristic proposal, and the grip a part grasp of a
container needs against its own weight. :class:`InitialGrasp` is the part of
:class:`~agentic_grasp.core.planner.planner.ReflectivePlanner` that chooses it; the planner's
attributes (config, configuration, retriever, hand, scene-graph thresholds, the perceived
handle and rim) are set by its constructor. Split out of ``planner``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.scene_graph.constraints import ConstraintSet
from agentic_grasp.core.grasping.along import (HAND_CONTINUOUS_FORCE_N, on_part,
                                               part_cannot_hold, pivot_grip_force,
                                               rim_grip_force)
from agentic_grasp.core.grasping.fit import fit_strategy
from agentic_grasp.core.grasping.heuristic import geometric_grasps, heuristic_grasp
from agentic_grasp.core.grasping.rim import rim_grasp, rim_opening
from agentic_grasp.core.planner.configurations import VLM_TYPE_FOR_AFFORDANCE
from agentic_grasp.core.planner.memory import EpisodicMemory, Recall
from agentic_grasp.core.planner.ports import RetrievalRequest
from agentic_grasp.core.planner.recovery import clamp_grasp, narrow_side
from agentic_grasp.core.retrieval.knowledge_base import grasp_to_world
from agentic_grasp.core.types import GraspParameters, GraspType, ObjectInstance, ObjectState


@dataclass(frozen=True)
class InitialChoice:
    """What InitGrasp chose, before Delta g: the base grasp b0, where it came from
    (``source``: memory | retrieval | default | vlm | heuristic | heuristic_box) and why
    (``detail``), the lower-ranked alternatives (base grasps) with their names, the
    retrieval summary reported in the goal (``retrieval``), and what memory transferred
    (``memory``: the Recall, None when memory was not asked)."""

    base: GraspParameters
    source: str
    detail: str
    alternatives: List[GraspParameters] = field(default_factory=list)
    names: List[str] = field(default_factory=list)
    retrieval: Dict[str, Any] = field(default_factory=lambda: {"used": False})
    memory_recalled: bool = False
    memory: Optional[Recall] = None


class InitialGrasp:
    """InitGrasp and the retrieval behind it, for :class:`ReflectivePlanner`."""

    def default_grasp(self, target: ObjectInstance) -> GraspParameters:
        """The fixed default grasp of config/planner.yaml at the perceived centre."""
        d = self.config.default_grasp
        return GraspParameters(position=np.asarray(target.position, dtype=float).copy(),
                               approach=np.array([0.0, 0.0, -1.0]), width=d.width_m,
                               force=d.force_n, grasp_type=d.grasp_type,
                               approach_height=d.approach_height_m, speed=d.speed_mps,
                               wrist_yaw=d.wrist_yaw_rad)

    def vlm_grasp(self, target: ObjectInstance) -> GraspParameters:
        """vlm_only's proposal: generic rule of category/affordance, no experience.

        The default grasp, closing across the narrower perceived side (the VLM's wrist
        orientation), with the grasp type the affordance names generically.
        """
        grasp = self.default_grasp(target)
        _, wrist = narrow_side(target)
        gtype = GraspType(self.config.default_grasp.grasp_type)
        if target.affordance is not None:
            gtype = VLM_TYPE_FOR_AFFORDANCE.get(target.affordance.type, gtype)
        return grasp.copy(wrist_yaw=wrist, grasp_type=gtype)

    def _retrieve(self, target: ObjectInstance) -> Tuple[List[GraspParameters], List[str],
                                                          Dict[str, Any]]:
        """World-frame base grasps of the top-k strategies (successful ones first)."""
        summary: Dict[str, Any] = {"used": True, "strategies": [], "reason": ""}
        if self.retriever is None:
            summary["reason"] = "no retriever"
            return [], [], summary
        if target.affordance is None:
            summary["reason"] = f"no affordance perceived for {target.id}"
            return [], [], summary
        crop = self.visual_query(target) if self.visual_query is not None else None
        # size feeds the affordance fallback; k = retrieve_k replaces the strategies the fit
        # skips (None = the retriever's configured k)
        k = self.config.grasp_synthesis.retrieve_k \
            if self.config.grasp_synthesis.fit_strategies else None
        request = RetrievalRequest.of(target, crop, k, self._perception_backend)
        result = self.retriever.retrieve(request)
        if request.k is not None and result.strategies \
                and result.n_level2 > len(result.strategies) \
                and not self._any_fits(result.strategies, target):
            # every strategy is ruled out by the perceived object (e.g. handle grasps with the
            # handle out of view): widen to every strategy that passed the affordance level
            request = replace(request, k=int(result.n_level2))
            result = self.retriever.retrieve(request)
            summary["widened_to"] = int(result.n_level2)
        if getattr(result, "fallback", False):
            summary["fallback"] = True
        summary["reason"] = result.reason
        summary["n_level1"], summary["n_level2"] = result.n_level1, result.n_level2
        ranked = sorted(result.strategies, key=lambda s: (not s.experience.success, s.rank))
        grasps, names = [], []
        for strategy in ranked:
            exp = strategy.experience
            summary["strategies"].append({"id": exp.id, "category": exp.category,
                                          "success": exp.success, "rank": strategy.rank,
                                          "s_final": round(float(strategy.s_final), 4),
                                          "explanation": strategy.explanation})
            if not exp.grasp:
                continue
            synth = self.config.grasp_synthesis
            if synth.fit_strategies:
                fitted = fit_strategy(exp.grasp, exp.render_spec, exp.fit, target, synth,
                                      self.hand, self._handle_yaw, self._yaw_known)
                summary["strategies"][-1]["fit"] = fitted.breakdown
                if fitted.skipped:
                    continue
                world = fitted.grasp
            else:
                world = grasp_to_world(exp, target)
            grasps.append(clamp_grasp(world, self.config.limits))
            names.append(f"{exp.id}, s_final {strategy.s_final:.3f}")
            summary["n_successful_grasps"] = summary.get("n_successful_grasps", 0) \
                + int(exp.success)
        return grasps, names, summary

    def _any_fits(self, strategies: Sequence[Any], target: ObjectInstance) -> bool:
        synth = self.config.grasp_synthesis
        return any(s.experience.grasp and not fit_strategy(
            s.experience.grasp, s.experience.render_spec, s.experience.fit, target, synth,
            self.hand, self._handle_yaw, self._yaw_known).skipped for s in strategies)

    def initial_grasp(self, target: ObjectInstance, memory: Optional[EpisodicMemory],
                      constraints: Optional[ConstraintSet] = None) -> InitialChoice:
        """InitGrasp(e_1, C, M) before Delta g: base grasp, source, alternatives.

        Memory wins over retrieval. Among the retrieved strategies (successful ones first)
        the first whose approach agrees with a direction the constraints impose is chosen.
        """
        cfg = self.configuration
        alternatives: List[GraspParameters] = []
        names: List[str] = []
        retrieval: Dict[str, Any] = {"used": False}
        recall: Optional[Recall] = None
        recalled = False
        if cfg.initial == "default":
            base, source = self.default_grasp(target), "default"
            detail = "fixed default grasp at the perceived centre (no retrieval)"
        elif cfg.initial == "vlm":
            base, source = self.vlm_grasp(target), "vlm"
            detail = "VLM proposal from the perceived category and affordance"
        elif cfg.initial == "heuristic":
            pairs = geometric_grasps(target, self.config.grasp_synthesis, self.config.level2,
                                     self.config.limits, self.heuristic_config,
                                     self._handle_yaw, self._rim_z)
            grasps = [clamp_grasp(g, self.config.limits) for g, _ in pairs]
            labels = [name for _, name in pairs]
            base, source = grasps[0], "heuristic"
            detail = (f"{labels[0]} on the perceived geometry (no retrieval, no VLM "
                      "semantics)")
            alternatives, names = grasps[1:], labels[1:]
            retrieval = {"used": False, "n_successful_grasps": len(grasps)}
        elif cfg.initial == "heuristic_box":
            base, source = heuristic_grasp(target, self.heuristic_config), "heuristic_box"
            detail = "size/fragility box rule on the perceived box"
        else:
            grasps, labels, summary = self._retrieve(target)
            retrieval = summary
            pick = self._compatible(grasps, constraints)
            if pick > 0:
                summary["chosen_for_constraints"] = labels[pick]
                grasps = [grasps[pick]] + grasps[:pick] + grasps[pick + 1:]
                labels = [labels[pick]] + labels[:pick] + labels[pick + 1:]
            recall = self._recall(target, memory)
            if recall is not None and recall.grasp is not None:     # levels 1-2: whole grasp
                base, source, detail, recalled = recall.grasp, "memory", recall.text, True
                alternatives, names = grasps, labels
            elif grasps:
                detail = f"retrieved strategy {labels[0]}"
                if pick > 0:
                    detail += " (the best one whose approach fits the imposed direction)"
                base, source = grasps[0], "retrieval"
                alternatives, names = grasps[1:], labels[1:]
            else:
                base, source = self.default_grasp(target), "default"
                detail = (f"retrieval gave nothing ({summary['reason']}): default "
                          "grasp")
            if recall is not None and recall.grasp is None:         # level 3: corrections
                base = recall.apply(base)
                detail += "; " + recall.text
                recalled = True
        return InitialChoice(clamp_grasp(base, self.config.limits), source, detail,
                             alternatives, names, retrieval, recalled, recall)

    def _recall(self, target: ObjectInstance,
                memory: Optional[EpisodicMemory]) -> Optional[Recall]:
        """What memory transfers to ``target`` (memory.py); a similar object's grasp is
        fitted to the perceived target as a retrieved strategy is."""
        if not (self.configuration.memory and memory is not None):
            return None
        synth = self.config.grasp_synthesis

        def fit(local: Dict[str, Any], spec: Dict[str, Any], record: Dict[str, Any]) -> Any:
            fitted = fit_strategy(local, spec, record, target, synth, self.hand,
                                  self._handle_yaw, self._yaw_known)
            if fitted.grasp is not None:
                fitted.grasp = clamp_grasp(fitted.grasp, self.config.limits)
            return fitted

        return memory.recall_for(target, fit, self.config.memory)

    def _compatible(self, grasps: List[GraspParameters],
                    constraints: Optional[ConstraintSet]) -> int:
        """Index of the first grasp whose approach fits the constraints' direction override
        (0 when there is none or no grasp fits)."""
        if constraints is None or not len(constraints) or not grasps:
            return 0
        override = constraints.adjustment["direction_override"]
        if override is None:
            return 0
        cos_tol = math.cos(self.config.strategy_direction_tolerance_rad)
        for k, grasp in enumerate(grasps):
            if float(grasp.approach @ np.asarray(override, dtype=float)) >= cos_tol:
                return k
        return 0

    def _rim_over_part(self, grasp: GraspParameters, target: ObjectInstance
                       ) -> Tuple[GraspParameters, str]:
        """A part grasp (a handle) of an open, non-fragile, unfilled container whose pads'
        torsional friction cannot hold its weight's moment at the hand's continuous grip,
        however light the container is for its size (grasping/along.part_cannot_hold):
        the container would turn out of the pads, the slip the part-pivot correction
        answers with the rim pinch. The rim pinch holds the same weight by the pads'
        pressure couple (lever: the 20 mm pad depth, against two thirds of the 11 mm pad
        radius times the friction for the handle), so the grasp starts there, with the
        opening the rim correction uses (the part opening plus the perceived width's error
        a side) and the grip the pressure couple needs by the content bound, at most the
        hand's continuous force. A filled container keeps its part (a finger half a pad
        below the rim would enter the liquid); so does a fragile one (the grip would crush
        it). Part of fitting a strategy to the perceived object: off with
        ``fit_strategies``."""
        synth = self.config.grasp_synthesis
        sg = self.scene_graph_config
        if (not synth.fit_strategies or self._rim_z is None
                or target.fragility >= sg.fragile_threshold
                or target.state == ObjectState.FILLED or not on_part(grasp, target)
                or not part_cannot_hold(grasp, target, synth)):
            return grasp, ""
        rim = rim_grasp(target, grasp, float(self._rim_z), synth, rim_opening(synth))
        grip = min(rim_grip_force(target, synth), self.config.limits.max_force_n,
                   HAND_CONTINUOUS_FORCE_N)
        rim = rim.copy(force=max(float(grasp.force), grip))
        return rim, (f"rim pinch instead of the part: the {target.category}'s pads could "
                     "not hold its weight's moment on the part at the hand's "
                     f"{HAND_CONTINUOUS_FORCE_N:.0f} N however light it is for its size; "
                     f"the rim's pressure couple does, {rim.force:.0f} N grip")

    def _pivot_grip(self, grasp: GraspParameters, target: ObjectInstance
                    ) -> Tuple[GraspParameters, str]:
        """A part grasp of a non-fragile container gets the grip force that holds its weight
        against turning about the pads (grasping/along.pivot_grip_force); the note says so.
        A container: a container word in its perceived category or a perceived open rim.
        At most the hand's continuous force (along.HAND_CONTINUOUS_FORCE_N).
        Part of fitting a strategy to the perceived object: off with ``fit_strategies``
        (the paper's stored grasp copied unchanged)."""
        sg = self.scene_graph_config
        if not self.config.grasp_synthesis.fit_strategies \
                or target.fragility >= sg.fragile_threshold or not (
                self._rim_z is not None or sg.is_container(target.category)):
            return grasp, ""
        need = pivot_grip_force(grasp, target, self.config.grasp_synthesis)
        need = min(need, self.config.limits.max_force_n, HAND_CONTINUOUS_FORCE_N)
        if need <= grasp.force:
            return grasp, ""
        return grasp.copy(force=need), (
            f"{need:.0f} N grip (was {grasp.force:.0f} N) so the {target.category} does not "
            "turn about the pinched part under its own weight")
