"""Relevance labels of the retrieval benchmark (paper Table IV): reading and checking them.

``kb_data/relevance/table_iv_qrels.yaml`` holds one query per Table I object (its category,
affordance descriptor and appearance) with the knowledge-base entries relevant to it,
written apart from the entries. :mod:`.evaluation` scores retrieval against it;
:func:`agentic_grasp.core.retrieval.knowledge_base.check_knowledge_base` checks that every
label names a successful experience that exists (this module imports neither).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Union

from agentic_grasp.core import paths
from agentic_grasp.core.config import load_yaml
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.retrieval.taxonomy import Taxonomy
from agentic_grasp.core.types import AffordanceDescriptor, AffordanceType, ObjectInstance


@dataclass
class TableIVQuery:
    """One Table I object as a retrieval query, with its relevance labels."""

    object: str
    category: str
    affordance: AffordanceDescriptor
    appearance: Dict[str, Any]
    relevant: Dict[str, str]
    not_relevant_notes: Dict[str, str] = field(default_factory=dict)

    def instance(self, pose: Mapping[str, float]) -> ObjectInstance:
        """The object standing on the table at ``pose`` (x, y, yaw)."""
        size = [float(v) for v in self.appearance["size"]]
        return ObjectInstance(
            id=self.object.replace(" ", "_"), category=self.category,
            shape=self.appearance["shape"],
            position=[float(pose.get("x", 0.55)), float(pose.get("y", 0.0)), size[2] / 2.0],
            size=size, yaw=float(pose.get("yaw", 0.0)),
            color=tuple(int(c) for c in self.appearance["color"]),
            material=self.affordance.material, fragility=self.affordance.fragility,
            affordance=self.affordance, name=self.object)


def qrels_path() -> Path:
    return paths.kb_dir() / "relevance" / "table_iv_qrels.yaml"


def load_table_iv(path: Union[str, Path, None] = None) -> Dict[str, Any]:
    """{"queries": [TableIVQuery], "render_pose": {...}} from the qrels file."""
    path = Path(path) if path else qrels_path()
    data = load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("queries"), list):
        raise ConfigError(f"{path}: expected a mapping with a 'queries' list")
    queries = []
    for i, q in enumerate(data["queries"]):
        where = f"{path}: queries[{i}]"
        try:
            aff = q["affordance"]
            queries.append(TableIVQuery(
                object=str(q["object"]), category=str(q["category"]),
                affordance=AffordanceDescriptor(type=AffordanceType.parse(aff["type"]),
                                                material=str(aff["material"]),
                                                fragility=float(aff["fragility"]),
                                                region=str(aff["region"])),
                appearance=dict(q["appearance"]),
                relevant={str(k): str(v) for k, v in (q.get("relevant") or {}).items()},
                not_relevant_notes={str(k): str(v)
                                    for k, v in (q.get("not_relevant_notes") or {}).items()}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return {"queries": queries, "render_pose": dict(data.get("render_pose") or {})}


def relevance_problems(path: Union[str, Path], by_id: Mapping[str, Any],
                       taxonomy: Taxonomy) -> List[str]:
    """Problems of a relevance file: unknown ids, failed experiences, unknown categories."""
    try:
        table = load_table_iv(path)
    except ConfigError as exc:
        return [str(exc)]
    problems = []
    for i, q in enumerate(table["queries"]):
        where = f"{path}: queries[{i}] ({q.object})"
        if taxonomy.canonical(q.category) is None:
            problems.append(f"{where}: field 'category': unknown category '{q.category}'")
        if not q.relevant:
            problems.append(f"{where}: field 'relevant': no relevant experience")
        for eid in list(q.relevant) + list(q.not_relevant_notes):
            exp = by_id.get(eid)
            if exp is None:
                problems.append(f"{where}: entry '{eid}': not in the knowledge base")
            elif eid in q.relevant and not exp.success:
                problems.append(f"{where}: entry '{eid}': a failed experience cannot be "
                                "relevant")
        both = set(q.relevant) & set(q.not_relevant_notes)
        if both:
            problems.append(f"{where}: {', '.join(sorted(both))} both relevant and not")
    return problems


__all__ = ["TableIVQuery", "load_table_iv", "qrels_path", "relevance_problems"]
