"""``agentic-grasp bench BENCHMARK``: benchmarks that print numbers, each beside a baseline
measured in the same run (never pass/fail timings). One subcommand per benchmark, each with
only its own options: ``agentic-grasp bench BENCHMARK --help``."""
from __future__ import annotations

import argparse
import json

#: one-line help of ``bench`` in ``agentic-grasp --help`` (read through the entry point)
HELP = ("benchmarks that print numbers, one subcommand each (paper, procedural, learning, "
        "fleet, sim, graph, retrieval, scene-graph, perception, soak, vlm-sim, geometry, "
        "peer-calls)")

#: benchmark -> its one-line help
BENCHMARKS = {
    "paper": "the paper's protocol: Tables II-V and the OOD study beside the paper",
    "procedural": "--scenes N scenes drawn from the catalogue in families: success per "
                  "family, refusals and the scene graph's effect (in process; one procedural "
                  "scene runs through the graph with `agentic-grasp grasp --procedural S:K`)",
    "learning": "success per block of 10 goals with and without experience acquisition, "
                "paired seeds, held-out evaluation",
    "fleet": "four robots sharing the PostgreSQL store beside each alone, commit-to-served "
             "delay, latency at --scale-records",
    "sim": "one simulated attempt in-process, and ExecuteGrasp through ROS beside the bare "
           "action round trip",
    "graph": "one single-grasp trial through the whole graph beside the bare action round trip",
    "retrieval": "HAA-RAG at 10^3, 10^5, 10^6 entries beside a brute-force scan",
    "scene-graph": "graph + constraints for 10 and 200 objects",
    "perception": "VLM client overhead per call beside the bare HTTP round trip",
    "soak": "-n goals (default 1000) over all 12 scenes through the graph, RSS per node every "
            "--every goals, latency p50/p99",
    "vlm-sim": "the simulated VLM's answer per call beside the depth geometry and rendering it "
               "feeds",
    "geometry": "depth geometry of every catalogue object at random poses against the "
                "renderer's truth (-n poses per object)",
    "peer-calls": "the planner's peer call beside ros2/examples' awaited call on the "
                  "scene-graph node: latency, a peer killed and respawned, a fresh client",
}

#: benchmark -> the default of its -n (samples)
SAMPLES = {"sim": "500 in process, 100 through ROS", "graph": "50", "retrieval": "200 queries",
           "scene-graph": "200 repeats", "perception": "200 calls", "soak": "1000 goals",
           "vlm-sim": "20 calls", "geometry": "12 poses per object",
           "peer-calls": "200 calls of each kind"}


def _json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _add_paper(parser: argparse.ArgumentParser) -> None:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.commands.bench_paper import add_paper_arguments

    add_paper_arguments(parser)


def _add_procedural(parser: argparse.ArgumentParser) -> None:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.commands.bench_paper import add_paper_arguments
    from agentic_grasp_lab.commands.bench_procedural import add_procedural_arguments

    add_procedural_arguments(parser)
    add_paper_arguments(parser, title="trials and output", only={
        "--configurations": "comma-separated configurations (default: full,no_scene_graph)",
        "--perception": "perception of every trial (default vlm_sim)",
        "--visual-query": "s_vis of HAA-RAG (default camera)",
        "--workers": None, "--executor": None, "--ray-address": None,
        "--out": "output folder (default out/procedural)",
        "--no-figures": None, "--no-progress": None,
        "--json": "print the summary as JSON"})


def _add_learning(parser: argparse.ArgumentParser) -> None:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.commands.bench_learning import add_learning_arguments
    from agentic_grasp_lab.commands.bench_paper import add_paper_arguments

    add_learning_arguments(parser)
    add_paper_arguments(parser, title="trials and output", only={
        "--tasks": "comma-separated series tasks (default: those of --groups)",
        "--perception": "perception of every trial (default vlm_sim)",
        "--out": "output folder (default results/learning)",
        "--no-progress": None, "--json": "also print the result as JSON"})


def _add_fleet(parser: argparse.ArgumentParser) -> None:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.commands.bench_fleet import add_fleet_arguments
    from agentic_grasp_lab.commands.bench_learning import add_learn_seed
    from agentic_grasp_lab.commands.bench_paper import add_paper_arguments

    add_fleet_arguments(parser)
    group = add_paper_arguments(parser, title="trials and output", only={
        "--perception": "perception of every trial (default vlm_sim)",
        "--out": "output folder (default results/fleet)",
        "--no-progress": None, "--json": "also print the result as JSON"})
    add_learn_seed(group)


def _add_samples(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument("-n", type=int, default=0, help=f"samples (default {SAMPLES[name]})")
    _json(parser)


def _add_sim(parser: argparse.ArgumentParser) -> None:
    _add_samples(parser, "sim")
    parser.add_argument("--inprocess-only", action="store_true", help="skip the ROS part")


def _add_soak(parser: argparse.ArgumentParser) -> None:
    _add_samples(parser, "soak")
    parser.add_argument("--every", type=int, default=100,
                        help="sample each node's RSS every this many goals")
    parser.add_argument("--soak-perception", choices=("oracle", "vlm_sim"), default="oracle",
                        help="the graph's perception backend")


def _add_geometry(parser: argparse.ArgumentParser) -> None:
    _add_samples(parser, "geometry")
    parser.add_argument("--geometry-seed", type=int, default=0, help="seed of the poses")
    parser.add_argument("--pointing-noise-px", type=float, default=0.0,
                        help="Gaussian noise (px, 1 sigma) on the perfect VLM's point and "
                        "box corners")
    parser.add_argument("--neighbours", action="store_true",
                        help="a random catalogue object beside each one (occlusion)")
    parser.add_argument("--depth-noise-mm", type=float, default=0.0,
                        help="Gaussian depth noise of the rendered frames (mm, 1 sigma)")


def _add_peer_calls(parser: argparse.ArgumentParser) -> None:
    _add_samples(parser, "peer-calls")
    parser.add_argument("--rounds", type=int, default=5,
                        help="times the scene-graph node is killed and respawned")
    parser.add_argument("--fresh", type=int, default=10,
                        help="fresh clients whose first call is measured, of each kind")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    sub.required = True
    adders = {"paper": _add_paper, "procedural": _add_procedural, "learning": _add_learning,
              "fleet": _add_fleet, "sim": _add_sim, "soak": _add_soak,
              "geometry": _add_geometry, "peer-calls": _add_peer_calls}
    for name, text in BENCHMARKS.items():
        p = sub.add_parser(name, help=text, description=text)
        adders.get(name, lambda q, n=name: _add_samples(q, n))(p)


def _bench_sim(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.benchmarks.timing import line
    from agentic_grasp.core.sim.simulator import bench_attempt

    inproc = bench_attempt(n=args.n or 500)
    out = {"sim_attempt_inprocess": inproc}
    if not args.json:
        print(line("simulated attempt, in-process (wall)", {**inproc, "p90_ms": float("nan")}))
        print(f"{'':44} cpu p50 {inproc['cpu_p50_ms']:.3f} ms, "
              f"success {inproc['success_rate']:.0%}")
    if args.inprocess_only:
        return out
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.ros.benchmarks.executor_bench import run

    ros = run(n=args.n or 100)
    out.update(ros)
    out["ratio_p50"] = ros["execute_grasp_ros"]["p50_ms"] / ros["bare_action_round_trip"]["p50_ms"]
    if not args.json:
        print(line("ExecuteGrasp through ROS (sim + executor)", ros["execute_grasp_ros"]))
        print(line("bare rclpy action round trip", ros["bare_action_round_trip"]))
        print(f"ExecuteGrasp / bare action p50 ratio: {out['ratio_p50']:.2f}")
    return out


def _bench_graph(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.ros.benchmarks.planner_bench import report, run

    result = run(n=args.n or 50)
    if not args.json:
        print(report(result))
    return result


def _bench_retrieval(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.benchmarks.retrieval_scale import format_scale_table, run_scale_bench

    rows = run_scale_bench(queries=args.n or 200)
    if not args.json:
        print(format_scale_table(rows))
    return {"rows": rows}


def _bench_scene_graph(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.benchmarks.scene_graph import main, run_bench

    if not args.json:
        main(["--repeats", str(args.n or 200)])
        return {}
    return {"rows": run_bench(repeats=args.n or 200)}


def _bench_perception(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.benchmarks.perception_client import run_client_bench

    result = run_client_bench(n=args.n or 200)
    if not args.json:
        print(json.dumps(result, indent=2))
    return result


def _bench_soak(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.ros.benchmarks.soak import format_checkpoint, report, run

    result = run(n=args.n or 1000, every=args.every, perception=args.soak_perception,
                 on_checkpoint=None if args.json else lambda p: print(format_checkpoint(p),
                                                                      flush=True))
    if not args.json:
        print("\n".join(report(result).splitlines()[len(result["checkpoints"]):]))
    return result


def _bench_vlm_sim(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.perception.vlm.sim import bench_calls

    result = bench_calls(n=args.n or 20)
    if not args.json:
        print(f"vlm_sim on the first frame of the 12 tasks, {result['calls']} calls "
              "(CPU time):")
        for key in ("answer_and_checks", "depth_geometry", "render_view"):
            print(f"  {key:<20} p50 {result[key]['p50_ms']:7.3f} ms   "
                  f"p90 {result[key]['p90_ms']:7.3f} ms")
        print(f"  answer length p50 {result['completion_tokens_p50']} tokens -> modelled "
              f"VLM latency {result['modelled_vlm_latency_s_p50']:.2f} s per real call")
    return result


def _bench_learning(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.commands.bench_learning import run_learning_bench

    return run_learning_bench(args)


def _bench_fleet(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.commands.bench_fleet import run_fleet_bench

    return run_fleet_bench(args)


def _bench_geometry(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.benchmarks.geometry import format_report, run_geometry_bench

    result = run_geometry_bench(poses=args.n or 12, seed=args.geometry_seed,
                                noise_px=args.pointing_noise_px, neighbours=args.neighbours,
                                depth_noise_m=args.depth_noise_mm / 1e3)
    result.pop("_trials")
    if not args.json:
        print(format_report(result))
    return result


def _bench_peer_calls(args) -> dict:
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp_lab.ros.benchmarks.peer_calls import report, run

    result = run(n=args.n or 200, rounds=args.rounds, fresh=args.fresh)
    if not args.json:
        print(report(result))
    return result


def run(args: argparse.Namespace) -> int:
    if args.benchmark == "paper":
        # on use: cli.py imports every command's module to build its parser
        from agentic_grasp_lab.commands.bench_paper import run_paper

        return run_paper(args)
    if args.benchmark == "procedural":
        # on use: cli.py imports every command's module to build its parser
        from agentic_grasp_lab.commands.bench_procedural import run_procedural_bench

        return run_procedural_bench(args)
    result = {"sim": _bench_sim, "graph": _bench_graph, "retrieval": _bench_retrieval,
              "scene-graph": _bench_scene_graph, "perception": _bench_perception,
              "soak": _bench_soak, "vlm-sim": _bench_vlm_sim,
              "geometry": _bench_geometry, "learning": _bench_learning,
              "fleet": _bench_fleet, "peer-calls": _bench_peer_calls}[args.benchmark](args)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    return 0
