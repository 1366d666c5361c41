"""Issue 15's one-home rules: geometry, recovery, Eq. 2, percentiles, and no import cycles;
issue 27's one ROS layer: rclpy and ROS messages only under agentic_grasp/ros/, no arrow from
the core up to ros/ or commands/, and a package root that shows the architecture."""
import ast
import math
import pathlib

import networkx as nx
import numpy as np
import pytest

import agentic_grasp
from agentic_grasp.core import geometry
from agentic_grasp.core.planner import failure, recovery
from agentic_grasp.core.planner.configurations import PlannerConfig
from agentic_grasp.core.stats import percentiles
from agentic_grasp.core.types import GraspParameters, ObjectInstance

PACKAGE = pathlib.Path(agentic_grasp.__file__).parent


# ---------------------------------------------------------------- geometry
def test_quaternion_round_trip_and_yaw():
    rng = np.random.default_rng(0)
    for _ in range(200):
        R = geometry.rpy_to_matrix(*rng.uniform(-math.pi, math.pi, 3))
        q = geometry.matrix_to_quaternion(R)
        assert q[3] >= 0.0 and abs(np.linalg.norm(q) - 1.0) < 1e-12
        assert np.allclose(geometry.quaternion_to_matrix(q), R, atol=1e-12)
    for yaw in np.linspace(-3.1, 3.1, 13):
        q = geometry.yaw_quaternion(yaw)
        assert geometry.quaternion_yaw(*q) == pytest.approx(yaw, abs=1e-12)
        assert np.allclose(geometry.quaternion_to_matrix(q), geometry.yaw_matrix(yaw))


def test_wrap_angle():
    assert geometry.wrap_angle(math.pi) == pytest.approx(-math.pi)
    assert geometry.wrap_angle(3 * math.pi / 2) == pytest.approx(-math.pi / 2)
    assert geometry.wrap_half_pi(math.pi * 0.75) == pytest.approx(-math.pi / 4)


def test_object_frame_round_trip():
    obj = ObjectInstance(id="cup_1", category="cup", shape="cylinder", position=[0.5, 0.1, 0.05],
                         size=[0.08, 0.08, 0.09], yaw=0.7)
    g = GraspParameters(position=np.array([0.52, 0.12, 0.08]), approach=np.array([0.0, 0.0, -1.0]),
                        wrist_yaw=2.9)
    back = geometry.grasp_to_world(geometry.grasp_to_object_frame(g, obj), obj)
    assert np.allclose(back.position, g.position) and back.wrist_yaw == pytest.approx(2.9)


def test_old_geometry_names_are_the_core_ones():
    from agentic_grasp.ros.backends import moveit_translation as mt
    from agentic_grasp.core.retrieval import knowledge_base as kb
    from agentic_grasp.core.sim import objects

    assert recovery.wrap_angle is geometry.wrap_angle
    assert objects.yaw_matrix is geometry.yaw_matrix
    assert kb.grasp_to_object_frame is geometry.grasp_to_object_frame
    assert mt.matrix_to_quaternion is geometry.matrix_to_quaternion
    assert mt.quaternion_to_matrix is geometry.quaternion_to_matrix


# ---------------------------------------------------------------- recovery
def test_corrections_live_in_recovery_and_failure_only_classifies():
    """One home each (issue 15): classification in failure.py; the three correction levels,
    their rules and the escalation in recovery.py; one thing called Adjustment (Delta g)."""
    for name in ("level1_adjustment", "level1_ops", "CORRECTION_RULES", "CorrectionOps",
                 "Adjustment", "failure_types_covered"):
        assert not hasattr(failure, name), name
    assert not hasattr(recovery, "Adjustment")
    assert callable(recovery.level1_ops) and recovery.CORRECTION_RULES


@pytest.mark.parametrize("level_by,expected", [("failed_attempt", [1, 1, 2, 3, 3]),
                                               ("next_attempt", [1, 2, 3, 3, 3])])
def test_escalation_rule_is_one_function(level_by, expected):
    cfg = PlannerConfig(level_by=level_by)
    assert [recovery.correction_level(r, cfg) for r in range(5)] == expected
    assert not hasattr(cfg, "level_for")           # no second copy on the config


# ---------------------------------------------------------------- Eq. 2, percentiles
def test_moveit_outcome_uses_the_given_weights():
    from agentic_grasp.ros.backends import moveit_config as mc
    from agentic_grasp.ros.backends import moveit_outcome as mo
    from agentic_grasp.core.sim.params import QualityParams

    cfg = mc.MoveItBackendConfig()
    obs = mo.AttemptObservation(execution_failure="ABORTED", execution_stage="descent")
    default = mo.outcome_from_observation(obs, cfg, "cube_1")
    phi = np.asarray(default.phi, dtype=float)
    assert default.quality == pytest.approx(float(np.dot(QualityParams().weights, phi)))
    only_clearance = [0.0] * 7
    only_clearance[list(mo.QUALITY_FACTOR_NAMES).index("approach_clearance")] = 1.0
    weighted = mo.outcome_from_observation(obs, cfg, "cube_1", weights=only_clearance)
    assert weighted.quality == 0.0 and default.quality > 0.0    # the collision zeroed phi5


def test_percentiles_are_numpy_default():
    samples = [0.3, 0.1, 0.2, 0.5, 0.4]
    assert percentiles(samples, (50, 90), scale=1e3) == [
        float(np.percentile(np.asarray(samples) * 1e3, 50)),
        float(np.percentile(np.asarray(samples) * 1e3, 90))]


# ---------------------------------------------------------------- import graph
def _import_graph() -> nx.DiGraph:
    """Module -> module edges of agentic_grasp, lazy (in-function) imports included and
    ``if TYPE_CHECKING:`` imports left out (they never run)."""
    mods = {}
    for p in PACKAGE.rglob("*.py"):
        parts = list(p.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p

    def resolve(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        skip = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for b in node.body for n in ast.walk(b))
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                base = node.module or ""
                # `from pkg import submodule` depends on the submodule; pkg's __init__ runs
                # first anyway (an implicit edge every submodule has)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            else:
                continue
            for target in targets:
                dep = resolve(target) if target.startswith("agentic_grasp") else None
                if dep and dep != mod and not (mod.startswith(dep + ".") and dep != target):
                    graph.add_edge(mod, dep)
    return graph


#: No cycle is tolerated.
KNOWN_CYCLES: list = []


def test_no_import_cycles_in_the_package():
    cycles = [set(c) for c in nx.simple_cycles(_import_graph())]
    assert [c for c in cycles if c not in KNOWN_CYCLES] == []


def test_benchmarks_do_not_import_commands():
    graph = _import_graph()
    up = [(a, b) for a, b in graph.edges
          if a.startswith(("agentic_grasp.core.benchmarks", "agentic_grasp.ros.benchmarks"))
          and b.startswith("agentic_grasp.commands")]
    assert up == []


# ---------------------------------------------------------------- one ROS layer (issue 27)
#: Top-level packages that only a ROS install provides: the client library, its generated
#: messages, launch. Importing one of them makes a module part of the ROS layer.
ROS_PACKAGES = ("rclpy", "rosidl_runtime_py", "rosidl_parser", "agentic_grasp_interfaces",
                "launch", "launch_ros", "builtin_interfaces", "std_msgs", "sensor_msgs",
                "geometry_msgs", "visualization_msgs", "action_msgs", "moveit_msgs",
                "moveit", "shape_msgs", "control_msgs", "franka_msgs", "tf2_ros")


def _external_imports(path: pathlib.Path) -> set:
    """Top-level names of everything ``path`` imports, lazy imports included and
    ``if TYPE_CHECKING:`` blocks left out."""
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for b in node.body for n in ast.walk(b))
    names = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_ros_is_imported_only_under_ros():
    """No module outside agentic_grasp/ros/ imports rclpy or a ROS message package (the
    interfaces package holds the messages and no Python of ours)."""
    ros_dir = PACKAGE / "ros"
    outside = {}
    for path in PACKAGE.rglob("*.py"):
        if ros_dir in path.parents:
            continue
        found = sorted(_external_imports(path) & set(ROS_PACKAGES))
        if found:
            outside[str(path.relative_to(PACKAGE))] = found
    assert outside == {}
    # the check sees imports at all: the ROS layer itself is full of them
    assert "rclpy" in _external_imports(ros_dir / "nodes" / "planner_node.py")


def test_no_arrow_from_core_up_to_ros_or_commands():
    graph = _import_graph()
    up = [(a, b) for a, b in graph.edges
          if a.startswith("agentic_grasp.core")
          and b.startswith(("agentic_grasp.ros", "agentic_grasp.commands", "agentic_grasp.cli"))]
    assert up == []
    back = [(a, b) for a, b in graph.edges
            if a.startswith("agentic_grasp.ros")
            and b.startswith(("agentic_grasp.commands", "agentic_grasp.cli"))]
    assert back == []
    assert any(a.startswith("agentic_grasp.ros") and b.startswith("agentic_grasp.core")
               for a, b in graph.edges)          # the graph is read: ros/ uses the core


def test_package_root_shows_the_architecture():
    """core/ (ROS-free), ros/ (every rclpy module), commands/ (the CLI) and the CLI's entry
    point; nothing else at the top of the package."""
    entries = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert entries == {"__init__.py", "cli.py", "core", "ros", "commands"}


# ---------------------------------------------------------------- one camera (issue 27)
def test_the_fixed_camera_is_defined_once():
    """config/camera.yaml holds the fixed camera; no module writes its eye as numbers."""
    import io
    import tokenize

    from agentic_grasp.core.camera import Camera, fixed_camera_spec

    spec = fixed_camera_spec()
    camera = Camera()
    assert np.allclose(camera.position, spec["eye"])
    assert (camera.width, camera.height, camera.fx, camera.cx) == (
        spec["width"], spec["height"], spec["fx"], spec["cx"])
    eye = [float(v) for v in spec["eye"]]
    written = []
    for path in PACKAGE.rglob("*.py"):
        numbers = [float(ast.literal_eval(t.string)) for t in tokenize.generate_tokens(
            io.StringIO(path.read_text()).readline) if t.type == tokenize.NUMBER
            and "j" not in t.string.lower()]
        if any(numbers[i:i + 3] == eye for i in range(len(numbers) - 2)):
            written.append(str(path.relative_to(PACKAGE)))
    assert written == []
