"""Supervision of the whole graph: each node SIGKILLed mid-goal costs that goal, not the graph.

Every node of graph.py runs as its own process under the launcher's supervisor (the same one
``agentic-grasp bringup`` runs). For each node in turn, a goal is sent, the node is killed
with SIGKILL while the arm moves (the simulator's three phases take PHASE_DELAY_S each, 1.8 s
in all, longer than the liveliness lease and verdict, 1.2 s, so the death is noticed before
the attempt ends and the kill lands mid-attempt), and the test checks that:

- a node the running attempt needs (executor, sim) or the planner itself: the in-flight goal
  ends within 2 s of the kill with ERROR_PEER_LOST naming the dead node (from the planner; for
  the planner, from the front node that forwarded the goal; for the front node, the client's
  own liveliness watch);
- a node the goal needs no answer from at that moment (perception, retrieval, scene_graph):
  the goal goes on and succeeds (a later call to that node would wait for its restart,
  ros/common/peer_call.py);
- the supervisor restarted that node (alive again within BACK_WITHIN_S, a bound for loaded
  CI machines: a node process takes 1.5-4.6 s to start here, retrieval the longest as it
  embeds its knowledge base) and a goal succeeds after it is back, within the tries' window
  (RECOVERY_S + the scripted motion + 10 s); the time from the kill to that success is
  printed against the 5 s target, not asserted: it is a timing of the machine's load (the CI
  machine once needed 8.9 s for a respawned sim to serve, on a run this machine's took 3 s),
  and timings here are printed, never pass/fail;
- no other node was restarted (same process ids).
"""
from __future__ import annotations

import threading
import time

import pytest

from agentic_grasp_interfaces.action import GraspObject

Result = GraspObject.Result
PHASE_DELAY_S = 0.6
#: The in-flight goal must end this soon after the kill.
END_WITHIN_S = 2.0
#: The killed node must be alive again this soon (restart delay + process start, see above).
BACK_WITHIN_S = 15.0
#: ... and a goal should succeed this soon after it is back (rediscovered by its peers), not
#: counting the scripted motion time of that goal's attempt (3 phases x PHASE_DELAY_S),
#: which is this test's stand-in for a moving arm, not recovery: the target printed beside
#: the measured time (the tries go on for 10 s more before the test fails).
RECOVERY_S = 5.0
MOTION_S = 3 * PHASE_DELAY_S
TIMEOUTS = {"timeouts.perceive_s": 3.0, "timeouts.retrieve_s": 3.0,
            "timeouts.constraints_s": 3.0, "timeouts.execute_s": 10.0}
TASK, SEED, INSTRUCTION, CONFIGURATION = "sg_cube", 0, "pick up the wood cube", \
    "no_episodic_memory"
ORDER = ["perception", "retrieval", "scene_graph", "executor", "sim", "planner", "grasp_front"]
#: Nodes whose death ends the goal in flight (the arm's, and the goal's own processes).
ENDS_GOAL = {"executor", "sim", "planner"}


class SupervisedGraph:
    def __init__(self) -> None:
        from agentic_grasp.ros.client.graph_client import GraphClient
        from agentic_grasp.commands.grasp import PlannerClient
        from agentic_grasp.ros.graph.launcher import Launcher
        from agentic_grasp.ros.common.liveness import PeerMonitor
        from agentic_grasp_interfaces.srv import Perceive

        # oracle, asked for: the test waits until perception lists exactly the scene's objects
        self.launcher = Launcher({"acquired": "none", "perception": "oracle"},
                                 extra_params={"sim": {"phase_delay_s": PHASE_DELAY_S},
                                               "planner": TIMEOUTS})
        self.launcher.start()
        self.launcher.supervise()
        try:
            self.client = GraphClient("test_supervision_client")
            self.planner = PlannerClient(self.client)
            self.perceive = self.client.node.create_client(Perceive, "perceive")
            self.liveness = PeerMonitor(self.client.node, ORDER)
            assert self.planner.wait_for_server(60.0), "planner did not come up"
            deadline = time.monotonic() + 60.0
            while not self.try_goal(10.0)[0]:
                assert time.monotonic() < deadline, "graph not ready"
        except Exception:
            self.launcher.stop()
            raise

    def try_goal(self, timeout_s: float):
        """(succeeded, message): load the scene, wait for perception, one goal."""
        from agentic_grasp.ros.client.graph_client import GraphError
        from agentic_grasp.commands import grasp as grasp_cli

        t0 = time.monotonic()
        try:
            # 2 s: a reply lost to a just-restarted sim (DDS still matching) is asked again.
            loaded = grasp_cli.load_scene(self.client, TASK, SEED, timeout_s=2.0)
            t1 = time.monotonic()
            grasp_cli.wait_until_perceived(self.client, self.perceive, loaded.object_ids,
                                           timeout_s)
            t2 = time.monotonic()
            result = self.planner.grasp(INSTRUCTION, CONFIGURATION, timeout_s=timeout_s,
                                        server_timeout_s=timeout_s)
        except GraphError as exc:
            return False, str(exc)
        print(f"   load {t1 - t0:.2f} perceived {t2 - t1:.2f} goal {time.monotonic() - t2:.2f}")
        return bool(result.success), result.message

    def pids(self):
        return {name: proc.pid for name, proc in self.launcher.procs.items()}

    def close(self):
        self.planner.close()
        self.client.close()
        return self.launcher.stop()


@pytest.fixture(scope="module")
def graph():
    g = SupervisedGraph()
    yield g
    g.close()


def _load_and_wait(graph):
    from agentic_grasp.commands import grasp as grasp_cli

    loaded = grasp_cli.load_scene(graph.client, TASK, SEED, timeout_s=10.0)
    grasp_cli.wait_until_perceived(graph.client, graph.perceive, loaded.object_ids, 10.0)


@pytest.mark.parametrize("victim", ORDER)
def test_a_node_killed_mid_goal_costs_one_goal(graph, victim):
    from agentic_grasp.ros.client.graph_client import PeerLostError

    _load_and_wait(graph)
    before = graph.pids()
    restarts_before = dict(graph.launcher.restarts())
    losses_before = graph.liveness.losses(victim)
    executing = threading.Event()

    def on_feedback(fb):
        if fb.stage == "execute":
            executing.set()

    handle = graph.planner.send(INSTRUCTION, CONFIGURATION, on_feedback=on_feedback)
    assert handle.accepted
    assert executing.wait(10.0), "the goal never reached the arm"
    graph.launcher.kill_node(victim)
    killed = time.monotonic()

    if victim == "grasp_front":
        with pytest.raises(PeerLostError, match="the grasp_front node died"):
            graph.planner.wait(handle, timeout_s=30.0)
    elif victim in ENDS_GOAL:
        status, result = graph.planner.wait(handle, timeout_s=30.0)
        assert not result.success
        assert result.error_code == Result.ERROR_PEER_LOST, result.message
        assert f"the {victim} node died" in result.message
    else:
        status, result = graph.planner.wait(handle, timeout_s=30.0)
        assert result.success, result.message
    ended = time.monotonic() - killed
    if victim in ENDS_GOAL or victim == "grasp_front":
        assert ended <= END_WITHIN_S, f"in-flight goal ended {ended:.2f} s after the kill"

    message = ""
    while graph.liveness.losses(victim) == losses_before or not graph.liveness.alive(victim):
        assert time.monotonic() - killed < BACK_WITHIN_S, f"{victim} did not come back"
        time.sleep(0.02)
    back = time.monotonic()
    print(f"  {victim} alive again {back - killed:.2f} s after the kill")
    while time.monotonic() - back < RECOVERY_S + MOTION_S + 10.0:
        t = time.monotonic()
        ok, message = graph.try_goal(timeout_s=8.0)
        print(f"  try at {t - killed:.2f} s took {time.monotonic() - t:.2f} s: {ok} {message}")
        if ok:
            break
    succeeded = time.monotonic()
    recovered = succeeded - back - MOTION_S
    assert ok, f"no goal succeeded after killing {victim}: {message}"
    after = graph.pids()
    restarts = graph.launcher.restarts()
    assert after[victim] != before[victim]
    assert restarts[victim] == restarts_before.get(victim, 0) + 1
    others = {n: p for n, p in after.items() if n != victim}
    assert others == {n: p for n, p in before.items() if n != victim}, "another node restarted"
    assert {n: c for n, c in restarts.items() if n != victim} == \
        {n: c for n, c in restarts_before.items() if n != victim}
    print(f"{victim}: goal ended {ended:.2f} s after SIGKILL; back after {back - killed:.2f} s; "
          f"a goal succeeded {succeeded - killed - MOTION_S:.2f} s after the kill (target 5 s; "
          f"+ {MOTION_S:.1f} s scripted motion)")
    if recovered > RECOVERY_S:
        print(f"  {victim}: recovery {recovered:.2f} s, beyond the {RECOVERY_S:g} s target "
              "(machine load; not a failure)")
