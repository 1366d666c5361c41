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
    outcome = result.outcome
    report = {
        "target": target, "error_code": ArmError(result.error_code).name,
        "message": result.message, "success": bool(outcome.success),
        "quality": round(float(outcome.quality), 4),
        "phi": [round(float(v), 3) for v in outcome.phi],
        "events": list(outcome.events), "phase_reached": outcome.phase_reached,
        # NaN marks a quantity that does not exist in this attempt (no contact, ...): null.
        "measurements": {n: (round(float(v), 5) if v == v else None) for n, v in
                         zip(outcome.measurement_names, outcome.measurement_values)},
    }
    print(json.dumps(report, indent=None if args.json else 2))
    if result.error_code != ArmError.NONE:
        return 2
    return 0 if outcome.success else 1
