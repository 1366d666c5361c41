"""launch_testing tests of the bringup (``launch_test FILE``, or ``colcon test`` in a ROS 2
install, where launch_testing's pytest plugin runs them under launch).

Plain pytest without that plugin never collects them: their test classes only mean something
under launch (the nodes it starts, ``proc_info`` after shutdown). That holds where the tools
are missing, and where they are installed from their sources beside the venv
(``scripts/setup.sh --ros2-tools DIR``): there the plugin is left out (its hooks do not load in
this pytest), and ``scripts/test.sh`` runs these files through ``launch_test`` instead
(test/ros2_tools/test_launch_tier.py).
"""


def pytest_ignore_collect(collection_path, config):
    if collection_path.name.startswith("test_") and collection_path.suffix == ".py":
        return not config.pluginmanager.has_plugin("launch_testing")
    return None
