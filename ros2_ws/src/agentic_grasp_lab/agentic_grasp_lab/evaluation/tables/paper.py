"""The paper's numbers (docs/paper_facts.md; paper Sec. V, Tables II-V, OOD), its task
categories and the row labels of its tables, which the tables are printed beside."""
from __future__ import annotations

from typing import Dict

CATEGORIES = ("SG", "IT", "LH")

#: Row labels of the paper's tables.
LABELS: Dict[str, str] = {
    "full": "Full system",
    "no_recovery": "w/o Recovery",
    "no_episodic_memory": "w/o Episodic Memory",
    "no_scene_graph": "w/o Scene Graph",
    "heuristic": "Heuristic baseline",
    "heuristic_box": "Heuristic (box rule)",
    "no_haa_rag": "w/o HAA-RAG",
    "vlm_only": "VLM-only",
    "no_constraint_inference": "+ scene graph, no constraint inference",
}
TABLE_V_LABELS = {"no_scene_graph": "No scene graph",
                  "no_constraint_inference": "+ scene graph",
                  "full": "+ constraint inference"}

# ----------------------------------------------------------------- the paper's numbers
#: Table II, success % (one run of 30 trials per task).
PAPER_TABLE_II: Dict[str, Dict[str, float]] = {
    "full": {"SG": 91.7, "IT": 64.2, "LH": 66.7, "overall": 78.3},
    "no_recovery": {"SG": 63.3, "IT": 33.3, "LH": 23.3, "overall": 46.7},
    "no_episodic_memory": {"SG": 91.7, "IT": 64.2, "LH": 55.0, "overall": 76.4},
    "no_scene_graph": {"SG": 91.7, "IT": 25.0, "LH": 66.7, "overall": 65.3},
    "heuristic": {"SG": 100.0, "IT": 25.0, "LH": 98.3, "overall": 74.7},
    "no_haa_rag": {"SG": 50.0, "IT": 0.0, "LH": 0.0, "overall": 25.0},
    "vlm_only": {"SG": 50.0, "IT": 0.0, "LH": 0.0, "overall": 25.0},
}
#: Full system over 5 seeds: 78.7 +- 1.8 % (95 % CI 76.4 to 81.0).
PAPER_FULL_SEEDS = {"mean": 78.7, "half_width": 1.8, "lo": 76.4, "hi": 81.0}
#: Per-object SG success of the full system.
PAPER_SG_OBJECTS = {"sg_banana": 100.0, "sg_cube": 100.0, "sg_apple": 60.0, "sg_cup": 90.0}
#: Table III: (success %, mean time per trial s) per category.
PAPER_TABLE_III = {"no_recovery": {"SG": (63.3, 1.7), "IT": (33.3, 2.5), "LH": (23.3, 5.8)},
                   "full": {"SG": (91.7, 2.3), "IT": (64.2, 3.5), "LH": (66.7, 9.1)}}
PAPER_ATTEMPTS = 2.48
PAPER_RECOVERY_RATE = 53.3
#: Table V: (success %, constraint satisfaction %) on the interactive tasks.
PAPER_TABLE_V = {"no_scene_graph": (25.0, 0.0), "no_constraint_inference": (58.3, 0.0),
                 "full": (58.3, 75.0)}
#: OOD study (Sec. V-F): success % (near-OOD not reported).
PAPER_OOD = {"in_distribution": 84.4, "far_ood": 54.4}


__all__ = ["CATEGORIES", "LABELS", "PAPER_ATTEMPTS", "PAPER_FULL_SEEDS", "PAPER_OOD",
           "PAPER_RECOVERY_RATE", "PAPER_SG_OBJECTS", "PAPER_TABLE_II", "PAPER_TABLE_III",
           "PAPER_TABLE_V", "TABLE_V_LABELS"]
