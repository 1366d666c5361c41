"""The knowledge base K = {e_1..e_N} of manipulation experiences (paper Sec. III-A).

An experience e_i = (c_i, a_i, g_i, y_i, v_i): category, affordance descriptor, grasp, success
label and visual embedding. Entries are JSON Lines under ``kb_data/experiences/`` (one file per
category group), one experience per line, checked against
``kb_data/schema/experience.schema.json`` and the vocabulary of ``kb_data/taxonomy.yaml``.

Grasp frame: a stored grasp is in the OBJECT frame -- ``position`` relative to the centre of
the object's bounding box, ``approach`` and ``wrist_yaw`` relative to the object's axes (z up,
yaw about z) -- because world positions of a past scene mean nothing in a new one.
:func:`grasp_to_world` places it on an object of the current scene and
:func:`grasp_to_object_frame` does the reverse for newly acquired experiences (both from
:mod:`agentic_grasp.core.geometry`).

v_i is not stored in the files: it is computed from the entry's ``render_spec`` (shape, size,
colour, material), drawn with the solid parts of the catalogue model the entry is an instance
of (:meth:`Experience.visual_spec`), by whatever embedding model is configured, so the same
knowledge base works with the built-in descriptor and with CLIP (see :mod:`.embedding`).
"""
from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import jsonschema
import numpy as np

from agentic_grasp.core import geometry, paths
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.geometry import grasp_to_object_frame  # noqa: F401 (re-export)
from agentic_grasp.core.retrieval.kb_vectors import EmbeddingCache, embed_render_specs, visual_spec
from agentic_grasp.core.retrieval.embedding import VisualEmbedder
from agentic_grasp.core.retrieval.jsonl import read_jsonl
from agentic_grasp.core.retrieval.relevance import relevance_problems
from agentic_grasp.core.retrieval.taxonomy import Taxonomy
from agentic_grasp.core.types import (AffordanceDescriptor, GraspParameters, ObjectInstance)

_LOG = logging.getLogger(__name__)

PathLike = Union[str, Path]
#: How many problems a ConfigError message lists before summarising the rest.
_MAX_LISTED = 20


#: The perception backend whose experiences are ground truth (core/perception/oracle.py).
GROUND_TRUTH_BACKEND = "oracle"


@dataclass
class Experience:
    """One knowledge-base entry. ``grasp`` holds GraspParameters.to_dict() fields in the
    object frame; ``embedding`` is v_i (unit norm) made by ``embedding_model``."""

    id: str
    category: str
    affordance: AffordanceDescriptor
    grasp: Dict[str, Any]
    success: bool
    provenance: str
    render_spec: Dict[str, Any]
    embedding: Optional[np.ndarray] = None
    embedding_model: str = ""
    object_name: str = ""
    failure_mode: Optional[str] = None
    source: str = ""            # "file:line" it was read from, for messages
    fit: Optional[Dict[str, Any]] = None   # how the grasp adapts (core/grasping/fit.py)
    # Experience acquisition (core/retrieval/acquired/acquisition.py, consolidation.py): where an
    # acquired entry came from, and the success/failure counts of merged near-duplicates.
    acquisition: Optional[Dict[str, Any]] = None
    outcomes: Optional[Dict[str, Any]] = None

    @property
    def failure_rate(self) -> float:
        """Failures / attempts behind this entry (0 or 1 for a single outcome)."""
        if self.outcomes:
            n = int(self.outcomes.get("successes", 0)) + int(self.outcomes.get("failures", 0))
            if n > 0:
                return int(self.outcomes.get("failures", 0)) / n
        return 0.0 if self.success else 1.0

    def visual_spec(self) -> Dict[str, Any]:
        """What v_i is rendered from: the render spec and the catalogue model whose parts it
        is drawn with (:func:`.kb_vectors.visual_spec`), so the render shows what a camera sees
        of the object, as a query crop does."""
        return visual_spec(self.render_spec, self.category, self.object_name)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], source: str = "") -> "Experience":
        """Build from one JSON record that already passed :func:`record_problems`."""
        aff = record["affordance"]
        return cls(
            id=str(record["id"]),
            category=str(record["category"]),
            affordance=AffordanceDescriptor(type=aff["type"], material=str(aff["material"]),
                                            fragility=float(aff["fragility"]),
                                            region=str(aff["region"])),
            grasp=dict(record["grasp"]),
            success=bool(record["success"]),
            provenance=str(record["provenance"]),
            render_spec=dict(record["render_spec"]),
            object_name=str(record.get("object_name", "")),
            failure_mode=record.get("failure_mode"),
            source=source,
            fit=dict(record["fit"]) if record.get("fit") is not None else None,
            acquisition=(dict(record["acquisition"]) if record.get("acquisition") is not None
                         else None),
            outcomes=dict(record["outcomes"]) if record.get("outcomes") is not None else None,
        )

    def to_record(self) -> Dict[str, Any]:
        """The JSON record of this experience (the embedding is never written)."""
        record: Dict[str, Any] = {"id": self.id, "category": self.category}
        if self.object_name:
            record["object_name"] = self.object_name
        record["affordance"] = {"type": self.affordance.type.value,
                                "material": self.affordance.material,
                                "fragility": self.affordance.fragility,
                                "region": self.affordance.region}
        record["grasp"] = _plain(self.grasp)
        record["success"] = bool(self.success)
        record["failure_mode"] = None if self.success else (self.failure_mode or "unknown")
        record["provenance"] = self.provenance
        record["render_spec"] = _plain(self.render_spec)
        if self.fit is not None:
            record["fit"] = _plain(self.fit)
        if self.acquisition is not None:
            record["acquisition"] = _plain(self.acquisition)
        if self.outcomes is not None:
            record["outcomes"] = _plain(self.outcomes)
        return record

    def grasp_parameters(self) -> GraspParameters:
        """The stored grasp as GraspParameters, still in the object frame."""
        return GraspParameters.from_dict(self.grasp)


def is_ground_truth(experience: Experience) -> bool:
    """Whether ``experience`` was acquired under oracle perception: its grasp was placed on
    the simulator's ground truth, not on what a camera showed (acquisition provenance).
    HAA-RAG serves such experiences to oracle runs only, and consolidation never merges
    them with camera-perceived ones."""
    acquisition = experience.acquisition or {}
    return str(acquisition.get("perception_backend", "")) == GROUND_TRUTH_BACKEND


def _plain(value: Any) -> Any:
    """numpy scalars/arrays -> JSON-serialisable Python values."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in list(value)]
    if isinstance(value, np.generic):
        return value.item()
    return value


# --------------------------------------------------------------------------- frames
def grasp_to_world(grasp: Union[Experience, Mapping[str, Any]],
                   obj: ObjectInstance) -> GraspParameters:
    """An object-frame grasp (an experience's, or its dict) placed on ``obj``
    (:func:`agentic_grasp.core.geometry.grasp_to_world`)."""
    return geometry.grasp_to_world(grasp.grasp if isinstance(grasp, Experience) else grasp, obj)


# --------------------------------------------------------------------------- validation
def schema_path() -> Path:
    return paths.kb_dir() / "schema" / "experience.schema.json"


@lru_cache(maxsize=4)
def _validator(path: str) -> jsonschema.Draft202012Validator:
    try:
        schema = json.loads(Path(path).read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
    except FileNotFoundError:
        raise ConfigError(f"{path}: schema file not found") from None
    except (json.JSONDecodeError, jsonschema.SchemaError) as exc:
        raise ConfigError(f"{path}: invalid JSON schema: {exc}") from None
    return jsonschema.Draft202012Validator(schema)


def _field_of(error: jsonschema.ValidationError) -> str:
    parts = []
    for p in error.absolute_path:
        if isinstance(p, int):
            parts[-1:] = [f"{parts[-1]}[{p}]"] if parts else [f"[{p}]"]
        else:
            parts.append(str(p))
    base = ".".join(parts)
    extra = None
    if error.validator == "required":
        m = re.match(r"'([^']+)' is a required property", error.message)
        extra = m.group(1) if m else None
    elif error.validator == "additionalProperties":
        m = re.search(r"\('([^']+)'", error.message)
        extra = m.group(1) if m else None
    if extra:
        base = f"{base}.{extra}" if base else extra
    return base or "(entry)"


def record_problems(record: Any, where: str, taxonomy: Optional[Taxonomy],
                    schema_file: Optional[PathLike] = None) -> List[str]:
    """Problems of one record, each '<where>: entry '<id>': field '<field>': <what>'."""
    if not isinstance(record, dict):
        return [f"{where}: not a JSON object"]
    eid = record.get("id", "?")
    head = f"{where}: entry '{eid}'"
    validator = _validator(str(schema_file or schema_path()))
    problems = [f"{head}: field '{_field_of(e)}': {e.message}"
                for e in sorted(validator.iter_errors(record), key=lambda e: list(e.path))]
    if problems or taxonomy is None:
        return problems
    if record["category"] not in taxonomy.superclass_of:
        hint = taxonomy.canonical(record["category"])
        problems.append(f"{head}: field 'category': '{record['category']}' is not a category of "
                        f"{taxonomy.source or 'the taxonomy'}"
                        + (f" (write '{hint}')" if hint else ""))
    for fld in ("affordance", "render_spec"):
        if not taxonomy.is_material(record[fld]["material"]):
            problems.append(f"{head}: field '{fld}.material': unknown material "
                            f"'{record[fld]['material']}'")
    if not taxonomy.is_region(record["affordance"]["region"]):
        problems.append(f"{head}: field 'affordance.region': unknown region "
                        f"'{record['affordance']['region']}'")
    if float(np.linalg.norm(record["grasp"]["approach"])) < 1e-6:
        problems.append(f"{head}: field 'grasp.approach': must not be the zero vector")
    return problems


@dataclass
class _KBLayout:
    root: Optional[Path]              # folder holding taxonomy.yaml, schema/, relevance/
    files: List[Path] = field(default_factory=list)


def _layout(path: Optional[PathLike]) -> _KBLayout:
    """Which experience files ``path`` means, and the kb_data folder they belong to."""
    if path is None:
        root = paths.kb_dir()
        return _KBLayout(root, sorted((root / "experiences").glob("*.jsonl")))
    path = Path(path)
    if path.is_file():
        root = path.parent.parent if (path.parent.parent / "taxonomy.yaml").is_file() else None
        return _KBLayout(root, [path])
    if path.is_dir():
        if (path / "experiences").is_dir():
            return _KBLayout(path, sorted((path / "experiences").glob("*.jsonl")))
        root = path.parent if (path.parent / "taxonomy.yaml").is_file() else None
        return _KBLayout(root, sorted(path.glob("*.jsonl")))
    raise ConfigError(f"{path}: knowledge base path does not exist")


def _taxonomy_for(layout: _KBLayout) -> Taxonomy:
    if layout.root is not None and (layout.root / "taxonomy.yaml").is_file():
        return Taxonomy.load(layout.root / "taxonomy.yaml")
    return Taxonomy.load()


def _schema_for(layout: _KBLayout) -> Path:
    if layout.root is not None:
        candidate = layout.root / "schema" / "experience.schema.json"
        if candidate.is_file():
            return candidate
    return schema_path()


def _read_files(files: Sequence[Path], taxonomy: Taxonomy, schema: Path,
                ) -> Tuple[List[Experience], List[str], List[str]]:
    """(experiences, problems, warnings) of all files; ids must be unique across files."""
    experiences: List[Experience] = []
    problems: List[str] = []
    warnings: List[str] = []
    first_seen: Dict[str, str] = {}
    for file in files:
        try:
            content = read_jsonl(file)
        except OSError as exc:
            problems.append(f"{file}: cannot read: {exc}")
            continue
        for line, message in content.errors:
            problems.append(f"{file}:{line}: {message}")
        if content.partial_tail is not None:
            warnings.append(f"{file}:{content.partial_line}: incomplete last line without "
                            "newline (an interrupted append) ignored")
        for line, record in content.records:
            where = f"{file}:{line}"
            found = record_problems(record, where, taxonomy, schema)
            if found:
                problems.extend(found)
                continue
            eid = record["id"]
            if eid in first_seen:
                problems.append(f"{where}: entry '{eid}': field 'id': duplicate of the entry "
                                f"at {first_seen[eid]}")
                continue
            first_seen[eid] = where
            experiences.append(Experience.from_record(record, where))
    return experiences, problems, warnings


def validate_kb(path: Optional[PathLike] = None) -> List[str]:
    """Every problem of a knowledge base, each naming the file, line/entry and field.

    ``path``: the kb_data folder (default), its experiences/ folder, or one .jsonl file. With
    a kb_data folder the taxonomy, the schema and the relevance labels are checked too. An
    empty list means valid; an interrupted last line is reported (the loader tolerates it).
    """
    problems: List[str] = []
    try:
        layout = _layout(path)
        taxonomy = _taxonomy_for(layout)
        schema = _schema_for(layout)
        _validator(str(schema))
    except ConfigError as exc:
        return [str(exc)]
    if not layout.files:
        problems.append(f"{path or paths.kb_dir()}: no experience files (*.jsonl)")
    experiences, found, warnings = _read_files(layout.files, taxonomy, schema)
    problems.extend(found)
    problems.extend(warnings)
    if layout.root is not None and (path is None or Path(path).is_dir()):
        problems.extend(_relevance_problems(layout.root, {e.id: e for e in experiences},
                                            taxonomy))
    return problems


def _relevance_problems(root: Path, by_id: Mapping[str, Experience],
                        taxonomy: Taxonomy) -> List[str]:
    """Relevance files may only name successful experiences that exist."""
    problems: List[str] = []
    for file in sorted((root / "relevance").glob("*.yaml")):
        problems.extend(relevance_problems(file, by_id, taxonomy))
    return problems


# --------------------------------------------------------------------------- the KB
class KnowledgeBase:
    """The experiences, their taxonomy, and (once embedded) one contiguous vector matrix."""

    def __init__(self, experiences: Sequence[Experience], taxonomy: Taxonomy,
                 sources: Sequence[str] = ()) -> None:
        ids = Counter(e.id for e in experiences)
        dup = [i for i, n in ids.items() if n > 1]
        if dup:
            raise ConfigError(f"duplicate experience ids: {', '.join(sorted(dup))}")
        unknown = sorted({e.category for e in experiences
                          if e.category not in taxonomy.superclass_of})
        if unknown:
            raise ConfigError(f"categories not in the taxonomy: {', '.join(unknown)}")
        self._experiences: Tuple[Experience, ...] = tuple(experiences)
        self._by_id = {e.id: e for e in self._experiences}
        self.taxonomy = taxonomy
        self.sources = tuple(sources)
        self._vectors: Optional[np.ndarray] = None
        self._embedding_model = ""

    @classmethod
    def load(cls, path: Optional[PathLike] = None,
             embedder: Optional[VisualEmbedder] = None, *,
             extra_paths: Sequence[PathLike] = (),
             cache: Union[EmbeddingCache, None, bool] = None,
             crop_size: int = 64) -> "KnowledgeBase":
        """Read and validate the knowledge base; embed it when ``embedder`` is given.

        ``path``: kb_data folder, experiences folder or one .jsonl file (default
        ``kb_data/experiences``). ``extra_paths``: more .jsonl files (acquired experiences),
        skipped when they do not exist. ``cache``: an EmbeddingCache, None for the default
        one, False for none. Raises ConfigError listing every problem (file:line, entry id,
        field); an interrupted last line only logs a warning.
        """
        layout = _layout(path)
        taxonomy = _taxonomy_for(layout)
        schema = _schema_for(layout)
        files = list(layout.files) + [Path(p) for p in extra_paths if Path(p).is_file()]
        if not files:
            raise ConfigError(f"{path or paths.kb_dir()}: no experience files (*.jsonl)")
        experiences, problems, warnings = _read_files(files, taxonomy, schema)
        for warning in warnings:
            _LOG.warning("%s", warning)
        if problems:
            listed = problems[:_MAX_LISTED]
            more = len(problems) - len(listed)
            raise ConfigError("invalid knowledge base:\n  " + "\n  ".join(listed)
                              + (f"\n  ... and {more} more" if more else ""))
        kb = cls(experiences, taxonomy, [str(f) for f in files])
        if embedder is not None:
            kb.embed(embedder, cache=cache, crop_size=crop_size)
        return kb

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self._experiences)

    def __iter__(self) -> Iterator[Experience]:
        return iter(self._experiences)

    @property
    def experiences(self) -> Tuple[Experience, ...]:
        return self._experiences

    @property
    def embedding_model(self) -> str:
        """model_id of the stored vectors ('' until :meth:`embed`)."""
        return self._embedding_model

    @property
    def vectors(self) -> Optional[np.ndarray]:
        """(N, dim) C-contiguous float32, row i = v_i of experiences[i]; None if not embedded."""
        return self._vectors

    def get(self, experience_id: str) -> Experience:
        try:
            return self._by_id[experience_id]
        except KeyError:
            raise ValidationError(f"no experience with id {experience_id!r}") from None

    def category_counts(self) -> Dict[str, int]:
        return dict(Counter(e.category for e in self._experiences))

    def superclass_counts(self) -> Dict[str, int]:
        return dict(Counter(self.taxonomy.superclass_of[e.category] for e in self._experiences))

    def embed(self, embedder: VisualEmbedder,
              cache: Union[EmbeddingCache, None, bool] = None, crop_size: int = 64) -> None:
        """Compute v_i for every entry from its render spec, drawn as the catalogue model it
        is an instance of (:meth:`Experience.visual_spec`; cached on disk by content)."""
        if cache is None:
            cache = EmbeddingCache()
        vectors = embed_render_specs([e.visual_spec() for e in self._experiences], embedder,
                                     cache or None, crop_size)
        self.set_vectors(vectors, embedder.model_id)

    def set_vectors(self, vectors: np.ndarray, model_id: str) -> None:
        """Install precomputed vectors (one unit-norm row per experience, same order)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(self._experiences):
            raise ValidationError(f"expected {len(self._experiences)} vectors, got shape "
                                  f"{vectors.shape}")
        if not model_id:
            raise ValidationError("vectors need the model_id that made them")
        norms = np.linalg.norm(vectors, axis=1) if len(vectors) else np.ones(0)
        if not np.all(np.isfinite(vectors)) or np.any(np.abs(norms - 1.0) > 1e-3):
            raise ValidationError("knowledge-base vectors must be finite and unit norm")
        self._vectors = vectors
        self._embedding_model = model_id
        for row, exp in enumerate(self._experiences):
            exp.embedding = vectors[row]          # a view: no copy per entry
            exp.embedding_model = model_id
