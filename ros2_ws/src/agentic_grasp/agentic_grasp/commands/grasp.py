"""``agentic-grasp grasp "<instruction>"``: one GraspObject goal to the planner node.

Optionally loads a task scene first (``--task``, ``--seed``; the simulator's sim/load_scene),
sends the goal, prints the planner's feedback as it streams (stage, sub-goal, attempt, retry
level, failure type, correction, thought) and then the result: success, the ids grasped and
one line per attempt (and per wrist-camera view, when the planner looked for a hidden target).
Exit status (ros/client/grasp_report.py): 0 success; 1 the goal failed (the grasp failed, the
target was not found, or it is beyond the hand); 2 a usage or system error (a bad argument,
the goal refused, perception or a peer failed, no planner, no answer in time); 130 after
Ctrl-C (the goal is canceled first).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
from typing import Any, Dict, Iterator, List

# The planner's client lives in ros/client/ so that the lab's benchmarks can use it too
# (wait_until_perceived: re-exported for the tests that use it from here).
from agentic_grasp.ros.client.grasp_report import ERROR_EXIT, exit_code, result_report
from agentic_grasp.ros.client.planner import (PlannerClient, _wait_for_oracle, load_scene,
                                              wait_until_perceived)  # noqa: F401
from agentic_grasp.core.errors import ConfigError

#: Pause after a scene load before the goal, for the perception node to take the new
#: ground truth (s); see load_scene.
SCENE_SETTLE_S = 0.5
#: How long the result waits for the last feedback line ("done") to be printed (s).
FEEDBACK_GRACE_S = 0.2
#: While the command waits on the graph without output (a scene load on a busy machine),
#: a line every this many seconds says what it waits for (s).
WAITING_EVERY_S = 15.0


@contextlib.contextmanager
def waiting(what: str, limit_s: float, quiet: bool = False,
            every_s: float = WAITING_EVERY_S) -> Iterator[None]:
    """Say what the command waits for, and again every ``every_s`` while it still does: a
    silent wait of up to ``limit_s`` looks hung."""
    done = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not done.wait(every_s):
            print(f"... still waiting for {what}: {time.monotonic() - start:.0f} s of at most "
                  f"{limit_s:.0f} s", flush=True)

    if quiet:
        yield
        return
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(1.0)


def feedback_line(fb: Any) -> str:
    """One human-readable line of GraspObject feedback."""
    parts = [f"[{fb.stage:<8}]"]
    if fb.subgoal_count:
        parts.append(f"sub-goal {fb.subgoal_index + 1}/{fb.subgoal_count}")
    if fb.target_id:
        parts.append(fb.target_id)
    if fb.target_id and fb.stage in ("plan", "execute", "reflect"):
        parts.append(f"attempt {fb.attempt + 1} L{fb.retry_level}")
    if fb.failure_type:
        parts.append(f"failure {fb.failure_type}")
    text = " ".join(parts)
    if fb.thought:
        text += f": {fb.thought}"
    if fb.correction:
        text += f" -> correction: {fb.correction}"
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("instruction", nargs="?", default="",
                        help='what to grasp, e.g. "pick up the ceramic cup" (default with '
                        "--procedural: the scene's own instruction)")
    parser.add_argument("--configuration", default="",
                        help="planner configuration: a Table II row (full, no_haa_rag, "
                        "no_scene_graph, no_recovery, no_episodic_memory, vlm_only, heuristic, "
                        "heuristic_box) or the Table V study's no_constraint_inference (the "
                        "scene graph without its constraints); default: the planner node's")
    parser.add_argument("--task", default="",
                        help="load this task scene into the simulator first (e.g. sg_cup)")
    parser.add_argument("--procedural", default="", metavar="S:K",
                        help="load procedural scene K of scene seed S first (agentic-grasp "
                        "bench procedural's scenes); the seed defaults to the one that "
                        "benchmark gives its trial")
    parser.add_argument("--seed", type=int, default=None,
                        help="trial seed of --task's scene, and of the goal (the planner's "
                             "level-3 generator, as the in-process benchmark seeds a trial; "
                             "default 0); without --task the goal uses the planner node's seed")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for the result (the goal is canceled after)")
    parser.add_argument("--server-timeout", type=float, default=30.0,
                        help="seconds to wait for the planner (and the simulator) to be up")
    parser.add_argument("--json", action="store_true",
                        help="print only the result, as JSON (no feedback lines)")


def _procedural(args: argparse.Namespace) -> str:
    """Resolve --procedural S:K into --task, --seed and the instruction; "" or an error."""
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.sim.scenes import trial_seed
    from agentic_grasp.core.sim.procedural import load_procedural

    if args.task:
        return "give --task or --procedural, not both"
    name = f"procedural:{args.procedural.strip()}"
    try:
        scene = load_procedural(name)
    except ConfigError as exc:
        return f"--procedural: {exc}"
    args.task = name
    if args.seed is None:
        args.seed = trial_seed(scene.scene_seed, name, 0)
    if not args.instruction:
        args.instruction = scene.task.instruction
    return ""


def run(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.ros.client.graph_client import GraphClient, GraphError

    if args.procedural:
        why = _procedural(args)
        if why:
            print(f"error: {why}", flush=True)
            return ERROR_EXIT
    if args.seed is None:
        args.seed = 0

    with GraphClient("agentic_grasp_grasp") as graph:
        planner = PlannerClient(graph)
        try:
            if args.task:
                with waiting(f"the simulator to load {args.task}", args.server_timeout,
                             quiet=args.json):
                    loaded = load_scene(graph, args.task, args.seed, args.server_timeout,
                                        settle_s=SCENE_SETTLE_S)
                    _wait_for_oracle(graph, loaded.object_ids, args.server_timeout)
                if not args.json:
                    print(f"loaded {loaded.task_id} (seed {args.seed}): objects "
                          f"{', '.join(loaded.object_ids)}", flush=True)

            done = threading.Event()

            def feedback(fb: Any) -> None:
                if not args.json:
                    print(feedback_line(fb), flush=True)
                if fb.stage == "done":
                    done.set()

            try:
                result = planner.grasp(args.instruction, args.configuration, feedback,
                                       timeout_s=args.timeout,
                                       server_timeout_s=args.server_timeout,
                                       seed=args.seed if args.task else None)
                # Feedback and result travel separately: let the last lines arrive.
                done.wait(FEEDBACK_GRACE_S)
            except KeyboardInterrupt:
                planner.cancel()
                print("canceled", flush=True)
                return 130
        except GraphError as exc:
            print(f"error: {exc}", flush=True)
            return ERROR_EXIT
        finally:
            planner.close()
    report = result_report(result)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report)
    return exit_code(result)


def _print_report(report: Dict[str, Any]) -> None:
    grasps = [a for a in report["attempts"] if a["kind"] == "grasp"]
    views = [a for a in report["attempts"] if a["kind"] == "view"]
    lines: List[str] = [
        f"result: {report['outcome']} ({report['error_code']}): {report['message']}",
        f"grasped: {', '.join(report['grasped_ids']) or 'nothing'}; "
        f"{len(grasps)} grasp attempt(s)"
        + (f", {len(views)} wrist-camera view(s)" if views else "")
        + f" in {report['total_time_s']:.2f} s"]
    for a in report["attempts"]:
        if a["kind"] == "view":
            where = "from above" if a["side"] == "above" else f"from its {a['side']}"
            seen = ("target seen" if a["target_seen"] else "target not seen") \
                if a["reached"] else f"pose not reached ({a['note']})"
            lines.append(f"  sub-goal {a['subgoal'] + 1} view {a['view'] + 1}: looked behind "
                         f"{a['occluder']} {where} with the wrist camera -> {seen}")
            continue
        g = a["grasp"]
        line = (f"  sub-goal {a['subgoal'] + 1} {a['target']} attempt {a['attempt'] + 1} "
                f"L{a['retry_level']}: {g['type']} {g['force_n']:.1f} N {g['width_mm']:.0f} mm"
                f" -> {'success' if a['success'] else 'failed'} (Q {a['quality']:.2f})")
        if a["failure_type"] not in ("", "none"):
            line += f", {a['failure_type']}"
            if a["correction"]:
                line += f"; next: {a['correction']}"
        lines.append(line)
    print("\n".join(lines), flush=True)
