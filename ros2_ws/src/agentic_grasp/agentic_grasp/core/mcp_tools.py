"""The graph's tools for LLM agents, ROS-free: bounded inputs, descriptions, result text.

``agentic-grasp mcp`` (commands/mcp.py) serves seven tools over the Model Context Protocol;
the rclpy side (ros/client/mcp_bridge.py) talks to the graph. What an agent may send and what it
reads back lives here, so it is tested without ROS:

- every input is checked before anything reaches the graph (:func:`check_instruction`,
  :func:`check_configuration`, :func:`check_seed`, :func:`check_task`,
  :func:`check_retrieval_query`): a bad one raises :class:`ToolInputError`, whose message
  the agent reads as the tool error;
- results become text an LLM can act on plus structured content (:func:`grasp_report_text`,
  :func:`scene_summary`, :func:`strategies_text`);
- GraspObject feedback becomes progress notifications (:func:`progress_of`).
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.planner.configurations import CONFIGURATIONS, STUDY_CONFIGURATIONS

#: Longest instruction accepted (characters). The paper's instructions are a sentence; a
#: prompt-sized text is not an instruction and would only cost the VLM tokens.
MAX_INSTRUCTION_CHARS = 300
#: Seeds: LoadScene carries a uint32 and GraspObject an int64; an agent gets the range both
#: hold and that the in-process benchmark uses.
SEED_MIN, SEED_MAX = 0, 2 ** 31 - 1
#: Strategies one retrieval may return (the retrieval node's k is configured at 3).
K_MAX = 20
#: Longest category / affordance / material / task name accepted (characters).
MAX_NAME_CHARS = 64
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")
_TASK = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*(/[A-Za-z0-9_][A-Za-z0-9_\-]*)?$")

#: Feedback stages in the order a goal passes them (GraspObject.action); the progress
#: value of a stage is its index, the total is the last.
STAGES = ("perceive", "retrieve", "reason", "plan", "execute", "reflect", "done")

MOTION_REFUSED = ("grasp refused: this server was started without --allow-motion, so it "
                  "does not move the arm. Restart it with `agentic-grasp mcp --allow-motion` "
                  "to let an agent send grasps.")
CONFIRM_UNSUPPORTED = ("grasp refused: this server asks for confirmation before each motion "
                       "(--confirm) and this client cannot answer confirmation requests "
                       "(it declared no elicitation capability).")
CONFIRM_DECLINED = "grasp refused: the motion was not confirmed ({action}); no goal was sent."
SCENE_REFUSED = ("load_scene refused: it changes the world, and this server was started "
                 "without --allow-motion. Restart it with `agentic-grasp mcp --allow-motion`.")
SCENE_BUSY = ("load_scene refused: a grasp is running ({goals}); changing the world under it "
              "would make it fail. Wait for it, or call stop first.")
SCENE_DECLINED = "load_scene refused: the scene change was not confirmed ({action})."

#: ``error_code`` of a grasp the server refused or could not run (the planner's own codes,
#: GraspObject.action's ERROR_*, come with the goals it ran).
REFUSED_NO_MOTION = "REFUSED_NO_MOTION"
REFUSED_NOT_CONFIRMED = "REFUSED_NOT_CONFIRMED"
REFUSED_CANNOT_CONFIRM = "REFUSED_CANNOT_CONFIRM"
GRAPH_ERROR = "GRAPH_ERROR"
PEER_LOST = "ERROR_PEER_LOST"


class ToolInputError(ValidationError):
    """A tool argument is missing, of the wrong type or out of bounds (the message says
    which and what is accepted)."""


# ---- inputs ----------------------------------------------------------------------------------

def configuration_names() -> List[str]:
    """Planner configurations a goal may name (Table II's and the studies')."""
    return list(CONFIGURATIONS) + list(STUDY_CONFIGURATIONS)


def check_instruction(value: Any) -> str:
    """The instruction, stripped; ToolInputError when empty, not text or too long."""
    if not isinstance(value, str):
        raise ToolInputError(f"instruction must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise ToolInputError('instruction is empty: say what to grasp, e.g. "pick up the '
                             'ceramic cup"')
    if len(text) > MAX_INSTRUCTION_CHARS:
        raise ToolInputError(f"instruction is {len(text)} characters long; at most "
                             f"{MAX_INSTRUCTION_CHARS} are accepted")
    if any(ord(c) < 32 and c not in "\t\n" for c in text):
        raise ToolInputError("instruction contains control characters")
    return text


def check_configuration(value: Any) -> str:
    """A known configuration name, or "" (the planner node's own)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ToolInputError(f"configuration must be a string, got {type(value).__name__}")
    name = value.strip()
    if name and name not in configuration_names():
        shown = name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "..."
        raise ToolInputError(f"unknown configuration {shown!r}; expected one of "
                             f"{', '.join(configuration_names())} (or none: the planner's "
                             "default)")
    return name


def check_seed(value: Any) -> Optional[int]:
    """None (not given) or an integer in [SEED_MIN, SEED_MAX]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolInputError(f"seed must be an integer, got {type(value).__name__}")
    if not SEED_MIN <= value <= SEED_MAX:
        raise ToolInputError(f"seed {value} is out of range [{SEED_MIN}, {SEED_MAX}]")
    return int(value)


def scene_tasks(scenes_dir: Union[str, Path]) -> Dict[str, Path]:
    """Task name -> scene file: every ``*.yaml`` in ``scenes_dir`` by its stem, and those one
    folder down as ``folder/stem`` (e.g. ``ood/...``)."""
    root = Path(scenes_dir)
    tasks: Dict[str, Path] = {}
    if not root.is_dir():
        return tasks
    for path in sorted(root.glob("*.yaml")):
        tasks[path.stem] = path
    for path in sorted(root.glob("*/*.yaml")):
        tasks[f"{path.parent.name}/{path.stem}"] = path
    return tasks


def check_task(value: Any, known: Mapping[str, Path]) -> str:
    """A task name of ``known`` (:func:`scene_tasks`); never a path an agent makes up."""
    if not isinstance(value, str):
        raise ToolInputError(f"task must be a string, got {type(value).__name__}")
    name = value.strip()
    if not name:
        raise ToolInputError("task is empty: name a scene, e.g. sg_cup")
    if len(name) > 2 * MAX_NAME_CHARS + 1 or not _TASK.match(name) or name not in known:
        shown = name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "..."
        top = [t for t in known if "/" not in t]
        raise ToolInputError(f"unknown task {shown!r}; the scenes are {', '.join(top)} "
                             f"(and {len(known) - len(top)} more in subfolders, named "
                             "folder/name)")
    return name


def _name(field: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ToolInputError(f"{field} must be a string, got {type(value).__name__}")
    text = value.strip()
    if text and (len(text) > MAX_NAME_CHARS or not _NAME.match(text)):
        raise ToolInputError(f"{field} must be a short name (letters, digits, _ or -, at most "
                             f"{MAX_NAME_CHARS} characters), e.g. mug, Graspable_Handle, "
                             "ceramic")
    return text


def check_retrieval_query(category: Any = None, affordance: Any = None,
                          material: Any = None, k: Any = None, fragility: Any = None,
                          region: Any = None,
                          defaults: Sequence[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    """A whole HAA-RAG query: category, affordance type, material, fragility, region, k.

    HAA-RAG's level 2 needs every affordance field. Those not given are taken from the first
    entry of ``defaults`` (the object catalogue's models as dicts with the same keys) whose
    category, and material when given, match; ``filled_from`` names it. k 0: the retrieval
    node's configured k."""
    query: Dict[str, Any] = {"category": _name("category", category),
                             "type": _name("affordance", affordance),
                             "material": _name("material", material),
                             "region": _name("region", region), "fragility": None}
    if not any(query.values()):
        raise ToolInputError("give at least one of category, affordance or material")
    if fragility is not None:
        if isinstance(fragility, bool) or not isinstance(fragility, (int, float)) or \
                not math.isfinite(float(fragility)) or not 0.0 <= float(fragility) <= 1.0:
            raise ToolInputError(f"fragility must be a number in [0, 1], got {fragility!r}"[:120])
        query["fragility"] = float(fragility)
    if k is None:
        k_value = 0
    elif isinstance(k, bool) or not isinstance(k, int):
        raise ToolInputError(f"k must be an integer, got {type(k).__name__}")
    elif not 1 <= k <= K_MAX:
        raise ToolInputError(f"k must be in [1, {K_MAX}], got {k}")
    else:
        k_value = int(k)
    filled_from = ""
    missing = [key for key, value in query.items() if value in ("", None)]
    if missing:
        for entry in defaults:
            if (not query["category"] or entry.get("category") == query["category"]) and \
                    (not query["material"] or entry.get("material") == query["material"]) and \
                    (not query["type"] or entry.get("type") == query["type"]):
                for key in missing:
                    query[key] = entry[key]
                filled_from = str(entry.get("name", ""))
                break
    still = [key for key, value in query.items() if value in ("", None)]
    if still:
        raise ToolInputError(f"no catalogue object matches the query to fill in "
                             f"{', '.join(still)}: give them (affordance, material, "
                             "fragility 0..1, region)")
    return {**query, "k": k_value, "filled_from": filled_from}


# ---- progress ----------------------------------------------------------------------------------

def feedback_text(fb: Mapping[str, Any]) -> str:
    """One line of GraspObject feedback (the fields by name, as plain values)."""
    parts = [str(fb.get("stage", ""))]
    if fb.get("subgoal_count"):
        parts.append(f"sub-goal {int(fb['subgoal_index']) + 1}/{int(fb['subgoal_count'])}")
    if fb.get("target_id"):
        parts.append(str(fb["target_id"]))
        if fb.get("stage") in ("plan", "execute", "reflect"):
            parts.append(f"attempt {int(fb.get('attempt', 0)) + 1} "
                         f"L{int(fb.get('retry_level', 0))}")
    if fb.get("failure_type"):
        parts.append(f"failure {fb['failure_type']}")
    text = " ".join(parts)
    if fb.get("thought"):
        text += f": {fb['thought']}"
    if fb.get("correction"):
        text += f" -> correction: {fb['correction']}"
    return text


def progress_of(fb: Mapping[str, Any], count: int) -> Tuple[float, float, str]:
    """(progress, total, message) of the ``count``-th feedback message of a goal.

    MCP wants progress to increase with every notification; the stages repeat (one loop
    per attempt and sub-goal), so the value is the message count and the stage is in the
    message. Total stays unknown until "done"."""
    stage = str(fb.get("stage", ""))
    total = float(count) if stage == "done" else None
    return float(count), total, feedback_text(fb)  # type: ignore[return-value]


# ---- results -------------------------------------------------------------------------------------

def attempt_line(a: Mapping[str, Any]) -> str:
    """One attempt of a result report (ros/grasp_report.attempt_summary's dict); a
    wrist-camera view (kind "view") grasps nothing and says what it saw."""
    if a.get("kind") == "view":
        seen = ("target seen" if a["target_seen"] else "target not seen") if a["reached"] \
            else f"pose not reached ({a['note']})"
        return (f"sub-goal {a['subgoal'] + 1} view {a['view'] + 1}: looked behind "
                f"{a['occluder']} ({a['side']}) with the wrist camera -> {seen}")
    g = a["grasp"]
    line = (f"sub-goal {a['subgoal'] + 1} {a['target']} attempt {a['attempt'] + 1} "
            f"L{a['retry_level']}: {g['type']} {g['force_n']:.1f} N {g['width_mm']:.0f} mm -> "
            f"{'success' if a['success'] else 'failed'} (Q {a['quality']:.2f})")
    if a.get("failure_type") not in ("", "none", None):
        line += f"; failure {a['failure_type']}"
        if a.get("correction"):
            line += f"; correction: {a['correction']}"
    return line


def grasp_report_text(report: Mapping[str, Any]) -> str:
    """The result of a goal as text: success, error name, message, grasped ids, attempts."""
    word = report.get("outcome") or ("SUCCESS" if report["success"] else "FAILED")
    lines = [f"{word} ({report['error_code']}): "
             f"{report['message']}",
             f"grasped: {', '.join(report['grasped_ids']) or 'nothing'}; "
             f"{len(report['attempts'])} attempt(s) in {report['total_time_s']:.2f} s"]
    lines += [attempt_line(a) for a in report["attempts"]]
    return "\n".join(lines)


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_round(v) for v in value]
    return value


def scene_summary(perception: Mapping[str, Any], relations: Sequence[Mapping[str, Any]],
                  relations_note: str = "") -> Tuple[str, Dict[str, Any]]:
    """(text, structured content) of what perception reports and the scene graph relates.

    ``perception``: backend, error, warnings and objects (id, category, name, position,
    size, affordance, material, fragility, confidence); ``relations``: subject, relation,
    object. ``Far_From`` is left out of the text (it holds between most pairs and says
    nothing about a grasp) but kept in the structured content."""
    objects = list(perception.get("objects", []))
    lines = [f"perception ({perception.get('backend') or 'unknown backend'}): "
             f"{len(objects)} object(s)"]
    if perception.get("error"):
        lines.append(f"perception error: {perception['error']}")
    for o in objects:
        p = o.get("position", [0.0, 0.0, 0.0])
        lines.append(f"- {o['id']}: {o.get('category', '')} ({o.get('name', '')}), "
                     f"{o.get('material', '') or 'unknown material'}, affordance "
                     f"{o.get('affordance', '') or 'none'}, fragility "
                     f"{float(o.get('fragility', 0.0)):.2f}, at ({p[0]:.3f}, {p[1]:.3f}, "
                     f"{p[2]:.3f}) m")
    shown = [r for r in relations if r.get("relation") != "Far_From"]
    lines.append(f"scene graph: {len(relations)} relation(s)"
                 + (f" ({len(relations) - len(shown)} Far_From not listed)"
                    if len(shown) != len(relations) else ""))
    lines += [f"- {r['subject']} {r['relation']} {r['object']}" for r in shown]
    if relations_note:
        lines.append(f"scene graph: {relations_note}")
    for w in perception.get("warnings", []):
        lines.append(f"warning: {w}")
    structured = _round({"backend": perception.get("backend", ""),
                         "error": perception.get("error", ""),
                         "warnings": list(perception.get("warnings", [])),
                         "objects": objects, "relations": list(relations)})
    return "\n".join(lines), structured


def strategies_text(report: Mapping[str, Any]) -> str:
    """A retrieval report (ros/retrieval_client's JSON shape) as text with the score
    breakdown of each strategy."""
    lines = [f"{'ok' if report['success'] else 'no strategies'}: {report['message']} "
             f"(candidates: {report['candidates_level1']} after level 1, "
             f"{report['candidates_level2']} after level 2)"]
    for s in report["strategies"]:
        g = s["grasp"]
        lines.append(
            f"{s['rank']}. {s['id']} ({s['category']}, {'success' if s['success'] else 'failed'}"
            f" experience): {g.get('grasp_type', g.get('type', '?'))} grasp, s_final "
            f"{s['s_final']:.3f} = (s_cat {s['s_cat']:.3f}, s_aff {s['s_aff']:.3f}, s_vis "
            f"{s['s_vis']:.3f}) x penalty {s['penalty']:.2f}; {s['explanation']}")
    return "\n".join(lines)


def refused_report(code: str, message: str) -> Dict[str, Any]:
    """The structured result of a grasp that sent no goal or lost it (same keys as a goal's
    report, so an agent reads one shape)."""
    return {"success": False, "error_code": code, "message": message, "grasped_ids": [],
            "total_time_s": 0.0, "attempts": []}


def confirmation_text(instruction: str, targets: Sequence[Mapping[str, str]],
                      configuration: str, preview_error: str = "") -> str:
    """The question put to the user before a grasp: the targets the planner would make of
    the instruction now and what the arm does with each. Only ids, categories and the
    order's reason without numbers: the 2026-07-28 protocol accepts an answer only for the
    exact question shown, and the resolver asks again on the answering round."""
    lines = [f"Let the robot arm move to carry out {instruction!r}?"]
    if preview_error:
        lines.append(f"Targets: not known before the goal starts ({preview_error}).")
    elif not targets:
        lines.append("Targets: none of the perceived objects matches the instruction now "
                     "(the planner will perceive again and may end with "
                     "ERROR_TARGET_NOT_FOUND, moving nothing).")
    else:
        lines.append("Targets, in order (the planner's reading of the instruction over what "
                     "perception sees now):")
        for n, t in enumerate(targets, start=1):
            extra = f", to clear the way for {t['prerequisite_for']}" \
                if t.get("prerequisite_for") else ""
            lines.append(f"{n}. {t['target_id']} ({t.get('category') or 'unknown'}{extra})")
    lines.append("For each target the arm approaches, closes the gripper and lifts it. A "
                 "failed attempt is retried with a correction (grip force, opening, grasp "
                 "type or approach side may change) without asking again.")
    lines.append(f"Planner configuration: {configuration or 'the planner default'}.")
    return "\n".join(lines)


def scene_confirmation_text(task: str, seed: int) -> str:
    return (f"Load the scene {task!r} (seed {seed})? The simulated world is replaced: every "
            "object is put where the scene says.")


def stop_text(report: Mapping[str, Any]) -> str:
    """A stop's report as one paragraph."""
    head = "STOPPED" if report["stopped"] else "NOT STOPPED"
    text = (f"{head} in {report['stop_s']:.2f} s: {report['goals_canceled']} goal(s) canceled"
            + (" (the arm was moving)" if report["arm_was_moving"] else
               " (the arm was not moving)"))
    if not report["goals_running_before"] and not report["arm_was_moving"]:
        text += "; nothing was running"
    for note in report.get("notes", []):
        text += f"; {note}"
    return text


def status_text(report: Mapping[str, Any]) -> str:
    """The graph's health, the running goal and the last result as text."""
    nodes = ", ".join(f"{n['name']} {'up' if n['alive'] else 'DOWN'}"
                      + (f" ({n['restarts']} restart(s))" if n["restarts"] else "")
                      for n in report["nodes"])
    lines = [f"graph {'healthy' if report['healthy'] else 'NOT healthy'}: {nodes}"]
    if report["running_goals"]:
        for g in report["running_goals"]:
            line = f"running goal {g['goal_id'][:8]} ({g['status']})"
            if g.get("feedback"):
                line += ": " + feedback_text(g["feedback"])
            lines.append(line)
    else:
        lines.append("no goal running")
    lines.append(f"arm {'moving' if report['arm_moving'] else 'still'}")
    last = report.get("last_result")
    if last:
        lines.append(f"last result: goal {last['goal_id'][:8]} {last['instruction']!r}: "
                     f"{'SUCCESS' if last['success'] else 'FAILED'} ({last['error_code']}) "
                     f"{last['message']}")
    else:
        lines.append("last result: none seen since this server started")
    return "\n".join(lines)


def tool_error_text(what: str, exc: BaseException) -> str:
    """The tool error an agent reads when the graph fails (no planner, peer lost, timeout)."""
    return f"{what} failed: {exc}"


#: Descriptions an LLM reads to choose and call the tools.
DESCRIPTIONS: Dict[str, str] = {
    "grasp": (
        "Ask the robot to grasp what a natural-language instruction names (e.g. 'pick up the "
        "ceramic cup', 'clear the table'). The planner perceives the scene, retrieves grasp "
        "strategies from past experience, reasons about neighbouring objects, executes and "
        "retries with corrections. Progress notifications report each stage. Returns success, "
        "the error name, the message, the grasped object ids and one line per attempt with "
        "its failure type and correction. A goal that fails, is refused or loses a peer is a "
        "tool error (isError) with the same structured result. Moves the arm: refused unless "
        "the server allows motion; with confirmation on, the user is shown the targets first. "
        "Call stop to end it from anywhere."),
    "describe_scene": (
        "What the robot perceives now: each object (id, category, material, affordance, "
        "fragility, position in metres, world frame) and the scene graph's spatial relations "
        "between them (On_Top_Of, Near, Occludes, ...), and the camera image with the objects, "
        "relations and each object's perceived attributes and confidence drawn on it. Look at "
        "the image before grasping: perception can be wrong (a glass object read as 'unknown "
        "material, fragility 0.00'), and the picture lets you catch it."),
    "load_scene": (
        "Simulator only: load one of the benchmark scenes (e.g. sg_cup, it_cup_near_vase, "
        "lh_clear_table) with a trial seed. It replaces the world, so it is gated like "
        "motion (refused unless the server allows motion, confirmed when confirmation is "
        "on) and refused while any grasp runs. Refused when the arm is not the simulator."),
    "retrieve_strategies": (
        "What the affordance-aware retrieval (HAA-RAG) would propose for an object: the top "
        "grasp strategies from the knowledge base with their score breakdown (category, "
        "affordance and visual similarity, failed-experience penalty). Give at least one of "
        "category (e.g. mug), affordance (e.g. Graspable_Handle) or material (e.g. ceramic)."),
    "show_last_attempt": (
        "A PNG picture of the last grasp attempt: the camera image it was planned from with "
        "the perceived objects, the scene-graph relations and the planned gripper drawn on "
        "it, and a panel with the grasp parameters, outcome, failure type and correction."),
    "stop": (
        "Stop the arm now: cancels every running grasp goal, whoever sent it (this agent, "
        "another agent, another program), and returns once the arm has stopped. Needs no "
        "confirmation and works on a server that does not allow motion."),
    "status": (
        "The graph's health and activity: each node alive or down and how often it restarted "
        "since this server started, the running grasp goal (any client's) with its stage, "
        "whether the arm moves, and the last goal's result."),
}


def iter_limits() -> Iterable[Tuple[str, str]]:
    """The bounds, for the docs and the server's instructions."""
    yield "instruction", f"1..{MAX_INSTRUCTION_CHARS} characters"
    yield "configuration", ", ".join(configuration_names())
    yield "seed", f"{SEED_MIN}..{SEED_MAX}"
    yield "k", f"1..{K_MAX}"
