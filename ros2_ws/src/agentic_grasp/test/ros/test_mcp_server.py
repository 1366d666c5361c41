"""commands/mcp.py's server over a stand-in of the graph bridge: the safety gates, the
elicitation answers, cancellation and graph failures, through the SDK's own client
(in process, and once over streamable HTTP). The real graph: test_mcp_graph.py."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is pinned in requirements.lock")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.types import ElicitResult  # noqa: E402

from agentic_grasp.commands.mcp import build_server, parse_http  # noqa: E402
from agentic_grasp.ros.client.graph_client import GraphError, PeerLostError  # noqa: E402

REPORT = {"success": True, "error_code": "ERROR_NONE", "message": "all 1 target(s) grasped",
          "grasped_ids": ["cup_1"], "total_time_s": 0.5, "attempts": []}


class FakeBridge:
    """GraphBridge's surface; the goal 'runs' for ``goal_s`` and streams four stages."""

    def __init__(self, goal_s: float = 0.3, fail: Exception = None,
                 fail_wait: Exception = None) -> None:
        self.goal_s = goal_s
        self.fail = fail
        self.fail_wait = fail_wait
        self.send_s = 0.0
        self.sent = []
        self.canceled = threading.Event()
        self.ended = threading.Event()

    def start_goal(self, instruction, configuration, seed, on_feedback):
        from concurrent.futures import Future

        if self.fail is not None:
            raise self.fail
        time.sleep(self.send_s)                 # the planner taking its time to accept
        self.sent.append((instruction, configuration, seed))
        future = Future()

        def run():
            for stage in ("perceive", "retrieve", "plan", "execute"):
                on_feedback({"stage": stage, "target_id": "cup_1"})
                time.sleep(0.02)
            try:
                if self.canceled.wait(self.goal_s):
                    future.set_result({**REPORT, "success": False,
                                       "error_code": "ERROR_CANCELED"})
                elif self.fail_wait is not None:
                    future.set_exception(self.fail_wait)
                else:
                    future.set_result(REPORT)
            finally:
                self.ended.set()
        threading.Thread(target=run, daemon=True).start()
        return "goal", future

    def cancel(self, handle):
        self.canceled.set()
        return True

    def describe_scene(self):
        raise GraphError("perceive is not available within 3 s (is its node running?)")

    def load_scene(self, task, seed):
        raise GraphError("load_scene is for the simulator only")


def call(server, tool, arguments, mode="auto", **client_kw):
    async def main():
        async with Client(server, mode=mode, **client_kw) as client:
            return await client.call_tool(tool, arguments)
    return anyio.run(main)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_confirm_accepted_declined_and_cancelled(mode):
    """Both protocol generations: ``legacy`` (the initialize handshake) asks with a
    standalone elicitation/create request, ``auto`` (2026-07-28) with an
    InputRequiredResult round; the answers mean the same."""
    asked = []

    def answer(action, content=None):
        async def callback(ctx, params):
            asked.append(params.message)
            return ElicitResult(action=action, content=content)
        return callback

    bridge = FakeBridge()
    server = build_server(bridge, allow_motion=True, confirm=True)
    ok = call(server, "grasp", {"instruction": "pick up the cup"}, mode,
              elicitation_callback=answer("accept", {"confirm": True}))
    assert not ok.is_error and text_of(ok).startswith("SUCCESS")
    assert asked == ["Let the robot arm move to carry out 'pick up the cup'?"]
    assert bridge.sent == [("pick up the cup", "", None)]
    for action, content, expected in (("accept", {"confirm": False}, "answered no"),
                                      ("decline", None, "decline"),
                                      ("cancel", None, "cancel")):
        refused = call(server, "grasp", {"instruction": "pick up the cup"}, mode,
                       elicitation_callback=answer(action, content))
        assert refused.is_error and f"not confirmed ({expected})" in text_of(refused)
    assert len(bridge.sent) == 1                            # no goal after a refusal
    no_answer = call(server, "grasp", {"instruction": "pick up the cup"}, mode)
    assert no_answer.is_error and "cannot answer confirmation" in text_of(no_answer)
    bad = call(server, "grasp", {"instruction": ""}, mode,
               elicitation_callback=answer("accept", {"confirm": True}))
    assert bad.is_error and "empty" in text_of(bad) and len(asked) == 4   # not even asked


def test_progress_ends_with_done_and_grasp_reports():
    progress = []

    async def main():
        async with Client(build_server(FakeBridge(), True, False)) as client:
            async def on_progress(value, total, message):
                progress.append((value, total, message))
            return await client.call_tool("grasp", {"instruction": "pick up the cup",
                                                    "configuration": "full", "seed": 4},
                                          progress_callback=on_progress)

    result = anyio.run(main)
    assert result.structured_content["grasped_ids"] == ["cup_1"]
    assert [p[2].split()[0].rstrip(":") for p in progress] == \
        ["perceive", "retrieve", "plan", "execute", "done"]
    assert [p[0] for p in progress] == [1.0, 2.0, 3.0, 4.0, 5.0] and progress[-1][1] == 5.0


def test_client_cancellation_cancels_the_goal():
    bridge = FakeBridge(goal_s=30.0)

    async def main():
        async with Client(build_server(bridge, True, False)) as client:
            with anyio.move_on_after(0.5):
                await client.call_tool("grasp", {"instruction": "pick up the cup"})
            # the server keeps serving; the goal slot frees once the goal ended
            return await client.list_tools()

    started = time.monotonic()
    assert len(anyio.run(main).tools) == 5
    assert bridge.canceled.wait(5.0) and bridge.ended.wait(5.0)
    assert time.monotonic() - started < 10.0


def test_a_cancellation_while_the_goal_is_sent_still_cancels_it():
    """The client gives up while the planner is accepting the goal: the accepted goal is
    canceled, not left running."""
    bridge = FakeBridge(goal_s=30.0)
    bridge.send_s = 1.0

    async def main():
        async with Client(build_server(bridge, True, False)) as client:
            with anyio.move_on_after(0.3):
                await client.call_tool("grasp", {"instruction": "pick up the cup"})
            return await client.list_tools()

    assert len(anyio.run(main).tools) == 5
    assert bridge.sent and bridge.canceled.wait(5.0) and bridge.ended.wait(5.0)


@pytest.mark.parametrize("failure, when", [
    (GraphError("the planner's grasp_object action is not available within 3 s"), "send"),
    (GraphError("grasp_object goal rejected: the planner is busy"), "send"),
    (PeerLostError("grasp_object: grasp_front lost its liveliness while the goal ran"),
     "wait"),
    (GraphError("grasp_object: no result within 90 s (goal canceled)"), "wait")])
def test_graph_failures_are_tool_errors(failure, when):
    bridge = FakeBridge(fail=failure) if when == "send" else FakeBridge(fail_wait=failure)
    result = call(build_server(bridge, True, False), "grasp",
                  {"instruction": "pick up the cup"})
    assert result.is_error and "grasp failed: " + str(failure) in text_of(result)
    scene = call(build_server(FakeBridge(), True, False), "describe_scene", {})
    assert scene.is_error and "describe_scene failed: perceive is not available" in \
        text_of(scene)
    sim = call(build_server(FakeBridge(), True, False), "load_scene", {"task": "sg_cup"})
    assert sim.is_error and "simulator only" in text_of(sim)


def test_http_address_parsing():
    assert parse_http("8765") == ("127.0.0.1", 8765)
    assert parse_http(":8765") == ("127.0.0.1", 8765)
    assert parse_http("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_http("[::1]:9000") == ("::1", 9000)
    for bad in ("", "host", "host:0", "host:70000", "host:http"):
        with pytest.raises(ValueError):
            parse_http(bad)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_serves_on_loopback():
    """The command itself with --http PORT: listening on 127.0.0.1 only, the SDK's HTTP
    client lists the tools and a refused grasp comes back as a tool error. (No graph: the
    tools that need it are not called.)"""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "agentic_grasp.cli", "mcp", "--http",
                             str(port), "--server-timeout", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60.0
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "the HTTP server did not come up"
                time.sleep(0.3)

        async def main():
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                tools = await client.list_tools()
                refused = await client.call_tool("grasp", {"instruction": "pick up the cup"})
                return tools, refused

        tools, refused = anyio.run(main)
        assert len(tools.tools) == 5
        assert refused.is_error and "--allow-motion" in text_of(refused)
        # bound to loopback only: another local address of this host is not served
        other = socket.gethostbyname(socket.gethostname())
        if not other.startswith("127."):
            with pytest.raises(OSError):
                socket.create_connection((other, port), timeout=1.0).close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("argv", [["--http", "abc"], ["--http", "127.0.0.1:0"],
                                  ["--goal-timeout", "-1"], ["--server-timeout", "0"],
                                  ["--call-timeout", "nan"]])
def test_bad_options_exit_2_before_serving(argv):
    from agentic_grasp.cli import main

    assert main(["mcp", *argv]) == 2
