"""The test run says what it did not run: under CI (CI=true) a missing rclpy fails the run
instead of skipping every graph test of test/ros; elsewhere it skips them, with the reason.

Runs pytest on test/ros in a subprocess whose ``rclpy`` is a stand-in
package that fails to import, as on a machine without ROS 2.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]          # the package root, where pytest.ini is


def _collect(tmp_path: Path, ci: str):
    fake = tmp_path / "no_ros" / "rclpy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no ROS 2 on this machine')\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(fake.parent), env.get("PYTHONPATH", "")])
    if ci:
        env["CI"] = ci
    # test/ros reached from test/, as scripts/test.sh runs it (a conftest named on the
    # command line is loaded before collection, where a skip cannot skip a folder)
    others = [f"--ignore=test/{d.name}" for d in (HERE / "test").iterdir()
              if d.is_dir() and d.name not in ("ros", "__pycache__")]
    return subprocess.run([sys.executable, "-m", "pytest", "test", *others, "-q", "-rs",
                           "-p", "no:cacheprovider"], cwd=HERE, env=env,
                          capture_output=True, text=True, timeout=120)


def test_without_rclpy_ci_fails_the_run(tmp_path):
    run = _collect(tmp_path, "true")
    out = run.stdout + run.stderr
    assert run.returncode not in (0, 5), out[-3000:]
    assert "CI=true and rclpy does not import" in out, out[-3000:]


def test_without_rclpy_elsewhere_the_graph_tests_skip_with_the_reason(tmp_path):
    run = _collect(tmp_path, "")
    out = run.stdout + run.stderr
    assert run.returncode in (0, 5), out[-3000:]       # 5: nothing ran, nothing failed
    assert "skipped" in out and "no ROS 2 on this machine" in out, out[-3000:]
