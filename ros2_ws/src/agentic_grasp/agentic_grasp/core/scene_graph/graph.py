"""Scene graph G = (V, E) of the tabletop (paper Sec. III-B, Fig. 3 left).

Nodes are the perceived objects with the paper's attributes (position p_j, category c_j,
state_j, fragility a_j^frag) plus the size, yaw and shape the geometry needs. Edges carry one
of 16 spatial relation types. The graph is a ``networkx.MultiDiGraph``: one edge per
(subject, object, relation), keyed by the relation name, with the attributes ``relation`` and
``distance``, so several relations between one pair coexist (``cup -> vase`` can be both
``Adjacent_To`` and ``Left_Of``).

Geometry. Every object is a vertical prism: its footprint extruded over [bottom_z, top_z]. The
footprint is yaw-aware: the rotated rectangle of a box; the disc of a circular cylinder or
sphere (an elliptic one, sx != sy, becomes the stadium with the same semi-axes). Spheres use
their bounding cylinder for distances and the true ellipsoid for line-of-sight tests.

The 16 relation types, their converses and their geometric definitions (the thresholds are
SceneGraphConfig fields, defaults in config/scene_graph.yaml) are in :mod:`.relations`.
Pair tests are pruned with a vectorised lower bound (centre distance minus footprint
circumradii) before the exact polygon distances are computed in numpy.
"""
from __future__ import annotations

import logging
import math
from functools import lru_cache
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import networkx as nx
import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.errors import UnknownTargetError, ValidationError
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.scene_graph.footprints import (EPS, SHAPE_CODE, SPHERE, Footprints,
                                                       centre_inside, footprint_gap,
                                                       footprint_inside, segment_hits,
                                                       validated_objects)
from agentic_grasp.core.scene_graph.relations import (
    ADJACENT_TO, BEHIND, CONTAINS, FAR_FROM, IN_FRONT_OF, INSIDE, LEANING_ON, LEFT_OF, NEAR,
    OCCLUDES, ON_TOP_OF, RELATION_TYPES, RIGHT_OF, STACKED_ON, SUPPORTS, TOUCHING, UNDER,
    Relation)
from agentic_grasp.core.types import ObjectInstance, ObjectState, Shape

_LOG = logging.getLogger(__name__)



# --------------------------------------------------------------------------------------------
# The scene graph
# --------------------------------------------------------------------------------------------

class SceneGraph:
    """The built graph plus the object geometry, for distance queries by the analyzer.

    Build it with :func:`build_scene_graph`; the constructor alone adds the nodes only.
    """

    def __init__(self, objects: Sequence[ObjectInstance], camera_position: np.ndarray,
                 config: SceneGraphConfig, arrays: Optional[Tuple[np.ndarray, ...]] = None
                 ) -> None:
        self.config = config
        self.camera_position = np.asarray(camera_position, dtype=float).copy()
        self.graph = nx.MultiDiGraph(camera_position=tuple(float(v) for v in camera_position))
        self._ids: List[str] = [o.id for o in objects]
        self._no_occlusion: Set[Tuple[int, int]] = set()  # support/containment pairs
        self._index: Dict[str, int] = {oid: i for i, oid in enumerate(self._ids)}
        n = len(objects)
        if arrays is None:
            _, pos, size, yaw = validated_objects(objects)
        else:
            pos, size, yaw = arrays
        self._centres = pos
        self._half = size / 2.0
        self._yaw = yaw
        self._shape = np.array([SHAPE_CODE[Shape(o.shape)] for o in objects],
                               dtype=int).reshape(n)
        self._lo = self._centres[:, 2] - self._half[:, 2]
        self._hi = self._centres[:, 2] + self._half[:, 2]
        self._fp = Footprints.of(self._centres, self._half, self._yaw, self._shape)
        self._circum = self._fp.circum
        self._gaps = np.full((n, n), np.nan)
        np.fill_diagonal(self._gaps, 0.0)
        for k, o in enumerate(objects):
            state = o.state.value if isinstance(o.state, ObjectState) else str(o.state)
            self.graph.add_node(
                o.id, position=pos[k].copy(), size=size[k].copy(), yaw=float(yaw[k]),
                category=o.category,
                state=state, fragility=float(o.fragility), shape=Shape(o.shape).value,
                upright=bool(o.upright), name=o.name)

    # ---- queries ---------------------------------------------------------------------------
    @property
    def ids(self) -> List[str]:
        return list(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, object_id: object) -> bool:
        return object_id in self._index

    def _idx(self, object_id: str) -> int:
        try:
            return self._index[object_id]
        except (KeyError, TypeError):
            raise UnknownTargetError(f"unknown object id {object_id!r}; scene holds "
                                     f"{sorted(self._ids)}") from None

    def node(self, object_id: str) -> Dict[str, Any]:
        """Attributes of one node (position, size, yaw, category, state, fragility, ...)."""
        return self.graph.nodes[self._ids[self._idx(object_id)]]

    def relations(self, relation: Optional[str] = None) -> List[Relation]:
        """All edges (or those of one relation type), sorted for reproducible output."""
        out = [Relation(u, k, v, float(d["distance"]))
               for u, v, k, d in self.graph.edges(keys=True, data=True)
               if relation is None or k == relation]
        out.sort(key=lambda r: (r.subject, r.relation, r.object))
        return out

    def to_dict(self) -> Dict[str, Any]:
        """JSON-safe snapshot (nodes and relations) for service responses and logs."""
        nodes = []
        for oid in self._ids:
            attrs = self.graph.nodes[oid]
            nodes.append({"id": oid, "category": attrs["category"], "state": attrs["state"],
                          "fragility": attrs["fragility"], "shape": attrs["shape"],
                          "position": [float(v) for v in attrs["position"]],
                          "size": [float(v) for v in attrs["size"]], "yaw": attrs["yaw"]})
        return {"camera_position": [float(v) for v in self.camera_position], "nodes": nodes,
                "relations": [{"subject": r.subject, "relation": r.relation,
                               "object": r.object, "distance": r.distance}
                              for r in self.relations()]}

    def has_relation(self, subject: str, relation: str, obj: str) -> bool:
        return self.graph.has_edge(subject, obj, key=relation)

    def relations_between(self, subject: str, obj: str) -> List[str]:
        """Relation names from subject to obj (empty when none)."""
        if not self.graph.has_edge(subject, obj):
            return []
        return sorted(self.graph[subject][obj].keys())

    def subjects_of(self, relation: str, obj: str) -> List[str]:
        """Every s with ``s relation obj`` (e.g. the occluders of a target)."""
        self._idx(obj)
        return sorted(u for u, keyed in self.graph.pred[obj].items() if relation in keyed)

    def objects_of(self, subject: str, relation: str) -> List[str]:
        """Every o with ``subject relation o`` (e.g. what a target supports)."""
        self._idx(subject)
        return sorted(v for v, keyed in self.graph.succ[subject].items() if relation in keyed)

    def gaps_from(self, object_id: str) -> Dict[str, float]:
        """Surface gap g (m) from one object to every other object."""
        i = self._idx(object_id)
        others = np.array([j for j in range(len(self._ids)) if j != i], dtype=int)
        if others.size == 0:
            return {}
        g = self._pair_gaps(np.full(others.size, i), others)
        return {self._ids[j]: float(d) for j, d in zip(others, g)}

    def gap(self, a: str, b: str) -> float:
        """Surface-to-surface gap of the two objects' prisms (m, 0 when touching)."""
        i, j = self._idx(a), self._idx(b)
        if i == j:
            return 0.0
        return float(self._pair_gaps(np.array([i]), np.array([j]))[0])

    def neighbours_within(self, target_id: str, radius: float) -> List[str]:
        """Objects whose surface gap to the target is <= radius, nearest first."""
        return [oid for oid, _ in self.neighbour_gaps(target_id, radius)]

    def neighbour_gaps(self, target_id: str, radius: float) -> List[Tuple[str, float]]:
        """(id, gap) of the objects within radius of the target, nearest first, ties by id."""
        i = self._idx(target_id)
        n = len(self._ids)
        if n < 2:
            return []
        others = np.array([j for j in range(n) if j != i], dtype=int)
        lower = (np.linalg.norm(self._centres[others, :2] - self._centres[i, :2], axis=1)
                 - self._circum[others] - self._circum[i])
        others = others[lower <= radius]
        if others.size == 0:
            return []
        g = self._pair_gaps(np.full(others.size, i), others)
        hits = [(self._ids[j], float(d)) for j, d in zip(others, g) if d <= radius]
        hits.sort(key=lambda item: (item[1], item[0]))
        return hits

    def _pair_gaps(self, ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
        """Surface gaps g of index pairs, memoised in a dense matrix (construction fills it)."""
        g = self._gaps[ii, jj]
        missing = np.isnan(g)
        if np.any(missing):
            im, jm = ii[missing], jj[missing]
            gap_xy, _ = footprint_gap(self._fp, im, jm)
            gap_z = np.maximum(0.0, np.maximum(self._lo[im] - self._hi[jm],
                                               self._lo[jm] - self._hi[im]))
            g[missing] = np.hypot(gap_xy, gap_z)
            self._gaps[im, jm] = self._gaps[jm, im] = g[missing]
        return g

    # ---- construction ----------------------------------------------------------------------
    def _build_edges(self, objects: Sequence[ObjectInstance]) -> None:
        n = len(objects)
        if n < 2:
            return
        cfg = self.config
        ii, jj = np.triu_indices(n, k=1)
        materialise_far = n <= cfg.far_from_max_objects
        if not materialise_far:
            _LOG.debug("scene of %d objects: Far_From edges not materialised (> %d)",
                       n, cfg.far_from_max_objects)
        self.graph.graph["far_from_materialised"] = materialise_far
        if not materialise_far:
            radius = max(cfg.near_gap, cfg.directional_max_gap, cfg.contact_tolerance)
            lower = (np.linalg.norm(self._centres[ii, :2] - self._centres[jj, :2], axis=1)
                     - self._circum[ii] - self._circum[jj])
            keep = lower <= radius
            ii, jj = ii[keep], jj[keep]
        edges: List[Tuple[str, str, str, Dict[str, float]]] = []
        if ii.size:
            self._pair_relations(objects, ii, jj, edges)
        self._occlusions(objects, edges)
        add_edge = self.graph.add_edge      # add_edges_from re-reads each edge through views
        for u, v, key, attrs in edges:
            add_edge(u, v, key=key, **attrs)

    def _pair_relations(self, objects: Sequence[ObjectInstance], ii: np.ndarray,
                        jj: np.ndarray, edges: List[Tuple[str, str, str, Dict[str, float]]]
                        ) -> None:
        cfg = self.config
        ct, tt = cfg.contact_tolerance, cfg.touch_tolerance
        gap_xy, depth = footprint_gap(self._fp, ii, jj)
        lo_i, hi_i, lo_j, hi_j = self._lo[ii], self._hi[ii], self._lo[jj], self._hi[jj]
        gap_z = np.maximum(0.0, np.maximum(lo_i - hi_j, lo_j - hi_i))
        overlap_z = np.minimum(hi_i, hi_j) - np.maximum(lo_i, lo_j)
        g = np.hypot(gap_xy, gap_z)
        self._gaps[ii, jj] = self._gaps[jj, ii] = g

        m = ii.size
        inter = depth > 0.0
        cin_ij = np.zeros(m, bool)   # centre of i inside footprint of j
        cin_ji = np.zeros(m, bool)
        fin_ij = np.zeros(m, bool)   # whole footprint of i inside footprint of j
        fin_ji = np.zeros(m, bool)
        if np.any(inter):
            ia, ja, tol = ii[inter], jj[inter], cfg.containment_tolerance
            cin_ij[inter] = centre_inside(self._fp, ia, ja)
            cin_ji[inter] = centre_inside(self._fp, ja, ia)
            fin_ij[inter] = footprint_inside(self._fp, ia, ja, tol)
            fin_ji[inter] = footprint_inside(self._fp, ja, ia, tol)

        container = np.array([cfg.is_container(o.category) for o in objects], bool)
        stacked = np.array([o.state == ObjectState.STACKED for o in objects], bool)
        upright = np.array([bool(o.upright) for o in objects], bool)
        cz_i, cz_j = self._centres[ii, 2], self._centres[jj, 2]

        inside_ij = container[jj] & fin_ij & (lo_i >= lo_j - ct) & (cz_i < hi_j)
        inside_ji = container[ii] & fin_ji & (lo_j >= lo_i - ct) & (cz_j < hi_i)
        inside_ji &= ~inside_ij      # identical footprints: keep one direction only
        ontop_ij = (np.abs(lo_i - hi_j) <= ct) & cin_ij & (hi_i > hi_j) & ~inside_ij
        ontop_ji = (np.abs(lo_j - hi_i) <= ct) & cin_ji & (hi_j > hi_i) & ~inside_ji
        under_ij = (depth > tt) & (hi_i <= lo_j + ct)
        under_ji = (depth > tt) & (hi_j <= lo_i + ct)
        vertical = ontop_ij | ontop_ji | inside_ij | inside_ji | under_ij | under_ji
        touching = (g <= tt) & (overlap_z > tt) & ~vertical
        adjacent = (g > tt) & (g <= cfg.adjacent_gap) & (overlap_z > 0.0) & ~vertical
        near = (g <= cfg.near_gap) & ~touching & ~adjacent & ~vertical
        far = g > cfg.far_gap
        lean_ij = ~upright[ii] & upright[jj] & (g <= ct) & ~ontop_ij & ~ontop_ji
        lean_ji = ~upright[jj] & upright[ii] & (g <= ct) & ~ontop_ij & ~ontop_ji

        # camera-aligned horizontal offsets for the local directional relations
        mid = 0.5 * (self._centres[ii, :2] + self._centres[jj, :2])
        fwd = mid - self.camera_position[None, :2]
        fwd /= np.maximum(np.linalg.norm(fwd, axis=1), EPS)[:, None]
        right = np.stack([fwd[:, 1], -fwd[:, 0]], axis=1)
        delta = self._centres[ii, :2] - self._centres[jj, :2]
        du = np.einsum("ij,ij->i", delta, fwd)
        dv = np.einsum("ij,ij->i", delta, right)
        local = (g <= cfg.directional_max_gap) & ~vertical
        margin = cfg.directional_margin
        depth_dom = np.abs(du) >= np.abs(dv)
        behind = local & depth_dom & (du > margin)        # i behind j
        front = local & depth_dom & (du < -margin)        # i in front of j
        left = local & ~depth_dom & (dv < -margin)        # i left of j
        right_of = local & ~depth_dom & (dv > margin)     # i right of j

        ids = self._ids

        def emit(mask: np.ndarray, rel: str, converse: Optional[str], forward: bool) -> None:
            for k in np.flatnonzero(mask):
                a, b = (ids[ii[k]], ids[jj[k]]) if forward else (ids[jj[k]], ids[ii[k]])
                attrs = {"relation": rel, "distance": float(g[k])}
                edges.append((a, b, rel, attrs))
                if converse is not None:
                    edges.append((b, a, converse, {"relation": converse,
                                                   "distance": float(g[k])}))

        emit(ontop_ij, ON_TOP_OF, SUPPORTS, True)
        emit(ontop_ji, ON_TOP_OF, SUPPORTS, False)
        emit(ontop_ij & stacked[ii], STACKED_ON, None, True)
        emit(ontop_ji & stacked[jj], STACKED_ON, None, False)
        emit(under_ij, UNDER, None, True)
        emit(under_ji, UNDER, None, False)
        emit(inside_ij, INSIDE, CONTAINS, True)
        emit(inside_ji, INSIDE, CONTAINS, False)
        emit(touching, TOUCHING, TOUCHING, True)
        emit(adjacent, ADJACENT_TO, ADJACENT_TO, True)
        emit(near, NEAR, NEAR, True)
        if self.graph.graph.get("far_from_materialised"):
            emit(far, FAR_FROM, FAR_FROM, True)
        emit(behind, BEHIND, IN_FRONT_OF, True)
        emit(front, IN_FRONT_OF, BEHIND, True)
        emit(left, LEFT_OF, RIGHT_OF, True)
        emit(right_of, RIGHT_OF, LEFT_OF, True)
        emit(lean_ij, LEANING_ON, None, True)
        emit(lean_ji, LEANING_ON, None, False)
        # support / containment pairs are excluded from occlusion
        excluded = ontop_ij | ontop_ji | inside_ij | inside_ji
        self._no_occlusion = {(int(ii[k]), int(jj[k])) for k in np.flatnonzero(excluded)}
        self._no_occlusion |= {(b, a) for a, b in self._no_occlusion}

    def _occlusions(self, objects: Sequence[ObjectInstance],
                    edges: List[Tuple[str, str, str, Dict[str, float]]]) -> None:
        cam = self.camera_position
        excluded = self._no_occlusion
        dist_cam = np.linalg.norm(self._centres - cam, axis=1)
        sphere = np.linalg.norm(self._half, axis=1)
        # prune: a nearer than b, and a's bounding sphere reaches b's line-of-sight tube
        a_idx, b_idx = np.nonzero(dist_cam[:, None] < dist_cam[None, :])
        if a_idx.size == 0:
            return
        seg = self._centres[b_idx] - cam
        t = np.clip(np.einsum("ij,ij->i", self._centres[a_idx] - cam, seg)
                    / np.maximum(np.einsum("ij,ij->i", seg, seg), EPS), 0.0, 1.0)
        closest = cam + t[:, None] * seg
        d = np.linalg.norm(self._centres[a_idx] - closest, axis=1)
        keep = d <= sphere[a_idx] + sphere[b_idx]
        a_idx, b_idx = a_idx[keep], b_idx[keep]
        if excluded and a_idx.size:
            keep = np.array([(int(a), int(b)) not in excluded for a, b in zip(a_idx, b_idx)],
                            bool)
            a_idx, b_idx = a_idx[keep], b_idx[keep]
        if a_idx.size == 0:
            return
        samples = self._visibility_samples()                    # (n, S, 3)
        s_count = samples.shape[1]
        pts = samples[b_idx].reshape(-1, 3)                     # (m*S, 3)
        occ = np.repeat(a_idx, s_count)
        # camera and sample points into a's unit-solid frame
        c, s = np.cos(self._yaw[occ]), np.sin(self._yaw[occ])

        def to_local(p: np.ndarray) -> np.ndarray:
            rel = p - self._centres[occ]
            x = c * rel[:, 0] + s * rel[:, 1]
            y = -s * rel[:, 0] + c * rel[:, 1]
            return np.stack([x, y, rel[:, 2]], axis=1) / self._half[occ]

        hits = segment_hits(to_local(np.broadcast_to(cam, pts.shape)), to_local(pts),
                             self._shape[occ]).reshape(-1, s_count)
        fraction = hits.mean(axis=1)
        occluding = fraction >= self.config.occlusion_min_fraction - 1e-9
        if not np.any(occluding):
            return
        a_sel, b_sel = a_idx[occluding], b_idx[occluding]
        gaps = self._pair_gaps(a_sel, b_sel)
        for a, b, gap in zip(a_sel, b_sel, gaps):
            edges.append((self._ids[a], self._ids[b], OCCLUDES,
                          {"relation": OCCLUDES, "distance": float(gap)}))

    def _visibility_samples(self) -> np.ndarray:
        """Per object: centre, top-face centre and 4 top-face points (world), shape (n, 6, 3)."""
        half = self._half
        top = np.where(self._shape == SPHERE, half[:, 2] * math.sqrt(0.75), half[:, 2])
        local = np.zeros((len(self._ids), 6, 3))
        local[:, 1, 2] = half[:, 2]
        for k, (sx, sy) in enumerate(((0.5, 0.0), (-0.5, 0.0), (0.0, 0.5), (0.0, -0.5))):
            local[:, 2 + k, 0] = sx * half[:, 0]
            local[:, 2 + k, 1] = sy * half[:, 1]
            local[:, 2 + k, 2] = top
        c, s = np.cos(self._yaw)[:, None], np.sin(self._yaw)[:, None]
        x = c * local[..., 0] - s * local[..., 1]
        y = s * local[..., 0] + c * local[..., 1]
        return np.stack([x, y, local[..., 2]], axis=-1) + self._centres[:, None, :]


@lru_cache(maxsize=1)
def _default_camera_position() -> Tuple[float, float, float]:
    return tuple(float(v) for v in Camera().position)


def build_scene_graph(objects: Sequence[Union[ObjectInstance, Mapping[str, Any]]],
                      camera_position: Optional[Sequence[float]] = None,
                      config: Optional[SceneGraphConfig] = None) -> SceneGraph:
    """Build G from perceived objects (ObjectInstance or plain dicts with the same fields).

    camera_position defaults to Camera().position, (1.15, 0, 0.75); config defaults to
    SceneGraphConfig() (the values of config/scene_graph.yaml), so no file is read here.
    Raises ValidationError for NaN/inf geometry, bad sizes or duplicate ids.
    """
    cfg = config if config is not None else SceneGraphConfig()
    cam = np.asarray(_default_camera_position() if camera_position is None
                     else camera_position, dtype=float).reshape(-1)
    if cam.shape != (3,) or not np.all(np.isfinite(cam)):
        raise ValidationError(f"camera_position must be 3 finite numbers, got {cam.tolist()}")
    objs, pos, size, yaw = validated_objects(objects)
    graph = SceneGraph(objs, cam, cfg, (pos, size, yaw))
    graph._build_edges(objs)
    return graph


def graph_from_relations(objects: Sequence[ObjectInstance], relations: Sequence[Relation],
                         camera_position: Optional[Sequence[float]] = None,
                         config: Optional[SceneGraphConfig] = None) -> SceneGraph:
    """G from objects and relations computed elsewhere (the scene-graph node's answer).

    The planner in the node graph plans on the graph the scene-graph service built, with
    that node's configuration, rather than building a second one here: the edges are taken
    as given. ``config`` and ``camera_position`` only serve the geometric queries (gaps,
    neighbours) of the returned object. ValidationError for an edge naming an object that
    is not in ``objects`` or a relation type outside the 16.
    """
    cfg = config if config is not None else SceneGraphConfig()
    cam = np.asarray(_default_camera_position() if camera_position is None
                     else camera_position, dtype=float).reshape(-1)
    objs, pos, size, yaw = validated_objects(objects)
    graph = SceneGraph(objs, cam, cfg, (pos, size, yaw))
    for r in relations:
        if r.relation not in RELATION_TYPES:
            raise ValidationError(f"relation {r.relation!r} is not one of the 16 types")
        if r.subject not in graph or r.object not in graph:
            raise ValidationError(f"relation {r.subject} {r.relation} {r.object} names an "
                                  "object that is not in the scene")
        graph.graph.add_edge(r.subject, r.object, key=r.relation, relation=r.relation,
                             distance=float(r.distance))
    return graph


__all__ = ["SceneGraph", "build_scene_graph", "graph_from_relations"]
