"""commands/mcp.py's server over a stand-in of the graph bridge: the safety gates, the
elicitation answers, cancellation and graph failures, the contracts (closed inputs, enums,
output schemas, isError on every failing grasp), stop and status, the scene picture, and
streamable HTTP with its token and Host/Origin checks, through the SDK's own client (in
process, and over streamable HTTP). The real graph: test_mcp_graph.py,
test_mcp_lease_graph.py."""
from __future__ import annotations

import base64
import os
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
        self.report = REPORT
        self.running_elsewhere = []
        self.loaded = []
        self.stops = 0

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
                    future.set_result(self.report)
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
        self.loaded.append((task, seed))
        raise GraphError("load_scene is for the simulator only")

    def preview_targets(self, instruction):
        return [{"target_id": "cup_1", "category": "cup", "reason": "named in the instruction",
                 "prerequisite_for": ""}]

    def grasp_running_elsewhere(self):
        return list(self.running_elsewhere)

    def stop(self, timeout_s):
        self.stops += 1
        self.canceled.set()
        return {"stopped": True, "goals_canceled": 1, "goals_running_before": ["ab" * 16],
                "arm_was_moving": True, "stop_s": 0.12, "notes": []}

    def status(self):
        return {"healthy": False, "nodes": [{"name": "planner", "alive": True, "deaths": 1,
                                             "restarts": 1},
                                            {"name": "sim", "alive": False, "deaths": 1,
                                             "restarts": 0}],
                "running_goals": [{"goal_id": "ab" * 16, "status": "executing",
                                   "feedback": {"stage": "execute", "target_id": "cup_1"}}],
                "arm_moving": True, "last_result": None, "watching_since_unix_s": 1.0,
                "this_server": {"goal_running": False, "lease_topic": "alive/x"}}


class SceneBridge(FakeBridge):
    """A bridge whose perception answers, with a picture."""

    PNG = b"\x89PNG\r\n\x1a\n" + b"0" * 32

    def describe_scene(self):
        return ({"backend": "oracle", "error": "", "warnings": [],
                 "objects": [{"id": "vase_1", "category": "vase", "name": "glass vase",
                              "position": [0.5, 0.0, 0.1], "size": [0.1, 0.1, 0.2],
                              "affordance": "Fragile", "material": "", "region": "body",
                              "fragility": 0.0, "confidence": 0.4, "warnings": []}]},
                [], "", self.PNG)


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
    assert len(asked) == 1 and \
        asked[0].startswith("Let the robot arm move to carry out 'pick up the cup'?")
    assert "1. cup_1 (cup)" in asked[0] and "approaches, closes the gripper" in asked[0]
    assert bridge.sent == [("pick up the cup", "", None)]
    for action, content, expected in (("accept", {"confirm": False}, "answered no"),
                                      ("decline", None, "decline"),
                                      ("cancel", None, "cancel")):
        refused = call(server, "grasp", {"instruction": "pick up the cup"}, mode,
                       elicitation_callback=answer(action, content))
        assert refused.is_error and f"not confirmed ({expected})" in text_of(refused)
        assert refused.structured_content["error_code"] == "REFUSED_NOT_CONFIRMED"
    assert len(bridge.sent) == 1                            # no goal after a refusal
    no_answer = call(server, "grasp", {"instruction": "pick up the cup"}, mode)
    assert no_answer.is_error and "cannot answer confirmation" in text_of(no_answer)
    assert no_answer.structured_content["error_code"] == "REFUSED_CANNOT_CONFIRM"
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
    assert len(anyio.run(main).tools) == 7
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

    assert len(anyio.run(main).tools) == 7
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
    assert result.structured_content["error_code"] == (
        "ERROR_PEER_LOST" if isinstance(failure, PeerLostError) else "GRAPH_ERROR")
    assert result.structured_content["success"] is False
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
        assert len(tools.tools) == 7
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


# ---- contracts ------------------------------------------------------------------------------

def test_every_tool_is_closed_has_enums_and_an_output_schema():
    async def main():
        async with Client(build_server(FakeBridge(), True, False)) as client:
            return (await client.list_tools()).tools

    listed = {t.name: t for t in anyio.run(main)}
    assert set(listed) == {"grasp", "describe_scene", "load_scene", "retrieve_strategies",
                           "show_last_attempt", "stop", "status"}
    for tool in listed.values():
        assert tool.input_schema.get("additionalProperties") is False, tool.name
        assert tool.output_schema and tool.output_schema.get("properties"), tool.name
    grasp_props = listed["grasp"].input_schema["properties"]
    configs = grasp_props["configuration"]["anyOf"][0]["enum"]
    assert "full" in configs and "no_episodic_memory" in configs
    assert "sg_cup" in listed["load_scene"].input_schema["properties"]["task"]["enum"]
    affordances = listed["retrieve_strategies"].input_schema["properties"]["affordance"]
    assert "Graspable_Handle" in affordances["anyOf"][0]["enum"]
    assert set(listed["grasp"].output_schema["required"]) >= {"success", "error_code",
                                                             "attempts"}
    assert listed["load_scene"].annotations.destructive_hint is True
    assert listed["stop"].annotations.destructive_hint is False


def test_unknown_arguments_are_refused_and_move_nothing():
    bridge = FakeBridge()
    server = build_server(bridge, True, False)
    result = call(server, "grasp", {"instruction": "pick up the cup", "speed": 99})
    assert result.is_error and "speed" in text_of(result)
    assert bridge.sent == []
    for tool in ("describe_scene", "stop", "status"):
        extra = call(server, tool, {"verbose": True})
        assert extra.is_error and "verbose" in text_of(extra), tool
    assert bridge.stops == 0


def test_a_failed_grasp_and_a_refusal_are_errors_with_their_result():
    bridge = FakeBridge()
    bridge.report = {**REPORT, "success": False, "error_code": "ERROR_GRASP_FAILED",
                     "message": "cup_1 slipped", "grasped_ids": []}
    failed = call(build_server(bridge, True, False), "grasp", {"instruction": "pick up the cup"})
    assert failed.is_error and text_of(failed).startswith("FAILED (ERROR_GRASP_FAILED)")
    assert failed.structured_content["error_code"] == "ERROR_GRASP_FAILED"
    refused = call(build_server(FakeBridge(), False, False), "grasp",
                   {"instruction": "pick up the cup"})
    assert refused.is_error and "--allow-motion" in text_of(refused)
    assert refused.structured_content == {
        "success": False, "error_code": "REFUSED_NO_MOTION", "grasped_ids": [],
        "attempts": [], "total_time_s": 0.0,
        "message": refused.structured_content["message"]}
    ok = call(build_server(FakeBridge(), True, False), "grasp", {"instruction": "pick up it"})
    assert not ok.is_error and ok.structured_content["success"] is True


def test_load_scene_is_gated_like_motion():
    bridge = FakeBridge()
    refused = call(build_server(bridge, False, False), "load_scene", {"task": "sg_cup"})
    assert refused.is_error and "--allow-motion" in text_of(refused) and bridge.loaded == []
    bridge.running_elsewhere = ["cd" * 16]
    busy = call(build_server(bridge, True, False), "load_scene", {"task": "sg_cup"})
    assert busy.is_error and "a grasp is running (cdcdcdcd)" in text_of(busy)
    assert bridge.loaded == []
    bridge.running_elsewhere = []
    asked = []

    async def answer(ctx, params):
        asked.append(params.message)
        return ElicitResult(action="decline")

    declined = call(build_server(bridge, True, True), "load_scene", {"task": "sg_cup"},
                    elicitation_callback=answer)
    assert declined.is_error and "not confirmed (decline)" in text_of(declined)
    assert asked and "sg_cup" in asked[0] and bridge.loaded == []
    unknown = call(build_server(bridge, True, False), "load_scene", {"task": "../../etc"})
    assert unknown.is_error and bridge.loaded == []


def test_describe_scene_returns_the_camera_image_beside_the_text():
    result = call(build_server(SceneBridge(), False, False), "describe_scene", {})
    assert not result.is_error, text_of(result)
    image = next(c for c in result.content if c.type == "image")
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data) == SceneBridge.PNG
    assert "vase_1" in text_of(result)
    assert result.structured_content["objects"][0]["confidence"] == 0.4


def test_stop_ends_a_running_grasp_of_another_client_and_status_reports():
    """One client's grasp runs; a second client's stop (on a server without motion: a stop
    needs no gate) ends it; the grasp comes back as an error."""
    bridge = FakeBridge(goal_s=30.0)
    mover = build_server(bridge, True, False)
    stopper = build_server(bridge, False, False)
    results = {}

    async def main():
        async with Client(mover) as a, Client(stopper) as b:
            async with anyio.create_task_group() as tg:
                async def grasp():
                    results["grasp"] = await a.call_tool("grasp",
                                                         {"instruction": "pick up the cup"})
                tg.start_soon(grasp)
                await anyio.sleep(0.3)
                started = time.monotonic()
                results["stop"] = await b.call_tool("stop", {})
                results["status"] = await b.call_tool("status", {})
                await anyio.sleep(0)
            results["grasp_ended_s"] = time.monotonic() - started

    anyio.run(main)
    stop = results["stop"]
    assert not stop.is_error and stop.structured_content["stopped"] is True
    assert text_of(stop).startswith("STOPPED in 0.12 s: 1 goal(s) canceled")
    assert results["grasp"].is_error
    assert results["grasp"].structured_content["error_code"] == "ERROR_CANCELED"
    assert results["grasp_ended_s"] < 1.0
    status = results["status"]
    assert not status.is_error and "sim DOWN" in text_of(status)
    assert "running goal abababab (executing): execute cup_1" in text_of(status)
    assert status.structured_content["nodes"][0]["restarts"] == 1


# ---- HTTP off loopback ------------------------------------------------------------------------

def test_token_is_read_from_the_environment_or_a_private_file(tmp_path):
    from agentic_grasp.commands import mcp_http

    token = "f" * 40
    assert mcp_http.read_token("", {mcp_http.TOKEN_ENV: token}) == token
    assert mcp_http.read_token("", {}) == ""
    path = tmp_path / "token"
    path.write_text(token + "\n")
    path.chmod(0o644)
    with pytest.raises(mcp_http.HttpConfigError, match="read by other users"):
        mcp_http.read_token(str(path), {})
    path.chmod(0o600)
    assert mcp_http.read_token(str(path), {}) == token
    with pytest.raises(mcp_http.HttpConfigError, match="at least 32"):
        mcp_http.read_token("", {mcp_http.TOKEN_ENV: "short"})
    with pytest.raises(mcp_http.HttpConfigError, match="needs a bearer token"):
        mcp_http.check_exposure("0.0.0.0", "")
    mcp_http.check_exposure("127.0.0.1", "")
    mcp_http.check_exposure("0.0.0.0", token)


def test_binding_beyond_loopback_without_a_token_exits_2(monkeypatch):
    from agentic_grasp.cli import main

    monkeypatch.delenv("AGENTIC_GRASP_MCP_TOKEN", raising=False)
    assert main(["mcp", "--http", "0.0.0.0:8765"]) == 2
    parser_help = subprocess.run([sys.executable, "-m", "agentic_grasp.cli", "mcp", "--help"],
                                 capture_output=True, text=True).stdout
    assert "--token-file" in parser_help and "--token " not in parser_help


def test_http_with_a_token_checks_it_and_the_host_and_origin():
    """The command with a token (from the environment) on 127.0.0.1: the SDK's client with
    the token lists the tools; no token or a wrong one is 401; a foreign Host is 421 and a
    foreign Origin 403 even with the token; an allowed extra origin passes."""
    import httpx2 as httpx

    port = _free_port()
    token = "0123456789abcdef" * 3
    env = {**os.environ, "AGENTIC_GRASP_MCP_TOKEN": token}
    proc = subprocess.Popen([sys.executable, "-m", "agentic_grasp.cli", "mcp", "--http",
                             str(port), "--server-timeout", "1", "--allow-origin",
                             "http://lab-pc:3000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "probe", "version": "0"}}}
    accept = {"accept": "application/json, text/event-stream",
              "content-type": "application/json"}
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

        def post(**headers):
            return httpx.post(url, json=body, headers={**accept, **headers}, timeout=10.0)

        assert post().status_code == 401
        assert post(authorization="Bearer " + "x" * 48).status_code == 401
        bearer = {"authorization": f"Bearer {token}"}
        assert post(**bearer, host="evil.example:80").status_code == 421
        assert post(**bearer, origin="http://evil.example").status_code == 403
        assert post(**bearer, origin="http://lab-pc:3000").status_code == 200
        assert post(**bearer).status_code == 200

        async def main():
            async with httpx.AsyncClient(headers=bearer) as http_client:
                from mcp.client.streamable_http import streamable_http_client

                async with Client(streamable_http_client(url, http_client=http_client)) as c:
                    return await c.list_tools()

        assert len(anyio.run(main).tools) == 7
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
