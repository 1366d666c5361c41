"""Bags of the release before decision inputs, written here from synthetic messages
(rosbags only, no rclpy), and what reads them.

The "recorded session" is made by running the core planner in process on one perceived cup
with a scripted arm (first attempt slips, second succeeds) and writing what the graph of
that release published: every perception answer on /perception/result and every attempt on
/planner/attempts, as CDR through the typestore of agentic_grasp.ros.recording. Replay
refuses such a bag and names what it lacks (faithful replay needs the decision inputs:
test/ros/test_replay_graph.py); bag info and show read it, whole, cut or of an older layout.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rosbags")

from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: E402

from agentic_grasp.core.arm.backend import ArmBackend, ArmError, ArmResult  # noqa: E402
from agentic_grasp.core.camera import Camera  # noqa: E402
from agentic_grasp.core.planner import (EpisodicMemory, PlannerConfig,  # noqa: E402
                                        ReflectivePlanner)
from agentic_grasp.core.planner.peers import (FunctionPerceiver, HaaRagRetriever,  # noqa: E402
                                              SceneGraphReasoner)
from agentic_grasp.core.scene_graph.config import SceneGraphConfig  # noqa: E402
from agentic_grasp.ros.conversions.perception import perception_result_from_msg  # noqa: E402
from agentic_grasp.ros.recording import replay  # noqa: E402
from agentic_grasp.ros.recording.bag.typestore import connection_args, typestore  # noqa: E402

from test_planner_fakes import observation_for, ok, slip  # noqa: E402

PERCEPTION = "agentic_grasp_interfaces/msg/PerceptionResult"
ATTEMPT = "agentic_grasp_interfaces/msg/AttemptRecord"
_GRASP_CODES = {"power": 0, "pinch": 1, "side": 2}


def new(msgtype: str, /, _store=None, **values):
    """A rosbags message of type ``msgtype``: ``values``, defaults for the other fields."""
    store = _store if _store is not None else typestore()
    kwargs = {}
    for field, node in store.fielddefs[msgtype][1]:
        kwargs[field] = values[field] if field in values else _default(node, store)
    return store.types[msgtype](**kwargs)


def _default(node, store=None):
    kind, detail = node
    kind = int(getattr(kind, "value", kind))
    if kind == 1:
        typ = detail[0]
        return "" if typ == "string" else False if typ == "bool" else \
            0.0 if typ.startswith("float") else 0
    if kind == 2:
        return new(detail, _store=store)
    inner, size = detail
    if int(getattr(inner[0], "value", inner[0])) == 1 and inner[1][0] != "string":
        dtype = {"bool": np.bool_, "byte": np.uint8, "char": np.uint8}.get(inner[1][0],
                                                                             inner[1][0])
        return np.zeros(size if kind == 3 else 0, dtype=dtype)
    return [_default(inner, store) for _ in range(size if kind == 3 else 0)]


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
    """Attempt 0 slips during lift (its sensors: the width lost at lift-off), attempt 1
    holds; keeps the grasps it was given and the observations it reported."""

    name = "scripted"

    def __init__(self) -> None:
        self.grasps = []
        self.observations = []

    def execute(self, target_id, grasp, on_phase, is_canceled):
        held = len(self.grasps) > 0
        obs = observation_for(ok(duration=2.0) if held else slip(duration=2.0), grasp,
                              target_id, {})
        self.grasps.append(grasp)
        self.observations.append(obs)
        return ArmResult(ArmError.NONE, "", obs)


def _grasp_msg(g):
    return new("agentic_grasp_interfaces/msg/GraspParameters",
               position=_vec("geometry_msgs/msg/Point", g.position),
               approach_direction=_vec("geometry_msgs/msg/Vector3", g.approach),
               gripper_width=float(g.width), grip_force=float(g.force),
               grasp_type=_GRASP_CODES[g.grasp_type.value],
               approach_height=float(g.approach_height), speed=float(g.speed),
               wrist_yaw=float(g.wrist_yaw))


def _wrench_msg(w):
    return new("geometry_msgs/msg/Wrench", force=_vec("geometry_msgs/msg/Vector3", w.force),
               torque=_vec("geometry_msgs/msg/Vector3", w.torque))


def _observation_msg(o):
    return new("agentic_grasp_interfaces/msg/ArmObservation",
               commanded_width_m=float(o.commanded_width_m),
               commanded_speed_mps=float(o.commanded_speed_mps),
               commanded_force_n=float(o.commanded_force_n),
               phase_reached=o.phase_reached.value, planning_error=o.planning_error,
               execution_error=o.execution_error,
               reflexes=[new("agentic_grasp_interfaces/msg/ArmReflex", phase=r.phase.value,
                             ee_position=_vec("geometry_msgs/msg/Point", r.ee_position),
                             wrench=_wrench_msg(r.wrench)) for r in o.reflexes],
               width_at_contact_m=float(o.width_at_contact_m),
               width_after_close_m=float(o.width_after_close_m),
               width_at_liftoff_m=float(o.width_at_liftoff_m),
               width_after_lift_m=float(o.width_after_lift_m),
               close_trace_m=np.asarray(o.close_trace_m, dtype=np.float64),
               grasp_result={None: 0, False: 1, True: 2}[o.is_grasped],
               wrench_free=_wrench_msg(o.wrench_free),
               wrench_gripped=_wrench_msg(o.wrench_gripped),
               wrench_liftoff=_wrench_msg(o.wrench_liftoff),
               wrench_lifted=_wrench_msg(o.wrench_lifted), duration_s=float(o.duration_s))


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
def session():
    """(perception answers, grasps, (observation, the planner's outcome) per attempt) of
    one goal of the full configuration."""
    config = PlannerConfig.from_config()
    from agentic_grasp.core.retrieval import build_retriever

    planner = ReflectivePlanner(config.with_configuration("full"),
                                HaaRagRetriever(build_retriever()),
                                SceneGraphReasoner(SceneGraphConfig.from_config(),
                                                   Camera().position))
    planner.reseed(config.seed)
    answers = []

    def perceive(text):
        msg = perception_msg(text)
        answers.append(msg)
        return perception_result_from_msg(msg)

    arm = ScriptedArm()
    task = planner.run_task("pick up the ceramic cup", FunctionPerceiver(perceive), arm,
                            EpisodicMemory())
    assert task.success and len(arm.grasps) == 2
    outcomes = [a.outcome for a in task.attempts]
    assert [o.success for o in outcomes] == [False, True]
    assert [e.kind for e in outcomes[0].events] == ["slip"]
    return answers, arm.grasps, list(zip(arm.observations, outcomes))


GOAL_ID = "ab" * 16
GOAL_LOG = "agentic_grasp_interfaces/msg/GoalLog"
IMAGE = "sensor_msgs/msg/Image"


def _time(ns):
    return new("builtin_interfaces/msg/Time", sec=ns // 10**9, nanosec=ns % 10**9)


def write_session(path, session, storage=StoragePlugin.SQLITE3, log_configuration=None,
                  frames=0, store=None):
    """The session as the graph records it: perception answers (each after ``frames``
    camera frames of 640x480 rgb8, 0.9 MB each, so an MCAP has several chunks), the attempt
    records and, when ``log_configuration`` is given, the goal log."""
    store = store if store is not None else typestore()
    answers, grasps, outcomes = session
    writer = Writer(path, version=9, storage_plugin=storage)
    writer.open()
    types = [("/perception/result", PERCEPTION), ("/planner/attempts", ATTEMPT),
             ("/camera/color/image_raw", IMAGE), ("/planner/goal_log", GOAL_LOG)]
    conns = {t: writer.add_connection(topic, t, **connection_args(t, store))
             for topic, t in types}
    stamp = 1_000
    rgb = np.zeros((480, 640, 3), np.uint8)
    rgb[200:300, 250:400] = (200, 180, 150)
    for msg in answers:
        for _ in range(frames):
            img = new(IMAGE, _store=store, height=480, width=640, encoding="rgb8",
                      step=640 * 3, data=rgb.reshape(-1).copy())
            writer.write(conns[IMAGE], stamp, store.serialize_cdr(img, IMAGE))
            stamp += 1_000
        writer.write(conns[PERCEPTION], stamp,
                     store.serialize_cdr(_convert(msg, store), PERCEPTION))
        stamp += 1_000
    for k, (g, (obs, o)) in enumerate(zip(grasps, outcomes)):
        rec = new(ATTEMPT, _store=store, goal_id=GOAL_ID, target_id="cup_1", attempt=k,
                  grasp=_convert(_grasp_msg(g), store),
                  observation=_convert(_observation_msg(obs), store),
                  outcome=_convert(_outcome_msg(o), store))
        writer.write(conns[ATTEMPT], stamp, store.serialize_cdr(rec, ATTEMPT))
        stamp += 1_000
    if log_configuration is not None:
        log = new(GOAL_LOG, version=1, goal_id=GOAL_ID, instruction="pick up the ceramic cup",
                  requested_configuration="", configuration=log_configuration,
                  start_stamp=_time(500), end_stamp=_time(stamp), success=True,
                  message="all 1 target(s) grasped", grasped_ids=["cup_1"], attempt_count=2)
        writer.write(conns[GOAL_LOG], stamp, store.serialize_cdr(log, GOAL_LOG))
    writer.close()
    return path


def _convert(msg, store):
    """``msg`` (of today's typestore) as a message of ``store`` (an older layout): the
    fields ``store`` knows, recursively."""
    if store is typestore():
        return msg
    import dataclasses

    name = msg.__msgtype__
    values = {}
    for field, node in store.fielddefs[name][1]:
        value = getattr(msg, field)
        if dataclasses.is_dataclass(value):
            value = _convert(value, store)
        elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            value = [_convert(v, store) for v in value]
        values[field] = value
    return store.types[name](**values)


@pytest.fixture(scope="module")
def bag(tmp_path_factory, session):
    """A one-goal session of the full configuration, recorded as the graph would (sqlite3,
    no goal log: a bag of the release before the goal log)."""
    return write_session(tmp_path_factory.mktemp("replay") / "session", session)


def test_a_bag_of_the_release_before_decision_inputs_is_refused_naming_what_it_lacks(bag):
    """Perception answers and attempt records alone cannot reproduce a goal (its retrieval,
    constraints, memory and seed are not in them): such a bag is refused, never replayed on
    guesses."""
    with pytest.raises(replay.ReplayRefused) as err:
        replay.replay_bag(bag)
    text = str(err.value)
    assert "/planner/decision_inputs" in text and "/planner/goal_log" not in text
    assert "episodic memory" in text and "seed" in text and "record the session again" in text


def test_a_third_party_reader_decodes_every_topic_from_the_embedded_schemas(tmp_path,
                                                                          session):
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    path = write_session(tmp_path / "mcap", session, StoragePlugin.MCAP, "full", frames=1)
    seen = {}
    with (path / "mcap.mcap").open("rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        for schema, channel, _, decoded in reader.iter_decoded_messages():
            assert schema.encoding == "ros2msg"
            seen.setdefault(channel.topic, decoded)
    assert set(seen) == {"/perception/result", "/planner/attempts", "/camera/color/image_raw",
                         "/planner/goal_log"}
    assert seen["/planner/goal_log"].configuration == "full"
    assert seen["/perception/result"].objects[0].id == "cup_1"
    assert seen["/planner/attempts"].grasp.gripper_width > 0.0


def _cut(path, fraction):
    """A copy of the bag's storage file cut at ``fraction`` of its size, with no
    metadata.yaml: what a SIGKILLed recorder leaves."""
    src = next(p for p in path.iterdir() if p.suffix in (".mcap", ".db3"))
    out = path.parent / f"{path.name}_cut"
    out.mkdir()
    data = src.read_bytes()
    (out / f"{out.name}{src.suffix}").write_bytes(data[:int(len(data) * fraction)])
    return out, len(data)


def test_a_bag_cut_mid_file_reads_up_to_the_cut(tmp_path, session):
    from agentic_grasp.ros.recording.bag.reader import bag_info

    path = write_session(tmp_path / "mcap", session, StoragePlugin.MCAP, "full", frames=2)
    whole = bag_info(path)
    assert whole["complete"] and whole["stopped"] == "" and whole["closed"]
    cut, size = _cut(path, 0.6)
    info = bag_info(cut)
    counts = {t["topic"]: t["count"] for t in info["topics"]}
    assert not info["complete"] and not info["closed"]
    assert "unreadable from byte" in info["stopped"] and "truncated" in info["stopped"]
    assert 0 < info["message_count"] < whole["message_count"]
    assert counts["/camera/color/image_raw"] >= 1 and counts["/planner/goal_log"] == 0


def _cli(argv, capsys):
    from agentic_grasp import cli

    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("storage", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_cli_on_a_cut_bag_says_where_it_stops_and_exits_non_zero(tmp_path, session, storage,
                                                                  capsys):
    path = write_session(tmp_path / "bag", session, storage, "full", frames=2)
    code, out, err = _cli(["bag", "info", str(path)], capsys)
    assert code == 0 and ("mcap" if storage == StoragePlugin.MCAP else "sqlite3") in out
    cut, _ = _cut(path, 0.5)
    for argv in (["bag", "info", str(cut)],
                 ["show", str(cut), "--out", str(tmp_path / "pics")]):
        code, out, err = _cli(argv, capsys)
        assert code == 1, (argv, out, err)
        assert "damaged" in err and "Traceback" not in out + err, (argv, err)
    code, out, err = _cli(["replay", str(cut)], capsys)     # no decision inputs: refused
    assert code == 2 and "refused" in err and "Traceback" not in out + err
    code, _, err = _cli(["bag", "info", str(tmp_path / "nothing")], capsys)
    assert code == 2 and "no such bag" in err


def test_a_bag_of_the_older_outcome_layout_still_reads(tmp_path, session):
    """GraspOutcome before event_details: decoded with the bag's own definitions."""
    import shutil

    from rosbags.typesys import Stores, get_typestore

    from agentic_grasp.ros.recording.bag.typestore import interface_types, interfaces_dir

    old_root = tmp_path / "interfaces"
    shutil.copytree(interfaces_dir(), old_root)
    msg = old_root / "msg" / "GraspOutcome.msg"
    msg.write_text("\n".join(line for line in msg.read_text().splitlines()
                             if "event_details" not in line) + "\n")
    old = get_typestore(Stores.ROS2_JAZZY)
    old.register(interface_types(old_root))
    assert "event_details" not in dict(old.fielddefs[
        "agentic_grasp_interfaces/msg/GraspOutcome"][1])
    path = write_session(tmp_path / "old", session, StoragePlugin.SQLITE3, "full", store=old)
    from agentic_grasp.ros.recording.bag.reader import by_topic

    rec = by_topic(path, ["/planner/attempts"])["/planner/attempts"][0][1]
    assert not hasattr(rec.outcome, "event_details") and list(rec.outcome.events) == \
        ["slip:lift"]


def test_an_attempt_record_carries_the_observation_beside_the_planners_reading(bag):
    """The arm's sensor readings travel with the outcome the planner read from them."""
    from agentic_grasp.ros.recording.bag.reader import by_topic

    recs = [m for _, m in by_topic(bag, ["/planner/attempts"])["/planner/attempts"]]
    slipped, held = recs
    assert slipped.observation.phase_reached == "lift"
    assert slipped.observation.width_at_liftoff_m == 0.0 and slipped.observation.grasp_result == 2
    assert held.observation.width_after_lift_m > 0.0
    assert list(slipped.outcome.events) == ["slip:lift"] and held.outcome.success


def test_show_draws_one_picture_per_attempt_and_a_sheet(tmp_path, session, capsys):
    import cv2

    path = write_session(tmp_path / "mcap", session, StoragePlugin.MCAP, "full", frames=1)
    out = tmp_path / "pics"
    code, stdout, err = _cli(["show", str(path), "--out", str(out)], capsys)
    assert code == 0, err
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"{GOAL_ID[:8]}_attempt0.png", f"{GOAL_ID[:8]}_attempt1.png",
                     f"{GOAL_ID[:8]}_sheet.png"]
    first = cv2.imread(str(out / names[0]))
    assert first.shape == (480, 640 + 420, 3)
    # The camera frame is drawn (its lit rectangle shows through), not the blank stand-in.
    assert first[:, :640].max() >= 150


def test_show_draws_the_grasp_where_it_projects():
    """The closing axis of a top-down grasp at the image centre's world point lands there."""
    from agentic_grasp.ros.recording import show

    cam = Camera()
    centre = cam.backproject(cam.cx, cam.cy, 1.0)
    lines = show.gripper_lines(centre, np.array([0.0, 0.0, -1.0]), 0.04, 0.0, 0.1)
    uv, _ = cam.project(lines["closing_axis"])
    assert np.allclose(uv.mean(axis=0), [cam.cx, cam.cy], atol=0.5)
    # The fingers are 40 mm + 2 x 12 mm apart along world y at ~1 m: about 35 px.
    fl, _ = cam.project(lines["finger_left"])
    fr, _ = cam.project(lines["finger_right"])
    assert 25.0 < abs(fl[:, 0].mean() - fr[:, 0].mean()) < 45.0


def test_goals_that_ended_before_the_recording_are_told_apart():
    """recording.reader.goals_before: the latched goal log and attempt history bring earlier
    goals into a late recorder's bag; those are not recorded goals, a goal that ran while
    recording (feedback, or anything sent after the first message) is."""
    from types import SimpleNamespace as NS

    from agentic_grasp.ros.recording.bag.reader import goals_before

    def t(ns):
        return NS(sec=ns // 10**9, nanosec=ns % 10**9)

    def rec(gid, ns):
        return NS(goal_id=gid, header=NS(stamp=t(ns)))

    start = 100 * 10**9
    topics = {"/planner/goal_log": [(start, None)], "/planner/attempts": [(start + 5, None)]}
    logs = {"old": NS(end_stamp=t(start - 10**9)), "new": NS(end_stamp=t(start + 10**9)),
            "running": NS(end_stamp=t(start + 2 * 10**9))}
    attempts = [rec("old", start - 2 * 10**9), rec("nolog_old", start - 10**9),
                rec("nolog_new", start - 10**9), rec("nolog_new", start + 10**9),
                rec("running", start - 10**9), rec("unstamped", 0)]
    before = goals_before(topics, logs, {"running"}, attempts)
    assert before == {"old", "nolog_old"}
    assert goals_before({}, logs, set(), attempts) == set()          # an empty bag


def test_reading_a_bag_for_replay_loads_no_rclpy(bag):
    """Bags are read with rosbags only: importing replay and refusing an old bag load no
    rclpy (the replayed goals bind the planner node's peer classes, which do)."""
    import subprocess
    import sys

    probe = ("import sys; from agentic_grasp.ros.recording import replay\n"
             "try:\n    replay.read_session(sys.argv[1])\n"
             "except replay.ReplayRefused:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rclpy'))")
    out = subprocess.run([sys.executable, "-c", probe, str(bag)], capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_refused_goal_is_named_and_not_taken_for_a_cut_one(tmp_path):
    """A goal the planner refused (ERROR_INVALID_GOAL: nothing decided) has a goal log and a
    'done' feedback but no decision inputs: replay says so, and a --strict run passes."""
    import json

    store = typestore()
    path = tmp_path / "refused"
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    topics = {"/planner/decision_inputs": "std_msgs/msg/String",
              "/planner/goal_log": GOAL_LOG,
              "/grasp_object/_action/feedback":
                  "agentic_grasp_interfaces/action/GraspObject_FeedbackMessage"}
    conns = {topic: writer.add_connection(topic, t, **connection_args(t, store))
             for topic, t in topics.items()}
    fb_type = topics["/grasp_object/_action/feedback"]
    uuid = np.frombuffer(bytes.fromhex(GOAL_ID), dtype=np.uint8).copy()
    fb = new(fb_type, goal_id=new("unique_identifier_msgs/msg/UUID", uuid=uuid),
             feedback=new("agentic_grasp_interfaces/action/GraspObject_Feedback",
                          stage="done", thought="empty instruction"))
    writer.write(conns["/grasp_object/_action/feedback"], 1_000, store.serialize_cdr(fb, fb_type))
    log = new(GOAL_LOG, version=1, goal_id=GOAL_ID, instruction="", configuration="",
              start_stamp=_time(500), end_stamp=_time(2_000), success=False, error_code=1,
              message="empty instruction: say what to grasp")
    writer.write(conns["/planner/goal_log"], 2_000, store.serialize_cdr(log, GOAL_LOG))
    writer.close()
    report = replay.replay_bag(path)
    assert report["goals"] == [] and report["cut"] == []
    refused, = report["refused"]
    assert refused["goal_id"] == GOAL_ID and "refused it: empty instruction" in refused["why"]
    from agentic_grasp import cli

    assert cli.main(["replay", str(path), "--strict"]) == 0
    assert json.loads(json.dumps(report))["refused"] == report["refused"]
