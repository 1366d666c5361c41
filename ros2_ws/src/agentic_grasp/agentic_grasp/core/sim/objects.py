"""Object catalogue of the simulator (paper Table I): physical properties, not outcomes.

``config/objects.yaml`` lists materials (friction against the rubber pads, strength) and
objects (size, mass, friction, strength, centre of mass, content, and the solid ``parts``
the fingers meet). This module validates the file, naming file, object and field in every
:class:`ConfigError`, and turns entries into :class:`ObjectInstance` objects. The simulator
pairs each instance with its :class:`ObjectModel` (:meth:`Catalogue.model_for`); an instance
that matches no entry (a test's hand-made object) gets a model derived from its own fields
with the same documented strength formula, so every object obeys the same physics.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from agentic_grasp.core import paths
from agentic_grasp.core.config import load_yaml
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.geometry import yaw_matrix  # noqa: F401 (re-export)
from agentic_grasp.core.types import (AffordanceDescriptor, AffordanceType, ObjectInstance,
                                      ObjectState, Shape)

logger = logging.getLogger(__name__)

_AXES = {"x": 0, "y": 1, "z": 2}


@dataclass(frozen=True)
class MaterialSpec:
    """Friction against the pads and the strength constants of the crush/deform formula."""

    friction: float
    crush_base_n: float
    deform_base_n: Optional[float]
    #: the friction's spread between items of the material (default: the friction alone)
    friction_range: Optional[Tuple[float, float]] = None

    @property
    def friction_bounds(self) -> Tuple[float, float]:
        return self.friction_range or (self.friction, self.friction)


@dataclass(frozen=True)
class PartSpec:
    """One solid primitive of an object, in the object frame (hollow: open towards +axis)."""

    name: str
    shape: Shape
    centre: np.ndarray
    size: np.ndarray
    axis: int = 2                     # cylinder axis in the object frame
    wall_m: float = 0.0               # 0 = solid
    floor_m: float = 0.0
    friction: Optional[float] = None  # overrides the object's friction on this part
    crush_limit_n: Optional[float] = None

    def scaled(self, factor: np.ndarray) -> "PartSpec":
        """The part of an object whose bounding box is ``factor`` times the catalogue's."""
        wall_scale = float(np.min(factor))
        return replace(self, centre=self.centre * factor, size=self.size * factor,
                       wall_m=self.wall_m * wall_scale, floor_m=self.floor_m * wall_scale)


@dataclass(frozen=True)
class FillSpec:
    """Content of a container in the ``filled`` state."""

    mass_kg: float
    freeboard_m: float
    spillable: bool


@dataclass(frozen=True)
class ObjectModel:
    """Everything physical the simulator knows about one kind of object."""

    key: str
    name: str
    category: str
    shape: Shape
    size: np.ndarray
    material: str
    fragility: float
    affordance: AffordanceType
    region: str
    mass_kg: float
    friction: float
    crush_limit_n: float
    deform_limit_n: Optional[float]
    com: np.ndarray
    color: Tuple[int, int, int]
    parts: Tuple[PartSpec, ...]
    fill: Optional[FillSpec] = None
    regions: Dict[str, Tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def instantiate(self, object_id: str, x: float, y: float, yaw: float = 0.0,
                    state: Union[str, ObjectState] = ObjectState.EMPTY) -> ObjectInstance:
        """An instance standing on the table (z = half its height) at (x, y, yaw)."""
        state = state if isinstance(state, ObjectState) else ObjectState.parse(str(state))
        mass = self.mass_kg
        if state == ObjectState.FILLED:
            if self.fill is None:
                raise ValidationError(f"{self.key} cannot be filled (no 'fill' in the catalogue)")
            mass += self.fill.mass_kg
        descriptor = AffordanceDescriptor(self.affordance, self.material, self.fragility,
                                          self.region)
        return ObjectInstance(
            id=object_id, category=self.category, shape=self.shape,
            position=np.array([x, y, self.size[2] / 2.0]), size=self.size.copy(), yaw=yaw,
            material=self.material, fragility=self.fragility, mass=mass,
            friction=self.friction, state=state, affordance=descriptor, name=self.name,
            color=self.color)

    def varied(self, scale: np.ndarray, mass_kg: float, friction: float) -> "ObjectModel":
        """This kind of object as one item of it: its bounding box ``scale`` times the
        catalogue's (parts, centre of mass and regions with it), its own empty mass and
        surface friction. Strength stays the catalogue's: it is the material's and the
        wall's, which a few per cent of size do not change."""
        factor = np.asarray(scale, dtype=float)
        regions = {k: (c * factor, z * factor) for k, (c, z) in self.regions.items()}
        return replace(self, size=self.size * factor,
                       parts=tuple(p.scaled(factor) for p in self.parts),
                       com=self.com * factor, mass_kg=float(mass_kg), friction=float(friction),
                       regions=regions)

    def region_world(self, instance: ObjectInstance, region: str) -> Tuple[np.ndarray, np.ndarray]:
        """World centre and object-frame size of a graspable region (for planners)."""
        if region not in self.regions:
            raise ValidationError(f"{self.key} has no region {region!r}; "
                                  f"known: {sorted(self.regions)}")
        centre, size = self.regions[region]
        return instance.position + yaw_matrix(instance.yaw) @ centre, size.copy()


class Catalogue:
    """The validated object catalogue; look objects up by key ("ceramic_cup") or name."""

    def __init__(self, materials: Dict[str, MaterialSpec], models: Dict[str, ObjectModel],
                 source: str = "<memory>") -> None:
        self.materials = materials
        self.models = models
        self.source = source
        self._by_name = {_norm(m.name): m for m in models.values()}
        self._by_name.update({_norm(k): m for k, m in models.items()})

    def keys(self) -> List[str]:
        return sorted(self.models)

    def get(self, name: str) -> ObjectModel:
        model = self._by_name.get(_norm(name))
        if model is None:
            raise ConfigError(f"{self.source}: no object {name!r} in the catalogue "
                              f"(known: {', '.join(self.keys())})")
        return model

    def instance(self, key: str, object_id: str, x: float, y: float, yaw: float = 0.0,
                 state: Union[str, ObjectState] = ObjectState.EMPTY) -> ObjectInstance:
        return self.get(key).instantiate(object_id, x, y, yaw, state)

    def extended(self, models: Mapping[str, ObjectModel]) -> "Catalogue":
        """This catalogue and ``models`` (objects it holds no entry for: a procedural scene's
        novel objects), so their parts, strength and content are simulated as drawn."""
        if not models:
            return self
        return Catalogue(self.materials, {**self.models, **dict(models)},
                         f"{self.source} + {len(models)} drawn object(s)")

    def model_for(self, instance: ObjectInstance) -> ObjectModel:
        """The physical model of an instance: its catalogue entry (parts scaled to the
        instance's size) or, for unknown objects, one derived from the instance's fields."""
        entry = self._by_name.get(_norm(instance.name)) if instance.name else None
        if entry is None or entry.shape != instance.shape:
            return derive_model(instance, self.materials)
        factor = instance.size / entry.size
        if np.allclose(factor, 1.0, atol=1e-9):
            return entry
        return replace(entry, size=instance.size.copy(),
                       parts=tuple(p.scaled(factor) for p in entry.parts),
                       com=entry.com * factor)


def derive_model(instance: ObjectInstance, materials: Mapping[str, MaterialSpec]) -> ObjectModel:
    """A model for an object that is not in the catalogue: one solid part, formula strength."""
    mat = materials.get(instance.material) or materials.get("plastic") or MaterialSpec(
        0.5, 500.0, None)
    crush = mat.crush_base_n * (1.0 - instance.fragility)
    deform = None if mat.deform_base_n is None else mat.deform_base_n * (1.0 - instance.fragility)
    axis = 2
    part = PartSpec("body", instance.shape, np.zeros(3), instance.size.copy(), axis)
    aff = instance.affordance
    fill = FillSpec(0.0, 0.01, True) if instance.state == ObjectState.FILLED else None
    return ObjectModel(
        key=instance.id, name=instance.name or instance.id, category=instance.category,
        shape=instance.shape, size=instance.size.copy(), material=instance.material,
        fragility=instance.fragility,
        affordance=aff.type if aff else AffordanceType.GRASPABLE_BODY,
        region=aff.region if aff else "body", mass_kg=instance.mass, friction=instance.friction,
        crush_limit_n=crush, deform_limit_n=deform, com=np.zeros(3), color=instance.color,
        parts=(part,), fill=fill)


def _norm(name: str) -> str:
    return "_".join(str(name).lower().replace("-", " ").replace("_", " ").split())


# ------------------------------------------------------------------------------ loading
class _Field:
    """Typed accessors that raise ConfigError naming file, object and field."""

    def __init__(self, source: str, where: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: {where}: expected a mapping, got {type(data).__name__}")
        self.source, self.where, self.data = source, where, data

    def fail(self, key: str, msg: str) -> ConfigError:
        return ConfigError(f"{self.source}: {self.where}.{key}: {msg}")

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def number(self, key: str, default: Optional[float] = None, lo: float = -math.inf,
               hi: float = math.inf, required: bool = True) -> Optional[float]:
        if not self.has(key):
            if default is not None or not required:
                return default
            raise self.fail(key, "missing")
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"expected a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value) or not lo <= value <= hi:
            raise self.fail(key, f"{value} outside [{lo}, {hi}]")
        return value

    def vector(self, key: str, length: int = 3, positive: bool = False,
               default: Optional[List[float]] = None) -> np.ndarray:
        if not self.has(key):
            if default is not None:
                return np.array(default, dtype=float)
            raise self.fail(key, "missing")
        value = self.data[key]
        try:
            arr = np.array(value, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise self.fail(key, f"expected {length} numbers, got {value!r}") from None
        if arr.shape != (length,) or not np.all(np.isfinite(arr)):
            raise self.fail(key, f"expected {length} finite numbers, got {value!r}")
        if positive and np.any(arr <= 0):
            raise self.fail(key, f"must be positive, got {value!r}")
        return arr

    def text(self, key: str, default: Optional[str] = None) -> str:
        if not self.has(key):
            if default is not None:
                return default
            raise self.fail(key, "missing")
        value = self.data[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"expected a non-empty string, got {value!r}")
        return value.strip()


def _parse_part(source: str, where: str, data: Any) -> PartSpec:
    f = _Field(source, where, data)
    try:
        shape = Shape(f.text("shape"))
    except ValueError:
        raise f.fail("shape", f"expected box, cylinder or sphere, got {data.get('shape')!r}") \
            from None
    axis_name = f.text("axis", "z")
    if axis_name not in _AXES:
        raise f.fail("axis", f"expected x, y or z, got {axis_name!r}")
    size = f.vector("size", positive=True)
    wall = f.number("wall_m", 0.0, 0.0, 0.1)
    if wall > 0 and shape != Shape.CYLINDER:
        raise f.fail("wall_m", "only cylinders can be hollow")
    return PartSpec(name=f.text("name"), shape=shape, centre=f.vector("centre"), size=size,
                    axis=_AXES[axis_name], wall_m=wall, floor_m=f.number("floor_m", 0.0, 0.0, 0.1),
                    friction=f.number("friction", None, 0.01, 3.0, required=False),
                    crush_limit_n=f.number("crush_limit_n", None, 0.1, 1e5, required=False))


def _parse_object(source: str, key: str, data: Any,
                  materials: Dict[str, MaterialSpec]) -> ObjectModel:
    where = f"objects.{key}"
    f = _Field(source, where, data)
    try:
        shape = Shape(f.text("shape"))
    except ValueError:
        raise f.fail("shape", f"expected box, cylinder or sphere, got {data.get('shape')!r}") \
            from None
    size = f.vector("size", positive=True)
    material = f.text("material")
    if material not in materials:
        raise f.fail("material", f"unknown material {material!r} (known: {sorted(materials)})")
    mat = materials[material]
    fragility = f.number("fragility", lo=0.0, hi=1.0)
    aff = _Field(source, f"{where}.affordance", data.get("affordance"))
    try:
        aff_type = AffordanceType.parse(aff.text("type"))
    except ValidationError as exc:
        raise aff.fail("type", str(exc)) from None
    deform_default = None if mat.deform_base_n is None else mat.deform_base_n * (1 - fragility)
    color = f.vector("color", positive=False)
    if np.any(color < 0) or np.any(color > 255):
        raise f.fail("color", "RGB components must be in 0..255")
    fill = None
    if f.has("fill"):
        ff = _Field(source, f"{where}.fill", data["fill"])
        spill = ff.data.get("spillable", True)
        if not isinstance(spill, bool):
            raise ff.fail("spillable", f"expected true or false, got {spill!r}")
        fill = FillSpec(ff.number("mass_kg", lo=0.0, hi=10.0),
                        ff.number("freeboard_m", lo=0.0, hi=0.5), spill)
    raw_parts = data.get("parts")
    if raw_parts is None:
        parts = (PartSpec("body", shape, np.zeros(3), size.copy()),)
    elif not isinstance(raw_parts, list) or not raw_parts:
        raise f.fail("parts", "expected a non-empty list")
    else:
        parts = tuple(_parse_part(source, f"{where}.parts[{i}]", p)
                      for i, p in enumerate(raw_parts))
    regions = {}
    for name, region in (data.get("regions") or {}).items():
        rf = _Field(source, f"{where}.regions.{name}", region)
        regions[str(name)] = (rf.vector("centre"), rf.vector("size", positive=True))
    try:
        return ObjectModel(
            key=key, name=f.text("name"), category=f.text("category"), shape=shape, size=size,
            material=material, fragility=fragility, affordance=aff_type,
            region=aff.text("region"), mass_kg=f.number("mass_kg", lo=1e-4, hi=50.0),
            friction=f.number("friction", mat.friction, 0.01, 3.0),
            crush_limit_n=f.number("crush_limit_n", mat.crush_base_n * (1 - fragility), 0.1, 1e5),
            deform_limit_n=f.number("deform_limit_n", deform_default, 0.1, 1e5, required=False),
            com=f.vector("com", default=[0.0, 0.0, 0.0]),
            color=tuple(int(round(c)) for c in color), parts=parts, fill=fill, regions=regions)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {where}: {exc}") from None


def parse_catalogue(data: Any, source: str = "<memory>") -> Catalogue:
    """Validate a catalogue mapping ({materials: ..., objects: ...})."""
    top = _Field(source, "catalogue", data)
    mats_raw = top.data.get("materials")
    if not isinstance(mats_raw, dict) or not mats_raw:
        raise top.fail("materials", "expected a non-empty mapping")
    materials = {}
    for name, raw in mats_raw.items():
        mf = _Field(source, f"materials.{name}", raw)
        deform = mf.number("deform_base_n", None, 0.1, 1e5, required=False)
        friction = mf.number("friction", lo=0.01, hi=3.0)
        spread = None
        if mf.has("friction_range"):
            lo, hi = (float(v) for v in mf.vector("friction_range", length=2, positive=True))
            if not lo <= friction <= hi:
                raise mf.fail("friction_range", f"[{lo}, {hi}] must contain the friction "
                                                f"{friction}")
            spread = (lo, hi)
        materials[str(name)] = MaterialSpec(friction,
                                            mf.number("crush_base_n", lo=0.1, hi=1e5), deform,
                                            spread)
    objs_raw = top.data.get("objects")
    if not isinstance(objs_raw, dict) or not objs_raw:
        raise top.fail("objects", "expected a non-empty mapping")
    models = {str(k): _parse_object(source, str(k), v, materials) for k, v in objs_raw.items()}
    names = [_norm(m.name) for m in models.values()]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{source}: objects: duplicate names {dupes}")
    return Catalogue(materials, models, source)


@lru_cache(maxsize=8)
def _load_cached(path: str) -> Catalogue:
    return parse_catalogue(load_yaml(path), path)


def load_catalogue(path: Union[str, Path, None] = None) -> Catalogue:
    """The catalogue at ``path`` (default ``config/objects.yaml``), parsed once per path."""
    resolved = Path(path) if path else paths.config_file("objects")
    return _load_cached(str(resolved.resolve()))
