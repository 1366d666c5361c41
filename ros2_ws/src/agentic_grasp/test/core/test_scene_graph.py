"""Scene graph: the 16 relations (positive and negative), geometry, bad input, config, bench."""
import json
import math

import networkx as nx
import numpy as np
import pytest

from agentic_grasp.core.camera import Camera
from agentic_grasp.core.config import node_params
from agentic_grasp.core.errors import ConfigError, UnknownTargetError, ValidationError
from agentic_grasp.core.scene_graph.relations import CONVERSE, RELATION_TYPES
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.scene_graph.graph import build_scene_graph
from agentic_grasp_lab.benchmarks.scene_graph import random_scene, run_bench
from agentic_grasp.core.types import ObjectInstance


def place(oid, x, y, size, shape="box", z0=0.0, category=None, **kw):
    """Object resting with its bottom at z0 (the table by default)."""
    return ObjectInstance(id=oid, category=category or oid, shape=shape,
                          position=(x, y, z0 + size[2] / 2.0), size=size, **kw)


CUBE = (0.05, 0.05, 0.05)
BALL = (0.065, 0.065, 0.065)


def rels(graph, a, b):
    return set(graph.relations_between(a, b))


# ---------------------------------------------------------------------------------------------
# vocabulary
# ---------------------------------------------------------------------------------------------

def test_sixteen_relation_types_include_the_papers_six():
    assert len(RELATION_TYPES) == 16 == len(set(RELATION_TYPES))
    for name in ("On_Top_Of", "Contains", "Occludes", "Supports", "Adjacent_To", "Behind"):
        assert name in RELATION_TYPES
    assert set(CONVERSE) == set(RELATION_TYPES)
    for rel, conv in CONVERSE.items():
        if conv is not None:
            assert CONVERSE[conv] == rel


def test_graph_is_multidigraph_keyed_by_relation_with_node_attributes():
    cup = place("cup", 0.5, 0.0, (0.08, 0.08, 0.09), "cylinder", state="filled",
                fragility=0.3)
    vase = place("vase", 0.5, 0.13, (0.08, 0.08, 0.15), "cylinder", fragility=0.8)
    g = build_scene_graph([cup, vase])
    assert isinstance(g.graph, nx.MultiDiGraph)
    node = g.node("cup")
    np.testing.assert_allclose(node["position"], [0.5, 0.0, 0.045])
    np.testing.assert_allclose(node["size"], [0.08, 0.08, 0.09])
    assert (node["category"], node["state"], node["fragility"]) == ("cup", "filled", 0.3)
    # two relations between one pair coexist as two keyed edges
    assert set(g.graph["cup"]["vase"].keys()) == {"Adjacent_To", "Left_Of"}
    edge = g.graph["cup"]["vase"]["Adjacent_To"]
    assert edge["relation"] == "Adjacent_To"
    assert edge["distance"] == pytest.approx(0.05)
    assert all(r.relation in RELATION_TYPES for r in g.relations())
    snapshot = json.loads(json.dumps(g.to_dict()))
    assert [n["id"] for n in snapshot["nodes"]] == ["cup", "vase"]
    assert len(snapshot["relations"]) == g.graph.number_of_edges() == 4


# ---------------------------------------------------------------------------------------------
# vertical relations
# ---------------------------------------------------------------------------------------------

def test_on_top_of_supports_and_under():
    base = place("base", 0.5, 0.0, (0.10, 0.10, 0.04))
    cube = place("cube", 0.51, 0.01, CUBE, z0=0.04)
    g = build_scene_graph([base, cube])
    assert g.has_relation("cube", "On_Top_Of", "base")
    assert g.has_relation("base", "Supports", "cube")
    assert g.has_relation("base", "Under", "cube")
    assert not g.has_relation("cube", "Stacked_On", "base")   # state is not stacked
    assert not g.has_relation("base", "On_Top_Of", "cube")
    assert not rels(g, "cube", "base") & {"Touching", "Adjacent_To", "Near", "Left_Of",
                                         "Right_Of", "Behind", "In_Front_Of"}


def test_on_top_of_negatives_floating_offcentre_and_beside():
    base = place("base", 0.5, 0.0, (0.10, 0.10, 0.04))
    floating = place("cube", 0.5, 0.0, CUBE, z0=0.07)          # 3 cm above: not resting
    g = build_scene_graph([base, floating])
    assert not g.has_relation("cube", "On_Top_Of", "base")
    assert not g.has_relation("base", "Supports", "cube")
    assert g.has_relation("base", "Under", "cube")             # Under holds at any height
    overhang = place("cube", 0.56, 0.0, CUBE, z0=0.04)         # centre outside the base
    g = build_scene_graph([base, overhang])
    assert not g.has_relation("cube", "On_Top_Of", "base")
    beside = place("cube", 0.60, 0.0, CUBE)
    g = build_scene_graph([base, beside])
    assert not rels(g, "cube", "base") & {"On_Top_Of", "Under", "Supports"}
    assert not rels(g, "base", "cube") & {"On_Top_Of", "Under", "Supports"}


def test_stacked_on_needs_the_stacked_state():
    base = place("block1", 0.5, 0.0, (0.04, 0.04, 0.04), state="stacked")
    top = place("block2", 0.5, 0.0, (0.04, 0.04, 0.04), z0=0.04, state="stacked")
    g = build_scene_graph([base, top])
    assert g.has_relation("block2", "Stacked_On", "block1")
    assert not g.has_relation("block1", "Stacked_On", "block2")
    plain = place("block2", 0.5, 0.0, (0.04, 0.04, 0.04), z0=0.04)
    g = build_scene_graph([base, plain])
    assert g.has_relation("block2", "On_Top_Of", "block1")
    assert not g.has_relation("block2", "Stacked_On", "block1")


def test_three_stack_bottom_is_under_the_top_but_does_not_support_it():
    blocks = [place(f"b{k}", 0.5, 0.0, (0.04, 0.04, 0.04), z0=0.04 * k, state="stacked")
              for k in range(3)]
    g = build_scene_graph(blocks)
    assert g.has_relation("b0", "Under", "b2")
    assert not g.has_relation("b0", "Supports", "b2")
    assert g.objects_of("b0", "Supports") == ["b1"]
    assert g.objects_of("b1", "Supports") == ["b2"]


def test_inside_and_contains():
    bowl = place("bowl", 0.5, 0.0, (0.12, 0.12, 0.06), "cylinder")
    ball = place("ball", 0.51, 0.0, BALL, "sphere", category="tennis ball")
    g = build_scene_graph([bowl, ball])
    assert g.has_relation("ball", "Inside", "bowl")
    assert g.has_relation("bowl", "Contains", "ball")
    assert not g.has_relation("ball", "On_Top_Of", "bowl")
    assert not rels(g, "ball", "bowl") & {"Touching", "Near", "Occludes"}


def test_inside_negatives_non_container_protruding_and_above_rim():
    plate = place("slab", 0.5, 0.0, (0.12, 0.12, 0.06), "cylinder", category="stone slab")
    ball = place("ball", 0.5, 0.0, BALL, "sphere")
    assert not build_scene_graph([plate, ball]).has_relation("ball", "Inside", "slab")
    bowl = place("bowl", 0.5, 0.0, (0.12, 0.12, 0.06), "cylinder")
    sticking_out = place("ball", 0.54, 0.0, BALL, "sphere")   # footprint leaves the bowl
    assert not build_scene_graph([bowl, sticking_out]).has_relation("ball", "Inside", "bowl")
    on_rim = place("ball", 0.5, 0.0, BALL, "sphere", z0=0.06)
    g = build_scene_graph([bowl, on_rim])
    assert not g.has_relation("ball", "Inside", "bowl")
    assert g.has_relation("ball", "On_Top_Of", "bowl")


def test_container_words_match_multiword_categories():
    cfg = SceneGraphConfig()
    assert cfg.is_container("wine glass") and cfg.is_container("ceramic_cup")
    assert not cfg.is_container("banana") and not cfg.is_container("cupboard_door")


# ---------------------------------------------------------------------------------------------
# distance bands
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gap,expected", [
    (0.002, "Touching"), (0.02, "Adjacent_To"), (0.08, "Near"), (0.20, None), (0.40, "Far_From"),
])
def test_distance_bands_are_exclusive(gap, expected):
    a = place("a", 0.5, 0.0, CUBE)
    b = place("b", 0.5, 0.05 + gap, CUBE)
    g = build_scene_graph([a, b])
    assert g.gap("a", "b") == pytest.approx(gap)
    band = rels(g, "a", "b") & {"Touching", "Adjacent_To", "Near", "Far_From"}
    assert band == ({expected} if expected else set())
    assert rels(g, "b", "a") & {"Touching", "Adjacent_To", "Near", "Far_From"} == band


def test_adjacent_needs_a_shared_height_but_near_does_not():
    low = place("low", 0.5, 0.0, CUBE)
    high = place("high", 0.5, 0.08, CUBE, z0=0.07)   # 3 cm gap in y, 2 cm gap in z
    g = build_scene_graph([low, high])
    assert g.gap("low", "high") == pytest.approx(math.hypot(0.03, 0.02))
    assert g.has_relation("low", "Near", "high")
    assert not g.has_relation("low", "Adjacent_To", "high")


def test_far_from_not_materialised_above_the_object_cap():
    objs = [place("a", 0.3, -0.3, CUBE), place("b", 0.7, 0.3, CUBE), place("c", 0.3, 0.3, CUBE)]
    g = build_scene_graph(objs)
    assert g.has_relation("a", "Far_From", "b") and g.graph.graph["far_from_materialised"]
    g = build_scene_graph(objs, config=SceneGraphConfig(far_from_max_objects=2))
    assert not g.relations("Far_From") and not g.graph.graph["far_from_materialised"]
    assert g.gap("a", "b") > 0.30                     # still answerable on demand


def test_yaw_aware_footprints():
    # a 0.1 m square turned 45 deg reaches 0.0707 m along x
    a = place("a", 0.5, 0.0, (0.1, 0.1, 0.05), yaw=math.pi / 4)
    b = place("b", 0.7, 0.0, (0.1, 0.1, 0.05))
    assert build_scene_graph([a, b]).gap("a", "b") == pytest.approx(0.15 - 0.05 * math.sqrt(2))
    # a 20 cm screwdriver along x touches the cube; turned 90 deg it is 8.5 cm away
    cube = place("cube", 0.625, 0.0, CUBE)
    along = place("screwdriver", 0.5, 0.0, (0.20, 0.03, 0.03))
    across = place("screwdriver", 0.5, 0.0, (0.20, 0.03, 0.03), yaw=math.pi / 2)
    g1, g2 = build_scene_graph([along, cube]), build_scene_graph([across, cube])
    assert g1.gap("screwdriver", "cube") == pytest.approx(0.0)
    assert g1.has_relation("screwdriver", "Touching", "cube")
    assert g2.gap("screwdriver", "cube") == pytest.approx(0.085)
    assert g2.has_relation("screwdriver", "Near", "cube")


def test_cylinder_gap_is_surface_to_surface():
    a = place("a", 0.5, 0.0, (0.08, 0.08, 0.1), "cylinder")
    b = place("b", 0.5 + 0.2 / math.sqrt(2), 0.2 / math.sqrt(2), (0.08, 0.08, 0.1), "cylinder")
    assert build_scene_graph([a, b]).gap("a", "b") == pytest.approx(0.12)


# ---------------------------------------------------------------------------------------------
# camera-relative relations
# ---------------------------------------------------------------------------------------------

def test_behind_and_in_front_of_from_the_camera():
    ball = place("ball", 0.42, 0.0, BALL, "sphere")    # smaller x: farther from the camera
    cube = place("cube", 0.52, 0.0, CUBE)
    g = build_scene_graph([ball, cube])
    assert g.has_relation("ball", "Behind", "cube")
    assert g.has_relation("cube", "In_Front_Of", "ball")
    assert not g.has_relation("cube", "Behind", "ball")
    assert not rels(g, "ball", "cube") & {"Left_Of", "Right_Of"}


def test_directional_relations_are_local_and_dominant_axis():
    far = build_scene_graph([place("a", 0.3, 0.0, CUBE), place("b", 0.6, 0.0, CUBE)])
    assert not rels(far, "a", "b") & {"Behind", "In_Front_Of", "Left_Of", "Right_Of"}
    lateral = build_scene_graph([place("a", 0.49, -0.05, CUBE), place("b", 0.5, 0.05, CUBE)])
    assert not lateral.has_relation("a", "Behind", "b")
    assert lateral.has_relation("a", "Left_Of", "b")


def test_left_and_right_agree_with_the_camera_image():
    a = place("a", 0.5, -0.05, CUBE)
    b = place("b", 0.5, 0.05, CUBE)
    g = build_scene_graph([a, b])
    uv, _ = Camera().project(np.array([a.position, b.position]))
    assert uv[0, 0] < uv[1, 0]                          # a is left of b in the image
    assert g.has_relation("a", "Left_Of", "b") and g.has_relation("b", "Right_Of", "a")
    assert not g.has_relation("a", "Right_Of", "b")
    # from a camera on the other side of the table, left and right swap
    g2 = build_scene_graph([a, b], camera_position=(-0.2, 0.0, 0.75))
    assert g2.has_relation("a", "Right_Of", "b")


def _segment_hits_box_bruteforce(cam, point, box):
    ts = np.linspace(0.0, 1.0, 4001)[:, None]
    pts = cam + ts * (point - cam)
    lo = box.position - box.size / 2
    hi = box.position + box.size / 2
    return bool(np.any(np.all((pts >= lo) & (pts <= hi), axis=1)))


def test_occludes_ball_behind_box():
    box = place("box", 0.55, 0.0, (0.10, 0.20, 0.15), category="cardboard box")
    ball = place("ball", 0.45, 0.0, BALL, "sphere", category="tennis ball")
    g = build_scene_graph([box, ball])
    assert g.has_relation("box", "Occludes", "ball")
    assert not g.has_relation("ball", "Occludes", "box")
    # independent check: the camera-to-ball-top line of sight passes through the box
    cam = Camera().position
    top = ball.position + np.array([0.0, 0.0, 0.0325])
    assert _segment_hits_box_bruteforce(cam, top, box)


def test_occludes_negatives_far_behind_and_to_the_side():
    box = place("box", 0.55, 0.0, (0.10, 0.20, 0.15))
    far_ball = place("ball", 0.30, 0.0, BALL, "sphere")
    g = build_scene_graph([box, far_ball])
    assert not g.has_relation("box", "Occludes", "ball")
    cam = Camera().position
    assert not _segment_hits_box_bruteforce(cam, far_ball.position, box)
    side_ball = place("ball", 0.45, 0.25, BALL, "sphere")
    assert not build_scene_graph([box, side_ball]).has_relation("box", "Occludes", "ball")
    low_box = place("box", 0.55, 0.0, (0.10, 0.20, 0.02))
    assert not build_scene_graph([low_box, place("ball", 0.45, 0.0, BALL, "sphere")]) \
        .has_relation("box", "Occludes", "ball")


def test_an_object_resting_on_another_does_not_count_as_occluding_it():
    base = place("base", 0.5, 0.0, (0.10, 0.10, 0.04))
    big = place("lid", 0.5, 0.0, (0.12, 0.12, 0.10), z0=0.04)
    g = build_scene_graph([base, big])
    assert g.has_relation("lid", "On_Top_Of", "base")
    assert not g.has_relation("lid", "Occludes", "base")


def test_leaning_on():
    box = place("box", 0.5, 0.0, (0.10, 0.10, 0.15))
    tipped = place("bottle", 0.5, 0.0885, (0.07, 0.07, 0.22), "cylinder", upright=False,
                   z0=0.0)
    g = build_scene_graph([box, tipped])
    assert g.has_relation("bottle", "Leaning_On", "box")
    assert not g.has_relation("box", "Leaning_On", "bottle")
    upright = place("bottle", 0.5, 0.0885, (0.07, 0.07, 0.22), "cylinder")
    assert not build_scene_graph([box, upright]).has_relation("bottle", "Leaning_On", "box")
    apart = place("bottle", 0.5, 0.12, (0.07, 0.07, 0.22), "cylinder", upright=False)
    assert not build_scene_graph([box, apart]).has_relation("bottle", "Leaning_On", "box")


def test_converse_pairs_hold_on_random_scenes():
    rng = np.random.default_rng(3)
    for _ in range(5):
        objs = random_scene(15, rng)
        # add a stack and a container pair so vertical relations are present too
        objs.append(place("s0", 0.0, 0.0, (0.06, 0.06, 0.04), state="stacked"))
        objs.append(place("s1", 0.0, 0.0, (0.04, 0.04, 0.04), z0=0.04, state="stacked"))
        g = build_scene_graph(objs)
        edges = {(r.subject, r.relation, r.object) for r in g.relations()}
        assert edges
        for s, r, o in edges:
            conv = CONVERSE[r]
            if conv is not None:
                assert (o, conv, s) in edges, (s, r, o)
        for s, r, o in edges:
            if r == "Stacked_On":
                assert (s, "On_Top_Of", o) in edges
        # the bands are exclusive
        for a in g.ids:
            for b in g.ids:
                if a != b:
                    assert len(set(g.relations_between(a, b))
                               & {"Touching", "Adjacent_To", "Near", "Far_From"}) <= 1


# ---------------------------------------------------------------------------------------------
# queries and bad input
# ---------------------------------------------------------------------------------------------

def test_neighbours_within_uses_surface_gap_and_sorts_nearest_first():
    t = place("t", 0.5, 0.0, CUBE)
    objs = [t, place("n1", 0.5, 0.13, CUBE), place("n2", 0.5, -0.07, CUBE),
            place("n3", 0.5, 0.30, CUBE)]
    g = build_scene_graph(objs)
    assert g.neighbours_within("t", 0.15) == ["n2", "n1"]     # gaps 0.02, 0.08
    assert g.neighbours_within("t", 0.02 + 1e-9) == ["n2"]
    assert g.neighbours_within("t", 0.01) == []
    with pytest.raises(UnknownTargetError):
        g.neighbours_within("ghost", 0.1)


def test_plain_dicts_are_accepted():
    g = build_scene_graph([
        {"id": "a", "category": "cube", "position": [0.5, 0.0, 0.025], "size": CUBE},
        {"id": "b", "category": "cube", "position": [0.5, 0.07, 0.025], "size": CUBE,
         "state": "filled", "fragility": 0.6, "shape": "cylinder"},
    ])
    assert g.has_relation("a", "Adjacent_To", "b")
    assert g.node("b")["state"] == "filled" and g.node("b")["shape"] == "cylinder"


def test_bad_input_is_rejected_with_clear_messages():
    ok = place("a", 0.5, 0.0, CUBE)
    with pytest.raises(ValidationError, match="duplicate object id 'a'"):
        build_scene_graph([ok, place("a", 0.6, 0.0, CUBE)])
    with pytest.raises(ValidationError, match="position"):
        build_scene_graph([{"id": "n", "position": [float("nan"), 0, 0], "size": CUBE}])
    mutated = place("m", 0.5, 0.0, CUBE)
    mutated.position = np.array([0.5, np.inf, 0.0])      # written after construction
    with pytest.raises(ValidationError, match="'m'.*position"):
        build_scene_graph([ok, mutated])
    with pytest.raises(ValidationError, match="size"):
        build_scene_graph([{"id": "s", "position": [0.5, 0, 0], "size": [0.1, 0.0, 0.1]}])
    with pytest.raises(ValidationError, match="missing field 'size'"):
        build_scene_graph([{"id": "s", "position": [0.5, 0, 0]}])
    with pytest.raises(ValidationError, match="camera_position"):
        build_scene_graph([ok], camera_position=(np.nan, 0.0, 1.0))


def test_empty_and_single_object_scenes():
    g = build_scene_graph([])
    assert len(g) == 0 and g.graph.number_of_nodes() == 0 and g.relations() == []
    g = build_scene_graph([place("a", 0.5, 0.0, CUBE)])
    assert g.graph.number_of_edges() == 0 and g.neighbours_within("a", 1.0) == []
    with pytest.raises(UnknownTargetError):
        g.node("b")


# ---------------------------------------------------------------------------------------------
# config and benchmark
# ---------------------------------------------------------------------------------------------

def test_yaml_matches_the_dataclass_defaults():
    assert SceneGraphConfig.from_config() == SceneGraphConfig()
    params = node_params("scene_graph")
    assert params["delta_check"] == 0.15 and params["delta_safe"] == 0.10
    assert params["collision_force_scale"] == 0.8
    assert params["collision_height_delta"] == 0.03


def test_bad_config_values(tmp_path):
    with pytest.raises(ValidationError):
        SceneGraphConfig(adjacent_gap=0.2)                # breaks touch < adjacent < near
    with pytest.raises(ValidationError):
        SceneGraphConfig(delta_safe=0.2)                  # delta_safe > delta_check
    with pytest.raises(ValidationError):
        SceneGraphConfig(near_gap=float("nan"))
    with pytest.raises(ConfigError, match="unknown scene_graph parameter"):
        SceneGraphConfig.from_params({"delta_chek": 0.1})
    path = tmp_path / "sg.yaml"
    path.write_text("scene_graph:\n  ros__parameters:\n    collision_force_scale: 1.5\n")
    with pytest.raises(ConfigError, match="collision_force_scale"):
        SceneGraphConfig.from_config(path)


def test_random_scenes_do_not_overlap_and_bench_reports_percentiles():
    scene = random_scene(30, np.random.default_rng(1))
    g = build_scene_graph(scene)
    gaps = [g.gap(a, b) for i, a in enumerate(g.ids) for b in g.ids[i + 1:]]
    assert min(gaps) > 0.0
    rows = run_bench(sizes=(10, 40), repeats=4, scenes=2, seed=2)
    assert [r["objects"] for r in rows] == [10, 40]
    for row in rows:
        assert 0.0 < row["p50_ms"] <= row["p99_ms"]
        assert row["mean_edges"] > 0
    assert rows[0]["target_p50_ms"] == 2.0 and rows[1]["target_p50_ms"] is None
    json.dumps(rows)
