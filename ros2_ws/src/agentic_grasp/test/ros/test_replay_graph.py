"""A recorded whole-graph session replays to the same decisions (recording/replay.py).

The graph runs as bringup runs it (simulated VLM perception, experience acquisition on, to a
file of this test), with the recorder beside it (``agentic-grasp bag record``:
recording/session.py), for three goals: the long-horizon clearing task (three sub-goals,
retrieval with the camera crop as visual query, experience acquired after each attempt), a
tennis ball hidden behind a box (a wrist-camera view uncovers it before the grasp), and a
cup after the clearing task's cup (episodic memory recalls it). Replayed faithfully, every
goal reproduces its result and every attempt's parameters bit for bit; recomputing
retrieval over the acquired file as the retrieval node had read it, constraints, and
perception on the recorded camera frames does too; another
configuration diverges and leaves the rest unobserved; a bag cut mid-goal replays its
complete goals and names the cut one.
"""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy")

GOALS = [("lh_clear_table", 0), ("it_ball_behind_box", 2), ("sg_cup", 0)]


@pytest.fixture(scope="module")
def session_bag(tmp_path_factory):
    from agentic_grasp.ros.recording.session import record_session

    root = tmp_path_factory.mktemp("replay_graph")
    bag = root / "session"
    done = record_session(str(bag), GOALS, {"acquired": str(root / "acquired.jsonl")},
                          timeout_s=120.0, server_timeout_s=90.0, say=lambda _t: None)
    assert [(g["task"], g["seed"]) for g in done] == GOALS
    return bag


def test_faithful_replay_reproduces_every_decision(session_bag):
    from agentic_grasp.core.planner import PlannerConfig
    from agentic_grasp.ros.recording.replay import read_session, recorded_config, replay_bag

    session = read_session(session_bag)
    assert [g.header["seed"] for g in session.goals] == [s for _, s in GOALS]
    assert session.cut == [] and session.stopped == ""
    kinds = [[d["kind"] for d in g.documents if d["type"] == "exchange"]
             for g in session.goals]
    assert kinds[0].count("retrieve") == 3 and kinds[0].count("execute") >= 3
    assert "move_camera" in kinds[1] and "wrist_camera" in kinds[1]       # uncovered
    assert session.goals[2].header["memory"]["entries"]          # memory from earlier goals
    assert recorded_config(session.goals[0].header) == PlannerConfig.from_config()
    report = replay_bag(session_bag)
    s = report["summary"]
    assert (s["goals"], s["reproduced"]) == (3, 3), report["goals"]
    assert s["attempts_agreed"] == s["recorded_attempts"] > 0
    for goal, recorded in zip(report["goals"], session.goals):
        assert goal["replayed"] == {**goal["recorded"], "message": goal["replayed"]["message"]}
        planned = [a["grasp"] for d in goal["decisions"] for a in d["attempts"]]
        sent = [d["request"]["grasp"] for d in recorded.documents if d.get("kind") == "execute"]
        assert planned == sent                                   # bit for bit
    assert replay_bag(session_bag) == report                     # deterministic


def test_recomputed_components_reproduce_too(session_bag):
    """Today's retrieval (the acquired file as the node had read it, the recorded crop),
    constraints and perception (the recorded captures, the node's per-goal noise) give the
    recorded answers again, so the goals reproduce."""
    from agentic_grasp.ros.recording.replay import replay_bag

    for recompute in (["retrieval"], ["constraints"], ["perception"],
                      ["perception", "retrieval", "constraints"]):
        report = replay_bag(session_bag, recompute=recompute)
        assert report["summary"]["reproduced"] == 3, (recompute, report["goals"])


def test_another_configuration_is_compared_up_to_its_first_divergence(session_bag, capsys):
    from agentic_grasp import cli
    from agentic_grasp.ros.recording.replay import replay_bag

    report = replay_bag(session_bag, "no_haa_rag")
    for goal in report["goals"]:
        div = goal["metrics"]["first_divergence"]
        assert goal["verdict"] == "unobserved" and goal["replayed"] is None
        assert div["kind"] == "execute" and div["attempt"] == 1 and div["parameters"]
    code = cli.main(["replay", str(session_bag), "--configuration", "no_haa_rag"])
    out = capsys.readouterr().out
    assert code == 0 and "unobserved 3" in out and "replayed: failure" not in out


def _killed_mid_goal(bag, out, goal_id):
    """What a recorder killed during goal ``goal_id`` leaves: the bag's messages up to the
    middle of that goal (between its first decision input and its goal log), no
    metadata.yaml and the file's last bytes missing (the summary never written)."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer

    from agentic_grasp.ros.recording.bag.typestore import connection_args

    with Reader(bag) as reader:
        first = end = None
        for conn, stamp, raw in reader.messages():
            if conn.topic == "/planner/decision_inputs" and first is None \
                    and goal_id.encode() in bytes(raw):
                first = stamp
            if conn.topic == "/planner/goal_log" and goal_id.encode() in bytes(raw):
                end = stamp
        assert first is not None and end is not None and first < end
        cut_at = (first + end) // 2
        writer = Writer(out, version=9, storage_plugin=StoragePlugin.MCAP)
        writer.open()
        conns = {c.id: writer.add_connection(c.topic, c.msgtype, **connection_args(c.msgtype))
                 for c in reader.connections}
        for conn, stamp, raw in reader.messages():
            if stamp < cut_at:
                writer.write(conns[conn.id], stamp, raw)
        writer.close()
    (out / "metadata.yaml").unlink()
    mcap = next(out.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[:-64])


def test_a_bag_cut_mid_goal_replays_the_goals_before_it(session_bag, tmp_path, capsys):
    """A recorder killed during the second goal: every goal before it replays, the cut one
    is named, and only --strict makes that an error."""
    from agentic_grasp import cli
    from agentic_grasp.ros.recording.replay import read_session, replay_bag

    whole = [g.goal_id for g in read_session(session_bag).goals]
    cut = tmp_path / "killed"
    _killed_mid_goal(Path(session_bag), cut, whole[1])
    report = replay_bag(cut)
    assert not report["complete"] and report["stopped"]
    assert [g["goal_id"] for g in report["goals"]] == whole[:1]
    assert [c["goal_id"] for c in report["cut"]] == whole[1:2]
    assert report["summary"]["reproduced"] == 1
    assert cli.main(["replay", str(cut)]) == 0
    out = capsys.readouterr()
    assert "NOT REPLAYED" in out.out and whole[1][:8] in out.err and "damaged" in out.err
    assert cli.main(["replay", str(cut), "--strict"]) == 1
