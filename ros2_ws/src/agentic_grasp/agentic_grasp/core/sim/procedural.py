"""Procedural scenes: seeded draws from the object catalogue, in families, checked by geometry.

A procedural scene is named ``procedural:S:K`` (:func:`procedural_id`): scene ``K`` of scene
seed ``S``. It is rebuilt from those two numbers alone (:func:`generate`), so a scene id can
be handed to anything that loads a task (``Simulator.load_task``, the sweep, the sim node's
``load_scene``, ``agentic-grasp grasp --procedural S:K``) and always means the same layout.

Families (``FAMILIES``; scene ``K`` is family ``FAMILIES[K % 13]``, so every family gets an
equal share of any run of scenes):

- ``sg``: one object of the catalogue, anywhere in the workspace, any yaw;
- ``it_near``: a target near a fragile neighbour;
- ``it_between``: a target between two objects;
- ``it_hidden``: a target behind an occluder (opaque or fragile, narrow or wide), on the far
  side from the fixed camera: any object low and narrow enough to hide;
- ``it_handle``: a handled object whose handle is turned towards, away from or across a
  neighbour;
- ``it_lying``: a long object lying beside a flat or fragile one (or one on each side);
- ``lh_clear``: three to five objects, "clear the table" (or "everything but the Y");
- ``lh_sort``: three objects sorted by fragility or by size;
- ``it_clutter``: a target with three to six neighbours within 10 cm, fragile and sturdy;
- ``it_far``: a target at the edge of the reach, its easy side turned away, between one or
  two fragile neighbours;
- ``it_duplicate``: two or three items of one kind told apart by side, ordinal, a landmark
  or an attribute the camera sees ("the tall mug");
- ``it_novel``: an object no catalogue or knowledge base entry describes (a box, cylinder
  or sphere of random size and material, named "<colour> <noun>");
- ``lh_long``: clearing with a hidden object, sorting four to six, "everything but the Y"
  in clutter, or a list with a relation inside it.

Every item of a kind differs (:meth:`_Draw.item`): size, mass and friction within bounds.

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
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from agentic_grasp.core.camera import fixed_camera_spec
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.instructions import SYNONYMS
from agentic_grasp.core.sim.feasibility import (Feasibility, extent_towards, footprint_radius,
                                                reachable, stable, target_feasibility)
from agentic_grasp.core.sim.objects import Catalogue, ObjectModel, derive_model, load_catalogue
from agentic_grasp.core.sim.procedural_ids import (FAMILIES, FAMILY_CATEGORY, PREFIX,
                                                   parse_procedural_id, procedural_id)
from agentic_grasp.core.sim.scenes import GENERATED, SceneObjectSpec, TaskSpec, layout_problem
from agentic_grasp.core.types import (AffordanceDescriptor, AffordanceType, ObjectInstance,
                                      ObjectState, Shape)

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
#: Where far targets are drawn (m): out to the table's far side, within the Panda's reach
#: for a top grasp (checked by :func:`reachable`), and sideways to +-0.30 m.
FAR_X = (0.60, 0.74)
FAR_Y = 0.30
#: What ``add(far=True)`` accepts: the table less the largest half footprint.
TABLE_REACH_X = (0.30, 0.76)
TABLE_REACH_Y = (-0.34, 0.34)
#: One item of a kind differs from the catalogue's by up to this fraction in size (each
#: footprint axis together, the height apart) and this fraction in mass.
SIZE_SPREAD = 0.15
MASS_SPREAD = 0.30
#: Clutter: neighbours round a target, and how far their surfaces stand from it at most.
#: 3 to 6 neighbours within 10 cm surface to surface keeps their centres within 15 cm of
#: the target's edge for the catalogue's 4-15 cm objects.
CLUTTER_NEIGHBOURS = (3, 6)
CLUTTER_NEAR_M = 0.10
#: Gap between items of one kind in a row (surfaces): the hand's 12 mm finger and its
#: approach error fit from 3 cm, as for any two neighbours.
DUP_GAP_M = (0.03, 0.08)
#: "The mug nearest the bowl": the named item is at least this much nearer (or farther)
#: than the next, 3x the perceived centre's error (8 mm p90), so the camera can tell.
DUP_DISTANCE_MARGIN_M = 0.025
#: What an occluder hides: lower than it by this much, no wider than this.
HIDDEN_MARGIN_M = 0.04
HIDDEN_WIDTH_M = 0.10
#: Sorting by size: neighbouring objects differ in bounding-box volume by at least this
#: factor, so a perceived extent error (8 mm p90 on a 5-25 cm object, under 40 % in
#: volume) cannot swap them.
SIZE_RATIO = 1.6
#: Sorting by fragility: neighbouring fragilities differ by at least this much (a fragility
#: is a property the VLM names by material and shape; closer values are a coin toss).
FRAGILITY_STEP = 0.15
#: Sorting four to six objects by fragility: any two distinct Table I values (0.1 apart):
#: the knowledge base knows each category's fragility, which perception alone cannot tell.
FRAGILITY_STEP_MANY = 0.1

#: Families' object pools are chosen by geometry and material only: fragile = fragility >=
#: 0.5 (the scene graph's fragile threshold); occluders are the objects at least 12 cm tall
#: (they hide a 4-8 cm object behind them from the camera, 0.75 m high at 0.65 m behind the
#: table's edge); handled = a catalogue part named handle; lying long = a body at least 15 cm
#: long lying along x; flat = under 2 cm tall.


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
             "please pick up the {t}", "bring me the {t}", "hand me the {t}",
             "could you grab the {t}?", "can you get me the {t}, please?", "the {t}, please",
             "{t}"),
    "near": ("pick up the {t} next to the {n}", "grab the {t} near the {n}",
             "get the {t} beside the {n}", "take the {t} by the {n}",
             "bring me the {t} next to the {n}", "could you hand me the {t} beside the {n}?",
             "the {t} by the {n}, please", "{t} next to the {n}"),
    "between": ("pick up the {t} between the {a} and the {b}",
                "grab the {t} between the {a} and the {b}",
                "hand me the {t} from between the {a} and the {b}",
                "could you get the {t} between the {a} and the {b}?"),
    "hidden": ("grab the {t} behind the {n}", "pick up the {t} behind the {n}",
               "get the {t} hidden behind the {n}", "bring me the {t} behind the {n}",
               "could you grab the {t} behind the {n}, please?"),
    "clear": ("clear the table", "put away all the objects", "clear everything",
              "tidy the table", "could you clear the table, please?"),
    "but": ("put away everything but the {n}", "clear the table except the {n}",
            "remove all objects except the {n}", "clear everything except the {n}, please"),
    "sort_fragility": ("sort the objects by fragility, most fragile first",
                       "sort the objects by fragility, least fragile first"),
    "sort_size": ("sort the objects by size, largest first",
                  "sort the objects by size, smallest first"),
    # two or three items of one kind
    "side": ("pick up the {t} on the {s}", "bring me the {t} on the {s}",
             "could you grab the {t} on the {s}?", "the {t} on the {s}, please"),
    "side_most": ("pick up the {s}most {t}", "hand me the {s}most {t}",
                  "grab the {t} furthest to the {s}"),
    "ordinal": ("pick up the {o} {t} from the {s}", "hand me the {o} {t} from the {s}",
                "could you get the {o} {t} from the {s}?"),
    "attribute": ("pick up the {a} {t}", "bring me the {a} {t}", "could you grab the {a} {t}?",
                  "the {a} {t}, please"),
    "nearest": ("pick up the {t} nearest the {n}", "hand me the {t} closest to the {n}",
                "bring me the {t} nearest to the {n}"),
    "farther": ("pick up the {t} farther from the {n}", "grab the {t} farthest from the {n}",
                "could you get the {t} further from the {n}?"),
    # a relation inside a list
    "list": ("pick up the {t} behind the {n}, the {a} and the {b}",
             "bring me the {t} behind the {n}, the {a} and the {b}",
             "put away the {t} behind the {n}, then the {a} and the {b}"),
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
        #: each object's own model (an item of its kind, :meth:`item`), by id
        self.model_of: Dict[str, ObjectModel] = {}
        #: objects the catalogue holds no entry for (novel), by key
        self.novel: Dict[str, ObjectModel] = {}

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

    def item(self, key: str, scale: Optional[Sequence[float]] = None) -> ObjectModel:
        """One item of catalogue entry ``key``: every item of a kind differs a little.

        Size: each footprint axis together and the height apart, within +-SIZE_SPREAD of
        the catalogue's (``scale`` gives them instead). Mass: the catalogue's times the
        volume's change (same material, same wall), within +-MASS_SPREAD. Friction: the
        catalogue's shifted within its material's spread (``friction_range``)."""
        model = self.models[key]
        if scale is None:
            xy = float(self.rng.uniform(1.0 - SIZE_SPREAD, 1.0 + SIZE_SPREAD))
            z = float(self.rng.uniform(1.0 - SIZE_SPREAD, 1.0 + SIZE_SPREAD))
            scale = (xy, xy, z)
        factor = np.asarray(scale, dtype=float)
        volume = float(np.prod(factor)) * float(self.rng.uniform(0.95, 1.05))
        mass = model.mass_kg * float(np.clip(volume, 1.0 - MASS_SPREAD, 1.0 + MASS_SPREAD))
        material = self.cat.materials.get(model.material)
        lo, hi = material.friction_bounds if material is not None else (model.friction,) * 2
        nominal = material.friction if material is not None else model.friction
        friction = model.friction + float(self.rng.uniform(lo - nominal, hi - nominal))
        return model.varied(factor, round(mass, 5), round(max(0.05, friction), 4))

    def add(self, key: str, x: float, y: float, yaw: float,
            state: ObjectState = ObjectState.EMPTY, model: Optional[ObjectModel] = None,
            far: bool = False) -> str:
        """Place an item of ``key`` (``model``: one drawn already; default: a new item).
        ``far``: anywhere on the table within reach, not only the usual region."""
        model = model if model is not None else self.item(key)
        lo_x, hi_x = (TABLE_REACH_X if far else (REGION_X[0] - 0.04, REGION_X[1] + 0.04))
        lo_y, hi_y = (TABLE_REACH_Y if far else (REGION_Y[0] - 0.06, REGION_Y[1] + 0.06))
        if not (lo_x <= x <= hi_x and lo_y <= y <= hi_y) or not reachable(model, x, y):
            raise _Retry
        oid = f"{model.category.lower().replace(' ', '_')}_{len(self.objects) + 1}"
        base = self.models.get(key)
        novel = base is None
        scale = None if novel else tuple(round(float(v), 5) for v in model.size / base.size)
        self.objects.append(SceneObjectSpec(
            oid, key, float(x), float(y), float(_wrap(yaw)), state, scale=scale,
            mass_kg=None if novel else model.mass_kg,
            friction=None if novel else model.friction))
        self.model_of[oid] = model
        return oid

    def anywhere(self) -> Tuple[float, float]:
        return (float(self.rng.uniform(*REGION_X)), float(self.rng.uniform(*REGION_Y)))

    def yaw(self) -> float:
        return float(self.rng.uniform(-math.pi, math.pi))

    def beside(self, anchor: SceneObjectSpec, model: ObjectModel, yaw: float,
               direction: np.ndarray, gap: float) -> Tuple[float, float]:
        """Where ``model`` stands ``gap`` beyond ``anchor`` along ``direction`` (surfaces)."""
        a = self.model_of[anchor.id]
        d = extent_towards(a, anchor.yaw, direction) \
            + extent_towards(model, yaw, -direction) + gap
        return anchor.x + d * float(direction[0]), anchor.y + d * float(direction[1])

    def place_beside(self, anchor: SceneObjectSpec, key: str, direction: np.ndarray,
                     gap: float, state: Optional[ObjectState] = None) -> str:
        """Add an item of ``key`` ``gap`` beyond ``anchor`` along ``direction``."""
        model = self.item(key)
        yaw = self.yaw()
        x, y = self.beside(anchor, model, yaw, direction, gap)
        return self.add(key, x, y, yaw, self.state_for(key) if state is None else state,
                        model)


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
    return draw.model_of[spec.id].name


def _say(d: _Draw, kind: str, **names: str) -> str:
    """One phrasing of ``kind`` (``_PHRASES``) with the objects' names filled in."""
    return _choose(d.rng, _PHRASES[kind]).format(**names)


def _family_sg(d: _Draw) -> Tuple[str, List[str], Dict[str, object]]:
    key = d.pick(d.pool(lambda m: True))
    x, y = d.anywhere()
    oid = d.add(key, x, y, d.yaw(), d.state_for(key))
    return _say(d, "pick", t=_name(d, d.objects[0])), [oid], {}


def _graspable_target(d: _Draw) -> str:
    """A target for the interactive families: any object of the catalogue (feasibility is
    labelled from geometry, not assumed)."""
    return d.pick(d.pool(lambda m: True))


def _family_near(d: _Draw):
    key = _graspable_target(d)
    x, y = d.anywhere()
    target = d.add(key, x, y, d.yaw(), d.state_for(key))
    gap = float(d.rng.uniform(*NEAR_GAP_M))
    d.place_beside(d.objects[0], d.pick(d.pool(_fragile)),
                   _unit(d.rng.uniform(-math.pi, math.pi)), gap)
    text = _say(d, "near", t=_name(d, d.objects[0]), n=_name(d, d.objects[1]))
    return text, [target], {"gap_m": round(gap, 4)}


def _family_between(d: _Draw):
    key = _graspable_target(d)
    x, y = d.anywhere()
    target = d.add(key, x, y, d.yaw(), d.state_for(key))
    axis = float(d.rng.uniform(-math.pi, math.pi))
    gaps = []
    for sign in (1.0, -1.0):
        gap = float(d.rng.uniform(*NEAR_GAP_M))
        gaps.append(round(gap, 4))
        d.place_beside(d.objects[0], d.pick(d.pool(lambda m: not _flat(m))),
                       sign * _unit(axis), gap)
    text = _say(d, "between", t=_name(d, d.objects[0]), a=_name(d, d.objects[1]),
                b=_name(d, d.objects[2]))
    return text, [target], {"gaps_m": gaps}


def _hidden_pool(d: _Draw, occluder: ObjectModel) -> List[str]:
    """What a tall occluder hides: an object at least HIDDEN_MARGIN_M lower than it and no
    wider than HIDDEN_WIDTH_M (the camera, 0.75 m up and 0.65 m beyond the table's edge,
    sees over a 12 cm body only what stands well below its top)."""
    return d.pool(lambda m: m.size[2] <= occluder.size[2] - HIDDEN_MARGIN_M
                  and max(m.size[:2]) <= HIDDEN_WIDTH_M)


def _hide_behind(d: _Draw, occluder_id: str) -> Tuple[str, float]:
    """Add an object close behind ``occluder_id`` (on the far side from the camera)."""
    occluder = next(o for o in d.objects if o.id == occluder_id)
    key = d.pick(_hidden_pool(d, d.model_of[occluder_id]))
    # "behind" = on the far side from the camera, on the line from the camera through
    # the occluder, so the occluder stands between the camera and the target
    away = np.array([occluder.x, occluder.y]) - _camera_xy()
    away /= float(np.linalg.norm(away))
    gap = float(d.rng.uniform(*HIDDEN_GAP_M))
    return d.place_beside(occluder, key, away, gap, ObjectState.EMPTY), gap


def _family_hidden(d: _Draw):
    okey = d.pick(d.pool(_occluder))
    ox, oy = d.anywhere()
    ox = max(ox, REGION_X[0] + 0.12)        # room behind it for the target
    occluder = d.add(okey, ox, oy, d.yaw(), d.state_for(okey))
    target, gap = _hide_behind(d, occluder)
    text = _say(d, "hidden", t=_name(d, d.objects[1]), n=_name(d, d.objects[0]))
    om = d.model_of[occluder]
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
    gap = float(d.rng.uniform(*NEAR_GAP_M))
    d.place_beside(d.objects[0], nkey, _unit(heading), gap)
    text = _say(d, "near", t=_name(d, d.objects[0]), n=_name(d, d.objects[1]))
    return text, [target], {"handle": turn, "gap_m": round(gap, 4)}


def _family_lying(d: _Draw):
    key = d.pick(d.pool(_lying_long))
    x, y = d.anywhere()
    yaw = d.yaw()
    target = d.add(key, x, y, yaw, ObjectState.EMPTY)
    sides = [_choose(d.rng, (1.0, -1.0))]
    if d.rng.random() < 0.5:                # a neighbour on each long side
        sides.append(-sides[0])
    for side in sides:
        # beside the long side: across the object's length
        d.place_beside(d.objects[0], d.pick(d.pool(lambda m: _flat(m) or _fragile(m))),
                       side * _unit(yaw + math.pi / 2), float(d.rng.uniform(*NEAR_GAP_M)))
    text = _say(d, "near", t=_name(d, d.objects[0]), n=_name(d, d.objects[1]))
    return text, [target], {"neighbours": len(sides)}


def _scatter(d: _Draw, keys: Sequence[str], p_filled: float = 0.0) -> None:
    """Place ``keys`` anywhere in the region, CLUTTER_GAP_M apart (rejection sampling)."""
    for key in keys:
        m = d.item(key)
        for _ in range(60):
            x, y = d.anywhere()
            ok = all(math.hypot(x - o.x, y - o.y)
                     >= footprint_radius(m) + footprint_radius(d.model_of[o.id])
                     + CLUTTER_GAP_M
                     for o in d.objects)
            if ok:
                d.add(key, x, y, d.yaw(), d.state_for(key, p_filled), m)
                break
        else:
            raise _Retry


def _distinct(d: _Draw, n: int, pool: Sequence[str]) -> List[str]:
    keys: List[str] = []
    for _ in range(n):
        free = [k for k in pool if k not in keys and not _taken_among(d, k, keys)
                and not d.category_taken(k)]
        if not free:
            raise _Retry
        keys.append(_choose(d.rng, free))
    return keys


def _taken_among(d: _Draw, key: str, keys: Sequence[str]) -> bool:
    """Whether ``key``'s category is that of one of ``keys``, or a synonym of it."""
    cat = _category(d, key)
    for k in keys:
        other = _category(d, k)
        if other == cat or other in SYNONYMS.get(cat, ()) or cat in SYNONYMS.get(other, ()):
            return True
    return False


def _category(d: _Draw, key: str) -> str:
    model = d.models.get(key) or d.novel.get(key)
    return model.category.lower().replace("_", " ")


def _family_clear(d: _Draw):
    n = int(d.rng.integers(3, 6))
    keys = _distinct(d, n, d.pool(lambda m: True))
    _scatter(d, keys)
    ids = [o.id for o in d.objects]
    if d.rng.random() < 0.3:
        keep = int(d.rng.integers(len(ids)))
        text = _say(d, "but", n=_name(d, d.objects[keep]))
        return text, [oid for k, oid in enumerate(ids) if k != keep], {"kept": ids[keep]}
    return _choose(d.rng, _PHRASES["clear"]), ids, {}


def _sorted_keys(d: _Draw, n: int, by: str, step: float) -> List[str]:
    """``n`` distinct kinds whose values (fragility, or bounding-box volume) are ``step``
    apart (fragility: by at least ``step``; size: by a factor of at least ``step``)."""
    for _ in range(40):
        keys = _distinct(d, n, d.pool(lambda m: True))
        vals = sorted(_sort_value(d.models[k], by) for k in keys)
        if by == "fragility":
            ok = all(b - a >= step for a, b in zip(vals, vals[1:]))
        else:
            ok = all(b >= step * a for a, b in zip(vals, vals[1:]))
        if ok:
            return keys
    raise _Retry


def _sort_value(m: ObjectModel, by: str) -> float:
    return float(m.fragility) if by == "fragility" else float(np.prod(m.size))


def _sort_scene(d: _Draw, n: int, step_fragility: float):
    by = _choose(d.rng, ("fragility", "size"))
    text = _choose(d.rng, _PHRASES["sort_" + by])
    descending = any(w in text for w in ("most", "largest", "biggest"))
    keys = _sorted_keys(d, n, by, step_fragility if by == "fragility" else SIZE_RATIO)
    _scatter(d, keys)
    order = sorted(d.objects, key=lambda o: _sort_value(d.model_of[o.id], by),
                   reverse=descending)
    vals = sorted(_sort_value(d.model_of[o.id], by) for o in order)
    if by == "size" and not all(b >= SIZE_RATIO * a for a, b in zip(vals, vals[1:])):
        raise _Retry                        # the items drawn came too close in size
    return text, [o.id for o in order], {"by": by, "descending": descending, "n": n}


def _family_sort(d: _Draw):
    return _sort_scene(d, 3, FRAGILITY_STEP)


# ------------------------------------------------------------------ the wider families
def _family_clutter(d: _Draw):
    """A target with CLUTTER_NEIGHBOURS around it, CLUTTER_NEAR_M or closer, fragile and
    sturdy mixed, in directions spread round it."""
    key = _graspable_target(d)
    x, y = d.anywhere()
    target = d.add(key, x, y, d.yaw(), d.state_for(key))
    n = int(d.rng.integers(CLUTTER_NEIGHBOURS[0], CLUTTER_NEIGHBOURS[1] + 1))
    start = float(d.rng.uniform(-math.pi, math.pi))
    kinds = [_fragile, lambda m: not _fragile(m)] + [lambda m: True] * (n - 2)
    for k in range(n):
        angle = start + 2.0 * math.pi * k / n + float(d.rng.uniform(-0.25, 0.25))
        gap = float(d.rng.uniform(NEAR_GAP_M[0], CLUTTER_NEAR_M))
        d.place_beside(d.objects[0], d.pick(d.pool(kinds[k])), _unit(angle), gap)
    named = 1 + int(d.rng.integers(n))
    if d.rng.random() < 0.5:
        text = _say(d, "pick", t=_name(d, d.objects[0]))
    else:
        text = _say(d, "near", t=_name(d, d.objects[0]), n=_name(d, d.objects[named]))
    return text, [target], {"neighbours": n}


def _family_far(d: _Draw):
    """A target at the edge of the reach, turned so its easy side (a handle, a long
    object's end) faces away from the robot, between one or two fragile neighbours."""
    key = d.pick(d.pool(lambda m: True))
    model = d.item(key)
    for _ in range(40):
        x = float(d.rng.uniform(*FAR_X))
        y = float(d.rng.uniform(-FAR_Y, FAR_Y))
        if reachable(model, x, y):
            break
    else:
        raise _Retry
    outward = math.atan2(y, x)               # from the robot's base out to the object
    yaw = outward + float(d.rng.uniform(-0.4, 0.4))
    target = d.add(key, x, y, yaw, d.state_for(key), model, far=True)
    n = int(d.rng.integers(1, 3))
    side = _choose(d.rng, (1.0, -1.0))
    for k in range(n):
        direction = _unit(outward + side * (math.pi / 2) * (1 if k == 0 else -1)
                          + float(d.rng.uniform(-0.5, 0.5)))
        nkey = d.pick(d.pool(_fragile))
        m = d.item(nkey)
        nyaw = d.yaw()
        nx, ny = d.beside(d.objects[0], m, nyaw, direction, float(d.rng.uniform(*NEAR_GAP_M)))
        d.add(nkey, nx, ny, nyaw, d.state_for(nkey), m, far=True)
    text = _say(d, "near", t=_name(d, d.objects[0]), n=_name(d, d.objects[1]))
    return text, [target], {"reach_m": round(math.hypot(x, y), 3), "neighbours": n}


def _family_duplicates(d: _Draw):
    """Two or three items of one kind, told apart by place, a landmark or an attribute the
    camera sees, with one or two other objects."""
    key = d.pick(d.pool(lambda m: not _flat(m) and max(m.size[:2]) <= 0.12))
    how = _choose(d.rng, ("side", "ordinal", "landmark", "attribute"))
    n = 3 if how == "ordinal" else int(d.rng.integers(2, 4)) if how != "attribute" else 2
    scales: List[Optional[Tuple[float, float, float]]] = [None] * n
    attr = ""
    if how == "attribute":
        attr = _choose(d.rng, ("tall", "short", "big", "small"))
        lo, hi = 1.0 - SIZE_SPREAD, 1.0 + SIZE_SPREAD
        # the two items differ by the whole spread: 35 % in height or 52 % in volume,
        # beyond the perceived extent's error (8 mm p90 on a 5-25 cm object)
        if attr in ("tall", "short"):
            scales = [(1.0, 1.0, hi), (1.0, 1.0, lo)]
        else:
            scales = [(hi, hi, hi), (lo, lo, lo)]
    items = [d.item(key, s) for s in scales]
    # the items stand in a row across the camera's view (left to right as it sees them),
    # DUP_GAP_M apart, so a side or an ordinal names one; the row may be turned a little
    x0, y0 = d.anywhere()
    turn = float(d.rng.uniform(-0.35, 0.35))
    along = _unit(math.pi / 2 + turn)       # +y: the camera's right
    order = list(d.rng.permutation(n))
    pos = 0.0
    ids: List[str] = []
    for k, idx in enumerate(order):
        m = items[idx]
        yaw = d.yaw()
        if k:
            prev = d.model_of[ids[-1]]
            pos += extent_towards(prev, d.objects[-1].yaw, along) \
                + extent_towards(m, yaw, -along) + float(d.rng.uniform(*DUP_GAP_M))
        ids.append(d.add(key, x0 + pos * along[0], y0 + pos * along[1], yaw,
                         d.state_for(key), m))
    by_item = {idx: ids[k] for k, idx in enumerate(order)}
    others = int(d.rng.integers(1, 3))
    for _ in range(others):
        okey = d.pick(d.pool(lambda m: not _flat(m)))
        anchor = d.objects[int(d.rng.integers(len(ids)))]
        angle = float(d.rng.uniform(-math.pi, math.pi))
        d.place_beside(anchor, okey, _unit(angle), float(d.rng.uniform(0.04, 0.10)))
    # by its kind's word: its catalogue name may hold an attribute ("tall mug") that the
    # items, varied, no longer bear out
    noun = d.models[key].category.replace("_", " ")
    left_to_right = ids                     # the row's order is +y
    if how == "side":
        pick_right = bool(d.rng.random() < 0.5)
        target = left_to_right[-1] if pick_right else left_to_right[0]
        side = "right" if pick_right else "left"
        text = _say(d, "side", t=noun, s=side) if n == 2 else _say(d, "side_most", t=noun,
                                                                    s=side)
    elif how == "ordinal":
        k = int(d.rng.integers(3))
        from_right = bool(d.rng.random() < 0.5)
        target = left_to_right[::-1][k] if from_right else left_to_right[k]
        text = _say(d, "ordinal", t=noun, o=("first", "second", "third")[k],
                    s="right" if from_right else "left")
    elif how == "attribute":
        target = by_item[0] if attr in ("tall", "big") else by_item[1]
        text = _say(d, "attribute", t=noun, a=attr)
    else:
        landmark = d.objects[-1]
        lxy = np.array([landmark.x, landmark.y])
        dist = {i: float(np.linalg.norm(np.array([o.x, o.y]) - lxy))
                for o in d.objects for i in ids if o.id == i}
        ranked = sorted(ids, key=dist.get)
        nearest = bool(d.rng.random() < 0.5)
        target = ranked[0] if nearest else ranked[-1]
        second = dist[ranked[1]] if nearest else dist[ranked[-2]]
        # the perceived centres are a few mm off: the named one must be clearly the one
        if abs(dist[target] - second) < DUP_DISTANCE_MARGIN_M:
            raise _Retry
        text = _say(d, "nearest" if nearest else "farther", t=noun,
                    n=_name(d, landmark))
    return text, [target], {"by": how, "items": n}


#: Nouns of objects no knowledge base holds: a drawn object is named "<colour> <noun>".
_NOVEL_NOUNS = ("widget", "gizmo", "canister", "puck", "capsule", "brick", "knob", "spool",
                "token", "drum", "pod", "slab", "caddy", "doohickey", "ingot", "bobbin")
_COLOURS = {"red": (200, 40, 40), "green": (40, 160, 60), "blue": (40, 70, 200),
            "yellow": (220, 200, 40), "orange": (230, 130, 30), "purple": (130, 50, 160),
            "grey": (130, 130, 130), "white": (235, 235, 235)}
#: Effective density (kg/m^3) of a drawn object of each material: the bulk material's for
#: solid ones (wood, rubber), a hollow item's (glass, ceramic, metal, plastic ware is
#: mostly air inside: a 250 ml glass jar weighs about 200 g, 800 kg/m^3 of its box).
_NOVEL_DENSITY = {"wood": 600.0, "rubber": 1100.0, "plastic": 400.0, "glass": 800.0,
                  "ceramic": 900.0, "metal": 1500.0, "cardboard": 150.0}
#: Fragility of a drawn object of each material: the range Table I gives its objects.
_NOVEL_FRAGILITY = {"wood": (0.0, 0.1), "rubber": (0.0, 0.05), "plastic": (0.0, 0.2),
                    "glass": (0.6, 0.9), "ceramic": (0.3, 0.5), "metal": (0.0, 0.05),
                    "cardboard": (0.1, 0.3)}


def _novel_model(d: _Draw) -> str:
    """A box, cylinder or sphere of random size and material that the catalogue and the
    knowledge base hold no entry for; its physics is the catalogue's formula for an object
    it does not know (:func:`.objects.derive_model`), exactly as the simulator builds it."""
    noun = _choose(d.rng, [n for n in _NOVEL_NOUNS
                           if all(_category(d, o.catalogue) != n for o in d.objects)])
    colour = _choose(d.rng, sorted(_COLOURS))
    material = _choose(d.rng, [m for m in sorted(_NOVEL_DENSITY) if m in d.cat.materials])
    shape = _choose(d.rng, (Shape.BOX, Shape.CYLINDER, Shape.SPHERE))
    if shape == Shape.SPHERE:
        dia = float(d.rng.uniform(0.035, 0.09))
        size = np.array([dia, dia, dia])
    elif shape == Shape.CYLINDER:
        dia = float(d.rng.uniform(0.03, 0.10))
        size = np.array([dia, dia, float(d.rng.uniform(0.04, 0.20))])
    else:
        size = np.array([float(d.rng.uniform(0.03, 0.14)), float(d.rng.uniform(0.03, 0.10)),
                         float(d.rng.uniform(0.03, 0.16))])
    fill = {Shape.BOX: 1.0, Shape.CYLINDER: math.pi / 4, Shape.SPHERE: math.pi / 6}[shape]
    mass = _NOVEL_DENSITY[material] * float(np.prod(size)) * fill
    mat = d.cat.materials[material]
    lo, hi = mat.friction_bounds
    fragility = round(float(d.rng.uniform(*_NOVEL_FRAGILITY[material])), 2)
    key = f"drawn_{colour}_{noun}"
    name = f"{colour} {noun}"
    instance = ObjectInstance(
        id=key, category=noun, shape=shape, position=np.array([0.0, 0.0, size[2] / 2]),
        size=size, material=material, fragility=fragility, mass=round(max(mass, 0.005), 4),
        friction=round(float(d.rng.uniform(lo, hi)), 3),
        affordance=AffordanceDescriptor(AffordanceType.GRASPABLE_BODY, material, fragility,
                                        "body"),
        name=name, color=_COLOURS[colour])
    model = derive_model(instance, d.cat.materials)
    d.novel[key] = replace(model, key=key)
    d.models[key] = d.novel[key]
    return key


def _family_novel(d: _Draw):
    """A novel object as the target, alone or beside a catalogue object or another novel
    one, named by its colour and noun ("the blue widget")."""
    key = _novel_model(d)
    x, y = d.anywhere()
    target = d.add(key, x, y, d.yaw(), ObjectState.EMPTY, d.models[key])
    if d.rng.random() < 0.5:
        return _say(d, "pick", t=_name(d, d.objects[0])), [target], {"alone": True}
    nkey = _novel_model(d) if d.rng.random() < 0.5 else d.pick(d.pool(
        lambda m: m.key in d.cat.models))
    gap = float(d.rng.uniform(*NEAR_GAP_M))
    d.place_beside(d.objects[0], nkey, _unit(d.rng.uniform(-math.pi, math.pi)), gap,
                   ObjectState.EMPTY)
    text = _say(d, "near", t=_name(d, d.objects[0]), n=_name(d, d.objects[1]))
    return text, [target], {"alone": False}


def _family_long(d: _Draw):
    """Long-horizon tasks with relations and hidden objects inside them: clearing with an
    occluded object, sorting four to six objects, "everything but the Y" in clutter, and a
    list with a relation inside it ("the X behind the Y, the Z and the W")."""
    kind = _choose(d.rng, ("clear_hidden", "sort_many", "but_clutter", "list"))
    if kind == "sort_many":
        text, targets, details = _sort_scene(d, int(d.rng.integers(4, 7)), FRAGILITY_STEP_MANY)
        return text, targets, {**details, "kind": kind}
    if kind == "but_clutter":
        key = d.pick(d.pool(lambda m: True))
        x, y = d.anywhere()
        d.add(key, x, y, d.yaw(), d.state_for(key))
        n = int(d.rng.integers(3, 6))
        start = float(d.rng.uniform(-math.pi, math.pi))
        for k in range(n):
            angle = start + 2.0 * math.pi * k / n + float(d.rng.uniform(-0.25, 0.25))
            d.place_beside(d.objects[0], d.pick(d.pool(lambda m: True)), _unit(angle),
                           float(d.rng.uniform(NEAR_GAP_M[0], CLUTTER_NEAR_M)))
        keep = int(d.rng.integers(len(d.objects)))
        ids = [o.id for o in d.objects]
        text = _say(d, "but", n=_name(d, d.objects[keep]))
        return text, [i for k, i in enumerate(ids) if k != keep], {"kind": kind,
                                                                    "kept": ids[keep]}
    # an occluder with an object hidden behind it, and two to three others scattered
    okey = d.pick(d.pool(_occluder))
    ox, oy = d.anywhere()
    occluder = d.add(okey, max(ox, REGION_X[0] + 0.12), oy, d.yaw(), d.state_for(okey))
    hidden, _ = _hide_behind(d, occluder)
    _scatter(d, _distinct(d, int(d.rng.integers(2, 4)), d.pool(lambda m: True)))
    if kind == "clear_hidden":
        ids = [o.id for o in d.objects]
        return _choose(d.rng, _PHRASES["clear"]), ids, {"kind": kind, "hidden": hidden}
    rest = [o for o in d.objects if o.id not in (occluder, hidden)]
    text = _say(d, "list", t=_name(d, d.objects[1]), n=_name(d, d.objects[0]),
                a=_name(d, rest[0]), b=_name(d, rest[1]))
    return text, [hidden, rest[0].id, rest[1].id], {"kind": kind, "hidden": hidden}


_FAMILY_DRAW = {"sg": _family_sg, "it_near": _family_near, "it_between": _family_between,
                "it_hidden": _family_hidden, "it_handle": _family_handle,
                "it_lying": _family_lying, "lh_clear": _family_clear, "lh_sort": _family_sort,
                "it_clutter": _family_clutter, "it_far": _family_far,
                "it_duplicate": _family_duplicates, "it_novel": _family_novel,
                "lh_long": _family_long}


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
        scene_cat = cat.extended(d.novel)
        task = TaskSpec(procedural_id(scene_seed, index),
                        FAMILY_CATEGORY.get(family, "IT"), text, list(targets),
                        list(d.objects), f"procedural {family}", procedural_id(scene_seed, index),
                        scene_cat)
        if layout_problem(task.nominal(), scene_cat) is not None:
            continue
        feas = {o.id: target_feasibility(d.model_of[o.id], o.state)
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
