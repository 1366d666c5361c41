"""bringup.launch.py cannot run here (no ros2 launch); check what can be checked statically."""
import argparse
import ast

from agentic_grasp.core import paths
from agentic_grasp.ros.graph.description import (DEFAULT_ARGS, NODES, RECORD_ACTION_TOPICS,
                                                 RECORD_TOPICS, RECORD_VIEW_TOPICS)


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
    assert any(n.module == "agentic_grasp.ros.graph.description" for n in imports)


def test_every_node_has_a_params_file_and_console_script():
    setup_py = (paths.data_root() / "ros2_ws" / "src" / "agentic_grasp" / "setup.py").read_text()
    for spec in NODES:
        assert (paths.config_dir() / spec.params_file).is_file(), spec.params_file
        assert f"{spec.executable} = {spec.module}:main" in setup_py, spec.executable


def _record_command(output="out/bags/run1"):
    """bringup.launch.py's record_command, compiled alone (the file imports launch)."""
    tree = _launch_tree()
    func = next(n for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == "record_command")
    namespace = {"RECORD_TOPICS": RECORD_TOPICS, "RECORD_VIEW_TOPICS": RECORD_VIEW_TOPICS,
                 "RECORD_ACTION_TOPICS": RECORD_ACTION_TOPICS}
    exec(compile(ast.Module(body=[func], type_ignores=[]), "bringup.launch.py", "exec"),
         namespace)
    return namespace["record_command"](output)


def _is_hidden(topic):
    # rosbag2 jazzy rosbag2_transport/src/rosbag2_transport/topic_filter.cpp:56-66.
    return any(part.startswith("_") for part in topic.split("/") if part)


def _ros2bag_record_args(argv):
    """The options of ros2bag's record verb (jazzy ros2bag/verb/record.py:55-116) that the
    launch file uses, with the same argparse shapes."""
    parser = argparse.ArgumentParser()
    parser.add_argument("-o", "--output")
    parser.add_argument("-s", "--storage", default="mcap", choices=["mcap", "sqlite3"])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("topics_positional", default=[], nargs="*")
    group.add_argument("--topics", default=[], nargs="+")
    parser.add_argument("--include-hidden-topics", action="store_true")
    return parser.parse_args(argv)


def test_bag_record_lists_every_topic_with_hidden_topics_included():
    cmd = _record_command("out/bags/run1")
    assert cmd[:3] == ["ros2", "bag", "record"]
    args = _ros2bag_record_args(cmd[3:])
    wanted = RECORD_TOPICS + RECORD_VIEW_TOPICS + RECORD_ACTION_TOPICS
    assert args.topics == wanted and args.topics_positional == []   # --topics, not positional
    assert args.output == "out/bags/run1" and args.storage == "mcap"
    hidden = [t for t in wanted if _is_hidden(t)]
    assert set(RECORD_ACTION_TOPICS) <= set(hidden)      # the GraspObject action topics
    # Without the flag rosbag2 drops these even though they are listed (topic_filter.cpp:188).
    assert args.include_hidden_topics


def test_launch_file_records_with_record_command():
    calls = [n for n in ast.walk(_launch_tree()) if isinstance(n, ast.Call)
             and getattr(n.func, "id", "") == "ExecuteProcess"]
    assert len(calls) == 1
    cmd = next(kw.value for kw in calls[0].keywords if kw.arg == "cmd")
    assert isinstance(cmd, ast.Call) and cmd.func.id == "record_command"
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
