"""Benchmark scenes (paper Sec. V-A): one user-editable YAML file per task in config/scenes/.

A scene names its objects (catalogue entries), where they stand, their state and how much
their placement varies between trials. :meth:`TaskSpec.instantiate` applies that seeded
jitter and re-samples (a bounded number of times) until every object stands on the table
without touching another; if no sample fits it falls back to the nominal layout, which
:func:`load_task` has checked.
"""
from __future__ import annotations

import logging
import math
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from agentic_grasp.core import paths
from agentic_grasp.core.config import load_yaml
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.sim.collision import object_obb, place_object, separation
from agentic_grasp.core.sim.objects import Catalogue, ObjectModel, load_catalogue
from agentic_grasp.core.types import ObjectInstance, ObjectState

logger = logging.getLogger(__name__)

#: The paper's 12 benchmark tasks, in the order the learning check and recorded sessions use.
BENCHMARK_TASKS = ("sg_cup", "sg_apple", "sg_bottle", "sg_banana", "sg_bowl", "sg_cube",
                   "it_cup_near_vase", "it_phone_near_wine_glass", "it_ball_behind_box",
                   "it_screwdriver_side_grasp", "lh_clear_table", "lh_sort_by_fragility")


def task_key(task: str) -> str:
    """The id a task is known by in seeds and records: a scene path's stem, or the id."""
    text = str(task)
    return Path(text).stem if text.endswith((".yaml", ".yml")) else text


def trial_seed(seed: int, task: str, trial: int) -> int:
    """The seed of trial ``trial`` of ``task`` in repetition ``seed`` (same for every
    configuration). A stable hash (CRC-32 of the task id, not Python's salted ``hash``) so
    every process and every run derives the same value."""
    entropy = [int(seed), zlib.crc32(task_key(task).encode("utf-8")), int(trial)]
    return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint32)[0])

CATEGORIES = ("SG", "IT", "LH")
#: Smallest gap kept between two objects' footprints (m).
MIN_GAP_M = 0.005
#: Re-samples of the jitter before the nominal layout is used.
MAX_TRIES = 50
TABLE_X = (0.2, 0.8)
TABLE_Y = (-0.4, 0.4)


@dataclass(frozen=True)
class SceneObjectSpec:
    """One object of a scene: catalogue entry, nominal pose, state and per-trial jitter."""

    id: str
    catalogue: str
    x: float
    y: float
    yaw: float = 0.0
    state: ObjectState = ObjectState.EMPTY
    position_std_m: float = 0.0
    yaw_std_rad: float = 0.0
    #: one item of its kind (procedural scenes): bounding box ``scale`` times the
    #: catalogue's, its own empty mass and friction; None = the catalogue's
    scale: Optional[Tuple[float, float, float]] = None
    mass_kg: Optional[float] = None
    friction: Optional[float] = None

    def model(self, catalogue: Catalogue) -> ObjectModel:
        """The physical model of this object: its catalogue entry, varied as drawn."""
        model = catalogue.get(self.catalogue)
        if self.scale is None and self.mass_kg is None and self.friction is None:
            return model
        return model.varied(np.asarray(self.scale or (1.0, 1.0, 1.0), dtype=float),
                            model.mass_kg if self.mass_kg is None else self.mass_kg,
                            model.friction if self.friction is None else self.friction)

    def instance(self, catalogue: Catalogue, x: float, y: float, yaw: float
                 ) -> ObjectInstance:
        return self.model(catalogue).instantiate(self.id, x, y, yaw, self.state)


@dataclass
class TaskSpec:
    """A benchmark task: instruction, ordered targets and the scene it runs in."""

    task_id: str
    category: str
    instruction: str
    targets: List[str]
    objects_spec: List[SceneObjectSpec]
    description: str = ""
    source: str = ""
    catalogue: Optional[Catalogue] = field(default=None, repr=False, compare=False)

    def _catalogue(self) -> Catalogue:
        return self.catalogue if self.catalogue is not None else load_catalogue()

    def nominal(self) -> List[ObjectInstance]:
        cat = self._catalogue()
        return [o.instance(cat, o.x, o.y, o.yaw) for o in self.objects_spec]

    def instantiate(self, rng: np.random.Generator) -> List[ObjectInstance]:
        """The scene of one trial: nominal poses plus seeded jitter, on the table, apart."""
        cat = self._catalogue()
        for _ in range(MAX_TRIES):
            draws = rng.standard_normal((len(self.objects_spec), 3))
            objs = [o.instance(cat, o.x + d[0] * o.position_std_m,
                               o.y + d[1] * o.position_std_m, o.yaw + d[2] * o.yaw_std_rad)
                    for o, d in zip(self.objects_spec, draws)]
            if layout_problem(objs, cat) is None:
                return objs
        logger.warning("%s: no jittered layout fits after %d tries; using the nominal one",
                       self.task_id, MAX_TRIES)
        return self.nominal()


def layout_problem(objects: Sequence[ObjectInstance], catalogue: Catalogue,
                   table_x: Tuple[float, float] = TABLE_X,
                   table_y: Tuple[float, float] = TABLE_Y) -> Optional[str]:
    """Why a layout is not physical (off the table, overlapping), or None when it is."""
    boxes = []
    for inst in objects:
        box = object_obb(inst, place_object(inst, catalogue.model_for(inst)))
        xy = box.corners()[:, :2]
        if xy[:, 0].min() < table_x[0] or xy[:, 0].max() > table_x[1] \
                or xy[:, 1].min() < table_y[0] or xy[:, 1].max() > table_y[1]:
            return f"{inst.id} is not entirely on the table"
        boxes.append(box)
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            if separation(boxes[i], boxes[j]) < MIN_GAP_M:
                return f"{objects[i].id} and {objects[j].id} overlap"
    return None


#: Task names resolved by a generator instead of a scene file, by prefix: ``procedural:``
#: (core/sim/procedural.py registers itself; the package imports it).
GENERATED: Dict[str, Callable[[str, Optional[Catalogue]], TaskSpec]] = {}


def list_tasks(folder: Union[str, Path, None] = None) -> List[str]:
    """Task ids of every scene file (file stem = task id)."""
    root = Path(folder) if folder else paths.scenes_dir()
    return sorted(p.stem for p in root.glob("*.yaml"))


def load_task(task_id_or_path: str, catalogue: Optional[Catalogue] = None) -> TaskSpec:
    """Parse and check one scene file (a task id in config/scenes/ or a path), or rebuild a
    procedural scene from its name ``procedural:SEED:INDEX`` (:mod:`.procedural`)."""
    text = str(task_id_or_path)
    for prefix, generate in GENERATED.items():
        if text.startswith(prefix):
            spec = generate(text, catalogue)
            return replace(spec, targets=list(spec.targets),
                           objects_spec=list(spec.objects_spec))
    path = Path(text) if text.endswith((".yaml", ".yml")) or "/" in text \
        else paths.scenes_dir() / f"{text}.yaml"
    if not path.is_file():
        known = ", ".join(list_tasks()) if paths.scenes_dir().is_dir() else "none"
        raise ConfigError(f"{path}: no such scene file (tasks: {known})")
    cat = catalogue if catalogue is not None else load_catalogue()
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    cached = _PARSED.get(key)
    if cached is None or cached[0] is not cat:
        spec = _parse(load_yaml(path), str(path), cat)
        problem = layout_problem(spec.nominal(), cat)
        if problem:
            raise ConfigError(f"{path}: nominal layout: {problem}")
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = cached = (cat, spec)
    spec = cached[1]
    # A copy, so a caller that edits its spec does not change the next trial's.
    return replace(spec, targets=list(spec.targets), objects_spec=list(spec.objects_spec))


#: Parsed and checked scenes keyed by (resolved path, mtime, size): a benchmark loads the
#: same few files thousands of times, and parsing the YAML was ~30 % of a trial. An edited
#: file has a new mtime/size and is parsed again.
_PARSED: Dict[Tuple[str, int, int], Tuple[Catalogue, "TaskSpec"]] = {}
_PARSED_MAX = 256


def _parse(data: Any, src: str, cat: Catalogue) -> TaskSpec:
    if not isinstance(data, dict):
        raise ConfigError(f"{src}: expected a mapping at the top level")

    def need(mapping: dict, key: str, where: str) -> Any:
        if mapping.get(key) is None:
            raise ConfigError(f"{src}: {where}{key}: missing")
        return mapping[key]

    task_id = str(need(data, "task_id", ""))
    category = str(need(data, "category", "")).upper()
    if category not in CATEGORIES:
        raise ConfigError(f"{src}: category: expected one of {CATEGORIES}, got {category!r}")
    jitter = data.get("jitter") or {}
    pos_std = _number(src, "jitter.position_std_m", jitter.get("position_std_m", 0.0), 0, 0.1)
    yaw_std = _number(src, "jitter.yaw_std_rad", jitter.get("yaw_std_rad", 0.0), 0, math.pi)
    raw = need(data, "objects", "")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{src}: objects: expected a non-empty list")
    specs, seen = [], set()
    for i, obj in enumerate(raw):
        where = f"objects[{i}]."
        if not isinstance(obj, dict):
            raise ConfigError(f"{src}: objects[{i}]: expected a mapping")
        oid = str(need(obj, "id", where))
        if oid in seen:
            raise ConfigError(f"{src}: {where}id: duplicate id {oid!r}")
        seen.add(oid)
        name = str(need(obj, "object", where))
        model = cat.get(name)
        try:
            state = ObjectState.parse(str(obj.get("state", "empty")))
        except ValidationError as exc:
            raise ConfigError(f"{src}: {where}state: {exc}") from None
        if state == ObjectState.FILLED and model.fill is None:
            raise ConfigError(f"{src}: {where}state: {name} cannot be filled")
        oj = obj.get("jitter") or {}
        specs.append(SceneObjectSpec(
            oid, model.key, _number(src, where + "x", need(obj, "x", where), -2, 2),
            _number(src, where + "y", need(obj, "y", where), -2, 2),
            _number(src, where + "yaw", obj.get("yaw", 0.0), -10, 10), state,
            _number(src, where + "jitter.position_std_m", oj.get("position_std_m", pos_std),
                    0, 0.1),
            _number(src, where + "jitter.yaw_std_rad", oj.get("yaw_std_rad", yaw_std), 0,
                    math.pi)))
    targets = need(data, "targets", "")
    if not isinstance(targets, list) or not targets:
        raise ConfigError(f"{src}: targets: expected a non-empty list of object ids")
    targets = [str(t) for t in targets]
    unknown = [t for t in targets if t not in seen]
    if unknown:
        raise ConfigError(f"{src}: targets: {unknown} are not objects of the scene")
    return TaskSpec(task_id, category, str(need(data, "instruction", "")), targets, specs,
                    str(data.get("description", "")), src, cat)


def _number(src: str, where: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(float(value)) or not lo <= float(value) <= hi:
        raise ConfigError(f"{src}: {where}: expected a number in [{lo}, {hi}], got {value!r}")
    return float(value)
