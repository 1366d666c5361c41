"""Two retrieval nodes (two robots) following the PostgreSQL fleet store over DDS: a record
one robot commits is served by both robots' next request; the database down at start, and
refused credentials (test/conftest.py's pg_server, never a skip)."""
from __future__ import annotations

import time

import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.retrieval.acquired.store import FleetStore
from agentic_grasp.ros.retrieval.node import RetrievalNode
from agentic_grasp_lab.ros.testing.node_harness import wait_future
from agentic_grasp_lab.testing.pg_server import free_port
from agentic_grasp_interfaces.msg import AffordanceDescriptor as AffordanceMsg
from agentic_grasp_interfaces.srv import RetrieveStrategies

from .conftest import assert_stopped

THERMOS = {"type": "Graspable_Body", "material": "metal", "fragility": 0.0, "region": "body"}
CUP = {"type": "Graspable_Handle", "material": "ceramic", "fragility": 0.3, "region": "handle"}


def _node(ns: str, tmp_path) -> RetrievalNode:
    return RetrievalNode(namespace=ns, parameter_overrides=[
        Parameter("acquired_store", value="postgres"),
        Parameter("fleet.cache_path", value=str(tmp_path / f"{ns.strip('/')}-cache.jsonl")),
        Parameter("fleet.spool_path", value="none")])


def _request(category, aff):
    return RetrieveStrategies.Request(category=category, affordance=AffordanceMsg(
        type=aff["type"], material=aff["material"], fragility=aff["fragility"],
        graspable_region=aff["region"]))


class Fleet:
    """Retrieval nodes in namespaces, a client per node, one executor thread."""

    def __init__(self, nodes):
        import threading

        self.nodes = nodes
        self.client_node = rclpy.create_node("fleet_test_client")
        self.executor = MultiThreadedExecutor(num_threads=4)
        for n in nodes + [self.client_node]:
            self.executor.add_node(n)
        self.clients = [self.client_node.create_client(
            RetrieveStrategies, f"{n.get_namespace()}/retrieve_strategies") for n in nodes]
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
        assert all(c.wait_for_service(timeout_sec=30.0) for c in self.clients)

    def ask(self, i, category, aff):
        return wait_future(self.clients[i].call_async(_request(category, aff)))

    def close(self):
        self.executor.shutdown()
        for n in self.nodes + [self.client_node]:
            n.destroy_node()
        self.thread.join(timeout=10)


def _thermos_record(robot="robot3"):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
    from test_fleet_store import _records

    return _records(1, robot=robot, prefix="ros")[0]


def test_a_commit_by_one_robot_is_served_to_both_robots_next_request(pg_dsn, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("AGENTIC_GRASP_PG_DSN", pg_dsn)
    fleet = Fleet([_node("/robot1", tmp_path), _node("/robot2", tmp_path)])
    try:
        for i in (0, 1):
            res = fleet.ask(i, "thermos", THERMOS)
            assert res.success and res.message.startswith("fallback")  # nobody learned it
            assert not any(s.experience.id.startswith("acq-") for s in res.strategies)
        rec = _thermos_record()
        writer = FleetStore(pg_dsn, spool_path=tmp_path / "spool.jsonl", robot="robot3")
        assert writer.append(rec) == "db"
        committed = time.monotonic()
        for i in (0, 1):
            deadline = time.monotonic() + 5.0
            while True:
                res = fleet.ask(i, "thermos", THERMOS)
                if not res.message.startswith("fallback") or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            assert res.strategies and res.strategies[0].experience.id == rec["id"]
            assert time.monotonic() - committed < 5.0
        writer.close()
    finally:
        fleet.close()


def test_database_down_at_start_the_node_serves_the_authored_kb(tmp_path, monkeypatch,
                                                               pg_server):
    monkeypatch.setenv("AGENTIC_GRASP_PG_DSN",
                       f"host=127.0.0.1 port={free_port()} dbname=fleet user=nobody "
                       "connect_timeout=2")
    fleet = Fleet([_node("/robot9", tmp_path)])
    try:
        assert "not reachable" in fleet.nodes[0].retriever.status
        res = fleet.ask(0, "cup", CUP)
        assert res.success and res.strategies                 # the authored knowledge base
    finally:
        fleet.close()


def test_refused_credentials_stop_the_node_naming_host_and_database(pg_server, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setenv("AGENTIC_GRASP_PG_DSN", pg_server.dsn("postgres", password="nope-x1"))
    with pytest.raises(ConfigError) as err:
        _node("/robot8", tmp_path)
    assert "127.0.0.1" in str(err.value) and "database postgres" in str(err.value)
    assert "nope-x1" not in str(err.value)


def test_bringup_with_the_fleet_store_records_the_robot_and_serves_it(pg_dsn, monkeypatch):
    """The whole graph as processes with ``store: postgres`` (bringup's --store/--robot): a
    goal's attempts land in the database under the robot's name and the retrieval node
    serves them."""
    from action_msgs.msg import GoalStatus

    from agentic_grasp.ros.common import qos
    from agentic_grasp.ros.client.graph_client import GraphClient
    from agentic_grasp.core.retrieval.acquired.pg_store import Filter, PostgresStore
    from agentic_grasp.ros.graph.launcher import Launcher
    from .test_planner_graph import PHASE_DELAY_S, PLANNER, PlannerGraph

    monkeypatch.setenv("AGENTIC_GRASP_PG_DSN", pg_dsn)     # the node processes inherit it

    class FleetGraph(PlannerGraph):
        def __init__(self) -> None:
            self.launcher = Launcher({"store": "postgres", "robot": "arm-7"},
                                     extra_params={"sim": {"phase_delay_s": PHASE_DELAY_S},
                                                   "planner": PLANNER})
            self.launcher.start()
            try:
                self.client = GraphClient("test_fleet_client")
                self._connect(qos)
            except Exception:
                self.close()
                raise

    graph = FleetGraph()
    try:
        graph.load("sg_banana", 1)
        status, result, _, goal_id = graph.grasp("pick up the banana")
        assert status == GoalStatus.STATUS_SUCCEEDED, result.message
        rows = PostgresStore(pg_dsn).select(Filter(robots=["arm-7"], goal_ids=[goal_id]))
        assert [r["acquisition"]["attempt"] for r in rows] == \
            [a.attempt for a in result.attempts]
        assert rows[-1]["success"] and rows[-1]["category"] == "banana"
        client = graph.client.node.create_client(RetrieveStrategies, "retrieve_strategies")
        assert client.wait_for_service(timeout_sec=10.0)
        aff = rows[-1]["affordance"]
        future = client.call_async(RetrieveStrategies.Request(
            category="banana", k=50, affordance=AffordanceMsg(
                type=aff["type"], material=aff["material"], fragility=float(aff["fragility"]),
                graspable_region=aff["region"])))
        deadline = time.monotonic() + 10.0
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert future.done() and future.result().success
        assert any(s.experience.id.startswith("acq-arm-7-")
                   for s in future.result().strategies)
    finally:
        codes = graph.close()
    assert_stopped(codes)


def test_planner_node_refuses_bad_credentials_and_starts_spooling_when_the_db_is_down(
        pg_server, tmp_path, monkeypatch):
    from agentic_grasp.core.retrieval.acquired.pg_store import StoreConfigError
    from agentic_grasp.ros.planner.node import PlannerNode

    params = [Parameter("acquisition.path", value="default"),
              Parameter("acquisition.store", value="postgres"),
              Parameter("acquisition.robot", value="arm-5"),
              Parameter("acquisition.spool_path", value=str(tmp_path / "spool.jsonl"))]
    monkeypatch.setenv("AGENTIC_GRASP_PG_DSN", pg_server.dsn("postgres", password="bad-pw9"))
    with pytest.raises(StoreConfigError) as err:
        PlannerNode(parameter_overrides=params)
    assert "database postgres" in str(err.value) and "bad-pw9" not in str(err.value)
    monkeypatch.setenv("AGENTIC_GRASP_PG_DSN", f"host=127.0.0.1 port={free_port()} "
                       "dbname=fleet user=nobody connect_timeout=2")
    node = PlannerNode(parameter_overrides=params)
    try:
        acq = node._acquirer                                # noqa: SLF001
        assert acq.store.robot == "arm-5" and acq.context.robot == "arm-5"
        rec = _thermos_record("arm-5")
        assert acq.store.append(rec) == "spool"             # nothing lost while away
        assert (tmp_path / "spool.jsonl").read_text().count(rec["id"]) == 1
    finally:
        node.destroy_node()
