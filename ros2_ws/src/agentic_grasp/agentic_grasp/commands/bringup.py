"""``agentic-grasp bringup``: the graph of bringup.launch.py as plain processes.

A node that dies is restarted after a delay with backoff; after repeated crashes bringup gives
up on it with a message and the rest keeps running (core/supervision.py). ``--no-respawn``
restores the old behaviour: the first node that exits stops the graph.
"""
from __future__ import annotations

import argparse

from agentic_grasp.ros.graph.description import DEFAULT_PERCEPTION


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arm", choices=("sim", "moveit"), default="sim",
                        help="arm backend of the executor (default sim)")
    parser.add_argument("--perception", choices=("vlm_sim", "vlm", "oracle"),
                        default=DEFAULT_PERCEPTION,
                        help="perception backend (default vlm_sim: the simulated VLM of "
                        "config/perception.yaml, from the camera's pixels, no GPU; vlm: "
                        "Qwen3-VL on vLLM; oracle: simulator ground truth, only when asked)")
    parser.add_argument("--vlm-url", default="http://127.0.0.1:8000/v1",
                        help="OpenAI-compatible endpoint of the vLLM server")
    parser.add_argument("--params-file", default="",
                        help="extra ROS params file applied after config/<node>.yaml")
    parser.add_argument("--acquired", default="default",
                        help="experience acquisition file (planner appends one experience per "
                        "attempt, retrieval serves it live); default: $XDG_DATA_HOME/"
                        "agentic_grasp/acquired_experiences.jsonl; 'none' turns it off")
    parser.add_argument("--store", choices=("file", "postgres"), default="file",
                        help="where acquired experiences go: file (--acquired) or postgres, "
                        "the fleet store (DSN from $AGENTIC_GRASP_PG_DSN or the PG* "
                        "variables; README 'Fleet store')")
    parser.add_argument("--robot", default="",
                        help="this robot's name in the records' provenance (default: the "
                        "host name)")
    parser.add_argument("--record", default="",
                        help="record the run's topics to this rosbag2 folder")
    parser.add_argument("--record-storage", choices=("mcap", "sqlite3"), default="mcap",
                        help="storage of the recorded bag (default mcap, as rosbag2 on "
                             "Jazzy)")
    parser.add_argument("--no-respawn", action="store_true",
                        help="do not restart a node that dies: stop the whole graph instead")


def run(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.ros.graph.launcher import Launcher

    launcher = Launcher({"arm": args.arm, "perception": args.perception,
                         "vlm_url": args.vlm_url, "params_file": args.params_file,
                         "record": args.record, "record_storage": args.record_storage,
                         "acquired": args.acquired, "store": args.store,
                         "robot": args.robot})
    launcher.start()
    print(f"[bringup] started: {', '.join(launcher.procs)} (Ctrl-C to stop)", flush=True)
    return launcher.wait_forever(supervise=not args.no_respawn)
