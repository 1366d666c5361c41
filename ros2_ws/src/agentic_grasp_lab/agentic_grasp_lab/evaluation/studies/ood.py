"""Out-of-distribution study (paper Sec. V-F): in-distribution, near-OOD and far-OOD splits.

The splits are data (config/ood/splits.yaml): lists of single-object scenes. This module
reads them, checks that each split is what its name says against the knowledge base's
vocabulary (:func:`validate_splits`; rules in the file's header), and runs them with one
configuration (the full system) through the same sweep as Table II.

A far-OOD category is unknown to kb_data/taxonomy.yaml, so HAA-RAG's level 1 returns an
empty result with a reason ("unknown category ...") and the planner's InitGrasp falls back
to the default grasp of config/planner.yaml; recovery then works from there. That is the
mechanism the far-OOD number measures here; the paper's "bottle-body grasp for an unseen
thermos" would need a taxonomy link this project deliberately does not add.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from agentic_grasp.core import paths
from agentic_grasp.core.config import load_yaml
from agentic_grasp.core.errors import ConfigError
from agentic_grasp_lab.evaluation.sweep import SweepResult, run_sweep
from agentic_grasp.core.planner.configurations import get_configuration
from agentic_grasp.core.planner.episode import retriever_for
from agentic_grasp.core.retrieval.relevance import load_table_iv
from agentic_grasp.core.retrieval.taxonomy import Taxonomy
from agentic_grasp.core.sim import load_catalogue, load_task

_LOG = logging.getLogger(__name__)

SPLITS = ("in_distribution", "near_ood", "far_ood")


@dataclass
class OODSplit:
    """One split: its scenes as absolute scene-file paths."""

    name: str
    label: str
    description: str
    scenes: List[str]
    paths: List[Path] = field(default_factory=list)


@dataclass
class OODSplits:
    configuration: str
    splits: Dict[str, OODSplit]
    source: str = ""

    def tasks(self) -> List[str]:
        """Scene paths of every split, in split order."""
        return [str(p) for s in self.splits.values() for p in s.paths]

    def split_of(self) -> Dict[str, str]:
        """Scene path -> split name (the records' ``split`` field)."""
        return {str(p): s.name for s in self.splits.values() for p in s.paths}

    def labels(self) -> Dict[str, str]:
        return {name: s.label for name, s in self.splits.items()}


def scene_path(scene: str) -> Path:
    """A scene reference of splits.yaml ("sg_cup", "ood/ood_far_egg") as a file path."""
    text = str(scene)
    if not text.endswith((".yaml", ".yml")):
        text += ".yaml"
    path = Path(text)
    return path if path.is_absolute() else paths.scenes_dir() / path


def load_splits(path: Union[str, Path, None] = None) -> OODSplits:
    """Read config/ood/splits.yaml (or ``path``); ConfigError naming the field."""
    file = Path(path) if path else paths.config_dir() / "ood" / "splits.yaml"
    data = load_yaml(file)
    if not isinstance(data, dict) or not isinstance(data.get("splits"), dict):
        raise ConfigError(f"{file}: expected a mapping with 'splits'")
    unknown = sorted(set(data["splits"]) - set(SPLITS))
    if unknown:
        raise ConfigError(f"{file}: splits: unknown split(s) {unknown}; expected {SPLITS}")
    splits: Dict[str, OODSplit] = {}
    for name in SPLITS:
        raw = data["splits"].get(name)
        if raw is None:
            continue
        if not isinstance(raw, dict) or not isinstance(raw.get("scenes"), list) \
                or not raw["scenes"]:
            raise ConfigError(f"{file}: splits.{name}.scenes: expected a non-empty list")
        scenes = [str(s) for s in raw["scenes"]]
        if len(set(scenes)) != len(scenes):
            raise ConfigError(f"{file}: splits.{name}.scenes: duplicate scenes")
        split = OODSplit(name, str(raw.get("label", name)), str(raw.get("description", "")),
                         scenes, [scene_path(s) for s in scenes])
        for scene, p in zip(scenes, split.paths):
            if not p.is_file():
                raise ConfigError(f"{file}: splits.{name}.scenes: no scene file for "
                                  f"{scene!r} ({p})")
        splits[name] = split
    if not splits:
        raise ConfigError(f"{file}: no split defined")
    all_paths = [p for s in splits.values() for p in s.paths]
    if len(set(all_paths)) != len(all_paths):
        raise ConfigError(f"{file}: a scene is in more than one split")

    configuration = str(data.get("configuration", "full"))
    get_configuration(configuration)
    return OODSplits(configuration, splits, str(file))


def table_i_objects() -> List[str]:
    """Names of the 12 Table I objects (the Table IV queries)."""
    return [q.object for q in load_table_iv()["queries"]]


def validate_splits(splits: OODSplits) -> List[Dict[str, Any]]:
    """Load every scene, check the split rules; one row per object (ConfigError on a breach).

    Rows: split, task_id, object id, catalogue name, category, material, mass, fragility,
    affordance, whether the taxonomy knows the category, and what retrieval returns for it.
    """
    taxonomy = Taxonomy.load()
    table_i = {name.lower() for name in table_i_objects()}
    catalogue = load_catalogue()
    retriever = retriever_for(None)
    rows = []
    for name, split in splits.splits.items():
        for scene, path in zip(split.scenes, split.paths):
            spec = load_task(str(path), catalogue)
            where = f"{splits.source}: splits.{name}: {scene}"
            if len(spec.objects_spec) != 1 or len(spec.targets) != 1:
                raise ConfigError(f"{where}: an OOD scene holds exactly one object, its target")
            obj = spec.nominal()[0]
            model = catalogue.get(spec.objects_spec[0].catalogue)
            known = taxonomy.canonical(obj.category) is not None
            in_table_i = obj.name.lower() in table_i
            if name == "in_distribution" and not in_table_i:
                raise ConfigError(f"{where}: {obj.name} is not a Table I object")
            if name == "near_ood" and (in_table_i or not known):
                raise ConfigError(f"{where}: a near-OOD object must be a new instance of a "
                                  f"known category ({obj.name}: Table I {in_table_i}, "
                                  f"category known {known})")
            if name == "far_ood" and known:
                raise ConfigError(f"{where}: category {obj.category!r} of {obj.name} is in "
                                  "the knowledge-base taxonomy; far-OOD needs an unseen one")
            result = retriever.retrieve(obj.category, obj.affordance)
            rows.append({"split": name, "task_id": spec.task_id, "object_id": obj.id,
                         "object": obj.name, "category": obj.category,
                         "material": obj.material, "mass_kg": round(model.mass_kg, 4),
                         "fragility": obj.fragility,
                         "size_m": [round(float(v), 4) for v in obj.size],
                         "affordance": obj.affordance.type.value,
                         "taxonomy_known": known,
                         "retrieved": [s.experience.id for s in result.strategies],
                         "retrieval_reason": result.reason})
    return rows


def run_ood(splits: Optional[OODSplits] = None, trials: int = 30,
            seeds: Sequence[int] = (0, 1, 2, 3, 4), workers: Optional[int] = None,
            progress: bool = True, configuration: Optional[str] = None,
            start_method: str = "", memory_scope: str = "trial", perception: str = "oracle",
            visual_query: str = "none", **executor: Any) -> SweepResult:
    """Every split's scenes x trials x seeds with the split's configuration (full);
    ``executor``: run_sweep's executor, ray_address, journal, resume."""
    splits = splits or load_splits()
    conf = configuration or splits.configuration
    return run_sweep([conf], splits.tasks(), trials, seeds, workers, progress,
                     splits=splits.split_of(), start_method=start_method,
                     memory_scope=memory_scope, perception=perception,
                     visual_query=visual_query, **executor)


def format_validation(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = ["OOD objects (what retrieval returns for each):"]
    for r in rows:
        got = ", ".join(r["retrieved"]) or f"nothing ({r['retrieval_reason']})"
        lines.append(f"  {r['split']:<16} {r['object']:<20} {r['category']:<12} "
                     f"{r['material']:<9} {r['mass_kg']:.3f} kg  frag {r['fragility']:.2f}  "
                     f"-> {got}")
    return "\n".join(lines)


__all__ = ["OODSplit", "OODSplits", "SPLITS", "format_validation", "load_splits",
           "run_ood", "scene_path", "table_i_objects", "validate_splits"]
