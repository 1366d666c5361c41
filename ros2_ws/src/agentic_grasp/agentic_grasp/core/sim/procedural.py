"""Procedural scenes: seeded draws from the object catalogue, in families, checked by geometry.

A procedural scene is named ``procedural:S:K`` (:func:`procedural_id`): scene ``K`` of scene
seed ``S``. It is rebuilt from those two numbers alone (:func:`generate`), so a scene id can
be handed to anything that loads a task (``Simulator.load_task``, the sweep, the sim node's
``load_scene``, ``agentic-grasp grasp --procedural S:K``) and always means the same layout.

Families (``FAMILIES``; scene ``K`` is family ``FAMILIES[K % 8]``, so every family gets an
equal share of any run of scenes):

- ``sg``: one object of the catalogue, anywhere in the workspace, any yaw;
- ``it_near``: a target near a fragile neighbour;
- ``it_between``: a target between two objects;
- ``it_hidden``: a target behind an occluder (opaque or fragile, narrow or wide), on the far
  side from the fixed camera;
- ``it_handle``: a handled object whose handle is turned towards, away from or across a
  neighbour;
- ``it_lying``: a long object lying beside a flat or fragile one;
- ``lh_clear``: three to five objects, "clear the table" (or "everything but the Y");
- ``lh_sort``: three objects sorted by fragility or by size.

Instructions come from a small grammar with varied phrasing (``_PHRASES``).

Feasibility is decided by geometry before any trial, from the catalogue's physical model
(:mod:`.feasibility`): the layout is physical, with a gap between every two objects
(:func:`.scenes.layout_problem`), and each target is labelled feasible or not.

Nothing here is tuned to a benchmark number: every range is a geometric or physical bound,
stated where it is defined.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.camera import fixed_camera_spec
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.instructions import SYNONYMS
from agentic_grasp.core.sim.feasibility import (Feasibility, extent_towards, footprint_radius,
                                                reachable, stable, target_feasibility)
from agentic_grasp.core.sim.objects import Catalogue, ObjectModel, load_catalogue
from agentic_grasp.core.sim.procedural_ids import (FAMILIES, FAMILY_CATEGORY, PREFIX,
                                                   parse_procedural_id, procedural_id)
from agentic_grasp.core.sim.scenes import GENERATED, SceneObjectSpec, TaskSpec, layout_problem
from agentic_grasp.core.types import AffordanceType, ObjectState

#: Where objects are drawn (m, world = panda_link0). x: from 0.36 m (closer, the hand's
#: 0.2 m body sweeps the base's links) to 0.64 m; y: +-0.22 m. Both are well inside the
#: Panda's 0.855 m reach for a top grasp (checked by :func:`reachable`) and inside the
#: table (0.2..0.8 x -0.4..0.4) with the largest object's half footprint to spare.
REGION_X = (0.36, 0.64)
REGION_Y = (-0.22, 0.22)
#: Surface-to-surface gaps between a target and its neighbours (m). Below 3 cm a 12 mm
#: finger plus its approach error (8 mm p90) does not fit between two bodies at all; above
#: 8 cm the hand's 20 cm body clears a neighbour in every wrist turn (an easy scene, which
#: ``sg`` already covers).
NEAR_GAP_M = (0.03, 0.08)
#: Gap between an occluder and what it hides: the hidden target stands close behind it.
HIDDEN_GAP_M = (0.02, 0.05)
#: Gap kept between objects of a clearing or sorting scene.
CLUTTER_GAP_M = 0.04
#: Draws of a layout before a scene falls back to a simpler placement.
TRIES = 200
#: Sorting by size: neighbouring objects differ in bounding-box volume by at least this
#: factor, so a perceived extent error (8 mm p90 on a 5-25 cm object, under 40 % in
#: volume) cannot swap them.
SIZE_RATIO = 1.6
#: Sorting by fragility: neighbouring fragilities differ by at least this much (a fragility
#: is a property the VLM names by material and shape; closer values are a coin toss).
FRAGILITY_STEP = 0.15

#: Families' object pools, by catalogue key. Chosen by geometry and material only:
#: fragile = fragility >= 0.5 (the scene graph's fragile threshold); occluders are the
#: objects at least 12 cm tall (they hide a 4-8 cm object behind them from the camera,
#: 0.75 m high at 0.65 m behind the table's edge); handled = a catalogue part named handle;
#: lying long = a body at least 15 cm long lying along x; flat = under 2 cm tall.
_HIDDEN_TARGETS = ("toy_block", "tennis_ball", "wood_cube", "steel_cube", "egg", "apple",
                   "smartphone")


@dataclass
class ProceduralScene:
    """One drawn scene: the task, its family, and each target's feasibility."""

    scene_seed: int
    index: int
    family: str
    task: TaskSpec
    feasibility: Dict[str, Feasibility] = field(default_factory=dict)
    details: Dict[str, object] = field(default_factory=dict)

    @property
    def task_id(self) -> str:
        return self.task.task_id

    @property
    def feasible_targets(self) -> List[str]:
        return [t for t in self.task.targets if self.feasibility[t].feasible]

    @property
    def infeasible_targets(self) -> List[str]:
        return [t for t in self.task.targets if not self.feasibility[t].feasible]


# ------------------------------------------------------------------ geometry helpers
def _camera_xy() -> np.ndarray:
    return np.asarray(fixed_camera_spec()["eye"], dtype=float)[:2]


# ------------------------------------------------------------------ grammar
_PHRASES = {
    "pick": ("pick up the {t}", "grab the {t}", "get the {t}", "take the {t}",
             "please pick up the {t}"),
    "near": ("pick up the {t} next to the {n}", "grab the {t} near the {n}",
             "get the {t} beside the {n}", "take the {t} by the {n}"),
    "between": ("pick up the {t} between the {a} and the {b}",
                "grab the {t} between the {a} and the {b}"),
    "hidden": ("grab the {t} behind the {n}", "pick up the {t} behind the {n}",
               "get the {t} hidden behind the {n}"),
    "clear": ("clear the table", "put away all the objects", "clear everything",
              "tidy the table"),
    "but": ("put away everything but the {n}", "clear the table except the {n}",
            "remove all objects except the {n}"),
    "sort_fragility": ("sort the objects by fragility, most fragile first",
                       "sort the objects by fragility, least fragile first"),
    "sort_size": ("sort the objects by size, largest first",
                  "sort the objects by size, smallest first"),
}


def _choose(rng: np.random.Generator, items: Sequence):
    return items[int(rng.integers(len(items)))]


# ------------------------------------------------------------------ the draw
class _Draw:
    """One scene's random choices over the catalogue."""

    def __init__(self, catalogue: Catalogue, rng: np.random.Generator) -> None:
        self.cat, self.rng = catalogue, rng
        self.models = {k: catalogue.get(k) for k in catalogue.keys()}
        self.objects: List[SceneObjectSpec] = []

    def pool(self, predicate) -> List[str]:
        return [k for k, m in self.models.items() if predicate(m) and stable(m)]

    def category_taken(self, key: str) -> bool:
        """Two objects of one category (or of synonym categories) make "the cup" ambiguous."""
        return _taken_among(self, key, [o.catalogue for o in self.objects])

    def pick(self, keys: Sequence[str]) -> str:
        free = [k for k in keys if not self.category_taken(k)]
        if not free:
            raise _Retry
        return _choose(self.rng, free)

    def state_for(self, key: str, p_filled: float = 0.25) -> ObjectState:
        model = self.models[key]
        if model.fill is not None and self.rng.random() < p_filled:
            return ObjectState.FILLED
        return ObjectState.EMPTY

    def add(self, key: str, x: float, y: float, yaw: float,
            state: ObjectState = ObjectState.EMPTY) -> str:
        model = self.models[key]
        if not (REGION_X[0] - 0.04 <= x <= REGION_X[1] + 0.04
                and REGION_Y[0] - 0.06 <= y <= REGION_Y[1] + 0.06) \
                or not reachable(model, x, y):
            raise _Retry
        oid = f"{model.category.lower().replace(' ', '_')}_{len(self.objects) + 1}"
        self.objects.append(SceneObjectSpec(oid, key, float(x), float(y),
                                            float(_wrap(yaw)), state))
        return oid

    def anywhere(self) -> Tuple[float, float]:
        return (float(self.rng.uniform(*REGION_X)), float(self.rng.uniform(*REGION_Y)))

    def yaw(self) -> float:
        return float(self.rng.uniform(-math.pi, math.pi))

    def beside(self, anchor: SceneObjectSpec, key: str, yaw: float, direction: np.ndarray,
               gap: float) -> Tuple[float, float]:
        """Where ``key`` stands ``gap`` beyond ``anchor`` along ``direction`` (surfaces)."""
        a = self.models[anchor.catalogue]
        d = extent_towards(a, anchor.yaw, direction) \
            + extent_towards(self.models[key], yaw, -direction) + gap
        return anchor.x + d * float(direction[0]), anchor.y + d * float(direction[1])


class _Retry(Exception):
    """This draw does not fit: draw again."""


def _wrap(a: float) -> float:
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def _unit(angle: float) -> np.ndarray:
    return np.array([math.cos(angle), math.sin(angle)])


def _fragile(m: ObjectModel) -> bool:
    return m.fragility >= 0.5


def _handled(m: ObjectModel) -> bool:
    """A container with a side handle (Graspable_Handle and a part named handle)."""
    return m.affordance == AffordanceType.GRASPABLE_HANDLE \
        and any(p.name == "handle" for p in m.parts)


def _lying_long(m: ObjectModel) -> bool:
    return m.size[0] >= 0.15 and m.size[2] < 0.08


def _flat(m: ObjectModel) -> bool:
    return m.size[2] < 0.02


def _occluder(m: ObjectModel) -> bool:
    return m.size[2] >= 0.12


def _name(draw: _Draw, spec: SceneObjectSpec) -> str:
    return draw.models[spec.catalogue].name


def _family_sg(d: _Draw) -> Tuple[str, List[str], Dict[str, object]]:
    key = d.pick(d.pool(lambda m: True))
    x, y = d.anywhere()
    oid = d.add(key, x, y, d.yaw(), d.state_for(key))
    text = _choose(d.rng, _PHRASES["pick"]).format(t=_name(d, d.objects[0]))
    return text, [oid], {}


def _graspable_target(d: _Draw) -> str:
    """A target for the interactive families: any object of the catalogue (feasibility is
    labelled from geometry, not assumed)."""
    return d.pick(d.pool(lambda m: True))


def _family_near(d: _Draw):
    key = _graspable_target(d)
    x, y = d.anywhere()
    target = d.add(key, x, y, d.yaw(), d.state_for(key))
    nkey = d.pick(d.pool(_fragile))
    nyaw = d.yaw()
    gap = float(d.rng.uniform(*NEAR_GAP_M))
    nx, ny = d.beside(d.objects[0], nkey, nyaw, _unit(d.rng.uniform(-math.pi, math.pi)), gap)
    d.add(nkey, nx, ny, nyaw, d.state_for(nkey))
    text = _choose(d.rng, _PHRASES["near"]).format(t=_name(d, d.objects[0]),
                                                   n=_name(d, d.objects[1]))
    return text, [target], {"gap_m": round(gap, 4)}


def _family_between(d: _Draw):
    key = _graspable_target(d)
    x, y = d.anywhere()
    target = d.add(key, x, y, d.yaw(), d.state_for(key))
    axis = float(d.rng.uniform(-math.pi, math.pi))
    gaps = []
    for sign in (1.0, -1.0):
        nkey = d.pick(d.pool(lambda m: not _flat(m)))
        nyaw = d.yaw()
        gap = float(d.rng.uniform(*NEAR_GAP_M))
        gaps.append(round(gap, 4))
        nx, ny = d.beside(d.objects[0], nkey, nyaw, sign * _unit(axis), gap)
        d.add(nkey, nx, ny, nyaw, d.state_for(nkey))
    text = _choose(d.rng, _PHRASES["between"]).format(
        t=_name(d, d.objects[0]), a=_name(d, d.objects[1]), b=_name(d, d.objects[2]))
    return text, [target], {"gaps_m": gaps}


def _family_hidden(d: _Draw):
    okey = d.pick(d.pool(_occluder))
    om = d.models[okey]
    ox, oy = d.anywhere()
    ox = max(ox, REGION_X[0] + 0.12)        # room behind it for the target
    oyaw = d.yaw()
    d.add(okey, ox, oy, oyaw, d.state_for(okey))
    key = d.pick([k for k in _HIDDEN_TARGETS if k in d.models])
    # "behind" = on the far side from the camera, on the line from the camera through
    # the occluder, so the occluder stands between the camera and the target
    away = np.array([ox, oy]) - _camera_xy()
    away /= float(np.linalg.norm(away))
    yaw = d.yaw()
    gap = float(d.rng.uniform(*HIDDEN_GAP_M))
    tx, ty = d.beside(d.objects[0], key, yaw, away, gap)
    target = d.add(key, tx, ty, yaw, ObjectState.EMPTY)
    text = _choose(d.rng, _PHRASES["hidden"]).format(t=_name(d, d.objects[1]),
                                                     n=_name(d, d.objects[0]))
    width = "wide" if min(om.size[:2]) >= 0.1 else "narrow"
    kind = "fragile" if _fragile(om) else "opaque"
    return text, [target], {"occluder": f"{kind} {width}", "gap_m": round(gap, 4)}


def _family_handle(d: _Draw):
    key = d.pick(d.pool(_handled))
    x, y = d.anywhere()
    nkey = d.pick(d.pool(lambda m: not _flat(m) and not _handled(m)))
    heading = float(d.rng.uniform(-math.pi, math.pi))      # target -> neighbour
    turn = _choose(d.rng, ("towards", "away", "across"))
    yaw = heading + {"towards": 0.0, "away": math.pi,
                     "across": _choose(d.rng, (math.pi / 2, -math.pi / 2))}[turn]
    # the handle sticks out along the object's +x (catalogue parts): the footprint the
    # neighbour must clear is the whole bounding box including it
    target = d.add(key, x, y, yaw, d.state_for(key))
    nyaw = d.yaw()
    gap = float(d.rng.uniform(*NEAR_GAP_M))
    nx, ny = d.beside(d.objects[0], nkey, nyaw, _unit(heading), gap)
    d.add(nkey, nx, ny, nyaw, d.state_for(nkey))
    text = _choose(d.rng, _PHRASES["near"]).format(t=_name(d, d.objects[0]),
                                                   n=_name(d, d.objects[1]))
    return text, [target], {"handle": turn, "gap_m": round(gap, 4)}


def _family_lying(d: _Draw):
    key = d.pick(d.pool(_lying_long))
    x, y = d.anywhere()
    yaw = d.yaw()
    target = d.add(key, x, y, yaw, ObjectState.EMPTY)
    nkey = d.pick(d.pool(lambda m: _flat(m) or _fragile(m)))
    nyaw = d.yaw()
    side = _choose(d.rng, (1.0, -1.0))
    # beside the long side: across the object's length
    direction = side * _unit(yaw + math.pi / 2)
    gap = float(d.rng.uniform(*NEAR_GAP_M))
    nx, ny = d.beside(d.objects[0], nkey, nyaw, direction, gap)
    d.add(nkey, nx, ny, nyaw, d.state_for(nkey))
    text = _choose(d.rng, _PHRASES["near"]).format(t=_name(d, d.objects[0]),
                                                   n=_name(d, d.objects[1]))
    return text, [target], {"gap_m": round(gap, 4)}


def _scatter(d: _Draw, keys: Sequence[str]) -> None:
    """Place ``keys`` anywhere in the region, CLUTTER_GAP_M apart (rejection sampling)."""
    for key in keys:
        m = d.models[key]
        for _ in range(60):
            x, y = d.anywhere()
            ok = all(math.hypot(x - o.x, y - o.y)
                     >= footprint_radius(m) + footprint_radius(d.models[o.catalogue])
                     + CLUTTER_GAP_M
                     for o in d.objects)
            if ok:
                d.add(key, x, y, d.yaw(), d.state_for(key, 0.0))
                break
        else:
            raise _Retry


def _distinct(d: _Draw, n: int, pool: Sequence[str]) -> List[str]:
    keys: List[str] = []
    for _ in range(n):
        free = [k for k in pool if k not in keys and not _taken_among(d, k, keys)]
        if not free:
            raise _Retry
        keys.append(_choose(d.rng, free))
    return keys


def _taken_among(d: _Draw, key: str, keys: Sequence[str]) -> bool:
    """Whether ``key``'s category is that of one of ``keys``, or a synonym of it."""
    cat = d.models[key].category.lower()
    for k in keys:
        other = d.models[k].category.lower()
        if other == cat or other in SYNONYMS.get(cat, ()) or cat in SYNONYMS.get(other, ()):
            return True
    return False


def _family_clear(d: _Draw):
    n = int(d.rng.integers(3, 6))
    keys = _distinct(d, n, d.pool(lambda m: True))
    _scatter(d, keys)
    ids = [o.id for o in d.objects]
    if d.rng.random() < 0.3:
        keep = int(d.rng.integers(len(ids)))
        text = _choose(d.rng, _PHRASES["but"]).format(n=_name(d, d.objects[keep]))
        return text, [oid for k, oid in enumerate(ids) if k != keep], {"kept": ids[keep]}
    return _choose(d.rng, _PHRASES["clear"]), ids, {}


def _family_sort(d: _Draw):
    by = _choose(d.rng, ("fragility", "size"))
    text = _choose(d.rng, _PHRASES["sort_" + by])
    descending = "most" in text or "largest" in text

    def value(key: str) -> float:
        m = d.models[key]
        return float(m.fragility) if by == "fragility" else float(np.prod(m.size))

    for _ in range(40):
        keys = _distinct(d, 3, d.pool(lambda m: True))
        vals = sorted(value(k) for k in keys)
        if by == "fragility":
            ok = all(b - a >= FRAGILITY_STEP for a, b in zip(vals, vals[1:]))
        else:
            ok = all(b >= SIZE_RATIO * a for a, b in zip(vals, vals[1:]))
        if ok:
            break
    else:
        raise _Retry
    _scatter(d, keys)
    order = sorted(d.objects, key=lambda o: value(o.catalogue), reverse=descending)
    return text, [o.id for o in order], {"by": by, "descending": descending}


_FAMILY_DRAW = {"sg": _family_sg, "it_near": _family_near, "it_between": _family_between,
                "it_hidden": _family_hidden, "it_handle": _family_handle,
                "it_lying": _family_lying, "lh_clear": _family_clear, "lh_sort": _family_sort}


def scene_rng(scene_seed: int, index: int) -> np.random.Generator:
    """The generator of scene ``index`` of ``scene_seed`` (independent of every other)."""
    entropy = [int(scene_seed), int(index), zlib.crc32(b"procedural")]
    return np.random.default_rng(np.random.SeedSequence(entropy))


def generate(scene_seed: int, index: int, catalogue: Optional[Catalogue] = None
             ) -> ProceduralScene:
    """Scene ``index`` of ``scene_seed`` (module docstring); the same two numbers always give
    the same scene."""
    if int(scene_seed) < 0 or int(index) < 0:
        raise ConfigError("procedural scene seed and index must be >= 0")
    return _generate(int(scene_seed), int(index), catalogue)


def _generate(scene_seed: int, index: int, catalogue: Optional[Catalogue]) -> ProceduralScene:
    cat = catalogue if catalogue is not None else load_catalogue()
    family = FAMILIES[index % len(FAMILIES)]
    rng = scene_rng(scene_seed, index)
    for _ in range(TRIES):
        d = _Draw(cat, rng)
        try:
            text, targets, details = _FAMILY_DRAW[family](d)
        except _Retry:
            continue
        task = TaskSpec(procedural_id(scene_seed, index),
                        FAMILY_CATEGORY.get(family, "IT"), text, list(targets),
                        list(d.objects), f"procedural {family}", procedural_id(scene_seed, index),
                        cat)
        if layout_problem(task.nominal(), cat) is not None:
            continue
        feas = {o.id: target_feasibility(d.models[o.catalogue], o.state)
                for o in d.objects if o.id in targets}
        return ProceduralScene(scene_seed, index, family, task, feas, details)
    raise ConfigError(f"procedural scene {scene_seed}:{index} ({family}): no layout fits "
                      f"after {TRIES} draws")


#: Scenes kept: a 1,000-scene run builds each in the parent's check, in its worker and in the
#: summary (a few kB each; forked workers inherit the parent's).
@lru_cache(maxsize=4096)
def _cached(scene_seed: int, index: int, catalogue_id: int, catalogue: Catalogue
            ) -> ProceduralScene:
    return _generate(scene_seed, index, catalogue)


def load_procedural(task: str, catalogue: Optional[Catalogue] = None) -> ProceduralScene:
    """The scene named ``procedural:S:K`` (cached: a sweep loads it once per configuration)."""
    seed, index = parse_procedural_id(task)
    cat = catalogue if catalogue is not None else load_catalogue()
    return _cached(seed, index, id(cat), cat)


GENERATED[PREFIX] = lambda task, catalogue: load_procedural(task, catalogue).task

__all__ = ["ProceduralScene", "generate", "load_procedural", "scene_rng"]
