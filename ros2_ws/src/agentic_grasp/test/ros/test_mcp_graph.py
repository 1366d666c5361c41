"""``agentic-grasp mcp`` beside a real graph, driven by the MCP SDK's own stdio client.

Every node of graph.py runs as its own process (oracle perception, as the planner-graph
tests: ground truth makes "the cup is in the scene" exact); the MCP server runs as
``python -m agentic_grasp.cli mcp`` behind the SDK's ``Client(StdioServerParameters)``,
the way Claude Desktop or any MCP host starts it. The tests: the tools are listed; sg_cup is
loaded, described, grasped with progress notifications and pictured; bad inputs are tool
errors and the server keeps serving; without --allow-motion grasp is refused; a client's
cancellation cancels the goal; 100 hostile calls (bad types, huge strings, unknown tools,
calls while the planner is killed) are each answered, the server stays up and no goal is
left running.
"""
from __future__ import annotations

import base64
import os
import sys
import threading
import time

import pytest

mcp = pytest.importorskip("mcp", reason="the MCP SDK is pinned in requirements.lock")

import anyio  # noqa: E402
from action_msgs.msg import GoalStatus, GoalStatusArray  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402

from agentic_grasp.ros.planner import goal_log  # noqa: E402
from agentic_grasp_interfaces.msg import GoalLog  # noqa: E402

from .conftest import assert_stopped  # noqa: E402

PHASE_DELAY_S = 0.2
PLANNER = {"timeouts.perceive_s": 5.0, "timeouts.retrieve_s": 5.0,
           "timeouts.constraints_s": 5.0, "timeouts.execute_s": 15.0,
           "visual_query": "none"}
#: Goals that have not ended (GoalStatus).
RUNNING = (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING, GoalStatus.STATUS_CANCELING)
CALL_TIMEOUT_S = 120.0


def server_params(*flags: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentic_grasp.cli", "mcp", "--server-timeout", "3", "--goal-timeout",
              "90", "--call-timeout", "20", *flags],
        env=dict(os.environ))


class McpGraph:
    """The node graph as processes, and a plain ROS client watching the goals."""

    def __init__(self) -> None:
        from agentic_grasp.ros.client.graph_client import GraphClient
        from agentic_grasp.ros.graph.launcher import Launcher

        self.launcher = Launcher({"perception": "oracle", "acquired": "none"},
                                 extra_params={"sim": {"phase_delay_s": PHASE_DELAY_S},
                                               "planner": PLANNER})
        self.launcher.start()
        try:
            self.client = GraphClient("test_mcp_watch")
        except Exception:
            self.launcher.stop()
            raise
        self._lock = threading.Condition()
        self.logs = {}
        self.status = {}
        node = self.client.node
        node.create_subscription(GoalLog, goal_log.TOPIC, self._on_log, goal_log.QOS)
        node.create_subscription(
            GoalStatusArray, "grasp_object/_action/status", self._on_status,
            QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL))

    def _on_log(self, msg) -> None:
        with self._lock:
            self.logs[msg.goal_id] = msg
            self._lock.notify_all()

    def _on_status(self, msg) -> None:
        with self._lock:
            for s in msg.status_list:
                self.status[bytes(s.goal_info.goal_id.uuid).hex()] = int(s.status)
            self._lock.notify_all()

    def running_goals(self, settle_s: float = 10.0):
        """Goal ids still running after up to ``settle_s`` (a canceled goal takes a moment)."""
        deadline = time.monotonic() + settle_s
        with self._lock:
            while True:
                running = [g for g, s in self.status.items() if s in RUNNING]
                if not running or time.monotonic() > deadline:
                    return running
                self._lock.wait(0.2)

    def wait_log(self, pred, timeout_s: float = 20.0):
        with self._lock:
            self._lock.wait_for(lambda: any(pred(m) for m in self.logs.values()), timeout_s)
            return [m for m in self.logs.values() if pred(m)]

    def wait_announced(self, names, timeout_s: float = 90.0) -> bool:
        """Whether the nodes ``names`` announce their liveliness within ``timeout_s``: a node
        does once its runner holds it (ros/common/runner.py), and stops cleanly on SIGINT
        from then on. A node stopped earlier, while its interpreter is still starting, dies
        of the KeyboardInterrupt in Python's own start-up, before any of its code runs. A
        killed node's writer lost its liveliness long before, so only the new one counts
        (a service or action server's discovery can outlive a killed participant)."""
        from agentic_grasp.ros.common.liveness import PeerMonitor

        monitor = PeerMonitor(self.client.node, names)
        deadline = time.monotonic() + timeout_s
        while not all(monitor.alive(n) for n in names):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def close(self):
        self.client.close()
        return self.launcher.stop()


@pytest.fixture(scope="module")
def graph():
    g = McpGraph()
    yield g
    assert_stopped(g.close())


def run(coro_fn, *args):
    return anyio.run(coro_fn, *args)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def _ready_grasp(client, deadline_s: float = 150.0):
    """Load sg_cup and grasp it through MCP until the graph (just started on 2 loaded
    cores) answers; the (progress, result) of the first goal that ran."""
    deadline = time.monotonic() + deadline_s
    while True:
        loaded = await client.call_tool("load_scene", {"task": "sg_cup", "seed": 0},
                                        read_timeout_seconds=CALL_TIMEOUT_S)
        if not loaded.is_error:
            progress = []

            async def on_progress(value, total, message):
                progress.append((value, total, message))

            result = await client.call_tool("grasp", {"instruction": "pick up the ceramic cup",
                                                      "configuration": "no_episodic_memory",
                                                      "seed": 0},
                                            read_timeout_seconds=CALL_TIMEOUT_S,
                                            progress_callback=on_progress)
            if not result.is_error and "ERROR_DEPENDENCY_TIMEOUT" not in text_of(result):
                return loaded, progress, result
        assert time.monotonic() < deadline, \
            f"graph not ready: {text_of(loaded)} / {text_of(result) if not loaded.is_error else ''}"
        await anyio.sleep(2.0)


def test_tools_scene_grasp_and_picture_over_stdio(graph):
    async def main():
        async with Client(server_params("--allow-motion"),
                          read_timeout_seconds=CALL_TIMEOUT_S) as client:
            listed = await client.list_tools()
            names = {t.name for t in listed.tools}
            assert names == {"grasp", "describe_scene", "load_scene", "retrieve_strategies",
                             "show_last_attempt", "stop", "status"}
            assert all(t.input_schema.get("additionalProperties") is False and t.output_schema
                       for t in listed.tools)
            schema = next(t for t in listed.tools if t.name == "grasp").input_schema
            assert schema["required"] == ["instruction"]
            assert schema["properties"]["instruction"]["maxLength"] == 300

            await _ready_grasp(client)              # the graph answers end to end
            loaded = await client.call_tool("load_scene", {"task": "sg_cup", "seed": 0})
            assert not loaded.is_error and "cup" in text_of(loaded), text_of(loaded)
            assert loaded.structured_content["task"] == "sg_cup"

            scene = await client.call_tool("describe_scene", {})
            assert not scene.is_error, text_of(scene)
            assert "cup" in text_of(scene)
            seen = next(c for c in scene.content if c.type == "image")   # eyes before hands
            assert base64.b64decode(seen.data)[:8] == b"\x89PNG\r\n\x1a\n"
            ids = [o["id"] for o in scene.structured_content["objects"]]
            assert any("cup" in i for i in ids), ids

            progress = []

            async def on_progress(value, total, message):
                progress.append((value, total, message))

            result = await client.call_tool("grasp", {"instruction": "pick up the ceramic cup",
                                                      "configuration": "no_episodic_memory",
                                                      "seed": 0},
                                            progress_callback=on_progress)
            assert not result.is_error, text_of(result)
            assert text_of(result).startswith("SUCCESS"), text_of(result)
            assert result.structured_content["grasped_ids"]
            assert "attempt 1" in text_of(result)
            values = [p[0] for p in progress]
            assert len(progress) >= 3 and values == sorted(values), progress
            stages = {p[2].split()[0].rstrip(":") for p in progress}
            # "done" is the feedback sent just before the result: rclpy's ActionClient drops
            # feedback of a goal whose result it has already taken (the phase-feedback tests
            # check the same way), so the stages before it must arrive, in order
            assert {"perceive", "execute"} <= stages, progress

            picture = await client.call_tool("show_last_attempt", {})
            assert not picture.is_error, text_of(picture)
            image = next(c for c in picture.content if c.type == "image")
            assert image.mime_type == "image/png"
            assert base64.b64decode(image.data)[:8] == b"\x89PNG\r\n\x1a\n"

            strategies = await client.call_tool("retrieve_strategies",
                                                {"category": "cup", "k": 2})
            assert not strategies.is_error, text_of(strategies)
            assert "s_final" in text_of(strategies)

    run(main)
    assert graph.running_goals() == []


@pytest.mark.parametrize("arguments, expected", [
    ({"instruction": ""}, "instruction is empty"),
    ({"instruction": "   "}, "instruction is empty"),
    ({"instruction": "pick up the cup", "configuration": "turbo"}, "configuration"),
    ({"instruction": "pick up the cup", "speed": 99}, "speed"),
    ({"instruction": "pick up the cup " * 100}, "at most 300 characters"),
    ({"instruction": "pick up the cup", "seed": -5}, "greater than or equal to 0"),
])
def test_bad_grasp_inputs_are_tool_errors_and_the_server_keeps_serving(graph, arguments,
                                                                        expected):
    async def main():
        async with Client(server_params("--allow-motion")) as client:
            result = await client.call_tool("grasp", arguments)
            assert result.is_error and expected in text_of(result), text_of(result)
            after = await client.call_tool("load_scene", {"task": "no_such_scene"})
            assert after.is_error and "task" in text_of(after)
            tools = await client.list_tools()
            assert len(tools.tools) == 7

    run(main)
    assert graph.running_goals() == []


def test_without_allow_motion_grasp_is_refused(graph):
    before = set(graph.logs)

    async def main():
        async with Client(server_params()) as client:
            result = await client.call_tool("grasp", {"instruction": "pick up the cup"})
            assert result.is_error and "--allow-motion" in text_of(result)
            scene = await client.call_tool("describe_scene", {})      # reading is allowed
            assert not scene.is_error, text_of(scene)

    run(main)
    time.sleep(1.0)
    assert set(graph.logs) == before                                    # no goal was sent


def test_confirm_refuses_a_client_that_cannot_answer(graph):
    before = set(graph.logs)

    async def main():
        async with Client(server_params("--allow-motion", "--confirm")) as client:
            result = await client.call_tool("grasp", {"instruction": "pick up the cup"})
            assert result.is_error and "cannot answer confirmation" in text_of(result)

    run(main)
    time.sleep(1.0)
    assert set(graph.logs) == before


def test_confirm_over_stdio_asks_before_the_goal(graph):
    from mcp.types import ElicitResult

    asked = []

    def answer(action, content=None):
        async def callback(ctx, params):
            if params.message.startswith("Load the scene"):     # load_scene is gated too
                return ElicitResult(action="accept", content={"confirm": True})
            asked.append(params.message)
            return ElicitResult(action=action, content=content)
        return callback

    async def main(action, content):
        async with Client(server_params("--allow-motion", "--confirm"),
                          elicitation_callback=answer(action, content),
                          read_timeout_seconds=CALL_TIMEOUT_S) as client:
            loaded = await client.call_tool("load_scene", {"task": "sg_cup", "seed": 0})
            assert not loaded.is_error, text_of(loaded)
            return await client.call_tool("grasp", {"instruction": "pick up the ceramic cup",
                                                    "configuration": "no_episodic_memory"})

    before = set(graph.logs)
    declined = anyio.run(main, "decline", None)
    assert declined.is_error and "not confirmed (decline)" in text_of(declined)
    time.sleep(1.0)
    assert set(graph.logs) == before                                    # no goal was sent
    accepted = anyio.run(main, "accept", {"confirm": True})
    assert not accepted.is_error and text_of(accepted).startswith("SUCCESS"), text_of(accepted)
    assert len(asked) == 2 and asked[0] == asked[1], asked
    # the question names the targets the planner makes of the instruction, and the motion
    assert asked[0].startswith("Let the robot arm move to carry out 'pick up the ceramic cup'?")
    assert "1. cup" in asked[0] and "closes the gripper" in asked[0], asked[0]
    assert graph.running_goals() == []


def test_client_cancellation_cancels_the_goal(graph):
    started = time.time()

    async def main():
        async with Client(server_params("--allow-motion"),
                          read_timeout_seconds=CALL_TIMEOUT_S) as client:
            loaded = await client.call_tool("load_scene", {"task": "sg_cup", "seed": 0})
            assert not loaded.is_error, text_of(loaded)
            executing = anyio.Event()

            async def on_progress(value, total, message):
                if message.startswith("execute"):
                    executing.set()

            async with anyio.create_task_group() as tg:
                async def call():
                    await client.call_tool("grasp", {"instruction": "pick up the ceramic cup",
                                                     "configuration": "no_episodic_memory"},
                                           progress_callback=on_progress)
                tg.start_soon(call)
                with anyio.fail_after(60):
                    await executing.wait()
                tg.cancel_scope.cancel()            # the client gives up on the call
            # a grasp right after the cancel waits for the canceled goal to end instead of
            # being refused as "still running"
            again = await client.call_tool("grasp", {"instruction": "pick up the ceramic cup",
                                                     "configuration": "no_episodic_memory"})
            assert "still running" not in text_of(again), text_of(again)
            assert again.structured_content["error_code"] != "GRAPH_ERROR", text_of(again)
            # the server keeps serving this client
            assert not (await client.call_tool("describe_scene", {})).is_error

    run(main)
    canceled = graph.wait_log(lambda m: m.error_code == 6 and m.end_stamp.sec >= int(started))
    assert canceled, "the canceled call's goal did not end as ERROR_CANCELED"
    assert graph.running_goals() == []


HOSTILE_TOOLS = ("grasp", "describe_scene", "load_scene", "retrieve_strategies",
                 "show_last_attempt", "stop", "status")


def _valid_instruction(value) -> bool:
    from agentic_grasp.core.mcp_tools import ToolInputError, check_instruction

    try:
        check_instruction(value)
        return True
    except ToolInputError:
        return False


def hostile_calls():
    """100 (tool, arguments, must be a tool error: True / either: None) an agent gone wrong
    might send."""
    big = "A" * 200_000
    values = [None, 0, -1, 2 ** 80, 3.5, True, "", big, [1, 2], {"x": big}, "\x00\x01",
              "../../etc/passwd", "sg_cup; rm -rf /", "\u202e\u0000"]
    calls = []
    for n in range(100):
        kind = n % 10
        v = values[n % len(values)]
        if kind == 0:
            calls.append(("grasp", {"instruction": v}, None if _valid_instruction(v) else True))
        elif kind == 1:
            calls.append(("grasp", {"instruction": "pick up the cup", "configuration": v,
                                    "seed": v}, None if v is None else True))
        elif kind == 2:
            calls.append(("load_scene", {"task": v, "seed": v}, True))
        elif kind == 3:
            calls.append(("retrieve_strategies", {"category": v, "affordance": v, "k": v},
                          True))
        elif kind == 4:
            calls.append((f"no_such_tool_{n}", {"a": v}, True))
        elif kind == 5:
            calls.append((big[:5000], {}, True))
        elif kind == 6:                       # closed schemas: an unknown argument is refused
            calls.append(("describe_scene", {"unexpected": v}, True))
        elif kind == 7:
            calls.append(("show_last_attempt", {"x": v}, True))
        elif kind == 8:
            calls.append(("grasp", {"instruction": "pick up the ceramic cup"}, None))
        else:
            tool = HOSTILE_TOOLS[n % len(HOSTILE_TOOLS)]
            calls.append((tool, {"instruction": {"nested": [v] * 50}}, True))
    return calls


def test_hostile_calls_are_answered_and_leave_no_goal(graph):
    calls = hostile_calls()
    assert len(calls) == 100 and sum(1 for c in calls if c[2]) >= 75
    answers = []

    async def main():
        async with Client(server_params("--allow-motion"),
                          read_timeout_seconds=CALL_TIMEOUT_S) as client:
            for k, (tool, arguments, _) in enumerate(calls):
                if k == 50:                       # the second half: no planner at all
                    graph.launcher.kill_node("planner")
                    graph.launcher.kill_node("grasp_front")
                started = time.monotonic()
                try:
                    result = await client.call_tool(tool, arguments)
                    answers.append((tool, result.is_error, text_of(result)[:300],
                                    time.monotonic() - started))
                except mcp.MCPError as exc:       # a protocol-level refusal is an answer too
                    answers.append((tool, True, f"MCPError {exc}"[:300],
                                    time.monotonic() - started))
            # still serving: a plain call after the storm
            tools = await client.list_tools()
            assert len(tools.tools) == 7

    try:
        run(main)
    finally:
        graph.launcher.restart_node("planner")
        graph.launcher.restart_node("grasp_front")
        # the graph is whole again before the next test or the module's stop
        assert graph.wait_announced(["planner", "grasp_front"]), \
            "the restarted planner and front did not come up"
    assert len(answers) == 100
    wrong = [(c, a) for c, a in zip(calls, answers) if c[2] and not a[1]]
    assert not wrong, wrong
    # with the planner gone, a well-formed grasp is a tool error naming the failure
    dead = [a for c, a in zip(calls[50:], answers[50:])
            if c[0] == "grasp" and c[2] is None]
    assert dead and all(a[1] and "grasp failed" in a[2] for a in dead), dead
    # bounded: no call waited past the goal timeout the server was given (90 s)
    assert max(a[3] for a in answers) < 90.0, max(answers, key=lambda a: a[3])
    assert graph.running_goals() == []
