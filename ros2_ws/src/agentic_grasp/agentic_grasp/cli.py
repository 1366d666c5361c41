"""``agentic-grasp``: the single user-facing command; each subcommand lives in commands/.

Subcommand modules are imported only when used, so ``agentic-grasp kb validate`` does not
load rclpy and ``agentic-grasp --help`` is instant.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import List, Optional

#: subcommand -> (module under agentic_grasp.commands, one-line help)
COMMANDS = {
    "bringup": ("bringup", "start the node graph as processes (like ros2 launch bringup)"),
    "execute": ("execute", "load a task scene and execute one grasp through ExecuteGrasp"),
    "grasp": ("grasp", "grasp what an instruction names through the planner (GraspObject), "
              "streaming its feedback"),
    "bench": ("bench", "benchmarks that print numbers (sim, retrieval, scene-graph, perception)"),
    "retrieve": ("retrieve", "ask HAA-RAG for grasp strategies (the retrieval node, or --local) "
                 "as JSON"),
    "kb": ("kb", "knowledge-base tools: validate"),
    "replay": ("replay", "replay a recorded run's observations through the planner under a "
               "configuration; report decisions and agreement"),
    "bag": ("bag", "recorded runs: info"),
    "show": ("show", "pictures of what the robot saw and decided: one PNG per attempt and a "
             "contact sheet per goal, from a bag or the live graph"),
    "mcp": ("mcp", "serve the graph as tools for LLM agents (Model Context Protocol: grasp, "
            "describe_scene, load_scene, retrieve_strategies, show_last_attempt)"),
    "eval": ("evaluate", "evaluations against the paper's tables: retrieval (Table IV)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentic-grasp", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module, text) in COMMANDS.items():
        p = sub.add_parser(name, help=text, description=text)
        p.set_defaults(_module=module)
        importlib.import_module(f"agentic_grasp.commands.{module}").add_arguments(p)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    module = importlib.import_module(f"agentic_grasp.commands.{args._module}")
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
