"""Whole graph over DDS: every node of graph.py as its own process, GraspObject end to end.

The planner's peer timeouts are short here (a few seconds) so the dead-peer test ends fast;
the simulator's phases take 0.2 s each so a cancel lands in the middle of an attempt. The
scenes and seeds are deterministic (the oracle has no noise in config/perception.yaml, the
simulator reseeds on every load, the planner reseeds per goal): sg_apple seed 4 fails its first
attempt (position_error) and succeeds on the second, as it does in process (run_trial). (This
was sg_cup seed 0 before; the pivot grip of handled containers now grasps that cup at
the first attempt.)
"""
from __future__ import annotations

import math

import os
import subprocess
import sys
import threading
import time

import pytest

from action_msgs.msg import GoalStatus
from rclpy.qos import QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import Marker, MarkerArray

from agentic_grasp.commands import grasp as grasp_cli
from agentic_grasp.commands.grasp import PlannerClient
from agentic_grasp_interfaces.action import GraspObject
from agentic_grasp_interfaces.msg import AttemptRecord, GoalLog
from agentic_grasp_interfaces.srv import Perceive

from .conftest import assert_stopped

Result = GraspObject.Result
PHASE_DELAY_S = 0.2
TIMEOUTS = {"timeouts.perceive_s": 3.0, "timeouts.retrieve_s": 3.0,
            "timeouts.constraints_s": 3.0, "timeouts.execute_s": 10.0}
#: These tests pin an exact attempt sequence (first attempt fails on position_error, the
#: level-1 correction succeeds). Over ROS the camera crop's s_vis decides between the cup's
#: two tied strategies (cup-001 / cup-002 at s_final 0.6 without it) and that choice is not
#: yet reproducible across runs (seen: 1 of 2 runs picks the other, which fails), so the
#: planner here retrieves without the visual query. Known issue, in the README.
PLANNER = {**TIMEOUTS, "visual_query": "none"}


class Run:
    """One goal as the client sees it: feedback through the action client's callback."""

    def __init__(self) -> None:
        self.feedback = []
        self.executing = threading.Event()

    def on_feedback(self, fb) -> None:
        self.feedback.append(fb)
        if fb.stage == "execute":
            self.executing.set()


class PlannerGraph:
    """All nodes as processes, a client, and the planner's topics recorded.

    Feedback is also recorded from the action's feedback topic itself: rclpy's action client
    drops feedback that arrives after the result (the last "done" may), the topic does not.
    """

    def __init__(self) -> None:
        from agentic_grasp.ros.common import qos
        from agentic_grasp.ros.client.graph_client import GraphClient
        from agentic_grasp.ros.graph.launcher import Launcher

        # acquisition on (bringup's default) into the session's temporary data dir: the
        # acquisition test below reads it; other modules' graphs run with it off.
        # oracle perception, asked for (the embedded default is vlm_sim): the pinned attempt
        # sequences and the exact "perception sees the scene" wait need ground truth
        self.launcher = Launcher({"perception": "oracle"},
                                 extra_params={"sim": {"phase_delay_s": PHASE_DELAY_S},
                                               "planner": PLANNER})
        self.launcher.start()
        try:
            self.client = GraphClient("test_planner_client")
        except Exception:
            self.launcher.stop()
            raise
        try:
            self._connect(qos)
        except Exception:           # no node may outlive a failed setup
            self.close()
            raise

    def _connect(self, qos) -> None:
        self.planner = PlannerClient(self.client)
        self.attempts = []
        self.markers = []
        self.feedback = {}
        self.goal_logs = {}
        self._lock = threading.Lock()
        self._news = threading.Condition(self._lock)
        node = self.client.node
        node.create_subscription(AttemptRecord, "planner/attempts", self._on_attempt,
                                 qos.RELIABLE_STREAM)
        node.create_subscription(MarkerArray, "planner/markers", self._on_markers, qos.LATCHED)
        from agentic_grasp.ros.planner import goal_log

        node.create_subscription(GoalLog, goal_log.TOPIC, self._on_goal_log, goal_log.QOS)
        node.create_subscription(GraspObject.Impl.FeedbackMessage,
                                 "grasp_object/_action/feedback", self._on_feedback,
                                 QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        self.perceive = node.create_client(Perceive, "perceive")
        assert self.planner.wait_for_server(60.0), "planner did not come up"
        self._warm_up()

    def _warm_up(self, timeout_s: float = 60.0) -> None:
        """Ready = one goal through every peer succeeds and its attempt record arrives on
        planner/attempts. While the processes still start (2 cores) a first call can outlast
        the short test timeouts, and discovery may match this client's (volatile)
        subscription to the planner's publisher after a goal's record went out: a loaded run
        once saw the first test's record never arrive. This configuration has no memory, so
        the warm-up leaves nothing behind for the tests."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.load("sg_cube", 0)
            status, result, _, goal_id = self.grasp("pick up the wood cube",
                                                    "no_episodic_memory")
            if status == GoalStatus.STATUS_SUCCEEDED and \
                    self.published(goal_id, len(result.attempts), timeout_s=5.0):
                return
            assert time.monotonic() < deadline, \
                f"graph not ready: {result.message or 'no attempt record on planner/attempts'}"

    def load(self, task: str, seed: int):
        """Load a scene and wait until perception (the oracle) sees exactly its objects."""
        loaded = grasp_cli.load_scene(self.client, task, seed)
        grasp_cli.wait_until_perceived(self.client, self.perceive, loaded.object_ids)
        return loaded

    def _on_attempt(self, msg) -> None:
        with self._news:
            self.attempts.append(msg)
            self._news.notify_all()

    def _on_markers(self, msg) -> None:
        with self._news:
            self.markers.append(msg)

    def _on_goal_log(self, msg) -> None:
        with self._news:
            self.goal_logs[msg.goal_id] = msg
            self._news.notify_all()

    def goal_log(self, goal_id: str, timeout_s: float = 5.0):
        """The GoalLog of ``goal_id`` (None when it did not arrive)."""
        with self._news:
            self._news.wait_for(lambda: goal_id in self.goal_logs, timeout_s)
            return self.goal_logs.get(goal_id)

    def _on_feedback(self, msg) -> None:
        with self._news:
            self.feedback.setdefault(bytes(msg.goal_id.uuid).hex(), []).append(msg.feedback)
            self._news.notify_all()

    def published(self, goal_id: str, count: int, timeout_s: float = 5.0):
        """The AttemptRecords published for ``goal_id`` once ``count`` have arrived."""
        with self._news:
            self._news.wait_for(lambda: len(self._of(goal_id)) >= count, timeout_s)
            return self._of(goal_id)

    def _of(self, goal_id: str):
        return [a for a in self.attempts if a.goal_id == goal_id]

    def stream(self, goal_id: str, timeout_s: float = 5.0):
        """Every feedback message of ``goal_id`` from the topic, once "done" is among them."""
        def done():
            return any(fb.stage == "done" for fb in self.feedback.get(goal_id, []))

        with self._news:
            self._news.wait_for(done, timeout_s)
            return list(self.feedback.get(goal_id, []))

    def send(self, instruction: str, configuration: str = ""):
        run = Run()
        handle = self.planner.send(instruction, configuration, run.on_feedback, 10.0)
        return handle, run

    def grasp(self, instruction: str, configuration: str = "", timeout_s: float = 60.0):
        """(status, result, feedback from the topic, goal id) of one goal."""
        handle, _ = self.send(instruction, configuration)
        assert handle.accepted
        status, result = self.planner.wait(handle, timeout_s)
        goal_id = bytes(handle.goal_id.uuid).hex()
        return status, result, self.stream(goal_id), goal_id

    def truth_ids(self, until=None, timeout_s: float = 5.0):
        deadline = time.monotonic() + timeout_s
        while True:
            ids = {o.id for o in self.client.ground_truth()}
            if until is None or until(ids) or time.monotonic() > deadline:
                return ids
            self.client._truth_event.clear()
            self.client._truth_event.wait(0.1)

    def close(self):
        if getattr(self, "planner", None) is not None:
            self.planner.close()
        self.client.close()
        return self.launcher.stop()


@pytest.fixture(scope="module")
def graph():
    g = PlannerGraph()
    yield g
    codes = g.close()
    assert_stopped(codes)


def test_banana_is_grasped_through_the_planner(graph):
    graph.load("sg_banana", 0)
    status, result, feedback, goal_id = graph.grasp("pick up the banana")
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert result.success and result.error_code == Result.ERROR_NONE
    assert list(result.grasped_ids) == ["banana_1"]
    assert result.attempts[-1].outcome.success
    assert len(result.attempts[-1].outcome.phi) == 7
    assert result.total_time_s > 0.0
    # Feedback walks the stages of Algorithm 1 in order and ends with done.
    stages = [fb.stage for fb in feedback]
    firsts = [s for i, s in enumerate(stages) if s not in stages[:i]]
    assert firsts == ["perceive", "plan", "reason", "retrieve", "execute", "done"], stages
    executes = [fb.thought for fb in feedback if fb.stage == "execute"]
    assert executes[:3] == ["approach (1/3)", "close (2/3)", "lift (3/3)"]
    assert all(fb.target_id == "banana_1" for fb in feedback
               if fb.stage in ("reason", "execute"))
    assert all((fb.subgoal_index, fb.subgoal_count) == (0, 1) for fb in feedback)
    # Every attempt is also published on planner/attempts, as in the result.
    published = graph.published(goal_id, len(result.attempts))
    assert [a.attempt for a in published] == [a.attempt for a in result.attempts]
    assert published[-1].grasp == result.attempts[-1].grasp
    assert published[-1].diagnosis.failure_type == "none"
    # Clearance mode with nothing near the banana: the strategy runs as fitted, in the clear.
    assert published[-1].candidate == "strategy unchanged"
    assert published[-1].clearance_m == math.inf and published[-1].collision_free
    # The planned grasp was drawn: DELETEALL, approach arrow, two fingers, a label.
    types = [m.type for m in graph.markers[-1].markers if m.action == Marker.ADD]
    assert types == [Marker.ARROW, Marker.CUBE, Marker.CUBE, Marker.TEXT_VIEW_FACING]
    assert "banana_1" not in graph.truth_ids(until=lambda ids: "banana_1" not in ids)
    # One GoalLog for the goal: what it was asked, what ran, how it ended.
    log = graph.goal_log(goal_id)
    assert (log.instruction, log.requested_configuration, log.configuration) == \
        ("pick up the banana", "", "full")
    assert (log.success, log.error_code, log.message, list(log.grasped_ids),
            log.attempt_count) == (True, Result.ERROR_NONE, result.message, ["banana_1"],
                                   len(result.attempts))
    assert (log.end_stamp.sec, log.end_stamp.nanosec) > \
        (log.start_stamp.sec, log.start_stamp.nanosec)


def test_first_attempt_fails_and_reflection_recovers(graph):
    graph.load("sg_apple", 4)
    status, result, feedback, goal_id = graph.grasp("pick up the apple")
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    assert list(result.grasped_ids) == ["apple_1"]
    first, second = result.attempts[0], result.attempts[1]
    assert not first.outcome.success
    assert first.diagnosis.failure_type == "position_error"
    assert first.diagnosis.retry_level == 1 and first.diagnosis.correction
    assert second.retry_level == 1 and second.outcome.success
    # the rule: re-centre, or raise the grasp point when already centred (here: up 10 mm)
    assert second.grasp.position.z > first.grasp.position.z
    reflect = [fb for fb in feedback if fb.stage == "reflect"]
    assert reflect and reflect[0].failure_type == "position_error"
    assert reflect[0].correction == first.diagnosis.correction
    # Re-perception after the failure, before the corrected attempt.
    stages = [fb.stage for fb in feedback]
    assert "perceive" in stages[stages.index("execute"):stages.index("reflect")]
    assert len(graph.published(goal_id, 2)) == 2


def test_episodic_memory_lives_for_the_session(graph):
    graph.load("sg_cup", 0)
    graph.grasp("pick up the ceramic cup")
    # The cup succeeded just before: the same scene is now planned from memory.
    graph.load("sg_cup", 0)
    status, result, feedback, _ = graph.grasp("pick up the ceramic cup")
    plans = [fb.thought for fb in feedback if fb.stage == "plan" and fb.target_id]
    assert plans[0].startswith("initial grasp from memory"), plans
    assert status == GoalStatus.STATUS_SUCCEEDED and len(result.attempts) == 1
    # Another configuration has its own memory (here: none), so it retrieves again.
    graph.load("sg_cup", 0)
    status, result, feedback, _ = graph.grasp("pick up the ceramic cup", "no_recovery")
    plans = [fb.thought for fb in feedback if fb.stage == "plan" and fb.target_id]
    assert plans and not plans[0].startswith("initial grasp from memory"), plans
    # ... and without recovery a failed first attempt ends the goal (sg_apple seed 4).
    graph.load("sg_apple", 4)
    status, result, _, _ = graph.grasp("pick up the apple", "no_recovery")
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == Result.ERROR_GRASP_FAILED, result.message
    assert len(result.attempts) == 1
    assert result.attempts[0].diagnosis.failure_type == "position_error"
    assert "position_error" in result.message


#: Tries of the cancel test: the attempt runs 3 phases of PHASE_DELAY_S, and the cancel is
#: sent when the client sees the "execute" feedback; a client spun late sends it too late,
#: and the grasp then succeeds (ROS lets a goal succeed after a cancel request; a fresh-clone
#: run saw it once: cancel requested 0.22 s before the attempt's end).
CANCEL_TRIES = 3


def test_cancel_during_an_attempt_stops_the_arm(graph):
    for attempt in range(1, CANCEL_TRIES + 1):
        graph.load("sg_banana", 2)
        handle, run = graph.send("pick up the banana")
        assert handle.accepted
        assert run.executing.wait(20.0)
        assert graph.planner.cancel(handle)
        status, result = graph.planner.wait(handle, 20.0)
        if status != GoalStatus.STATUS_SUCCEEDED:
            break
        print(f"cancel try {attempt}: the attempt ended before the cancel reached the arm")
    assert status == GoalStatus.STATUS_CANCELED, result.message
    assert result.error_code == Result.ERROR_CANCELED and not result.success
    assert list(result.grasped_ids) == []
    # The executor's goal was canceled too: the arm stopped before lifting, the banana stays.
    assert not result.attempts[-1].outcome.success
    assert result.attempts[-1].outcome.phase_reached in ("approach", "close")
    assert "banana_1" in graph.truth_ids()
    # Planner and executor are free again.
    status, result, _, _ = graph.grasp("pick up the banana")
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message


def test_a_second_goal_while_busy_is_rejected(graph):
    graph.load("sg_banana", 3)
    handle, run = graph.send("pick up the banana")
    assert handle.accepted
    assert run.executing.wait(20.0)
    second, _ = graph.send("pick up the banana")
    assert not second.accepted
    status, result = graph.planner.wait(handle, 30.0)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message


@pytest.mark.parametrize("configuration, rule", [("heuristic", "heuristic rule 1"),
                                                 ("heuristic_box", "box rule")])
def test_both_heuristic_baselines_run_through_the_graph(graph, configuration, rule):
    # every Table II name the in-process bench runs, the graph runs too
    graph.load("sg_banana", 4)
    status, result, feedback, goal_id = graph.grasp("pick up the banana", configuration)
    assert result.error_code != Result.ERROR_INVALID_GOAL, result.message
    assert result.attempts and rule in result.attempts[0].thought
    assert result.attempts[0].memory_transfer == ""          # memory off for the baselines
    assert graph.goal_log(goal_id).configuration == configuration


@pytest.mark.parametrize("instruction, configuration, reason", [
    ("", "", "instruction is empty"),
    ("   ", "", "instruction is empty"),
    ("pick up the banana " * 530, "", "at most 500"),
    ("pick up the banana", "turbo", "unknown planner configuration 'turbo'"),
])
def test_malformed_goals_are_accepted_and_aborted_with_the_reason(graph, instruction,
                                                                  configuration, reason):
    status, result, feedback, goal_id = graph.grasp(instruction, configuration,
                                                    timeout_s=10.0)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == Result.ERROR_INVALID_GOAL
    log = graph.goal_log(goal_id)        # refused goals are logged too
    assert (log.success, log.error_code, log.message, log.requested_configuration) == \
        (False, Result.ERROR_INVALID_GOAL, result.message, configuration)
    assert reason in result.message
    assert len(result.attempts) == 0
    assert [fb.stage for fb in feedback] == ["done"] and reason in feedback[0].thought


def test_a_goal_waits_for_a_dead_dependency_to_come_back(graph):
    # Since the one peer call (ros/common/peer_call.py): a node the goal needs no answer from
    # while it dies is waited for at the next call, within timeouts.restart_wait_s.
    graph.load("lh_clear_table", 2)
    handle, run = graph.send("clear the table")
    assert handle.accepted
    assert run.executing.wait(20.0)
    graph.launcher.kill_node("perception")
    time.sleep(1.5)             # known dead (lease + verdict, 1.2 s); a supervisor respawns
    graph.launcher.restart_node("perception")
    status, result = graph.planner.wait(handle, 90.0)
    assert result.error_code not in (Result.ERROR_PEER_LOST, Result.ERROR_DEPENDENCY_TIMEOUT,
                                     Result.ERROR_PERCEPTION_FAILED, Result.ERROR_INTERNAL), \
        result.message
    assert result.attempts

    assert graph.perceive.wait_for_service(timeout_sec=30.0)
    deadline = time.monotonic() + 30.0
    while True:                 # up once it answers with a usable result
        future = graph.perceive.call_async(Perceive.Request(instruction="pick up the cube"))
        graph.client.wait_future(future, 10.0)
        if future.done() and not future.result().result.error:
            break
        assert time.monotonic() < deadline, "perception did not come back"
    graph.load("sg_banana", 4)
    status, result, _, _ = graph.grasp("pick up the banana")
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentic_grasp.cli", "grasp", *args],
                          capture_output=True, text=True, timeout=90, env=dict(os.environ))


def test_cli_streams_feedback_and_exits_by_outcome(graph):
    ok = _cli("pick up the wood cube", "--task", "sg_cube", "--seed", "1")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "[execute ]" in ok.stdout
    assert "result: SUCCESS" in ok.stdout and "grasped: cube_1" in ok.stdout
    failed = _cli("pick up the apple", "--task", "sg_apple", "--seed", "4",
                  "--configuration", "no_recovery", "--json")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert '"error_code": "ERROR_GRASP_FAILED"' in failed.stdout
    refused = _cli("", "--json")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "ERROR_INVALID_GOAL" in refused.stdout
    # not on the table: a goal that failed (1, as the README says), the views it took to
    # look for it reported as views, never as a grasp attempt
    absent = _cli("pick up the banana", "--task", "sg_cup", "--seed", "0")
    assert absent.returncode == 1, absent.stdout + absent.stderr
    report = absent.stdout[absent.stdout.index("result:"):]
    assert report.startswith("result: FAILED (ERROR_TARGET_NOT_FOUND)"), report
    assert "landmark" not in report and "0 grasp attempt(s)" in report, report
    assert " N " not in report and "with the wrist camera" in report, report


def test_bringup_acquires_every_attempt_and_retrieval_serves_it_live(graph):
    """Acquisition is on by default in bringup (here into the session's temporary data
    dir): each attempt of a goal is one experience with the goal's id, and the retrieval
    node serves it to the next request without a restart."""
    import json
    import os

    from agentic_grasp.core.retrieval.acquired.acquisition import default_acquired_path
    from agentic_grasp_interfaces.msg import AffordanceDescriptor as AffordanceMsg
    from agentic_grasp_interfaces.srv import RetrieveStrategies

    path = default_acquired_path()
    assert str(path).startswith(os.environ["AGENTIC_GRASP_DATA_HOME"])
    graph.load("sg_banana", 1)
    status, result, _, goal_id = graph.grasp("pick up the banana")
    assert status == GoalStatus.STATUS_SUCCEEDED, result.message
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    mine = [r for r in records if r["acquisition"]["goal_id"] == goal_id]
    assert [r["acquisition"]["attempt"] for r in mine] == [a.attempt for a in result.attempts]
    assert mine[-1]["success"] and mine[-1]["category"] == "banana"
    assert mine[-1]["acquisition"]["perception_backend"] == "oracle"
    client = graph.client.node.create_client(RetrieveStrategies, "retrieve_strategies")
    assert client.wait_for_service(timeout_sec=10.0)
    request = RetrieveStrategies.Request(
        category="banana", k=50,
        affordance=AffordanceMsg(type=mine[-1]["affordance"]["type"],
                                 material=mine[-1]["affordance"]["material"],
                                 fragility=float(mine[-1]["affordance"]["fragility"]),
                                 graspable_region=mine[-1]["affordance"]["region"]))

    def served(backend):
        request.perception_backend = backend
        future = client.call_async(request)
        deadline = time.monotonic() + 10.0
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert future.done() and future.result().success
        return any(s.experience.id.startswith("acq-") for s in future.result().strategies)

    # learnt under the oracle: served to an oracle run, never to one that perceives from
    # pixels or does not say (ground truth must not leak into vlm / vlm_sim runs)
    assert served("oracle")
    assert not served("vlm_sim") and not served("")


def test_attempt_record_and_markers_carry_the_chosen_candidate(graph):
    """The candidate executed and its clearance to the perceived neighbours."""
    graph.load("it_cup_near_vase", 0)
    status, result, _feedback, goal_id = graph.grasp("pick up the ceramic cup")
    first = graph.published(goal_id, len(result.attempts))[0]
    assert first.candidate.startswith("around "), first.candidate     # a generated candidate
    assert 0.0 < first.clearance_m < 0.3 and "vase_1" in first.clearance_nearest
    assert first.candidate == result.attempts[0].candidate
    texts = [m.text for array in graph.markers for m in array.markers
             if m.type == Marker.TEXT_VIEW_FACING and "cup_1 #1" in m.text]
    assert texts and f"clearance {first.clearance_m * 1e3:.0f} mm" in texts[-1], texts
