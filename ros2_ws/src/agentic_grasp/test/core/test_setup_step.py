"""scripts/setup_step.py, which makes a long set-up step talk: a heartbeat line while the
step is silent, the step's own output passed on (less the lines it is told to drop), a log
instead when asked, and the step's exit status."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[5] / "scripts" / "setup_step.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=60)


def test_a_silent_step_prints_a_heartbeat_and_keeps_its_exit_status():
    run = _run("--every", "0.5", "--estimate", "about 2 s", "sleeping", "--",
               sys.executable, "-c", "import time, sys; time.sleep(3.0); sys.exit(3)")
    assert run.returncode == 3
    beats = [line for line in run.stdout.splitlines() if "... sleeping:" in line]
    assert len(beats) >= 2, run.stdout
    assert beats[0].endswith("(the first time: about 2 s)")


def test_output_passes_through_less_the_dropped_lines_and_a_log_keeps_it(tmp_path):
    code = "print('Collecting numpy'); print('x is ignored: noise'); print('done')"
    run = _run("--drop", "is ignored", "pip", "--", sys.executable, "-c", code)
    assert run.returncode == 0
    assert run.stdout.splitlines() == ["Collecting numpy", "done"]
    log = tmp_path / "step.log"
    run = _run("--log", str(log), "--every", "0.3", "build", "--", sys.executable, "-c",
               "import time; print('compiling'); time.sleep(1.0)")
    assert "compiling" not in run.stdout and "compiling" in log.read_text()
    assert "... build:" in run.stdout                   # the log is silent: heartbeats show
