"""HAA-RAG's configuration (config/retrieval.yaml, paper Sec. III-A): the
Eq. 1 weights, the thresholds, k, the embedding model and the retrieval mode; the retrieval
node declares every field as a parameter of the same dotted name. Also the consolidation of
acquired experiences (:class:`ConsolidationConfig`, config/acquisition.yaml).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Union

from agentic_grasp.core import paths
from agentic_grasp.core.config import load_yaml, nested, node_params, reject_unknown
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.retrieval.taxonomy import normalise_word


NODE_NAME = "retrieval"
MODES = ("haa", "clip_only")


# --------------------------------------------------------------------------- config
@dataclass
class RetrievalConfig:
    """Constants of HAA-RAG, read from config/retrieval.yaml (no defaults in code)."""

    # Field metadata: the ROS parameter's text and, where config/retrieval.yaml groups the
    # field under another key, its dotted parameter name (agentic_grasp.ros.common.params).
    k1: int = field(metadata={"description": "Level 1: candidates kept after the category "
                                             "match"})
    k: int = field(metadata={"description": "Strategies returned for a request with k = 0 "
                                            "(paper: 3)"})
    tau_aff: float = field(metadata={"description": "Level 2: candidates with s_aff below "
                                                    "this are discarded (paper: 0.3)"})
    category_exact_score: float = field(metadata={
        "description": "Level 1: s_cat of an exact category match (paper: 1.0)"})
    category_superclass_score: float = field(metadata={
        "description": "Level 1: s_cat of a category of the same superclass (paper: 0.5)"})
    w_type: float = field(metadata={
        "name": "affordance_weights.type",
        "description": "Eq. 1 weight of the affordance-type match (paper: 0.5)"})
    w_material: float = field(metadata={
        "name": "affordance_weights.material",
        "description": "Eq. 1 weight of s_mat (paper: 0.2)"})
    w_fragility: float = field(metadata={
        "name": "affordance_weights.fragility",
        "description": "Eq. 1 weight of 1 - |delta fragility| (paper: 0.15)"})
    w_region: float = field(metadata={
        "name": "affordance_weights.region",
        "description": "Eq. 1 weight of s_reg (paper: 0.15)"})
    region_family_score: float = field(metadata={
        "description": "s_reg of two regions of one family of kb_data/taxonomy.yaml (1.0 "
                       "same region, else 0)"})
    # An open map: one parameter per pair, material_similarity.<a>.<b>.
    material_similarity: Dict[str, Dict[str, float]] = field(metadata={
        "template": "s_mat of materials '{0}' and '{1}' (symmetric), in [0, 1]; 0 = not "
                    "similar"})
    w_category: float = field(metadata={
        "name": "final_weights.category",
        "description": "Level 3 weight of s_cat in s_final (paper: 0.2)"})
    w_affordance: float = field(metadata={
        "name": "final_weights.affordance",
        "description": "Level 3 weight of s_aff in s_final (paper: 0.4)"})
    w_visual: float = field(metadata={
        "name": "final_weights.visual",
        "description": "Level 3 weight of s_vis in s_final (paper: 0.4)"})
    failure_penalty: float = field(metadata={
        "description": "s_final of a failed experience is multiplied by 1 - this (paper: "
                       "0.3)"})
    clip_only_failure_penalty: bool = field(metadata={
        "description": "Apply the failure penalty in clip_only mode too"})
    mode: str = field(metadata={
        "description": "Mode of a request with an empty mode: haa (three levels) or "
                       "clip_only (category filter + visual re-rank, the Table IV baseline)"})
    knowledge_base_path: str = field(default="", metadata={
        "description": "Knowledge base: a kb_data folder, a folder of *.jsonl files or one "
                       "file; '' = <data root>/kb_data/experiences (start-up only)"})
    acquired_experiences_path: str = field(default="", metadata={
        "description": "JSONL file of experiences acquired during deployment, followed live "
                       "(new lines served from the next request); '' or 'none' = none, "
                       "'default' = the per-user file $XDG_DATA_HOME/agentic_grasp/"
                       "acquired_experiences.jsonl (start-up only)"})
    # A map with known keys (embedding.make_embedder reads them): one text per key.
    embedding: Dict[str, Any] = field(default_factory=dict, metadata={"keys": {
        "backend": "Visual embedding model: descriptor (builtin-descriptor-v1, CPU) or "
                   "open_clip (CLIP, local weights file) (start-up only)",
        "crop_size_px": "Side of the rendered knowledge-base crops (px) (start-up only)",
        "cache_dir": "Embedding cache folder; '' = kb_data/cache/ when writable, else "
                     "~/.cache/agentic_grasp/embeddings (start-up only)",
        "open_clip.model_name": "open_clip architecture, e.g. ViT-L-14 (start-up only)",
        "open_clip.pretrained_path": "Local open_clip weights file; never downloaded "
                                     "(start-up only)",
        "open_clip.device": "Torch device of the open_clip model (start-up only)"}})
    # Affordance fallback: when level 1 is empty (a category the taxonomy or the
    # knowledge base does not know), rank the whole knowledge base by
    # w_affordance s_aff + fallback_size_weight s_size + w_visual s_vis.
    fallback_enabled: bool = field(default=False, metadata={
        "name": "fallback.enabled",
        "description": "Level 1 empty (unknown category): rank the whole KB by affordance, "
                       "size and appearance, marked as a fallback"})
    fallback_size_weight: float = field(default=0.0, metadata={
        "name": "fallback.size_weight",
        "description": "Weight of the size similarity in the fallback ranking"})
    source: str = field(default="", metadata={"param": False})    # where it was read from

    def __post_init__(self) -> None:
        where = f"{self.source}: " if self.source else ""
        if int(self.k1) < 1 or int(self.k) < 1:
            raise ConfigError(f"{where}k1 and k must be >= 1, got {self.k1}, {self.k}")
        self.k1, self.k = int(self.k1), int(self.k)
        for name in ("tau_aff", "category_exact_score", "category_superclass_score",
                     "region_family_score", "failure_penalty", "w_type", "w_material",
                     "w_fragility", "w_region", "w_category", "w_affordance", "w_visual"):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value < 0.0:
                raise ConfigError(f"{where}{name} must be a finite number >= 0, got {value}")
            setattr(self, name, value)
        for name in ("category_exact_score", "category_superclass_score",
                     "region_family_score", "tau_aff"):
            if getattr(self, name) > 1.0:
                raise ConfigError(f"{where}{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0.0 < self.category_superclass_score <= self.category_exact_score:
            raise ConfigError(f"{where}need 0 < category_superclass_score <= "
                              "category_exact_score")
        if self.failure_penalty >= 1.0:
            raise ConfigError(f"{where}failure_penalty must be in [0, 1), got "
                              f"{self.failure_penalty}")
        if self.mode not in MODES:
            raise ConfigError(f"{where}mode must be one of {MODES}, got {self.mode!r}")
        table: Dict[str, Dict[str, float]] = {}
        for a, row in (self.material_similarity or {}).items():
            if not isinstance(row, Mapping):
                raise ConfigError(f"{where}material_similarity.{a} must map materials to "
                                  "similarities")
            for b, value in row.items():
                value = float(value)
                if not 0.0 <= value <= 1.0:
                    raise ConfigError(f"{where}material_similarity.{a}.{b} must be in "
                                      f"[0, 1], got {value}")
                a_n, b_n = normalise_word(a), normalise_word(b)
                table.setdefault(a_n, {})[b_n] = value
                table.setdefault(b_n, {})[a_n] = value      # symmetric
        self.material_similarity = table

    def material_score(self, a: str, b: str) -> float:
        """s_mat of two materials: 1 if equal, the table's value, else 0."""
        a, b = normalise_word(a), normalise_word(b)
        return 1.0 if a == b else float(self.material_similarity.get(a, {}).get(b, 0.0))

    @classmethod
    def from_params(cls, params: Mapping[str, Any], source: str = "") -> "RetrievalConfig":
        """From the ``ros__parameters`` mapping, nested or with dotted ROS keys."""
        cfg = nested(dict(params)) if any("." in str(k) for k in params) else dict(params)

        def need(*keys: str) -> Any:
            node: Any = cfg
            for key in keys:
                if not isinstance(node, Mapping) or key not in node:
                    raise ConfigError(f"{source or 'retrieval parameters'}: missing "
                                      f"'{'.'.join(keys)}'")
                node = node[key]
            return node

        return cls(
            k1=need("k1"), k=need("k"), tau_aff=need("tau_aff"),
            category_exact_score=need("category_exact_score"),
            category_superclass_score=need("category_superclass_score"),
            w_type=need("affordance_weights", "type"),
            w_material=need("affordance_weights", "material"),
            w_fragility=need("affordance_weights", "fragility"),
            w_region=need("affordance_weights", "region"),
            region_family_score=need("region_family_score"),
            material_similarity=dict(cfg.get("material_similarity") or {}),
            w_category=need("final_weights", "category"),
            w_affordance=need("final_weights", "affordance"),
            w_visual=need("final_weights", "visual"),
            failure_penalty=need("failure_penalty"),
            clip_only_failure_penalty=bool(need("clip_only_failure_penalty")),
            mode=str(need("mode")),
            knowledge_base_path=str(cfg.get("knowledge_base_path") or ""),
            acquired_experiences_path=str(cfg.get("acquired_experiences_path") or ""),
            embedding=dict(cfg.get("embedding") or {}),
            fallback_enabled=bool((cfg.get("fallback") or {}).get("enabled", False)),
            fallback_size_weight=float((cfg.get("fallback") or {}).get("size_weight", 0.0)),
            source=source,
        )

    @classmethod
    def from_config(cls, path: Union[str, Path, None] = None) -> "RetrievalConfig":
        """Read config/retrieval.yaml (or ``path``)."""
        file = Path(path) if path else paths.config_file(NODE_NAME)
        return cls.from_params(node_params(NODE_NAME, file), str(file))


@dataclass(frozen=True)
class ConsolidationConfig:
    """Merge tolerances and the per-category cap (config/acquisition.yaml explains them)."""

    position_tol_m: float = 0.01
    approach_tol_rad: float = 0.15
    wrist_yaw_tol_rad: float = 0.15
    width_tol_m: float = 0.01
    force_ratio_tol: float = 0.25
    cap_per_category: int = 40
    wilson_z: float = 1.96

    def __post_init__(self) -> None:
        for name in ("position_tol_m", "approach_tol_rad", "wrist_yaw_tol_rad", "width_tol_m",
                     "force_ratio_tol", "wilson_z"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"consolidation.{name} must be a positive number, got "
                                  f"{value!r}")
        if int(self.cap_per_category) < 2:
            raise ConfigError("consolidation.cap_per_category must be at least 2 (one best, "
                              f"one recent), got {self.cap_per_category!r}")

    @classmethod
    def from_config(cls, path: Union[str, Path, None] = None) -> "ConsolidationConfig":
        path = Path(path) if path is not None else paths.config_dir() / "acquisition.yaml"
        data = load_yaml(path) if path.is_file() else {}
        section = (data or {}).get("consolidation") or {}
        reject_unknown(f"{path}: consolidation", section, cls.__dataclass_fields__)
        return cls(**section)
