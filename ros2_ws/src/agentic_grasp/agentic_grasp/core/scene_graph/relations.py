"""The 16 spatial relation types of the scene graph (paper Sec. III-B), their converses and
the edge they label.

Every object is a vertical prism over its footprint (see :mod:`.graph`). Symbols used below,
for a subject a and an object b:

  ``depth_xy``: footprint penetration depth (> 0 only when they overlap);
- ``gap_z``: vertical distance between the height intervals (0 when they overlap);
  ``overlap_z``: length of the shared height interval (negative when apart);
- ``g = hypot(gap_xy, gap_z)``: the surface-to-surface gap of the two prisms (exact for
  prisms). Relation.distance and every distance threshold use this gap, not centre distance;
- "vertically related": On_Top_Of, Under or Inside holds in either direction;
- camera-aligned offsets: f = unit horizontal vector from the camera to the pair's midpoint,
  r = (f_y, -f_x) the camera's right (image +u); du = (c_a - c_b).f (> 0: a is farther from
  the camera), dv = (c_a - c_b).r (< 0: a appears left of b).

The 16 relations (thresholds are SceneGraphConfig fields, defaults in config/scene_graph.yaml):

=============  ===========  ================================================================
Relation       Converse     Geometric definition of ``a Relation b``
=============  ===========  ================================================================
On_Top_Of      Supports     a rests on b: abs(bottom_a - top_b) <= contact_tolerance (0.01 m),
                            a's centre (x, y) lies inside b's footprint, top_a > top_b, and a
                            is not Inside b.
Supports       On_Top_Of    exactly the converse: Supports(b, a) iff On_Top_Of(a, b).
Stacked_On     (Supports)   On_Top_Of(a, b) and state_a == stacked (the perceiver marked a as
                            part of a stack). A refinement of On_Top_Of.
Under          (none)       a lies beneath b: depth_xy > touch_tolerance (0.005 m) and
                            top_a <= bottom_b + contact_tolerance, at any height difference
                            (a 3-stack's bottom is Under its top). On_Top_Of(b, a) implies
                            Under(a, b); the converse "Above" is not a separate type.
Inside         Contains     b's category is a container (container_categories), the whole
                            of a's footprint lies within b's footprint (containment_tolerance
                            0.005 m slack), bottom_a >= bottom_b - contact_tolerance and a's
                            centre is below b's rim (centre_z_a < top_b).
Contains       Inside       exactly the converse: Contains(b, a) iff Inside(a, b).
Touching       Touching     side contact: g <= touch_tolerance (0.005 m), overlap_z >
                            touch_tolerance, not vertically related. Symmetric.
Adjacent_To    Adjacent_To  side by side at one level: touch_tolerance < g <= adjacent_gap
                            (0.05 m), overlap_z > 0, not vertically related. Symmetric.
Near           Near         any other pair within near_gap: g <= near_gap (0.15 m = the
                            analyzer's delta_check), not Touching, not Adjacent_To, not
                            vertically related. Symmetric. Touching / Adjacent_To / Near are
                            mutually exclusive distance bands.
Far_From       Far_From     g > far_gap (0.30 m). Symmetric. Materialised only when the scene
                            has at most far_from_max_objects (40) objects, because it is
                            O(n^2) edges; above that use SceneGraph.gap() on demand.
Behind         In_Front_Of  g <= directional_max_gap (0.15 m), not vertically related,
                            du > directional_margin (0.01 m) and abs(du) >= abs(dv): a is
                            farther from the camera, depth dominating.
In_Front_Of    Behind       same with du < -directional_margin and abs(du) >= abs(dv).
Left_Of        Right_Of     g <= directional_max_gap, not vertically related,
                            dv < -directional_margin and abs(dv) > abs(du): a appears left of
                            b in the camera image.
Right_Of       Left_Of      same with dv > directional_margin and abs(dv) > abs(du).
Occludes       (none)       a is nearer the camera than b (centre distance), not On_Top_Of /
                            Supports / Inside / Contains b, and the line-of-sight segments
                            from the camera to at least occlusion_min_fraction (0.5) of b's 6
                            visibility samples (centre, top-face centre, 4 top-face points at
                            half the half-extents along b's footprint axes) pass through a's
                            solid (box, elliptic cylinder or ellipsoid).
Leaning_On     (none)       a is tipped over (upright == False), b is upright, g <=
                            contact_tolerance (0.01 m), and neither rests on the other. Both
                            Supports and Leaning_On edges make the constraint analyzer remove
                            the dependent object first.
=============  ===========  ================================================================

Directional relations (Behind, In_Front_Of, Left_Of, Right_Of) are local: emitted only for
pairs within directional_max_gap, so each close pair carries exactly one of the two pairs
(depth or lateral, whichever offset dominates), and a 200-object scene does not get O(n^2)
directional edges. Pair tests are pruned with a vectorised lower bound (centre distance minus
footprint circumradii) before the exact polygon distances are computed in numpy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

ON_TOP_OF = "On_Top_Of"
SUPPORTS = "Supports"
STACKED_ON = "Stacked_On"
UNDER = "Under"
INSIDE = "Inside"
CONTAINS = "Contains"
TOUCHING = "Touching"
ADJACENT_TO = "Adjacent_To"
NEAR = "Near"
FAR_FROM = "Far_From"
BEHIND = "Behind"
IN_FRONT_OF = "In_Front_Of"
LEFT_OF = "Left_Of"
RIGHT_OF = "Right_Of"
OCCLUDES = "Occludes"
LEANING_ON = "Leaning_On"

#: The 16 predefined relation types of the paper, in the order of the docstring table.
RELATION_TYPES: Tuple[str, ...] = (
    ON_TOP_OF, SUPPORTS, STACKED_ON, UNDER, INSIDE, CONTAINS, TOUCHING, ADJACENT_TO, NEAR,
    FAR_FROM, BEHIND, IN_FRONT_OF, LEFT_OF, RIGHT_OF, OCCLUDES, LEANING_ON,
)

#: Converse of each relation: r(a, b) holds iff CONVERSE[r](b, a) holds. None: not emitted.
CONVERSE: Dict[str, Optional[str]] = {
    ON_TOP_OF: SUPPORTS, SUPPORTS: ON_TOP_OF, INSIDE: CONTAINS, CONTAINS: INSIDE,
    BEHIND: IN_FRONT_OF, IN_FRONT_OF: BEHIND, LEFT_OF: RIGHT_OF, RIGHT_OF: LEFT_OF,
    TOUCHING: TOUCHING, ADJACENT_TO: ADJACENT_TO, NEAR: NEAR, FAR_FROM: FAR_FROM,
    STACKED_ON: None, UNDER: None, OCCLUDES: None, LEANING_ON: None,
}

SYMMETRIC_RELATIONS = frozenset(r for r, c in CONVERSE.items() if c == r)

@dataclass(frozen=True)
class Relation:
    """One edge: ``subject relation object``; distance is the surface gap g (m)."""

    subject: str
    relation: str
    object: str
    distance: float



__all__ = [
    "RELATION_TYPES", "CONVERSE", "SYMMETRIC_RELATIONS", "Relation", "ON_TOP_OF", "SUPPORTS",
    "STACKED_ON", "UNDER",
    "INSIDE", "CONTAINS", "TOUCHING", "ADJACENT_TO", "NEAR", "FAR_FROM", "BEHIND",
    "IN_FRONT_OF", "LEFT_OF", "RIGHT_OF", "OCCLUDES", "LEANING_ON",
]
