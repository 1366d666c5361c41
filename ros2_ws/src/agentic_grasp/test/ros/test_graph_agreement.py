"""One system, two ways to run it: the node graph and the in-process benchmark agree.

The 12 tasks x 1 trial of the full configuration, seed 0, run through the whole graph (every
node a process, ``bench paper --ros``'s sweep) and in process (the benchmark's sweep), trial by
trial with the same paired seeds, with the oracle and with the default vlm_sim (whose
``it_ball_behind_box`` is found only by a wrist-camera view: the graph's MoveCamera, wrist
capture and Perceive camera=wrist). The test fails on any trial whose outcome differs and
prints every trial whose attempt sequence differs. Sequences are not asserted yet: the
first attempts' execution noise was seen to differ once in 60 trials (README, graph vs
in-process agreement). About 2 minutes per perception on 2 shared cores.
"""
from __future__ import annotations

import pytest

from agentic_grasp_lab.evaluation.agreement import agreement, disagreements, format_agreement

TASKS_PER_RUN = 12


def _both(perception: str):
    from agentic_grasp_lab.ros.benchmarks.ros_sweep import run_ros_sweep
    from agentic_grasp_lab.evaluation.sweep import run_sweep
    from agentic_grasp.core.sim import list_tasks

    tasks = list_tasks()
    assert len(tasks) == TASKS_PER_RUN
    graph = run_ros_sweep(["full"], tasks, 1, [0], perception=perception)
    inprocess = run_sweep(["full"], tasks, 1, [0], workers=1, progress=False,
                          perception=perception, visual_query="camera").records
    return graph, inprocess


@pytest.mark.parametrize("perception", ["oracle", "vlm_sim"])
def test_graph_and_in_process_runs_agree_trial_by_trial(perception):
    graph, inprocess = _both(perception)
    table = agreement(graph, inprocess)
    print(format_agreement(table, perception))
    assert table["total"]["trials"] == TASKS_PER_RUN and table["total"]["unpaired"] == 0
    assert all(r.perception == perception for r in graph)      # the records say what ran
    for line in disagreements(graph, inprocess, "sequence"):
        print("attempt sequence differs:", line)
    different = disagreements(graph, inprocess, "outcome")
    assert not different, "graph and in-process outcomes differ:\n" + "\n".join(different)


def test_bench_ros_refuses_what_the_graph_cannot_run():
    from agentic_grasp_lab.ros.benchmarks.ros_sweep import check_ros_options, run_ros_sweep

    assert check_ros_options("vlm_sim", "camera", "trial") == ""
    assert check_ros_options("vlm_sim_perfect", "none", "trial") == ""
    assert "render" in check_ros_options("oracle", "render", "trial")
    assert "series" in check_ros_options("oracle", "camera", "series")
    assert "perception" in check_ros_options("vlm", "camera", "trial")
    with pytest.raises(ValueError, match="render"):         # before any node starts
        run_ros_sweep(["full"], ["sg_cup"], 1, [0], visual_query="render")


def test_procedural_scenes_agree_through_the_graph():
    """One procedural scene of each family (bench procedural's scenes, by name) through the
    whole graph and in process, vlm_sim, paired seeds: the same outcome trial by trial."""
    from agentic_grasp_lab.evaluation.sweep import run_sweep
    from agentic_grasp.core.sim.procedural import FAMILIES, procedural_id
    from agentic_grasp_lab.ros.benchmarks.ros_sweep import run_ros_sweep

    seed = 7
    tasks = [procedural_id(seed, k) for k in range(len(FAMILIES))]
    graph = run_ros_sweep(["full"], tasks, 1, [seed], perception="vlm_sim")
    inprocess = run_sweep(["full"], tasks, 1, [seed], workers=1, progress=False,
                          perception="vlm_sim", visual_query="camera").records
    table = agreement(graph, inprocess)
    print(format_agreement(table, "vlm_sim"))
    assert table["total"]["trials"] == len(FAMILIES) and table["total"]["unpaired"] == 0
    for line in disagreements(graph, inprocess, "sequence"):
        print("attempt sequence differs:", line)
    different = disagreements(graph, inprocess, "outcome")
    assert not different, "graph and in-process outcomes differ:\n" + "\n".join(different)
