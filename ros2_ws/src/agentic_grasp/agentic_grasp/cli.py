"""``agentic-grasp``: the single user-facing command; each subcommand lives in commands/.

Subcommand modules are imported only when used, so ``agentic-grasp kb validate`` does not
load rclpy and ``agentic-grasp --help`` is instant.

Other installed packages add subcommands through the ``agentic_grasp.commands`` entry-point
group (name = module with ``add_arguments(parser)``, ``run(args)`` and a one-line ``HELP``):
the lab package, agentic_grasp_lab, adds ``bench`` and ``eval``. A robot install (this
package and agentic_grasp_interfaces) has no such package and so no such commands.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import logging
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from agentic_grasp.core.paths import DATA_HOME_ENV

#: subcommand -> (module under agentic_grasp.commands, one-line help)
COMMANDS = {
    "bringup": ("bringup", "start the node graph as processes (like ros2 launch bringup)"),
    "execute": ("execute", "load a task scene and execute one grasp through ExecuteGrasp"),
    "grasp": ("grasp", "grasp what an instruction names through the planner (GraspObject), "
              "streaming its feedback"),
    "retrieve": ("retrieve", "ask HAA-RAG for grasp strategies (the retrieval node, or --local) "
                 "as JSON"),
    "kb": ("kb", "knowledge-base tools: validate, stats, list, export, prune, import, reset "
           "(reset: forget what the robot learnt)"),
    "replay": ("replay", "replay a recorded run's observations through the planner under a "
               "configuration; report decisions and agreement"),
    "bag": ("bag", "recorded runs: info (what a bag holds), record (record goals for replay)"),
    "show": ("show", "pictures of what the robot saw and decided: one PNG per attempt and a "
             "contact sheet per goal, from a bag or the live graph"),
    "mcp": ("mcp", "serve the graph as tools for LLM agents (Model Context Protocol: grasp, "
            "describe_scene, load_scene, retrieve_strategies, show_last_attempt, stop, "
            "status)"),
}

#: The entry-point group through which other packages add subcommands (agentic_grasp_lab:
#: bench, eval); each entry point names a module, like the values of COMMANDS.
COMMAND_GROUP = "agentic_grasp.commands"

DESCRIPTION = ("Ask the node graph to grasp what an instruction names, and the tools around "
               "it: bring the graph up, look at what it did, tend its knowledge base.")

EPILOG = ("bench (benchmarks) and eval (evaluations against the paper's tables) come from the "
          "lab package, agentic_grasp_lab, when it is installed (entry-point group "
          f"{COMMAND_GROUP}); without it they are absent (a robot install). What the robot "
          "learns from its own attempts is kept in $AGENTIC_GRASP_DATA_HOME, by default "
          "~/.local/share/agentic_grasp ($XDG_DATA_HOME/agentic_grasp); --data-dir moves it for "
          "one command, agentic-grasp kb reset clears it. Exit status: 0 success, 1 a goal or "
          "check that failed, 2 a usage or system error.")


def extra_commands() -> Dict[str, Tuple[str, str]]:
    """subcommand -> (module, one-line help) of every installed package's entry points in
    COMMAND_GROUP; a name the runtime already has, or a second time, is left out."""
    found: Dict[str, Tuple[str, str]] = {}
    for entry in sorted(importlib.metadata.entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        if entry.name in COMMANDS or entry.name in found:
            continue
        module = importlib.import_module(entry.value)
        found[entry.name] = (entry.value, getattr(module, "HELP", ""))
    return found


def _module_path(module: str) -> str:
    """A COMMANDS module name, or an entry point's dotted module path, as an import path."""
    return module if "." in module else f"agentic_grasp.commands.{module}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentic-grasp", description=DESCRIPTION,
                                     epilog=EPILOG)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--data-dir", metavar="DIR", default=None,
                        help="keep what the robot learns (acquired experiences, the fleet "
                        f"spool) in DIR for this command and the nodes it starts; sets "
                        f"${DATA_HOME_ENV} (default: $AGENTIC_GRASP_DATA_HOME, else "
                        "~/.local/share/agentic_grasp)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, text) in {**COMMANDS, **extra_commands()}.items():
        p = sub.add_parser(name, help=text, description=text)
        p.set_defaults(_module=module, _parser=p)
        importlib.import_module(_module_path(module)).add_arguments(p)
    return parser


def _innermost(args: argparse.Namespace, parser: argparse.ArgumentParser
               ) -> argparse.ArgumentParser:
    """The parser of the deepest subcommand given (``kb prune``'s, not ``kb``'s): its usage
    is what a wrong argument after it should show."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                return _innermost(args, chosen)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Optional[List[str]]) -> argparse.Namespace:
    """``parser.parse_args``, except that an argument no parser knows is reported by the
    subcommand it follows, with that subcommand's usage (argparse reports it with the
    top-level usage, which does not list the subcommand's options)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        _innermost(args, args._parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    if args.data_dir:
        # the environment, so the nodes bringup starts and every reader of the folder
        # (core/paths.user_data_dir) see it
        os.environ[DATA_HOME_ENV] = str(Path(args.data_dir).expanduser().resolve())
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    module = importlib.import_module(_module_path(args._module))
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
