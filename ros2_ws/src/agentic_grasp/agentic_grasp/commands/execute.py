"""``agentic-grasp execute``: load a task scene, plan a heuristic grasp, run ExecuteGrasp."""
from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", default="sg_banana", help="task scene to load first")
    parser.add_argument("--seed", type=int, default=0, help="trial seed of the scene")
    parser.add_argument("--no-load", action="store_true",
                        help="use the scene the simulator already has")
    parser.add_argument("--target", default="", help="object id (default: the task's target)")
    parser.add_argument("--force", type=float, help="override the grip force (N)")
    parser.add_argument("--width", type=float, help="override the gripper opening (m)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait")
    parser.add_argument("--json", action="store_true", help="print the result as JSON only")


def run(args: argparse.Namespace) -> int:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.ros.client.graph_client import GraphClient, GraphError
    from agentic_grasp.core.arm.backend import ArmError
    from agentic_grasp.core.grasping.heuristic import heuristic_grasp

    with GraphClient("agentic_grasp_execute") as client:
        try:
            targets = []
            if not args.no_load:
                loaded = client.load_scene(args.task, args.seed)
                targets = list(loaded.target_ids)
                if not args.json:
                    print(f"loaded {loaded.task_id} (seed {args.seed}): {loaded.instruction!r}; "
                          f"objects {', '.join(loaded.object_ids)}")
            objects = {o.id: o for o in client.ground_truth()}
            target = args.target or (targets[0] if targets else "")
            if target not in objects:
                print(f"error: unknown target {target!r}; objects: {', '.join(objects)}")
                return 2
            grasp = heuristic_grasp(objects[target])
            if args.force is not None:
                grasp.force = args.force
            if args.width is not None:
                grasp.width = args.width
            if not args.json:
                print(f"grasping {target}: {json.dumps(grasp.to_dict())}")

            def feedback(fb):
                if not args.json:
                    print(f"  phase {fb.phase_index}/{fb.phase_count}: {fb.phase}", flush=True)

            result = client.execute_grasp(target, grasp, args.timeout, feedback)
        except GraphError as exc:
            print(f"error: {exc}")
            return 2
    # on use, as above
    from agentic_grasp.core.arm.backend import ArmResult
    from agentic_grasp.core.grasping.config import HandConfig
    from agentic_grasp.core.grasping.hand import HandModel
    from agentic_grasp.core.planner.recovery.diagnosis import assess
    from agentic_grasp.ros.conversions.grasp import observation_from_msg

    observation = observation_from_msg(result.observation)
    # the planner's reading of what the arm reported, against the scene this tool planned on
    assessed = assess(ArmResult(ArmError(result.error_code), result.message, observation),
                      grasp, HandModel(HandConfig()), objects[target], list(objects.values()))
    outcome, diagnosis = assessed.outcome, assessed.diagnosis
    report = {
        "target": target, "error_code": ArmError(result.error_code).name,
        "message": result.message, "success": assessed.success,
        "quality": None if outcome is None else round(float(outcome.quality), 4),
        "diagnosis": None if diagnosis is None else diagnosis.to_dict(),
        # NaN marks a quantity that does not exist in this attempt (no contact, ...): null.
        "observation": None if observation is None else observation.to_dict(),
    }
    print(json.dumps(report, indent=None if args.json else 2))
    if result.error_code != ArmError.NONE:
        return 2
    return 0 if assessed.success else 1
