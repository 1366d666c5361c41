"""Category taxonomy, materials and graspable regions of the knowledge base (paper Sec. III-A).

Level 1 of HAA-RAG needs to know which categories share a superclass ("mug" -> "cup"), and
level 2 needs the region families behind s_reg. Both are vocabulary, so they live as data in
``kb_data/taxonomy.yaml``; this module only reads and checks that file and normalises the
words a VLM or a user writes ("Wine Glass", "wine-glass" -> "wine_glass").
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from agentic_grasp.core import paths
from agentic_grasp.core.config import load_yaml
from agentic_grasp.core.errors import ConfigError

_SEPARATORS = re.compile(r"[\s\-]+")


@functools.lru_cache(maxsize=4096)
def _normalise(word: str) -> str:
    return _SEPARATORS.sub("_", word.strip().lower())


def normalise_word(word: str) -> str:
    """Lower case, trimmed, runs of spaces and hyphens replaced by one underscore. Memoised:
    every index rebuild (a live pick-up) normalises each entry's category, material and
    region again, and the vocabulary is a few hundred words."""
    return _normalise(str(word))


@dataclass(frozen=True)
class Taxonomy:
    """Vocabulary of the knowledge base.

    superclass_of: category -> superclass; a superclass name is itself a (generic) category.
    aliases: normalised other word -> category (an alias is an exact match).
    materials: known material words. region_family: region -> family word.
    """

    superclass_of: Mapping[str, str]
    aliases: Mapping[str, str] = field(default_factory=dict)
    materials: Tuple[str, ...] = ()
    region_family: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def from_dict(cls, data: Mapping, source: str = "taxonomy") -> "Taxonomy":
        """Build and check a taxonomy from the mapping shape of ``kb_data/taxonomy.yaml``."""
        problems = taxonomy_problems(data, source)
        if problems:
            raise ConfigError("; ".join(problems))
        superclass_of: Dict[str, str] = {}
        for sup, members in data["superclasses"].items():
            sup = normalise_word(sup)
            superclass_of[sup] = sup
            for cat in members:
                superclass_of[normalise_word(cat)] = sup
        aliases = {normalise_word(k): normalise_word(v)
                   for k, v in (data.get("aliases") or {}).items()}
        materials = tuple(normalise_word(m) for m in data.get("materials") or ())
        regions = {normalise_word(k): normalise_word(v)
                   for k, v in (data.get("regions") or {}).items()}
        return cls(superclass_of, aliases, materials, regions, source)

    @classmethod
    def load(cls, path: Union[str, Path, None] = None) -> "Taxonomy":
        """Read ``kb_data/taxonomy.yaml`` (or ``path``); raises ConfigError naming the field."""
        path = Path(path) if path else paths.kb_dir() / "taxonomy.yaml"
        data = load_yaml(path)
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping with 'superclasses'")
        return cls.from_dict(data, str(path))

    # ------------------------------------------------------------------ queries
    @property
    def categories(self) -> List[str]:
        return sorted(self.superclass_of)

    @property
    def superclasses(self) -> List[str]:
        return sorted(set(self.superclass_of.values()))

    def canonical(self, word: str) -> Optional[str]:
        """The category ``word`` names (after normalisation and aliases), or None if unknown."""
        name = normalise_word(word)
        name = self.aliases.get(name, name)
        return name if name in self.superclass_of else None

    def superclass(self, category: str) -> Optional[str]:
        canon = self.canonical(category)
        return self.superclass_of[canon] if canon else None

    def is_material(self, material: str) -> bool:
        return normalise_word(material) in self.materials

    def is_region(self, region: str) -> bool:
        return normalise_word(region) in self.region_family

    def family(self, region: str) -> Optional[str]:
        return self.region_family.get(normalise_word(region))


def taxonomy_problems(data: Mapping, source: str = "taxonomy") -> List[str]:
    """Everything wrong with a taxonomy mapping, each naming the file and the field."""
    problems: List[str] = []
    sups = data.get("superclasses") if isinstance(data, Mapping) else None
    if not isinstance(sups, Mapping) or not sups:
        return [f"{source}: field 'superclasses' must be a non-empty mapping"]
    seen: Dict[str, str] = {}
    for sup, members in sups.items():
        if not isinstance(members, Sequence) or isinstance(members, str):
            problems.append(f"{source}: field 'superclasses.{sup}' must be a list of categories")
            continue
        for cat in members:
            cat_n = normalise_word(cat)
            if cat_n in seen and seen[cat_n] != sup:
                problems.append(f"{source}: category '{cat_n}' is in superclasses "
                                f"'{seen[cat_n]}' and '{sup}'")
            seen[cat_n] = str(sup)
    for sup in sups:
        sup_n = normalise_word(sup)
        if sup_n in seen and seen[sup_n] != sup:
            problems.append(f"{source}: superclass '{sup_n}' is also a member of "
                            f"'{seen[sup_n]}'")
    known = set(seen) | {normalise_word(s) for s in sups}
    for alias, target in (data.get("aliases") or {}).items():
        if normalise_word(target) not in known:
            problems.append(f"{source}: field 'aliases.{alias}' names unknown category "
                            f"'{target}'")
        if normalise_word(alias) in known:
            problems.append(f"{source}: field 'aliases.{alias}' shadows a category")
    materials = data.get("materials")
    if not isinstance(materials, Sequence) or isinstance(materials, str) or not materials:
        problems.append(f"{source}: field 'materials' must be a non-empty list")
    regions = data.get("regions")
    if not isinstance(regions, Mapping) or not regions:
        problems.append(f"{source}: field 'regions' must be a non-empty mapping region -> family")
    return problems
