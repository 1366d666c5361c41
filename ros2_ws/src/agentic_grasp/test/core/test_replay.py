"""Replay evaluation on a bag written here from synthetic messages (rosbags only, no rclpy).

The "recorded session" is made by running the core planner in process on one perceived cup
with a scripted arm (first attempt slips, second succeeds) and writing what the graph would
have published: every perception answer on /perception/result and every attempt on
/planner/attempts, as CDR through the typestore of agentic_grasp.recording. Replaying it
under the same configuration must agree on every attempt; another initial-grasp source
diverges at attempt 0 with the grasp diff; the report is the same on every run.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rosbags")

from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: E402

from agentic_grasp.core.arm import ArmBackend, ArmError, ArmResult  # noqa: E402
from agentic_grasp.core.camera import Camera  # noqa: E402
from agentic_grasp.core.planner import (EpisodicMemory, PlannerConfig,  # noqa: E402
                                        ReflectivePlanner)
from agentic_grasp.core.planner.planner import scene_graph_constraints  # noqa: E402
from agentic_grasp.core.scene_graph import SceneGraphConfig  # noqa: E402
from agentic_grasp.core.types import AttemptOutcome, Phase, PhysicalEvent  # noqa: E402
from agentic_grasp.recording import replay  # noqa: E402
from agentic_grasp.recording.typestore import connection_args, typestore  # noqa: E402

PERCEPTION = "agentic_grasp_interfaces/msg/PerceptionResult"
ATTEMPT = "agentic_grasp_interfaces/msg/AttemptRecord"
_GRASP_CODES = {"power": 0, "pinch": 1, "side": 2}


def new(msgtype: str, /, **values):
    """A rosbags message of type ``msgtype``: ``values``, defaults for the other fields."""
    store = typestore()
    kwargs = {}
    for field, node in store.fielddefs[msgtype][1]:
        kwargs[field] = values[field] if field in values else _default(node)
    return store.types[msgtype](**kwargs)


def _default(node):
    kind, detail = node
    kind = int(getattr(kind, "value", kind))
    if kind == 1:
        typ = detail[0]
        return "" if typ == "string" else False if typ == "bool" else \
            0.0 if typ.startswith("float") else 0
    if kind == 2:
        return new(detail)
    inner, size = detail
    if int(getattr(inner[0], "value", inner[0])) == 1 and inner[1][0] != "string":
        dtype = {"bool": np.bool_, "byte": np.uint8, "char": np.uint8}.get(inner[1][0],
                                                                             inner[1][0])
        return np.zeros(size if kind == 3 else 0, dtype=dtype)
    return [_default(inner) for _ in range(size if kind == 3 else 0)]


def _vec(name: str, xyz) -> object:
    return new(name, x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


def perception_msg(instruction: str):
    cup = new("agentic_grasp_interfaces/msg/ObjectObservation", id="cup_1", category="cup",
              name="ceramic cup",
              pose=new("geometry_msgs/msg/Pose",
                       position=_vec("geometry_msgs/msg/Point", (0.5, 0.05, 0.05)),
                       orientation=new("geometry_msgs/msg/Quaternion", w=1.0)),
              size=_vec("geometry_msgs/msg/Vector3", (0.08, 0.08, 0.10)),
              fragility=0.7, mass=0.3, confidence=1.0, upright=True,
              affordance=new("agentic_grasp_interfaces/msg/AffordanceDescriptor",
                             type="Graspable_Handle", material="ceramic", fragility=0.7,
                             graspable_region="handle"))
    box = new("agentic_grasp_interfaces/msg/ObjectObservation", id="box_1", category="box",
              pose=new("geometry_msgs/msg/Pose",
                       position=_vec("geometry_msgs/msg/Point", (0.6, -0.2, 0.04)),
                       orientation=new("geometry_msgs/msg/Quaternion", w=1.0)),
              size=_vec("geometry_msgs/msg/Vector3", (0.1, 0.1, 0.08)),
              fragility=0.1, mass=0.2, confidence=1.0, upright=True)
    return new(PERCEPTION, backend="oracle", instruction=instruction, target_found=True,
               target_id="cup_1", objects=[cup, box])


class ScriptedArm(ArmBackend):
    """Attempt 0 slips during lift, attempt 1 succeeds; keeps the grasps it was given."""

    name = "scripted"

    def __init__(self) -> None:
        self.grasps = []
        self.outcomes = []

    def execute(self, target_id, grasp, on_phase, is_cancelled):
        ok = len(self.grasps) > 0
        outcome = AttemptOutcome(
            success=ok, quality=0.8 if ok else 0.2, phi=np.full(7, 0.5),
            events=[] if ok else [PhysicalEvent(kind="slip", phase=Phase.LIFT)],
            phase_reached=Phase.LIFT, measurements={"lift_height_m": 0.1}, duration_s=2.0)
        self.grasps.append(grasp)
        self.outcomes.append(outcome)
        return ArmResult(ArmError.NONE, "", outcome)


def _grasp_msg(g):
    return new("agentic_grasp_interfaces/msg/GraspParameters",
               position=_vec("geometry_msgs/msg/Point", g.position),
               approach_direction=_vec("geometry_msgs/msg/Vector3", g.approach),
               gripper_width=float(g.width), grip_force=float(g.force),
               grasp_type=_GRASP_CODES[g.grasp_type.value],
               approach_height=float(g.approach_height), speed=float(g.speed),
               wrist_yaw=float(g.wrist_yaw))


def _outcome_msg(o):
    names = sorted(o.measurements)
    return new("agentic_grasp_interfaces/msg/GraspOutcome", success=o.success,
               quality=float(o.quality), phi=np.asarray(o.phi, dtype=np.float32),
               events=[f"{e.kind}:{e.phase.value}" for e in o.events],
               phase_reached=o.phase_reached.value, measurement_names=names,
               measurement_values=np.array([o.measurements[n] for n in names],
                                           dtype=np.float64),
               duration_s=float(o.duration_s))


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    """A one-goal session of the full configuration, recorded as the graph would."""
    config = PlannerConfig.from_config()
    from agentic_grasp.core.retrieval import build_retriever

    planner = ReflectivePlanner(config.with_configuration("full"), build_retriever(),
                                scene_graph_constraints(SceneGraphConfig.from_config(),
                                                        Camera().position))
    planner.reseed(config.seed)
    answers = []

    def perceive(text):
        msg = perception_msg(text)
        answers.append(msg)
        return replay.perception_result(msg)

    arm = ScriptedArm()
    task = planner.run_task("pick up the ceramic cup", perceive, arm, EpisodicMemory())
    assert task.success and len(arm.grasps) == 2
    path = tmp_path_factory.mktemp("replay") / "session"
    store = typestore()
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.SQLITE3)
    writer.open()
    conns = {t: writer.add_connection(topic, t, **connection_args(t))
             for topic, t in (("/perception/result", PERCEPTION),
                              ("/planner/attempts", ATTEMPT))}
    stamp = 1_000
    for msg in answers:
        writer.write(conns[PERCEPTION], stamp, store.serialize_cdr(msg, PERCEPTION))
        stamp += 1_000
    for k, (g, o) in enumerate(zip(arm.grasps, arm.outcomes)):
        rec = new(ATTEMPT, goal_id="ab" * 16, target_id="cup_1", attempt=k,
                  grasp=_grasp_msg(g), outcome=_outcome_msg(o))
        writer.write(conns[ATTEMPT], stamp, store.serialize_cdr(rec, ATTEMPT))
        stamp += 1_000
    writer.close()
    return path


def test_full_configuration_agrees_with_its_recording(bag):
    report = replay.replay_bag(bag, "full")
    goal, = report["goals"]
    m = goal["metrics"]
    assert report["agrees"] and m["first_divergence"] is None
    assert m["agreement"] == [True, True]
    assert m["recorded_success"] and m["replay_success"]
    assert goal["instruction"] == "pick up the ceramic cup"
    decision, = goal["decisions"]
    assert decision["initial_source"] == "retrieval" and decision["retrieved"]
    first, second = decision["attempts"]
    assert first["failure_type"] and first["correction"] and second["retry_level"] >= 1


def test_another_configuration_diverges_and_says_how(bag):
    report = replay.replay_bag(bag, "heuristic")
    m = report["goals"][0]["metrics"]
    assert not report["agrees"] and m["agreement"] == [False]
    div = m["first_divergence"]
    assert div["attempt_index"] == 0 and div["target_id"] == "cup_1" and div["diff"]
    assert div["planned"] != div["recorded"]
    assert report["goals"][0]["decisions"][0]["initial_source"] == "heuristic"


def test_replay_is_deterministic(bag):
    assert replay.replay_bag(bag, "full") == replay.replay_bag(bag, "full")
    assert replay.replay_bag(bag, "heuristic") == replay.replay_bag(bag, "heuristic")


def test_grasp_diff_tolerances():
    from agentic_grasp.core.types import GraspParameters, GraspType

    g = GraspParameters(position=np.array([0.5, 0.0, 0.05]), approach=np.array([0, 0, -1.0]),
                        width=0.05, force=10.0, grasp_type=GraspType.POWER)
    assert replay.grasp_diff(g, g.copy(width=0.05 + 1e-6)) == {}
    assert replay.grasp_diff(g, g.copy(wrist_yaw=np.pi)) == {}     # symmetric gripper
    diff = replay.grasp_diff(g, g.copy(width=0.06, grasp_type=GraspType.PINCH))
    assert set(diff) == {"width_m", "grasp_type"}
