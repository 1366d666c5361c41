"""agentic_grasp.core never imports ROS (the core is tested with plain pytest).

Every module under agentic_grasp.core is imported in a fresh interpreter (this process may
already hold rclpy from other tests); afterwards no ROS client library may be loaded.
"""
import json
import subprocess
import sys

_PROBE = r"""
import importlib, json, pkgutil, sys
import agentic_grasp.core as core
names, failed = [], {}
for info in pkgutil.walk_packages(core.__path__, core.__name__ + "."):
    try:
        importlib.import_module(info.name)
        names.append(info.name)
    except Exception as exc:          # reported, so a broken module cannot hide
        failed[info.name] = repr(exc)
ros = sorted(m for m in sys.modules
             if m.split(".")[0] in ("rclpy", "rosidl_runtime_py", "agentic_grasp_interfaces"))
print(json.dumps({"imported": names, "failed": failed, "ros": ros}))
"""


def _probe() -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_core_module_imports_without_rclpy():
    result = _probe()
    assert not result["failed"], result["failed"]
    assert len(result["imported"]) > 50, result["imported"]     # the walk found the core
    assert "agentic_grasp.core.planner.recovery" in result["imported"]
    assert result["ros"] == [], f"core pulled in ROS modules: {result['ros']}"
