"""SceneGraphNode over DDS: InferConstraints, the markers and the latched graph.

The node under test and a client node spin in one MultiThreadedExecutor on a background
thread of this process; every exchange still goes through Fast DDS. Each request carries a
unique header stamp, which the node copies into what it publishes, so a test waits for the
markers / graph of its own request (with a deadline) instead of sleeping.

Expected relations and constraints come from two places: the core (build_scene_graph and
infer_constraints on the same domain objects, to check that nothing is lost or altered on
the way through the messages) and the scene geometry itself (which relation a layout must
produce, which way a bias must point), so a core bug is not silently mirrored.
"""
from __future__ import annotations

import itertools
import math
import threading
import time
from typing import Callable, List, Optional, Sequence

import numpy as np
import pytest
import yaml
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import Marker, MarkerArray

from agentic_grasp.ros.conversions.scene import constraint_set_from_msgs, relation_from_msg
from agentic_grasp.ros.conversions.perception import object_to_msg
from agentic_grasp.core.config import load_yaml
from agentic_grasp.core.scene_graph.constraints import apply_constraints, infer_constraints
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.paths import config_file
from agentic_grasp.core.scene_graph.config import SceneGraphConfig
from agentic_grasp.core.scene_graph.graph import build_scene_graph
from agentic_grasp.core.types import GraspParameters, ObjectInstance, ObjectState, Shape
from agentic_grasp.ros.scene_graph import node as scene_graph_node
from agentic_grasp.ros.scene_graph.node import SceneGraphNode
from agentic_grasp_lab.ros.testing.node_harness import TIMEOUT_S, NodeHarness, wait_future
from agentic_grasp_interfaces.msg import SceneGraph as SceneGraphMsg
from agentic_grasp_interfaces.srv import InferConstraints

CAMERA = (1.15, 0.0, 0.75)
#: Subscriber QoS: every message of the run, including the latched one present at start.
INBOX_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST,
                       reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)
_STAMPS = itertools.count(1)


# ---- scenes ----------------------------------------------------------------------------------

def obj(oid: str, category: str, position, size, **kw) -> ObjectInstance:
    return ObjectInstance(id=oid, category=category, shape=Shape.BOX,
                          position=np.array(position, float), size=np.array(size, float), **kw)


def filled_cup() -> List[ObjectInstance]:
    return [obj("cup", "cup", [0.5, 0.0, 0.05], [0.08, 0.08, 0.10], state=ObjectState.FILLED)]


def cup_by_glass() -> List[ObjectInstance]:
    """A cup 4 cm (surface gap) right of a fragile wine glass, a book far away."""
    return [obj("cup", "cup", [0.5, 0.0, 0.05], [0.08, 0.08, 0.10]),
            obj("glass", "wine glass", [0.5, 0.12, 0.09], [0.08, 0.08, 0.18], fragility=0.9),
            obj("book", "book", [0.22, -0.34, 0.02], [0.08, 0.08, 0.04])]


def stack_of_three() -> List[ObjectInstance]:
    """b3 on b2 on b1, each resting on the one below (stacked state)."""
    return [obj("b1", "box", [0.5, 0.0, 0.03], [0.10, 0.10, 0.06]),
            obj("b2", "box", [0.5, 0.0, 0.08], [0.08, 0.08, 0.04], state=ObjectState.STACKED),
            obj("b3", "box", [0.5, 0.0, 0.115], [0.06, 0.06, 0.03],
                state=ObjectState.STACKED)]


def toy_behind_wall() -> List[ObjectInstance]:
    """A tall cereal box 4 cm in front of a small toy, between it and the camera (+x)."""
    return [obj("toy", "toy", [0.5, 0.0, 0.03], [0.06, 0.06, 0.06]),
            obj("wall", "cereal box", [0.6, 0.0, 0.10], [0.06, 0.15, 0.20])]


# ---- harness ---------------------------------------------------------------------------------

class Inbox:
    """Messages of one subscription, in arrival order, with a deadline-bound wait."""

    def __init__(self) -> None:
        self.items: list = []
        self._cond = threading.Condition()

    def put(self, msg) -> None:
        with self._cond:
            self.items.append(msg)
            self._cond.notify_all()

    def mark(self) -> int:
        with self._cond:
            return len(self.items)

    def wait_for(self, predicate: Callable, since: int = 0, timeout: float = TIMEOUT_S):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for msg in self.items[since:]:
                    if predicate(msg):
                        return msg
                remaining = deadline - time.monotonic()
                if remaining <= 0.0:
                    raise AssertionError(f"no matching message within {timeout} s "
                                         f"({len(self.items) - since} others arrived)")
                self._cond.wait(remaining)


def stamp_of(msg) -> int:
    header = msg.markers[0].header if isinstance(msg, MarkerArray) else msg.header
    return header.stamp.sec


class Harness(NodeHarness):
    """The scene-graph node plus a client node, spun together on a background thread."""

    def __init__(self) -> None:
        super().__init__(SceneGraphNode(), "scene_graph_test_client", InferConstraints,
                         "infer_constraints")

    def setup(self) -> None:
        self.markers, self.graphs = Inbox(), Inbox()
        self.client_node.create_subscription(MarkerArray, "scene_graph/markers",
                                             self.markers.put, INBOX_QOS)
        self.client_node.create_subscription(SceneGraphMsg, "scene_graph/graph",
                                             self.graphs.put, INBOX_QOS)

    def call(self, objects: Sequence, target: str, frame: str = "world",
             mutate: Optional[Callable] = None, every_target: bool = False):
        """One request; returns (response, stamp). ``mutate`` edits the object messages."""
        stamp = next(_STAMPS)
        msgs = [o if not isinstance(o, ObjectInstance) else object_to_msg(o) for o in objects]
        if mutate is not None:
            mutate(msgs)
        request = InferConstraints.Request(target_id=target, every_target=every_target)
        request.scene.header.frame_id = frame
        request.scene.header.stamp.sec = stamp
        request.scene.source = "test"
        request.scene.objects = msgs
        return wait_future(self.cli.call_async(request)), stamp



@pytest.fixture(scope="module")
def sg():
    harness = Harness()
    yield harness
    harness.close()
    assert not harness.thread.is_alive()


# ---- helpers ---------------------------------------------------------------------------------

def triples(relations) -> set:
    return {(r.subject_id, r.relation, r.object_id) for r in relations}


def assert_matches_core(response, objects: Sequence[ObjectInstance], target: str,
                        config: Optional[SceneGraphConfig] = None) -> None:
    """Relations, constraints and Delta g equal the core's for the same objects."""
    graph = build_scene_graph(objects, CAMERA, config)
    expected = {(r.subject, r.relation, r.object): r.distance for r in graph.relations()}
    got = {(r.subject_id, r.relation, r.object_id): r.distance for r in response.relations}
    assert set(got) == set(expected)
    for key, distance in expected.items():
        assert got[key] == pytest.approx(distance, abs=1e-6), key
    for r in response.relations:           # every edge parses back into the domain
        relation_from_msg(r)
    cset = infer_constraints(graph, target)
    assert [(c.type, c.source_id) for c in response.constraints] == \
        [(c.type.value, c.source_id) for c in cset.constraints]
    for msg, c in zip(response.constraints, cset.constraints):
        assert msg.explanation == c.explanation
        assert list(msg.prerequisite_ids) == c.prerequisite_ids
    # re-composing the received constraints gives the response's own Delta g
    adj = constraint_set_from_msgs(target, response.constraints).adjustment
    core = cset.adjustment
    assert adj["force_scale"] == pytest.approx(core["force_scale"], abs=1e-6)
    assert adj["delta_h"] == pytest.approx(core["delta_h"], abs=1e-6)
    assert np.allclose(adj["delta_d"], core["delta_d"], atol=1e-6)
    assert response.force_scale == pytest.approx(core["force_scale"], abs=1e-6)
    assert response.height_delta == pytest.approx(core["delta_h"], abs=1e-6)
    assert response.speed_cap == pytest.approx(core["speed_cap"] or 0.0, abs=1e-6)
    assert list(response.prerequisite_ids) == core["prerequisites"]
    assert response.has_direction_override == (core["direction_override"] is not None)
    direction = [response.direction.x, response.direction.y, response.direction.z]
    want = core["direction_override"] if response.has_direction_override else core["delta_d"]
    assert np.allclose(direction, want, atol=1e-6)


def vec(v) -> np.ndarray:
    return np.array([v.x, v.y, v.z])


def away(objects, target: str, other: str) -> np.ndarray:
    """Horizontal unit vector from other's centre to the target's, from the layout."""
    pos = {o.id: o.position for o in objects}
    d = pos[target][:2] - pos[other][:2]
    return np.append(d / np.linalg.norm(d), 0.0)


# ---- parameters ------------------------------------------------------------------------------

def test_every_threshold_is_a_described_parameter(sg):
    names = [f for f in SceneGraphConfig.__dataclass_fields__]
    assert all(f.metadata.get("description")
               for f in SceneGraphConfig.__dataclass_fields__.values())
    for name in names + ["camera_position", "default_frame"]:
        assert sg.node.has_parameter(name), name
        description = sg.node.describe_parameter(name).description
        assert description and not description.startswith("SceneGraphConfig."), name
    assert list(sg.node.get_parameter("camera_position").value) == list(CAMERA)
    values = {n: sg.node.get_parameter(n).value for n in names}
    values["container_categories"] = tuple(values["container_categories"])
    assert SceneGraphConfig(**values) == SceneGraphConfig()


def test_node_accepts_the_repository_params_file(tmp_path):
    """config/scene_graph.yaml's values have the declared types and give the same config."""
    params = load_yaml(config_file("scene_graph"))["scene_graph"]["ros__parameters"]
    params = dict(params, collision_tilt_angle=0.3, camera_position=[1.0, 0.1, 0.8])
    path = tmp_path / "scene_graph.yaml"
    # a namespace keeps this node's service apart from the module's node under test
    path.write_text(yaml.safe_dump({"/yaml_check/scene_graph": {"ros__parameters": params}}))
    node = SceneGraphNode(namespace="yaml_check",
                          cli_args=["--ros-args", "--params-file", str(path)])
    try:
        settings = node._settings
        expected = SceneGraphConfig.from_config()
        expected.collision_tilt_angle = 0.3
        assert settings.config == expected
        assert settings.camera_position == (1.0, 0.1, 0.8)
    finally:
        node.destroy_node()


def test_an_inconsistent_threshold_stops_the_node_at_start():
    with pytest.raises(ConfigError, match="delta_safe"):             # 0.5 > delta_check
        SceneGraphNode(namespace="bad_params", parameter_overrides=[
            Parameter("delta_safe", value=0.5)]).destroy_node()


def test_parameters_change_at_run_time_and_bad_ones_are_refused(sg):
    objects = cup_by_glass()
    try:
        (result,) = sg.set_params(delta_safe=0.02)           # the glass is 0.04 m away
        assert result.successful, result.reason
        response, _ = sg.call(objects, "cup")
        assert response.success and not response.constraints
        assert response.force_scale == pytest.approx(1.0)

        (result,) = sg.set_params(delta_safe=0.5)            # > delta_check
        assert not result.successful and "delta_safe" in result.reason
        (result,) = sg.set_params(camera_position=[math.nan, 0.0, 1.0])
        assert not result.successful and "camera_position" in result.reason
        assert sg.node.get_parameter("delta_safe").value == pytest.approx(0.02)

        walled = toy_behind_wall()
        response, _ = sg.call(walled, "toy")
        assert ("wall", "Occludes", "toy") in triples(response.relations)
        assert ("toy", "Behind", "wall") in triples(response.relations)
        # the camera moved to the toy's side: the wall no longer hides it, and depth flips
        (result,) = sg.set_params(camera_position=[-0.15, 0.0, 0.75])
        assert result.successful, result.reason
        response, _ = sg.call(walled, "toy")
        assert ("wall", "Occludes", "toy") not in triples(response.relations)
        assert ("wall", "Behind", "toy") in triples(response.relations)
        assert "occlusion" not in [c.type for c in response.constraints]
    finally:
        results = sg.set_params(delta_safe=SceneGraphConfig().delta_safe,
                                camera_position=list(CAMERA))
        assert all(r.successful for r in results)


# ---- the four constraint types ---------------------------------------------------------------

def test_content_preservation_for_a_filled_cup(sg):
    objects = filled_cup()
    response, _ = sg.call(objects, "cup")
    assert response.success, response.message
    assert not response.relations                       # a single object has no edges
    (c,) = response.constraints
    assert (c.type, c.source_id) == ("content_preservation", "cup")
    assert c.has_direction_override and np.allclose(vec(c.direction_override), [0, 0, -1])
    assert c.speed_cap == pytest.approx(SceneGraphConfig().content_speed_cap)
    assert np.allclose(vec(c.direction_bias), 0.0) and c.force_scale == pytest.approx(1.0)
    assert "filled" in c.explanation
    assert response.has_direction_override
    assert np.allclose(vec(response.direction), [0.0, 0.0, -1.0])
    assert response.speed_cap == pytest.approx(0.05)
    assert_matches_core(response, objects, "cup")


def test_collision_avoidance_next_to_a_fragile_glass(sg):
    objects = cup_by_glass()
    response, _ = sg.call(objects, "cup")
    assert response.success, response.message
    rels = triples(response.relations)
    # 4 cm side by side, at one level; the glass lies at +y, the camera's right
    assert {("cup", "Adjacent_To", "glass"), ("glass", "Adjacent_To", "cup"),
            ("cup", "Left_Of", "glass"), ("glass", "Right_Of", "cup"),
            ("book", "Far_From", "glass")} <= rels
    (c,) = response.constraints
    assert (c.type, c.source_id) == ("collision_avoidance", "glass")
    assert c.force_scale == pytest.approx(0.8) and c.height_delta == pytest.approx(0.03)
    assert not c.has_direction_override and c.speed_cap == 0.0
    tilt = math.tan(SceneGraphConfig().collision_tilt_angle)
    bias = -tilt * away(objects, "cup", "glass")
    assert np.allclose(vec(c.direction_bias), bias, atol=1e-6)
    assert not response.has_direction_override
    assert np.allclose(vec(response.direction), bias, atol=1e-6)
    assert (response.force_scale, response.speed_cap) == (pytest.approx(0.8), 0.0)
    assert response.height_delta == pytest.approx(0.03)
    assert_matches_core(response, objects, "cup")
    # a planner applying the received constraints tilts the hand 20 deg away from the glass
    grasp = GraspParameters(position=np.array([0.5, 0.0, 0.05]))
    adjusted = apply_constraints(grasp, constraint_set_from_msgs("cup", response.constraints))
    assert adjusted.force == pytest.approx(0.8 * grasp.force)
    tilt_deg = math.degrees(math.acos(-adjusted.approach[2] / np.linalg.norm(adjusted.approach)))
    assert tilt_deg == pytest.approx(20.0, abs=1e-4)
    pre_grasp = adjusted.position - adjusted.approach_height * adjusted.approach
    assert pre_grasp[1] < adjusted.position[1]            # hand displaced away from +y glass


def test_occlusion_by_a_box_between_camera_and_target(sg):
    objects = toy_behind_wall()
    response, _ = sg.call(objects, "toy")
    assert response.success, response.message
    assert {("wall", "Occludes", "toy"), ("toy", "Behind", "wall"),
            ("wall", "In_Front_Of", "toy")} <= triples(response.relations)
    (c,) = response.constraints
    assert (c.type, c.source_id) == ("occlusion", "wall")
    bias = -math.tan(SceneGraphConfig().occlusion_tilt_angle) * away(objects, "toy", "wall")
    assert np.allclose(vec(c.direction_bias), bias, atol=1e-6)
    assert c.force_scale == pytest.approx(1.0) and c.height_delta == 0.0
    assert "line of sight" in c.explanation
    assert_matches_core(response, objects, "toy")


def test_support_dependency_removes_the_stack_top_first(sg):
    objects = stack_of_three()
    response, _ = sg.call(objects, "b1")
    assert response.success, response.message
    assert {("b2", "On_Top_Of", "b1"), ("b1", "Supports", "b2"), ("b3", "Stacked_On", "b2"),
            ("b2", "Stacked_On", "b1"), ("b1", "Under", "b3")} <= triples(response.relations)
    (c,) = response.constraints
    assert (c.type, c.source_id) == ("support_dependency", "b2")
    assert list(c.prerequisite_ids) == ["b3", "b2"]
    assert list(response.prerequisite_ids) == ["b3", "b2"]
    assert response.force_scale == pytest.approx(1.0) and not response.has_direction_override
    assert_matches_core(response, objects, "b1")
    # the top of the stack carries no constraint at all
    response, _ = sg.call(objects, "b3")
    assert response.success and not response.constraints


def test_constraints_compose_collision_first_then_content(sg):
    objects = cup_by_glass()
    objects[0].state = ObjectState.FILLED
    response, _ = sg.call(objects, "cup")
    assert response.success, response.message
    assert [c.type for c in response.constraints] == ["collision_avoidance",
                                                      "content_preservation"]
    # the override wins on direction; force and clearance of collision avoidance stay
    assert response.has_direction_override
    assert np.allclose(vec(response.direction), [0.0, 0.0, -1.0])
    assert response.force_scale == pytest.approx(0.8)
    assert response.height_delta == pytest.approx(0.03)
    assert response.speed_cap == pytest.approx(0.05)
    assert_matches_core(response, objects, "cup")


# ---- what is published -----------------------------------------------------------------------

def test_markers_show_objects_relations_and_constraints(sg):
    objects = cup_by_glass()
    response, stamp = sg.call(objects, "cup", frame="")
    assert response.success, response.message
    msg = sg.markers.wait_for(lambda m: m.markers and stamp_of(m) == stamp)
    markers = msg.markers
    assert markers[0].action == Marker.DELETEALL
    assert all(m.header.frame_id == "world" for m in markers)      # empty frame -> default
    by_ns = {}
    for m in markers[1:]:
        assert m.action == Marker.ADD and m.color.a > 0.0
        by_ns.setdefault(m.ns, []).append(m)
    cubes = by_ns["objects"]
    assert len(cubes) == len(objects) and {m.type for m in cubes} == {Marker.CUBE}
    sizes = sorted(tuple(np.round([m.scale.x, m.scale.y, m.scale.z], 6)) for m in cubes)
    assert sizes == sorted(tuple(np.round(o.size, 6)) for o in objects)
    labels = by_ns["object_labels"]
    assert {m.type for m in labels} == {Marker.TEXT_VIEW_FACING}
    assert sorted(m.text for m in labels) == sorted(o.id for o in objects)
    assert len({(m.ns, m.id) for m in markers[1:]}) == len(markers) - 1   # ids unique per ns

    # edges: cup-glass drawn once with both facts; Far_From (book) is left out
    (lines,) = by_ns["relations"]
    assert lines.type == Marker.LINE_LIST and len(lines.points) == 2
    (edge_label,) = by_ns["relation_labels"]
    assert sorted(edge_label.text.split("\n")) == ["Adjacent_To", "cup Left_Of glass"]
    assert ("book", "Far_From", "cup") in triples(response.relations)
    assert not any("Far_From" in m.text for m in markers)

    # one collision arrow plus the composed approach, both ending at the cup's top centre
    arrows = [m for m in by_ns["constraints"] + by_ns["approach"] if m.type == Marker.ARROW]
    assert len(arrows) == 2
    top = objects[0].position + [0.0, 0.0, objects[0].size[2] / 2.0]
    for arrow in arrows:
        start, tip = vec(arrow.points[0]), vec(arrow.points[1])
        assert np.allclose(tip, top, atol=1e-9)
        direction = (tip - start) / np.linalg.norm(tip - start)
        assert math.degrees(math.acos(-direction[2])) == pytest.approx(20.0, abs=1e-4)
        assert direction[1] > 0.0          # the hand descends moving toward +y: it starts
        #                                    on the side away from the glass
    (summary,) = by_ns["constraint_labels"]
    assert "collision_avoidance (glass)" in summary.text and "x0.80" in summary.text

    graph = sg.graphs.wait_for(lambda g: stamp_of(g) == stamp)
    assert graph.header.frame_id == "world" and graph.source == "test"
    assert [o.id for o in graph.objects] == [o.id for o in objects]
    assert triples(graph.relations) == triples(response.relations)


def test_markers_follow_the_scene_frame_and_replace_the_previous_scene(sg):
    response, stamp = sg.call(stack_of_three(), "b1", frame="panda_link0")
    assert response.success
    msg = sg.markers.wait_for(lambda m: m.markers and stamp_of(m) == stamp)
    assert msg.markers[0].action == Marker.DELETEALL
    assert {m.header.frame_id for m in msg.markers} == {"panda_link0"}
    texts = [m.text for m in msg.markers if m.ns == "object_labels"]
    assert sorted(texts) == ["b1", "b2 [stacked]", "b3 [stacked]"]
    # support dependency changes no direction: no arrow, but the removal order is shown
    assert not [m for m in msg.markers[1:] if m.type == Marker.ARROW]    # [0]: DELETEALL
    (summary,) = [m for m in msg.markers if m.ns == "constraint_labels"]
    assert "remove first: b3, b2" in summary.text
    edge_text = "\n".join(m.text for m in msg.markers if m.ns == "relation_labels")
    assert "b2 On_Top_Of b1" in edge_text and "Supports" not in edge_text   # drawn once
    graph = sg.graphs.wait_for(lambda g: stamp_of(g) == stamp)
    assert graph.header.frame_id == "panda_link0"


# ---- bad input and empty scenes --------------------------------------------------------------

def _set(index: int, **fields):
    def mutate(msgs):
        for name, value in fields.items():
            target = msgs[index]
            *path, last = name.split("__")
            for part in path:
                target = getattr(target, part)
            setattr(target, last, value)
    return mutate


@pytest.mark.parametrize("target, mutate, words", [
    ("cup", _set(1, pose__position__y=math.nan), ["'glass'", "position", "finite"]),
    ("cup", _set(0, pose__position__x=math.inf), ["'cup'", "position"]),
    ("cup", _set(1, id="cup"), ["duplicate", "'cup'"]),
    ("unicorn", None, ["unicorn", "not in the scene", "cup, glass"]),
    ("cup", _set(2, size__z=0.0), ["'book'", "size"]),
    ("cup", _set(0, size__x=-0.05), ["'cup'", "size"]),
    ("cup", _set(1, state=7), ["'glass'", "state 7"]),
    ("cup", _set(1, fragility=1.5), ["'glass'", "fragility"]),
    ("cup", _set(2, id=""), ["objects[2]", "id"]),
    ("cup", _set(0, pose__orientation__w=math.nan), ["'cup'", "yaw"]),
], ids=["nan-position", "inf-position", "duplicate-id", "unknown-target", "zero-size",
        "negative-size", "bad-state", "fragility-range", "empty-id", "nan-orientation"])
def test_bad_requests_fail_cleanly_and_the_node_keeps_serving(sg, target, mutate, words):
    since = sg.markers.mark()
    bad, bad_stamp = sg.call(cup_by_glass(), target, mutate=mutate)
    assert not bad.success
    for word in words:
        assert word in bad.message, (word, bad.message)
    assert not bad.relations and not bad.constraints
    good, stamp = sg.call(cup_by_glass(), "cup")
    assert good.success, good.message
    # the failed request published nothing: the next markers are the good request's
    first = sg.markers.wait_for(lambda m: m.markers and stamp_of(m) in (bad_stamp, stamp),
                                since=since)
    assert stamp_of(first) == stamp


def test_an_exception_inside_the_core_is_reported_not_fatal(sg, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("simulated core bug")

    monkeypatch.setattr(scene_graph_node, "infer_constraints", broken)
    response, _ = sg.call(cup_by_glass(), "cup")
    assert not response.success
    assert "internal error" in response.message and "simulated core bug" in response.message
    monkeypatch.undo()
    response, _ = sg.call(cup_by_glass(), "cup")
    assert response.success, response.message


def test_empty_scene(sg):
    response, stamp = sg.call([], "")
    assert response.success, response.message
    assert not response.relations and not response.constraints
    assert response.force_scale == pytest.approx(1.0) and not response.prerequisite_ids
    msg = sg.markers.wait_for(lambda m: m.markers and stamp_of(m) == stamp)
    assert [m.action for m in msg.markers] == [Marker.DELETEALL]   # clears the last scene
    graph = sg.graphs.wait_for(lambda g: stamp_of(g) == stamp)
    assert not graph.objects and not graph.relations

    response, _ = sg.call([], "cup")
    assert not response.success
    assert "'cup'" in response.message and "empty" in response.message


def test_no_target_gives_the_graph_without_constraints(sg):
    objects = stack_of_three()
    response, stamp = sg.call(objects, "")
    assert response.success, response.message
    assert "no target_id" in response.message
    assert not response.constraints and not response.prerequisite_ids
    graph = build_scene_graph(objects, CAMERA)
    assert triples(response.relations) == {(r.subject, r.relation, r.object)
                                           for r in graph.relations()}
    msg = sg.markers.wait_for(lambda m: m.markers and stamp_of(m) == stamp)
    assert not [m for m in msg.markers if m.ns.startswith("constraint")]
    assert len([m for m in msg.markers if m.ns == "objects"]) == 3


@pytest.mark.parametrize("scene", [cup_by_glass, stack_of_three, toy_behind_wall])
def test_every_target_answers_each_object_as_a_request_naming_it(sg, scene):
    """One call with every_target carries, per object in the scene's order, exactly the
    constraints a request naming that object answers (what lets the planner take its first
    sub-goal's constraints from the task graph's call)."""
    objects = scene()
    response, _ = sg.call(objects, "", every_target=True)
    assert response.success, response.message
    assert not response.constraints                 # no target_id: none of its own
    assert [e.target_id for e in response.every_target] == [o.id for o in objects]
    for entry, o in zip(response.every_target, objects):
        alone, _ = sg.call(objects, o.id)
        assert alone.success, alone.message
        assert entry.constraints == alone.constraints, o.id
        assert_matches_core(alone, objects, o.id)
    plain, _ = sg.call(objects, "")
    assert not plain.every_target                   # only when asked
    assert triples(plain.relations) == triples(response.relations)


def test_a_late_subscriber_gets_the_last_graph(sg):
    response, stamp = sg.call(toy_behind_wall(), "toy")
    assert response.success
    sg.graphs.wait_for(lambda g: stamp_of(g) == stamp)
    late = Inbox()
    sub = sg.client_node.create_subscription(SceneGraphMsg, "scene_graph/graph", late.put,
                                             INBOX_QOS)
    try:
        graph = late.wait_for(lambda g: True)
        assert stamp_of(graph) == stamp
        assert ("wall", "Occludes", "toy") in triples(graph.relations)
    finally:
        sg.client_node.destroy_subscription(sub)

