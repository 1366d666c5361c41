"""GetCorrection / ApplyCorrection with three escalation levels (paper Sec. IV-B, Fig. 4).

- Level 1 (parameter tuning): the failure type's rule (:func:`level1_ops`, the table in
  :mod:`.level1`).
- Level 2 (method switch): the grasp type rotates power -> pinch -> side -> power and the
  force drops 10 %. In the analytical simulator the type label alone changes nothing
  physical, so a new type brings its geometry, built from the perceived box (constants in
  config/planner.yaml ``level2``):
  power = top-down at the centre closing across the narrower horizontal side, fingers
  ``power_depth_m`` below the top; pinch = top-down at the same point and wrist, fingertips
  ``pinch_depth_m`` below the top, opening ``pinch_width_m``; side = horizontal approach
  pointing away from the robot base, at ``side_height_fraction`` of the height (at least
  ``side_min_height_m`` so the wrist clears the table), closing horizontally across the
  object.
- Level 3 (re-plan): reset to g0 and perturb the grasp point by eps ~ U(-0.01, 0.01)^3 m
  drawn from the planner's seeded generator.

Two grasps are corrected in step: the executed grasp g_r (with the scene-graph adjustment
Delta g of Sec. III-B) and its *base* b_r (the same grasp without Delta g). Parameter
operations apply to both; operations that rebuild the grasp (level-2 template, level-3
reset, replan) rebuild the base and apply the constraints again, so collision avoidance
survives every level. Episodic memory stores the base, so a grasp proven next to a fragile
vase is not reduced a second time when the next scene applies its own constraints.

Escalation (:func:`correction_level`): the correction computed after failed attempt r has
level(r) = 1 for r <= ``level1_max_index``, 2 for r == ``level2_index``, else 3; with
``level_by = "failed_attempt"`` (the paper's indexing, default) r is the failed attempt's
index, with ``"next_attempt"`` it is r + 1. With ``escalate_unchanged`` a correction that
changes nothing is replaced by the next level's (:func:`get_correction`).

The package, one step of the reflection each:

- :mod:`.failure`: ClassifyFailure, the taxonomy type F_r of a failed attempt (Diagnosis);
- :mod:`.level1`: the level-1 rules (parameter tuning per failure type, CorrectionOps);
- :mod:`agentic_grasp.core.grasping.operations`: grasp operations the levels share (limits,
  approach, the level-2 type templates, the grasp-type rotation), in the grasping package
  because the candidate search and the heuristic use them too;
- :mod:`.correction`: GetCorrection / ApplyCorrection at a level, and the escalation rule.

The public names of the correction modules are importable from the package itself
(``from agentic_grasp.core.planner.recovery import get_correction``).
"""
from agentic_grasp.core.geometry import wrap_angle
from agentic_grasp.core.planner.recovery.correction import (Correction, CorrectionContext,
                                                            NextCandidates, correction_level,
                                                            get_correction, retry_level)
from agentic_grasp.core.grasping.operations import (VERTICAL, clamp_grasp, describe_change,
                                                        extent_across, narrow_side,
                                                        next_grasp_type, rebase_grasp,
                                                        same_grasp, turned_side,
                                                        type_template, with_approach)
from agentic_grasp.core.planner.recovery.level1 import (CORRECTION_RULES, CorrectionOps,
                                                        failure_types_covered,
                                                        level1_adjustment, level1_ops)

__all__ = ["CORRECTION_RULES", "Correction", "CorrectionContext", "CorrectionOps", "NextCandidates",
           "VERTICAL", "clamp_grasp", "correction_level", "describe_change", "extent_across",
           "failure_types_covered", "get_correction", "level1_adjustment", "level1_ops",
           "narrow_side", "next_grasp_type", "rebase_grasp", "retry_level", "same_grasp",
           "turned_side", "type_template", "with_approach", "wrap_angle"]
