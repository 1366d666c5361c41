#!/usr/bin/env python3
"""A scripted agent session with ``agentic-grasp mcp``: look, choose, confirm, grasp, hit a
failure, stop. A copyable example for agent developers (docs/mcp.md walks through its
traffic), and the session test_mcp_session_graph.py records.

    source scripts/env.sh
    agentic-grasp bringup --perception oracle &     # or: --start-graph below
    python scripts/mcp_agent_session.py [--record session.jsonl] [--start-graph]

What the "agent" does, with the SDK's own client over stdio (the way an MCP host starts the
server), the server started with ``--allow-motion --confirm``:

1. ``status``: is the graph whole?
2. ``load_scene`` sg_apple (seed 4): the server asks to confirm the world change; accepted.
3. ``describe_scene``: reads the objects (structured content) and gets the camera image.
4. chooses the apple by its perceived category, and ``grasp`` "pick up the apple" without
   recovery (``no_recovery``, seed 4); the confirmation lists the targets: accepted only when
   the chosen object is among them.
5. the grasp fails (``isError``: ERROR_GRASP_FAILED, position_error); ``show_last_attempt``
   shows why.
6. grasps again with recovery (``full``); while the arm moves, the user says stop: ``stop``
   ends it (the grasp call comes back ``isError`` with ERROR_CANCELED).
7. ``status``: nothing runs, the last result is the canceled goal.

``--record FILE`` writes every JSON-RPC message both ways (one JSON object a line:
``{"dir": "client->server" | "server->client", "message": ...}``), image data shortened.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import asynccontextmanager

TASK, SEED = "sg_apple", 4


def _short(value):
    """The message with base64 image data replaced by its length (a readable record)."""
    if isinstance(value, dict):
        out = {k: _short(v) for k, v in value.items()}
        if out.get("type") == "image" and isinstance(value.get("data"), str):
            out["data"] = f"<{value.get('mimeType', 'image')} base64, {len(value['data'])} chars>"
        return out
    if isinstance(value, list):
        return [_short(v) for v in value]
    return value


@asynccontextmanager
async def recorded(transport, record):
    """``transport``'s streams, each message also handed to ``record(direction, dict)``."""
    import anyio
    from pydantic_core import to_jsonable_python

    def as_dict(message):
        return to_jsonable_python(message, by_alias=True, exclude_none=True)

    async with transport as (read, write):
        to_client_send, to_client = anyio.create_memory_object_stream(100)
        to_server, to_server_recv = anyio.create_memory_object_stream(100)

        async def inbound():
            async with to_client_send:
                async for item in read:
                    if hasattr(item, "message"):
                        record("server->client", as_dict(item.message))
                    await to_client_send.send(item)

        async def outbound():
            async for item in to_server_recv:
                record("client->server", as_dict(item.message))
                await write.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(inbound)
            tg.start_soon(outbound)
            try:
                yield to_client, to_server
            finally:
                tg.cancel_scope.cancel()


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def wait_ready(timeout_s: float = 180.0) -> None:
    """A graph just started (``--start-graph``): wait, unrecorded, until every node is up and
    a scene loads, so the recorded session is the agent's alone."""
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                   args=["-m", "agentic_grasp.cli", "mcp", "--allow-motion"])
    deadline = anyio.current_time() + timeout_s
    async with Client(params, read_timeout_seconds=120.0) as probe:
        while True:
            status = await probe.call_tool("status", {})
            if status.structured_content["healthy"]:
                loaded = await probe.call_tool("load_scene", {"task": TASK, "seed": SEED})
                if not loaded.is_error:
                    return
            if anyio.current_time() > deadline:
                raise RuntimeError(f"the graph did not come up: {text_of(status)}")
            await anyio.sleep(2.0)


async def session(log) -> dict:
    """The agent's task (module docstring); what it saw, for the caller to check."""
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import ElicitResult

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentic_grasp.cli", "mcp", "--allow-motion", "--confirm"],
        env=dict(os.environ))
    chosen = {}
    seen = {"questions": []}

    async def confirm(ctx, request):
        """The user's answer: a scene change yes; a grasp only when the object the agent
        chose is among the targets the question lists."""
        seen["questions"].append(request.message)
        ok = request.message.startswith("Load the scene") or \
            f". {chosen.get('id', '?')} (" in request.message
        return ElicitResult(action="accept", content={"confirm": ok})

    async with Client(recorded(stdio_client(params), log), elicitation_callback=confirm,
                      read_timeout_seconds=120.0) as agent:
        status = await agent.call_tool("status", {})                          # 1
        seen["status"] = status.structured_content
        deadline = anyio.current_time() + 120.0
        while True:                                                           # 2
            loaded = await agent.call_tool("load_scene", {"task": TASK, "seed": SEED})
            if not loaded.is_error or anyio.current_time() > deadline:
                break
            await anyio.sleep(2.0)          # a graph just started: discovery under way
        seen["loaded"] = loaded
        scene = await agent.call_tool("describe_scene", {})                   # 3
        seen["scene"] = scene
        apple = next(o for o in scene.structured_content["objects"]
                     if o["category"] == "apple")                               # 4
        chosen["id"] = apple["id"]
        failed = await agent.call_tool("grasp", {"instruction": "pick up the apple",
                                                 "configuration": "no_recovery",
                                                 "seed": SEED})
        seen["failed"] = failed
        seen["picture"] = await agent.call_tool("show_last_attempt", {})      # 5
        await agent.call_tool("load_scene", {"task": TASK, "seed": SEED})
        moving = anyio.Event()

        async def on_progress(value, total, message):
            if message.startswith("execute"):
                moving.set()

        async with anyio.create_task_group() as tg:                           # 6
            async def second_grasp():
                seen["stopped_grasp"] = await agent.call_tool(
                    "grasp", {"instruction": "pick up the apple", "configuration": "full",
                              "seed": SEED}, progress_callback=on_progress)
                moving.set()                    # ended before it moved: nothing to stop
            tg.start_soon(second_grasp)
            with anyio.fail_after(60):
                await moving.wait()
            seen["stop"] = await agent.call_tool("stop", {})
        seen["final_status"] = await agent.call_tool("status", {})            # 7
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", default="", help="write the JSON-RPC traffic here")
    parser.add_argument("--start-graph", action="store_true",
                        help="start the node graph (oracle perception) for the session")
    args = parser.parse_args()

    import anyio

    messages = []

    def log(direction, message):
        messages.append({"dir": direction, "message": _short(message)})

    launcher = None
    if args.start_graph:
        from agentic_grasp.ros.graph.launcher import Launcher

        launcher = Launcher({"perception": "oracle", "acquired": "none"},
                            extra_params={"sim": {"phase_delay_s": 0.3},
                                          "planner": {"visual_query": "none"}})
        launcher.start()
    try:
        if launcher is not None:
            anyio.run(wait_ready)
        seen = anyio.run(session, log)
    finally:
        if launcher is not None:
            launcher.stop()
        if args.record:
            with open(args.record, "w", encoding="utf-8") as out:
                for m in messages:
                    out.write(json.dumps(m, sort_keys=True) + "\n")
    for key in ("failed", "stop", "stopped_grasp", "final_status"):
        print(f"{key}: {'ERROR ' if seen[key].is_error else ''}{text_of(seen[key])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
