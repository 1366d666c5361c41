"""The node graph, declared once: bringup.launch.py and ``agentic-grasp bringup`` both read it.

Each entry names the node, its console script (ros2 launch) and module (plain processes), its
params file under config/, and when it runs. Arguments mirror the launch file's:
arm (sim | moveit), perception (vlm_sim, the default: the simulated VLM perceiving from
pixels | vlm | oracle: ground truth, only when asked), vlm_url, params_file, acquired
(experience acquisition: the acquired-experiences file the planner appends to and the
retrieval node follows; 'default' = the per-user file, 'none' = off), store (file | postgres:
the fleet store of core/retrieval/store.py), robot (the name in the records' provenance).
The launcher and the launch file add run_dir, the run's own folder (:func:`new_run_dir`).
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List

#: What the graph perceives with when nobody says: the simulated VLM, from pixels, as the
#: benchmark's default (config/evaluation.yaml). The oracle (ground truth) only when asked.
DEFAULT_PERCEPTION = "vlm_sim"

#: The file, in a run's own folder (:func:`new_run_dir`), where the sim keeps its world, so a
#: respawned sim comes back in it (ros/sim/node.py). A new bringup starts a new folder,
#: hence its configured scene.
WORLD_STATE_FILE = "sim_world.json"
#: Where the run folders go (else $XDG_RUNTIME_DIR/agentic_grasp, else <tmp>/agentic_grasp-<uid>).
RUN_DIR_ENV = "AGENTIC_GRASP_RUN_DIR"


def new_run_dir() -> Path:
    """A fresh folder for one bringup's runtime state (the sim's kept world); the launcher and
    the launch file remove it when the graph stops."""
    base = os.environ.get(RUN_DIR_ENV)
    if not base:
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        base = (os.path.join(runtime, "agentic_grasp") if runtime
                else os.path.join(tempfile.gettempdir(), f"agentic_grasp-{os.getuid()}"))
    os.makedirs(base, mode=0o700, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="run-", dir=base))


def _sim_overrides(args: Dict[str, str]) -> Dict[str, object]:
    run_dir = args.get("run_dir")
    return {"world_state_file": os.path.join(run_dir, WORLD_STATE_FILE)} if run_dir else {}


@dataclass(frozen=True)
class NodeSpec:
    name: str                     # ROS node name, also the params-file section
    executable: str               # console script in lib/agentic_grasp
    module: str                   # python -m module (machines without ros2 launch)
    params_file: str              # file under config/
    when: Callable[[Dict[str, str]], bool] = field(default=lambda args: True)
    overrides: Callable[[Dict[str, str]], Dict[str, object]] = field(default=lambda args: {})


NODES: List[NodeSpec] = [
    NodeSpec("sim", "sim_node", "agentic_grasp.ros.sim.node", "sim.yaml",
             when=lambda a: a.get("arm", "sim") == "sim", overrides=_sim_overrides),
    NodeSpec("executor", "executor_node", "agentic_grasp.ros.executor.node", "executor.yaml",
             overrides=lambda a: {"arm_backend": a.get("arm", "sim")}),
    NodeSpec("perception", "perception_node", "agentic_grasp.ros.perception.node",
             "perception.yaml",
             overrides=lambda a: {"backend": a.get("perception", DEFAULT_PERCEPTION),
                                  "vlm.url": a.get("vlm_url", "http://127.0.0.1:8000/v1")}),
    NodeSpec("retrieval", "retrieval_node", "agentic_grasp.ros.retrieval.node",
             "retrieval.yaml",
             overrides=lambda a: {"acquired_experiences_path": a.get("acquired", "default"),
                                  "acquired_store": a.get("store") or "file"}),
    NodeSpec("scene_graph", "scene_graph_node", "agentic_grasp.ros.scene_graph.node",
             "scene_graph.yaml"),
    NodeSpec("planner", "planner_node", "agentic_grasp.ros.planner.node", "planner.yaml",
             overrides=lambda a: {"acquisition.path": a.get("acquired", "default"),
                                  "acquisition.perception_backend":
                                      a.get("perception", DEFAULT_PERCEPTION),
                                  "acquisition.store": a.get("store") or "file",
                                  # rcl cannot parse an empty override ("-p name:="): left
                                  # out, the planner's own default (the host name) stands
                                  **({"acquisition.robot": a["robot"]} if a.get("robot")
                                     else {})}),
    # The public grasp_object action: forwards to the planner's planner/grasp_object and
    # outlives it, so a client's goal ends when the planner dies (ros/front/node.py).
    NodeSpec("grasp_front", "front_node", "agentic_grasp.ros.front.node", "front.yaml"),
]

#: Topics a recorded run keeps (ros2 bag record on a ROS 2 install).
RECORD_TOPICS: List[str] = [
    "/camera/color/image_raw", "/camera/depth/image_raw", "/camera/color/camera_info",
    "/joint_states", "/sim/ground_truth", "/perception/result", "/scene_graph/graph",
    "/scene_graph/markers", "/planner/attempts", "/planner/markers", "/planner/goal_log",
    "/planner/decision_inputs",
]
#: The wrist camera's topics (ros/sim/wrist.py), recorded too: a replayed goal that
#: looked behind an occluder (the planner's wrist view) shows what it saw there. Published
#: only when a view is taken, so a bag of goals without one has none of them.
RECORD_VIEW_TOPICS: List[str] = [
    "/wrist_camera/color/image_raw", "/wrist_camera/depth/image_raw",
    "/wrist_camera/color/camera_info", "/wrist_camera/ground_truth",
]
#: The GraspObject action's feedback and status topics, recorded too (goal progress).
RECORD_ACTION_TOPICS: List[str] = ["/grasp_object/_action/feedback",
                                   "/grasp_object/_action/status"]

#: ``agentic-grasp bringup --record DIR``: the recorder process (rosbags; the launch file runs
#: ``ros2 bag record`` instead). Not in NODES: it has no console script and runs only when
#: recording.
RECORDER = NodeSpec("recorder", "recorder", "agentic_grasp.ros.recording.recorder", "recorder.yaml",
                    when=lambda a: bool(a.get("record")),
                    overrides=lambda a: {"output": a.get("record", ""),
                                         "storage": a.get("record_storage") or "mcap"})

DEFAULT_ARGS: Dict[str, str] = {"arm": "sim", "perception": DEFAULT_PERCEPTION,
                                "vlm_url": "http://127.0.0.1:8000/v1", "params_file": "",
                                "acquired": "default", "store": "file", "robot": ""}


def selected_nodes(args: Dict[str, str]) -> List[NodeSpec]:
    merged = {**DEFAULT_ARGS, **{k: v for k, v in args.items() if v is not None}}
    return [spec for spec in NODES if spec.when(merged)]
