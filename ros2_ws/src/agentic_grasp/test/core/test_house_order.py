"""The one-home rules: geometry, recovery, Eq. 2, percentiles, and no import cycles; one
ROS layer: rclpy and ROS messages only under agentic_grasp/ros/, no arrow from the core up to
ros/ or commands/, and a package root that shows the architecture; the ROS
layer's layout (docs/ros-layout.md): one folder per node, rclpy internals only in ros/common/,
and modules and folders a reader can take in."""
import ast
import math
import pathlib

import networkx as nx
import numpy as np
import pytest

import agentic_grasp
from agentic_grasp.core import geometry
from agentic_grasp.core.planner import recovery
from agentic_grasp.core.planner.recovery import failure
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
    from agentic_grasp.ros.executor.moveit import translation as mt
    from agentic_grasp.core.retrieval import knowledge_base as kb
    from agentic_grasp.core.sim import objects

    assert recovery.wrap_angle is geometry.wrap_angle
    assert objects.yaw_matrix is geometry.yaw_matrix
    assert kb.grasp_to_object_frame is geometry.grasp_to_object_frame
    assert mt.matrix_to_quaternion is geometry.matrix_to_quaternion
    assert mt.quaternion_to_matrix is geometry.quaternion_to_matrix


# ---------------------------------------------------------------- recovery
def test_corrections_live_in_recovery_and_failure_only_classifies():
    """One home each: classification in failure.py; the three correction levels,
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
def test_moveit_observation_is_scored_with_the_eq2_weights():
    """The MoveIt arm's observation gets its Q from the planner's one reading of it, with
    the Eq. 2 weights the simulator's quality uses; the aborted descent zeroes phi5."""
    from agentic_grasp.core.arm.backend import ArmError, ArmResult
    from agentic_grasp.core.grasping.config import HandConfig
    from agentic_grasp.core.grasping.hand import HandModel
    from agentic_grasp.core.planner.recovery.diagnosis import PAPER_WEIGHTS, assess
    from agentic_grasp.core.sim.params import QualityParams
    from agentic_grasp.core.types import QUALITY_FACTOR_NAMES
    from agentic_grasp.ros.executor.moveit import outcome as mo

    grasp = GraspParameters(position=np.array([0.5, 0.1, 0.05]), width=0.06, force=25.0)
    obs = mo.MoveItObservation(execution_failure="ABORTED", execution_stage="descent")
    read = assess(ArmResult(ArmError.NONE, "", mo.arm_observation(obs, grasp)), grasp,
                  HandModel(HandConfig()))
    phi = np.asarray(read.outcome.phi, dtype=float)
    assert tuple(PAPER_WEIGHTS) == tuple(QualityParams().weights)
    assert read.outcome.quality == pytest.approx(float(np.dot(PAPER_WEIGHTS, phi)))
    assert phi[list(QUALITY_FACTOR_NAMES).index("approach_clearance")] == 0.0
    assert 0.0 < read.outcome.quality < 1.0


def test_percentiles_are_numpy_default():
    samples = [0.3, 0.1, 0.2, 0.5, 0.4]
    assert percentiles(samples, (50, 90), scale=1e3) == [
        float(np.percentile(np.asarray(samples) * 1e3, 50)),
        float(np.percentile(np.asarray(samples) * 1e3, 90))]


# ---------------------------------------------------------------- import graph
def _every_import_graph(package_dir: pathlib.Path = PACKAGE) -> nx.DiGraph:
    """Module -> module edges of a package (default agentic_grasp) counting every import
    statement: at module
    level, under ``if TYPE_CHECKING:``, inside functions and classes; absolute and relative.
    ``from pkg import name`` depends on ``pkg.name`` when that is a module, else on ``pkg``.
    Importing ``a.b.c`` from outside ``a.b`` runs ``a.b``'s ``__init__`` first, so it
    depends on ``a.b`` (and ``a``) too: a package whose ``__init__`` re-exports a module that
    imports the importer is a cycle. The edge every submodule has to its own package is left
    out, as a package importing its submodules would otherwise always be a cycle."""
    mods = {}
    for p in package_dir.rglob("*.py"):
        parts = list(p.relative_to(package_dir.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        mods[".".join(parts)] = (p, is_package)

    def resolve(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    for mod, (path, is_package) in mods.items():
        package = mod if is_package else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    up = package.split(".")
                    up = up[:len(up) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            else:
                continue
            for target in targets:
                dep = resolve(target) if target.startswith("agentic_grasp") else None
                if dep and dep != mod and not (mod.startswith(dep + ".") and dep != target):
                    graph.add_edge(mod, dep)
                parts = (dep or "").split(".")
                for parent in (".".join(parts[:i]) for i in range(1, len(parts))):
                    if parent in mods and mods[parent][1] and parent != mod \
                            and not mod.startswith(parent + "."):
                        graph.add_edge(mod, parent)        # its __init__ runs first
    return graph


def test_no_import_cycles_in_the_package():
    """No cycle, counting every import (TYPE_CHECKING and function-local ones included: a
    cycle hidden that way is still a cycle of the design)."""
    graph = _every_import_graph()
    assert [sorted(c) for c in nx.simple_cycles(graph)] == []
    # the graph is read: lazy and TYPE_CHECKING imports are edges too
    assert graph.has_edge("agentic_grasp.core.planner", "agentic_grasp.core.planner.episode")
    assert graph.has_edge("agentic_grasp.core.planner.events",
                          "agentic_grasp.core.planner.outcomes")


def test_every_import_graph_sees_hidden_and_relative_imports(tmp_path):
    """The cycle check finds a cycle tied by a TYPE_CHECKING import, a function-local one or
    a relative one."""
    pkg = tmp_path / "agentic_grasp"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from agentic_grasp.sub import c\n")
    (pkg / "sub" / "c.py").write_text("from . import a\n")
    cycles = [sorted(c) for c in nx.simple_cycles(_every_import_graph(pkg))]
    assert cycles == [["agentic_grasp.sub.a", "agentic_grasp.sub.b", "agentic_grasp.sub.c"]]


def test_every_import_graph_sees_a_cycle_through_a_package_init(tmp_path):
    """Importing a module of a package runs the package's __init__ first: an __init__ that
    re-exports a module importing the importer is a cycle, though no module names the other."""
    pkg = tmp_path / "agentic_grasp"
    (pkg / "high").mkdir(parents=True)
    (pkg / "low").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "high" / "__init__.py").write_text("from agentic_grasp.high.loop import run\n")
    (pkg / "high" / "loop.py").write_text("from agentic_grasp.low.tool import use\n")
    (pkg / "high" / "helpers.py").write_text("X = 1\n")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "tool.py").write_text(
        "def use():\n    from agentic_grasp.high.helpers import X\n    return X\n")
    cycles = [sorted(c) for c in nx.simple_cycles(_every_import_graph(pkg))]
    assert cycles == [["agentic_grasp.high", "agentic_grasp.high.loop", "agentic_grasp.low.tool"]]


def uncommented_local_imports(package_dir: pathlib.Path) -> list:
    """Function-local imports of a package with no comment saying why: an import inside a
    function must be on use for a reason (an optional or heavy dependency, a CLI command that
    loads what it runs only when it runs), stated on its line or on the comment line just
    above its block of imports (or above the ``try:`` or ``if`` holding it)."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        local = sorted({n.lineno: n for fn in ast.walk(tree)
                        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                        for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))
                        }.values(), key=lambda n: n.lineno)
        ends = {n.end_lineno for n in local}
        for node in local:
            head = node
            while (head.lineno - 1) in ends:            # the first import of its block
                head = next(n for n in local if n.end_lineno == head.lineno - 1)
            holder = parents.get(head)
            candidates = [lines[node.lineno - 1], lines[head.lineno - 2]]
            if isinstance(holder, (ast.Try, ast.If)) and holder.body and holder.body[0] is head:
                candidates += [lines[holder.lineno - 1], lines[holder.lineno - 2]]
            if not any("#" in line for line in candidates):
                found.append(f"{path.relative_to(package_dir.parent)}:{node.lineno}")
    return found


def test_every_function_local_import_says_why():
    """Imports live at module level; one inside a function carries a comment (its reason)."""
    assert uncommented_local_imports(PACKAGE) == []
    assert any(True for _ in PACKAGE.rglob("*.py"))


def test_the_local_import_check_sees_one_without_a_reason(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        "def f():\n    import json\n    return json\n\n\n"
        "def g():\n    # torch: an optional extra\n    import torch\n    import numpy\n"
        "    return torch, numpy\n\n\n"
        "def h():\n    try:    # matplotlib is optional\n        import matplotlib\n"
        "    except ImportError:\n        return None\n")
    assert uncommented_local_imports(pkg) == ["pkg/a.py:2"]


#: The planner's house limits: modules short enough to read whole, folders small enough to
#: see what belongs together.
PLANNER_MAX_LINES = 500
PLANNER_MAX_MODULES_PER_FOLDER = 12


def test_planner_modules_and_folders_stay_small():
    """No module under core/planner is over 500 lines and no folder there holds more than 12
    modules at its root (a group that belongs together gets its own subfolder)."""
    root = PACKAGE / "core" / "planner"
    long = {str(p.relative_to(root)): n for p in root.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > PLANNER_MAX_LINES}
    assert long == {}
    crowded = {str(d.relative_to(root)) or ".": n for d in [root, *root.rglob("*")]
               if d.is_dir() and d.name != "__pycache__"
               and (n := len(list(d.glob("*.py")))) > PLANNER_MAX_MODULES_PER_FOLDER}
    assert crowded == {}


# ---------------------------------------------------------------- one ROS layer
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
    assert "rclpy" in _external_imports(ros_dir / "planner" / "node.py")


def test_no_arrow_from_core_up_to_ros_or_commands():
    graph = _every_import_graph()
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


# ---------------------------------------------------------------- the ROS layer's layout
ROS = PACKAGE / "ros"
#: One folder per node: the node (node.py, with its main()), its parameters, its servers and
#: its clients of peers.
NODE_FOLDERS = ("planner", "perception", "retrieval", "scene_graph", "executor", "sim", "front")
#: What the nodes share (common/: the only place that knows rclpy internals), message
#: conversion, the node graph and its launcher, the client side, recording and replay.
SHARED_FOLDERS = ("common", "conversions", "graph", "client", "recording")
#: Folders that leave ros/ for their own package.
LEAVING_FOLDERS = ("benchmarks", "testing")
MAX_MODULE_LINES = 500
MAX_FOLDER_MODULES = 12


def _ros_modules():
    return [p for p in ROS.rglob("*.py") if "__pycache__" not in p.parts]


def test_ros_root_holds_only_folders():
    """ros/ itself holds __init__.py and folders: one per node and the shared ones."""
    entries = {p.name for p in ROS.iterdir() if p.name != "__pycache__"}
    files = {name for name in entries if (ROS / name).is_file()}
    assert files == {"__init__.py"}
    folders = entries - files
    assert set(NODE_FOLDERS) | set(SHARED_FOLDERS) <= folders
    assert folders <= set(NODE_FOLDERS) | set(SHARED_FOLDERS) | set(LEAVING_FOLDERS)
    for folder in folders:
        assert (ROS / folder / "__init__.py").is_file(), folder


@pytest.mark.parametrize("folder", NODE_FOLDERS)
def test_each_node_has_its_folder_with_its_main(folder):
    """ros/<node>/node.py defines the node's main() (setup.py's console script and the
    graph's module)."""
    from agentic_grasp.ros.graph.description import NODES

    tree = ast.parse((ROS / folder / "node.py").read_text())
    assert "main" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    modules = {spec.module for spec in NODES}
    assert f"agentic_grasp.ros.{folder}.node" in modules


def test_ros_modules_and_folders_stay_small():
    """No module of ros/ over MAX_MODULE_LINES lines, no folder with more than
    MAX_FOLDER_MODULES modules at its root (__init__.py not counted)."""
    long = {str(p.relative_to(ROS)): n for p in _ros_modules()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}
    crowded = {}
    for folder in [ROS] + [p for p in ROS.rglob("*") if p.is_dir() and p.name != "__pycache__"]:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > MAX_FOLDER_MODULES:
            crowded[str(folder.relative_to(PACKAGE))] = len(modules)
    assert crowded == {}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _rclpy_private_names():
    """Names starting with one underscore that rclpy's own Python defines (its methods and
    attributes), read from its sources: all of them, and those of each rclpy class (its own
    and its rclpy bases')."""
    import importlib.util

    spec = importlib.util.find_spec("rclpy")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("rclpy is not installed")
    names, own, bases = set(), {}, {}
    for root in spec.submodule_search_locations:
        for path in pathlib.Path(root).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                        and _private(node.name):
                    names.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                        and _private(node.attr):
                    names.add(node.attr)
                elif isinstance(node, ast.ClassDef):
                    members = own.setdefault(node.name, set())
                    bases.setdefault(node.name, set()).update(
                        ast.unparse(b).split(".")[-1] for b in node.bases)
                    for sub in ast.walk(node):
                        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                                and _private(sub.name):
                            members.add(sub.name)
                        elif isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) \
                                and _private(sub.attr):
                            members.add(sub.attr)

    def of_class(name, seen=()):
        found = set(own.get(name, ()))
        for base in bases.get(name, ()):
            if base not in seen:
                found |= of_class(base, seen + (name,))
        return found

    return names, {name: of_class(name) for name in own}


def _rclpy_internals(path: pathlib.Path, private: set, by_class: dict) -> list:
    """Where ``path`` reaches into rclpy: a private rclpy module or name imported, an rclpy
    private name read or set on another object (``x._name``, ``super()._name``,
    ``getattr(x, "_name")``), or a private method of an rclpy class overridden in a class
    derived from it."""
    tree = ast.parse(path.read_text())
    from_rclpy = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "rclpy":
            from_rclpy.update({a.asname or a.name: a.name for a in node.names})
            found += [f"{node.lineno}: {a.name}" for a in node.names if _private(a.name)]
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{node.lineno}: {node.module}")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: {a.name}" for a in node.names
                      if a.name.split(".")[0] == "rclpy"
                      and any(_private(part) for part in a.name.split("."))]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in private and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr") \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                and node.args[1].value in private:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ClassDef):
            inherited = set()
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in from_rclpy:
                    inherited |= by_class.get(from_rclpy[base.id], set())
            found += [f"{f.lineno}: {node.name}.{f.name}" for f in node.body
                      if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and f.name in inherited]
    return found


def test_rclpy_internals_only_in_common():
    """rclpy's private names (an underscore on rclpy's objects) are used in ros/common/ only,
    each with its reason there; everything else uses rclpy's public API."""
    private, by_class = _rclpy_private_names()
    outside = {}
    for path in _ros_modules():
        if (ROS / "common") in path.parents:
            continue
        found = _rclpy_internals(path, private, by_class)
        if found:
            outside[str(path.relative_to(ROS))] = found
    assert outside == {}
    # the check sees them: common/ reaches into rclpy (the runner, the action client)
    assert _rclpy_internals(ROS / "common" / "runner.py", private, by_class)
    assert _rclpy_internals(ROS / "common" / "dependencies.py", private, by_class)


# ---------------------------------------------------------------- one camera
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
