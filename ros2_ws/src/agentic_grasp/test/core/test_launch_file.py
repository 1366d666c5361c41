"""bringup.launch.py cannot run here (no ros2 launch); check what can be checked statically."""
import ast

from agentic_grasp.core import paths
from agentic_grasp.graph import DEFAULT_ARGS, NODES


def _launch_tree():
    source = (paths.data_root() / "launch" / "bringup.launch.py").read_text()
    return ast.parse(source)


def test_every_bringup_flag_is_a_described_launch_argument():
    declared = {}
    for node in ast.walk(_launch_tree()):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "DeclareLaunchArgument":
            name = node.args[0].value
            declared[name] = {kw.arg for kw in node.keywords}
    # record and use_mock_hardware need ros2 bag / ros2_control: launch-only arguments.
    assert set(declared) == set(DEFAULT_ARGS) | {"record", "use_mock_hardware"}
    for name, keywords in declared.items():
        assert {"default_value", "description"} <= keywords, name


def test_launch_file_reads_the_shared_node_table():
    imports = [n for n in ast.walk(_launch_tree()) if isinstance(n, ast.ImportFrom)]
    assert any(n.module == "agentic_grasp.graph" for n in imports)


def test_every_node_has_a_params_file_and_console_script():
    setup_py = (paths.data_root() / "ros2_ws" / "src" / "agentic_grasp" / "setup.py").read_text()
    for spec in NODES:
        assert (paths.config_dir() / spec.params_file).is_file(), spec.params_file
        assert f"{spec.executable} = {spec.module}:main" in setup_py, spec.executable


def test_graph_nodes_respawn_with_a_delay_and_a_bound():
    from agentic_grasp.core.supervision import DEFAULT_POLICY

    source = (paths.data_root() / "launch" / "bringup.launch.py").read_text()
    nodes = [n for n in ast.walk(_launch_tree()) if isinstance(n, ast.Call)
             and getattr(n.func, "id", "") == "Node"
             and any(kw.arg == "executable" and isinstance(kw.value, ast.Attribute)
                     for kw in n.keywords)]
    assert len(nodes) == 1, "the graph's nodes come from one Node(...) in _nodes"
    keywords = {kw.arg: kw.value for kw in nodes[0].keywords}
    assert isinstance(keywords["respawn"], ast.Constant) and keywords["respawn"].value is True
    assert ast.unparse(keywords["respawn_delay"]) == "DEFAULT_POLICY.delay_s"
    assert ast.unparse(keywords["respawn_max_retries"]) == "DEFAULT_POLICY.max_crashes"
    assert DEFAULT_POLICY.delay_s > 0.0 and DEFAULT_POLICY.max_crashes > 0
    assert "from agentic_grasp.core.supervision import DEFAULT_POLICY" in source
