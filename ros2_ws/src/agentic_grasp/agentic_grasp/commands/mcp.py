"""``agentic-grasp mcp``: the running graph as tools for LLM agents (Model Context Protocol).

An MCP server on the official MCP Python SDK (``mcp``, MCPServer). It is a ROS client of a
running graph (``agentic-grasp bringup``), through the same client code as
``agentic-grasp grasp`` (ros/client/mcp_bridge.py); its inputs, descriptions and result text are
ROS-free (core/mcp_tools.py). Tools: ``grasp``, ``describe_scene``, ``load_scene``,
``retrieve_strategies``, ``show_last_attempt``, ``stop``, ``status`` (docs/mcp.md).

Safety: ``grasp`` and ``load_scene`` change the world and are refused unless the server was
started with ``--allow-motion``; with ``--confirm`` each is first put to the client as an MCP
elicitation, a grasp's naming its targets (a client that cannot answer is refused); inputs
are bounded; a failing graph (no planner, a peer lost, a timeout) is a tool error, never a
crash, and no call waits past the goal's own timeout. A client's cancellation of ``grasp``
cancels the goal.

Transport: stdio by default; ``--http HOST:PORT`` serves the SDK's streamable HTTP on
``http://HOST:PORT/mcp`` (HOST 127.0.0.1 unless given), with a bearer token required beyond
loopback and Host/Origin allow-lists (commands/mcp_http.py).

Contracts (commands/mcp_schemas.py): closed input schemas, enums for fixed values, an
``outputSchema`` per tool; a grasp that fails, is refused or loses a peer is ``isError`` with
its structured result. ``load_scene`` changes the world and is gated like motion; ``stop``
(any client's goal) and ``status`` need no gate. The goals hold a lease on motion: a server
that dies has its goal canceled (ros/common/sender_lease.py).
"""
# No ``from __future__ import annotations`` here: MCPServer reads each tool's signature
# (get_type_hints) for its JSON schema, and the tools are closures whose annotations name
# locals of build_server, which string annotations could not resolve.
import argparse
import base64
import logging
import sys
from contextlib import asynccontextmanager
import time
from typing import Annotated, Any, Literal, Optional, Tuple

from agentic_grasp.core.paths import scenes_dir

_LOG = logging.getLogger(__name__)
#: How long a stop may wait for the arm to be still (s): a phase in flight ends before the
#: next is skipped (the simulator's phase_delay_s, a real arm's segment), and the planner's
#: cancel reaches the executor within a peer-call wake; well above both.
STOP_TIMEOUT_S = 10.0
#: How long the targets shown in a grasp's confirmation are kept for its answering round
#: (s): the 2026-07-28 protocol re-runs the resolver and accepts the answer only for the
#: question as shown; a user takes a while to read it.
PREVIEW_KEEP_S = 300.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-motion", action="store_true",
                        help="let agents send grasps (without it, grasp is refused)")
    parser.add_argument("--confirm", action="store_true",
                        help="ask the client to confirm each grasp (MCP elicitation) before "
                             "the goal is sent; clients that cannot answer are refused")
    parser.add_argument("--http", metavar="HOST:PORT", default="",
                        help="serve streamable HTTP on HOST:PORT (path /mcp) instead of stdio; "
                             "a bare PORT binds 127.0.0.1")
    parser.add_argument("--token-file", metavar="PATH", default="",
                        help="file holding the HTTP bearer token (mode 600); else the "
                             "environment's AGENTIC_GRASP_MCP_TOKEN. Required beyond loopback")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="a Host header HTTP requests may carry besides loopback and the "
                             "bound host (repeatable; HOST or HOST:PORT)")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="an Origin HTTP requests may carry besides loopback's, e.g. "
                             "http://lab-pc:3000 (repeatable)")
    parser.add_argument("--goal-timeout", type=float, default=300.0,
                        help="seconds a grasp may take before its goal is canceled")
    parser.add_argument("--server-timeout", type=float, default=10.0,
                        help="seconds to wait for the planner or a service to be there")
    parser.add_argument("--call-timeout", type=float, default=30.0,
                        help="seconds to wait for a service's answer (perceive, retrieval, "
                             "scene load)")


def parse_http(value: str) -> Tuple[str, int]:
    """(host, port) of ``HOST:PORT`` or ``PORT`` (host 127.0.0.1); ValueError otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--http wants HOST:PORT or PORT, got {value!r}")
    return host, int(port)


def build_server(bridge: Any, allow_motion: bool, confirm: bool,
                 bridge_factory: Optional[Any] = None) -> Any:
    """The MCPServer with the seven tools over ``bridge`` (a ros.mcp_bridge.GraphBridge, or
    None with ``bridge_factory``: made in the server's lifespan, after the stdio transport
    has diverted stray output away from the wire)."""
    # on use: cli.py imports every command's module to build its parser
    import asyncio
    import anyio
    from mcp.server.mcpserver import (AcceptedElicitation, Context, Elicit, ElicitationResult,
                                      MCPServer, Resolve)
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations
    from pydantic import BaseModel, Field

    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.commands import mcp_schemas as schemas
    from agentic_grasp.core import mcp_tools as tools
    from agentic_grasp.core.types import AffordanceType

    holder = {"bridge": bridge}

    @asynccontextmanager
    async def lifespan(_server: Any):
        made = False
        if holder["bridge"] is None and bridge_factory is not None:
            holder["bridge"] = await anyio.to_thread.run_sync(bridge_factory)
            made = True
        try:
            yield {}
        finally:
            if made:
                await anyio.to_thread.run_sync(holder["bridge"].close)

    def graph() -> Any:
        if holder["bridge"] is None:
            raise ToolError("the server is not connected to the graph")
        return holder["bridge"]

    def checked(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except tools.ToolInputError as exc:
            raise ToolError(str(exc)) from None

    async def blocking(what: str, fn: Any, *args: Any) -> Any:
        """A bridge call in a worker thread; a graph failure becomes the tool error."""
        # on use: cli.py imports every command's module to build its parser
        from agentic_grasp.ros.client.graph_client import GraphError

        try:
            return await anyio.to_thread.run_sync(fn, *args)
        except GraphError as exc:
            raise ToolError(tools.tool_error_text(what, exc)) from None

    server = MCPServer(
        "agentic-grasp", title="agentic_grasp robot grasping",
        instructions=("Tools of a Franka Panda grasping household objects through an "
                      "affordance-aware planner. describe_scene first, then grasp with an "
                      "instruction naming the object. " +
                      ("grasp moves the arm." if allow_motion else
                       "This server does not move the arm (grasp is refused).")),
        lifespan=lifespan, log_level="WARNING")

    class MotionConfirmation(BaseModel):
        confirm: bool = Field(description="true lets the robot arm move for this grasp")

    class SceneConfirmation(BaseModel):
        confirm: bool = Field(description="true lets the simulated world be replaced")

    config_type = Literal[tuple(tools.configuration_names())]  # type: ignore[valid-type]
    known_tasks = tools.scene_tasks(scenes_dir())
    task_type = Literal[tuple(known_tasks)]  # type: ignore[valid-type]
    affordance_type = Literal[tuple(a.value for a in AffordanceType)]  # type: ignore[valid-type]
    previews: dict = {}

    async def preview(instruction: str) -> Tuple[list, str]:
        """(targets, error) the planner would make of ``instruction`` now; kept a while so
        that the resolver's second round (2026-07-28) renders the question identically."""
        # on use: cli.py imports every command's module to build its parser
        from agentic_grasp.ros.client.graph_client import GraphError

        now = time.monotonic()
        for key in [k for k, (t, _) in previews.items() if now - t > PREVIEW_KEEP_S]:
            del previews[key]
        if instruction not in previews:
            try:
                found = (await anyio.to_thread.run_sync(graph().preview_targets, instruction),
                         "")
            except (GraphError, ToolError) as exc:
                found = ([], f"perceive failed: {exc}")
            previews[instruction] = (now, found)
        return previews[instruction][1]

    async def confirmation(instruction: str, ctx: Context,
                           configuration: Optional[str] = None,
                           seed: Optional[int] = None) -> Optional[Elicit[MotionConfirmation]]:
        """Runs before grasp's body: bad inputs first (never put to the user), then (with
        --confirm and motion allowed) the question with the targets. Refusals are the body's,
        with the structured result."""
        text = checked(tools.check_instruction, instruction)
        config = checked(tools.check_configuration, configuration)
        checked(tools.check_seed, seed)
        if not allow_motion or not confirm:
            return None
        if not can_answer(ctx):
            return None                       # the body refuses, with the result
        targets, error = await preview(text)
        return Elicit(tools.confirmation_text(text, targets, config, error), MotionConfirmation)

    def can_answer(ctx: Context) -> bool:
        """Whether the client declared it can answer elicitations (a resolver that asks
        nothing hands the body an accepted outcome without data, so the body asks again)."""
        caps = ctx.client_capabilities
        return caps is not None and caps.elicitation is not None

    def grasp_result(report: dict, is_error: bool) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text",
                                                   text=tools.grasp_report_text(report))],
                              structured_content=report, is_error=is_error)

    instruction_field = Field(description=f"what to grasp, e.g. 'pick up the ceramic cup' "
                                          f"(1..{tools.MAX_INSTRUCTION_CHARS} characters)",
                              max_length=tools.MAX_INSTRUCTION_CHARS)
    configuration_field = Field(description="planner configuration (Table II); omit for the "
                                            "planner's default")
    seed_field = Field(description="trial seed of the planner's randomness (omit: the "
                                   "planner's own)", ge=tools.SEED_MIN, le=tools.SEED_MAX)

    @server.tool(description=tools.DESCRIPTIONS["grasp"],
                 annotations=ToolAnnotations(title="Grasp an object", read_only_hint=False,
                                             destructive_hint=True, open_world_hint=True))
    async def grasp(
            instruction: Annotated[str, instruction_field],
            ctx: Context,
            approval: Annotated[ElicitationResult[MotionConfirmation],
                                Resolve(confirmation)],
            configuration: Annotated[Optional[config_type], configuration_field] = None,
            seed: Annotated[Optional[int], seed_field] = None
    ) -> Annotated[CallToolResult, schemas.GraspResult]:
        # on use: cli.py imports every command's module to build its parser
        from agentic_grasp.ros.client.graph_client import GraphError, PeerLostError

        text = checked(tools.check_instruction, instruction)
        config = checked(tools.check_configuration, configuration)
        goal_seed = checked(tools.check_seed, seed)
        if not allow_motion:
            return grasp_result(tools.refused_report(tools.REFUSED_NO_MOTION,
                                                     tools.MOTION_REFUSED), True)
        if confirm:
            if not can_answer(ctx):
                return grasp_result(tools.refused_report(tools.REFUSED_CANNOT_CONFIRM,
                                                         tools.CONFIRM_UNSUPPORTED), True)
            ok = isinstance(approval, AcceptedElicitation) and \
                getattr(approval.data, "confirm", False) is True
            if not ok:
                action = approval.action if not isinstance(approval, AcceptedElicitation) \
                    else "answered no"
                return grasp_result(tools.refused_report(
                    tools.REFUSED_NOT_CONFIRMED, tools.CONFIRM_DECLINED.format(action=action)),
                    True)
        bridge = graph()
        loop = asyncio.get_running_loop()
        queue: "asyncio.Queue[Any]" = asyncio.Queue()

        def on_feedback(fields: Any) -> None:       # the graph client's thread
            try:
                loop.call_soon_threadsafe(queue.put_nowait, fields)
            except RuntimeError:                    # the loop is gone: nobody listens
                pass

        sent = {"count": 0, "done": False}

        async def notify(fields: Any) -> None:
            sent["count"] += 1
            sent["done"] = sent["done"] or fields.get("stage") == "done"
            progress, total, message = tools.progress_of(fields, sent["count"])
            try:
                await ctx.report_progress(progress, total, message)
            except Exception as exc:  # noqa: BLE001 - a lost notification ends no goal
                _LOG.debug("progress notification failed: %s", exc)

        async def forward_progress() -> None:
            while True:
                await notify(await queue.get())

        def graph_failure(exc: BaseException) -> CallToolResult:
            code = tools.PEER_LOST if isinstance(exc, PeerLostError) else tools.GRAPH_ERROR
            return grasp_result(tools.refused_report(code, tools.tool_error_text("grasp", exc)),
                                True)

        # Shielded: a goal the planner accepted is never left behind by a cancellation
        # that lands while it is being sent (the handler below cancels it instead).
        with anyio.CancelScope(shield=True):
            try:
                handle, result = await anyio.to_thread.run_sync(
                    bridge.start_goal, text, config, goal_seed, on_feedback)
            except GraphError as exc:
                return graph_failure(exc)
        failure: Optional[BaseException] = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(forward_progress)
                try:
                    # shield: giving up on the wait must not cancel the bridge's future
                    report = await asyncio.shield(asyncio.wrap_future(result))
                except Exception as exc:  # noqa: BLE001 - GraphError, PeerLostError, ...
                    failure = exc         # (kept out of the task group's exception group)
                finally:
                    tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # The client canceled the call (or the server stops): cancel the goal. Its
            # wait goes on in the bridge and frees the goal slot when the goal has ended.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(bridge.cancel, handle)
            raise
        if failure is not None:
            if not isinstance(failure, GraphError):
                raise failure
            return graph_failure(failure)
        while not queue.empty():                    # feedback that came with the result
            await notify(queue.get_nowait())
        if not sent["done"]:
            # rclpy's action client drops feedback that arrives after the result (the
            # planner's "done" often does): the result itself ends the progress.
            await notify({"stage": "done", "thought": report["message"]})
        return grasp_result(report, not report["success"])

    @server.tool(description=tools.DESCRIPTIONS["describe_scene"],
                 annotations=ToolAnnotations(title="Describe the scene", read_only_hint=True,
                                             open_world_hint=True))
    async def describe_scene() -> Annotated[CallToolResult, schemas.SceneDescription]:
        perception, relations, note, png = await blocking("describe_scene",
                                                          graph().describe_scene)
        text, structured = tools.scene_summary(perception, relations, note)
        content: list = [TextContent(type="text", text=text)]
        if png:
            content.insert(0, ImageContent(type="image", mime_type="image/png",
                                           data=base64.b64encode(png).decode("ascii")))
        return CallToolResult(content=content, structured_content=structured)

    async def scene_confirmation(task: str, ctx: Context, seed: int = 0
                                 ) -> Optional[Elicit[SceneConfirmation]]:
        if not allow_motion or not confirm:
            return None
        if not can_answer(ctx):
            return None
        return Elicit(tools.scene_confirmation_text(task, seed), SceneConfirmation)

    @server.tool(description=tools.DESCRIPTIONS["load_scene"],
                 annotations=ToolAnnotations(title="Load a simulator scene",
                                             read_only_hint=False, destructive_hint=True,
                                             idempotent_hint=False, open_world_hint=False))
    async def load_scene(
            task: Annotated[task_type, Field(description="scene name, e.g. sg_cup, "
                                                         "it_cup_near_vase, lh_clear_table")],
            ctx: Context,
            approval: Annotated[ElicitationResult[SceneConfirmation],
                                Resolve(scene_confirmation)],
            seed: Annotated[int, Field(description="trial seed of the scene's layout and "
                                                   "noise", ge=tools.SEED_MIN,
                                       le=tools.SEED_MAX)] = 0
    ) -> Annotated[CallToolResult, schemas.LoadedScene]:
        name = checked(tools.check_task, task, known_tasks)
        seed_value = checked(tools.check_seed, seed)
        if not allow_motion:
            raise ToolError(tools.SCENE_REFUSED)
        if confirm:
            if not can_answer(ctx):
                raise ToolError(tools.CONFIRM_UNSUPPORTED.replace("grasp", "load_scene", 1))
            if not (isinstance(approval, AcceptedElicitation)
                    and getattr(approval.data, "confirm", False) is True):
                action = approval.action if not isinstance(approval, AcceptedElicitation) \
                    else "answered no"
                raise ToolError(tools.SCENE_DECLINED.format(action=action))
        bridge = graph()
        running = await anyio.to_thread.run_sync(bridge.grasp_running_elsewhere)
        if running:
            raise ToolError(tools.SCENE_BUSY.format(goals=", ".join(g[:8] for g in running)))
        loaded = await blocking("load_scene", bridge.load_scene,
                                name if "/" not in name else str(known_tasks[name]),
                                0 if seed_value is None else seed_value)
        text = (f"loaded {loaded['task']} (seed {loaded['seed']}): objects "
                f"{', '.join(loaded['object_ids'])}; the task's own instruction: "
                f"{loaded['instruction']!r}")
        return CallToolResult(content=[TextContent(type="text", text=text)],
                              structured_content=loaded)

    name_field = "short name: letters, digits, _ or -"
    entries: list = []

    def catalogue_entries() -> list:
        """The object catalogue's models as query defaults (read once)."""
        if not entries:
            # on use: cli.py imports every command's module to build its parser
            from agentic_grasp.core.sim.objects import load_catalogue

            entries.extend({"name": m.name, "category": m.category,
                            "type": m.affordance.value, "material": m.material,
                            "fragility": float(m.fragility), "region": m.region}
                           for m in load_catalogue().models.values())
        return entries

    @server.tool(description=tools.DESCRIPTIONS["retrieve_strategies"],
                 annotations=ToolAnnotations(title="Retrieve grasp strategies",
                                             read_only_hint=True, open_world_hint=False))
    async def retrieve_strategies(
            category: Annotated[Optional[str], Field(description=f"object category, e.g. mug "
                                                                 f"({name_field})",
                                                     max_length=tools.MAX_NAME_CHARS)] = None,
            affordance: Annotated[Optional[affordance_type], Field(
                description="affordance type")] = None,
            material: Annotated[Optional[str], Field(description="dominant material, e.g. "
                                                                 "ceramic, glass, plastic",
                                                     max_length=tools.MAX_NAME_CHARS)] = None,
            k: Annotated[Optional[int], Field(description="strategies wanted (omit: the "
                                                          "retrieval node's k)",
                                              ge=1, le=tools.K_MAX)] = None,
            fragility: Annotated[Optional[float], Field(description="fragility 0..1 (omit: "
                                                                    "the catalogue's)",
                                                        ge=0.0, le=1.0)] = None,
            region: Annotated[Optional[str], Field(description="graspable region, e.g. "
                                                               "handle, body, rim (omit: the "
                                                               "catalogue's)",
                                                   max_length=tools.MAX_NAME_CHARS)] = None
    ) -> Annotated[CallToolResult, schemas.Strategies]:
        query = checked(tools.check_retrieval_query, category, affordance, material, k,
                        fragility, region, catalogue_entries())
        report = await blocking("retrieve_strategies", graph().retrieve, query)
        text = tools.strategies_text(report)
        if query["filled_from"]:
            text = (f"query: {query['category']}, {query['type']}, {query['material']}, "
                    f"fragility {query['fragility']:.2f}, region {query['region']} (fields not "
                    f"given taken from the catalogue's {query['filled_from']})\n") + text
        return CallToolResult(content=[TextContent(type="text", text=text)],
                              structured_content={"query": query, **report})

    @server.tool(description=tools.DESCRIPTIONS["show_last_attempt"],
                 annotations=ToolAnnotations(title="Picture of the last attempt",
                                             read_only_hint=True, open_world_hint=False))
    async def show_last_attempt() -> Annotated[CallToolResult, schemas.AttemptPicture]:
        png, caption = await blocking("show_last_attempt", graph().last_attempt_png)
        return CallToolResult(content=[
            ImageContent(type="image", data=base64.b64encode(png).decode("ascii"),
                         mime_type="image/png"),
            TextContent(type="text", text=caption)], structured_content={"caption": caption})

    @server.tool(description=tools.DESCRIPTIONS["stop"],
                 annotations=ToolAnnotations(title="Stop the arm", read_only_hint=False,
                                             destructive_hint=False, idempotent_hint=True,
                                             open_world_hint=True))
    async def stop() -> Annotated[CallToolResult, schemas.StopReport]:
        with anyio.CancelScope(shield=True):      # a stop is never left half-sent
            report = await blocking("stop", graph().stop, STOP_TIMEOUT_S)
        return CallToolResult(content=[TextContent(type="text", text=tools.stop_text(report))],
                              structured_content=report, is_error=not report["stopped"])

    @server.tool(description=tools.DESCRIPTIONS["status"],
                 annotations=ToolAnnotations(title="Graph status", read_only_hint=True,
                                             open_world_hint=True))
    async def status() -> Annotated[CallToolResult, schemas.GraphStatus]:
        report = await blocking("status", graph().status)
        return CallToolResult(content=[TextContent(type="text",
                                                   text=tools.status_text(report))],
                              structured_content=report)

    schemas.close_inputs(server)
    return server


def run(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    import anyio

    try:
        http = parse_http(args.http) if args.http else None
    except ValueError as exc:
        print(f"mcp: {exc}", file=sys.stderr)
        return 2
    for name in ("goal_timeout", "server_timeout", "call_timeout"):
        if not 0.0 < getattr(args, name) < 86400.0:
            print(f"mcp: --{name.replace('_', '-')} must be in (0, 86400) s", file=sys.stderr)
            return 2
    if args.confirm and not args.allow_motion:
        print("mcp: --confirm without --allow-motion: grasp is refused anyway",
              file=sys.stderr)

    def make_bridge() -> Any:
        # on use: cli.py imports every command's module to build its parser
        from agentic_grasp.ros.client.mcp_bridge import GraphBridge

        return GraphBridge(server_timeout_s=args.server_timeout,
                           goal_timeout_s=args.goal_timeout, call_timeout_s=args.call_timeout)

    if http is None:
        # The bridge is made in the server's lifespan: after the stdio transport has put
        # fd 1 aside, so nothing the ROS middleware prints can reach the wire.
        server = build_server(None, args.allow_motion, args.confirm, bridge_factory=make_bridge)
        anyio.run(server.run_stdio_async)
        return 0
    host, port = http
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.commands import mcp_http

    try:
        token = mcp_http.read_token(args.token_file)
        mcp_http.check_exposure(host, token)
    except mcp_http.HttpConfigError as exc:
        print(f"mcp: {exc}", file=sys.stderr)
        return 2
    # One bridge (one ROS node) for every HTTP session, made here: a session's lifespan
    # must not own the process's ROS context.
    bridge = make_bridge()
    try:
        server = build_server(bridge, args.allow_motion, args.confirm)
        print(f"mcp: streamable HTTP on http://{host}:{port}/mcp"
              + (" (bearer token required)" if token else ""), file=sys.stderr)
        anyio.run(lambda: mcp_http.serve(server, host, port, token, args.allow_host,
                                         args.allow_origin))
    finally:
        bridge.close()
    return 0
