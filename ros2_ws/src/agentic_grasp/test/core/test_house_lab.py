"""The lab's house rules: the evaluation, benchmarks and test servers live in their own
package, agentic_grasp_lab, which imports the runtime (agentic_grasp) and is never imported
by it, so a robot installs the runtime and the interfaces only. The lab adds ``bench`` and
``eval`` to the runtime's CLI through an entry-point group; without it they are absent."""
import argparse
import ast
import pathlib
import xml.etree.ElementTree as ET

import networkx as nx
import pytest

import agentic_grasp
import agentic_grasp_lab
from agentic_grasp import cli

from test_house_order import (ROS_PACKAGES, _every_import_graph, _external_imports,
                              uncommented_local_imports)

RUNTIME = pathlib.Path(agentic_grasp.__file__).parent
LAB = pathlib.Path(agentic_grasp_lab.__file__).parent
LAB_NAME = "agentic_grasp_lab"


def _imported_names(source: str) -> set:
    """Every module name ``source`` imports, wherever the import stands: module level,
    ``if TYPE_CHECKING:`` blocks, inside functions and classes, and the literal argument of
    ``importlib.import_module(...)`` / ``__import__(...)``."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call) and node.args \
                and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) \
                and ast.unparse(node.func).endswith(("import_module", "__import__")):
            names.add(node.args[0].value)
    return names


def _is_lab(name: str) -> bool:
    return name == LAB_NAME or name.startswith(LAB_NAME + ".")


def test_the_import_scan_sees_every_kind_of_import():
    source = (
        "from typing import TYPE_CHECKING\n"
        "import importlib\n"
        "if TYPE_CHECKING:\n"
        "    from agentic_grasp_lab.evaluation import sweep\n"
        "def f():\n"
        "    import agentic_grasp_lab.benchmarks.timing\n"
        "    importlib.import_module('agentic_grasp_lab.commands.bench')\n"
        "class C:\n"
        "    def g(self):\n"
        "        from agentic_grasp_lab import testing\n")
    found = {n for n in _imported_names(source) if _is_lab(n)}
    assert found >= {"agentic_grasp_lab.evaluation", "agentic_grasp_lab.benchmarks.timing",
                     "agentic_grasp_lab.commands.bench", "agentic_grasp_lab"}


def test_the_runtime_never_imports_the_lab():
    offenders = {}
    for path in sorted(RUNTIME.rglob("*.py")):
        found = sorted(n for n in _imported_names(path.read_text()) if _is_lab(n))
        if found:
            offenders[str(path.relative_to(RUNTIME.parent))] = found
    assert offenders == {}
    assert len(list(RUNTIME.rglob("*.py"))) > 100            # the scan read the runtime


def test_a_robot_install_needs_no_lab():
    """The runtime's package.xml and setup.py name neither the lab nor its commands."""
    package = RUNTIME.parent
    xml = package / "package.xml"
    if not xml.is_file():                  # an install without the sources next to it
        pytest.skip("the runtime's package.xml is not beside its sources")
    deps = {e.text for e in ET.parse(xml).getroot() if e.tag.endswith("depend")}
    assert LAB_NAME not in deps
    assert LAB_NAME not in (package / "setup.py").read_text()
    lab_xml = LAB.parent / "package.xml"
    if lab_xml.is_file():
        lab_deps = {e.text for e in ET.parse(lab_xml).getroot() if e.tag.endswith("depend")}
        assert "agentic_grasp" in lab_deps


# ---------------------------------------------------------------- the lab's own order
def _lab_modules() -> dict:
    mods = {}
    for p in LAB.rglob("*.py"):
        parts = list(p.relative_to(LAB.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _lab_graph() -> nx.DiGraph:
    """Module -> module edges inside the lab, counting every import (the house-order test's
    graph over the lab's package)."""
    return _every_import_graph(pathlib.Path(agentic_grasp_lab.__file__).parent)


def test_no_import_cycles_in_the_lab():
    assert list(nx.simple_cycles(_lab_graph())) == []


def test_benchmarks_do_not_import_commands():
    up = [(a, b) for a, b in _lab_graph().edges
          if a.startswith((f"{LAB_NAME}.benchmarks", f"{LAB_NAME}.ros.benchmarks"))
          and b.startswith(f"{LAB_NAME}.commands")]
    assert up == []


def test_lab_rclpy_only_under_its_ros_and_no_arrow_up():
    """As in the runtime: rclpy only under agentic_grasp_lab/ros/, and nothing outside ros/
    and commands/ imports them."""
    outside = {}
    for path in LAB.rglob("*.py"):
        if LAB / "ros" in path.parents:
            continue
        found = sorted(_external_imports(path) & set(ROS_PACKAGES))
        if found:
            outside[str(path.relative_to(LAB))] = found
    assert outside == {}
    up = [(a, b) for a, b in _lab_graph().edges
          if not a.startswith((f"{LAB_NAME}.ros", f"{LAB_NAME}.commands"))
          and b.startswith((f"{LAB_NAME}.ros", f"{LAB_NAME}.commands"))]
    assert up == []


def test_lab_folders_and_modules_stay_small():
    """At most 12 modules at the root of any folder of the lab, none over 500 lines."""
    crowded = {str(d.relative_to(LAB.parent)): n for d in [LAB, *LAB.rglob("*")]
               if d.is_dir() and d.name != "__pycache__"
               and (n := len(list(d.glob("*.py")))) > 12}
    assert crowded == {}
    long = {str(p.relative_to(LAB.parent)): n for p in LAB.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}


# ---------------------------------------------------------------- the CLI
def _subcommands(parser: argparse.ArgumentParser) -> dict:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_bench_and_eval_come_from_the_lab_entry_points():
    extra = cli.extra_commands()
    assert extra["bench"][0] == "agentic_grasp_lab.commands.bench"
    assert extra["eval"][0] == "agentic_grasp_lab.commands.evaluate"
    assert "bench" not in cli.COMMANDS and "eval" not in cli.COMMANDS
    assert {"bench", "eval"} <= set(_subcommands(cli.build_parser()))


def test_without_the_lab_bench_and_eval_are_absent(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])
    parser = cli.build_parser()
    commands = set(_subcommands(parser))
    assert "bench" not in commands and "eval" not in commands
    assert {"grasp", "bringup", "kb", "replay"} <= commands
    assert "agentic_grasp_lab" in parser.format_help()        # --help says where they went


def test_each_benchmark_has_only_its_own_options():
    bench = _subcommands(cli.build_parser())["bench"]
    subs = _subcommands(bench)
    assert set(subs) == {"paper", "procedural", "learning", "fleet", "sim", "graph",
                         "retrieval", "scene-graph", "perception", "soak", "vlm-sim",
                         "geometry", "peer-calls"}

    def options(name):
        return set(subs[name]._option_string_actions)

    assert {"--only", "--trials", "--seeds", "--from-records", "--ros"} <= options("paper")
    assert "--scenes" not in options("paper") and "-n" not in options("paper")
    assert {"--scenes", "--scene-seed", "--only-scene", "--configurations",
            "--workers", "--out"} <= options("procedural")
    assert "--only" not in options("procedural") and "--ros" not in options("procedural")
    assert {"--goals", "--learn-seed", "--tasks"} <= options("learning")
    assert {"--fleet-goals", "--learn-seed", "--robots"} <= options("fleet")
    assert "--goals" not in options("fleet")
    assert {"--geometry-seed", "--neighbours", "-n"} <= options("geometry")
    assert options("retrieval") == {"-h", "--help", "-n", "--json"}
    assert "--inprocess-only" in options("sim") and "--inprocess-only" not in options("soak")
    assert {"--every", "--soak-perception"} <= options("soak")
    assert options("peer-calls") == {"-h", "--help", "-n", "--json", "--rounds", "--fresh"}
    args = cli.build_parser().parse_args(["bench", "paper", "--only", "table2", "--trials", "2"])
    assert (args.benchmark, args.only, args.trials) == ("paper", "table2", 2)


def test_every_function_local_import_of_the_lab_says_why():
    assert uncommented_local_imports(LAB) == []
