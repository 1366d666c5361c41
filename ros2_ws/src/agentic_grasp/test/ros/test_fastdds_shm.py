"""ros/common/fastdds_shm.py: a Fast DDS port segment left uninitialised by a killed process hangs
every later participant on that port for good; removing what no process holds ends it.

The reproduction runs in ROS domain 101 (its own: scripts/test.sh and the fixtures draw
5-94, the executor probe 95-100), whose first participant takes the shared-memory port
7400 + 250 * 101 + 11 = 32661 (Fast DDS's well-known port formula, user unicast, id 0).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agentic_grasp.core import paths
from agentic_grasp.ros.common import fastdds_shm

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir() or not fastdds_shm.SHM_DIR.is_dir(),
                                reason="Linux /proc and /dev/shm")

DOMAIN = 101
PORT = 7400 + 250 * DOMAIN + 11
#: A port segment's size with the graph's profile (port_queue_capacity 1024), as a killed
#: creator left one here: all zeros, never initialised.
PORT_BYTES = 62640
NODE_SCRIPT = """
import rclpy
rclpy.init()
node = rclpy.create_node("fastdds_shm_probe")
print("created", flush=True)
node.destroy_node()
rclpy.shutdown()
"""


def test_a_file_belongs_to_its_port_or_segment_group():
    assert fastdds_shm.group_of("fastrtps_port7411") == "fastrtps_port7411"
    assert fastdds_shm.group_of("fastrtps_port7411_el") == "fastrtps_port7411"
    assert fastdds_shm.group_of("sem.fastrtps_port7411_mutex") == "fastrtps_port7411"
    assert fastdds_shm.group_of("fastrtps_0123456789abcdef_sl") == "fastrtps_0123456789abcdef"


def test_a_group_with_any_held_file_is_kept_whole(tmp_path):
    for name in ("fastrtps_port7411", "fastrtps_port7411_el", "sem.fastrtps_port7411_mutex",
                 "fastrtps_port7413", "sem.fastrtps_port7413_mutex",
                 "fastrtps_00ff00ff00ff00ff", "fastrtps_00ff00ff00ff00ff_el", "other_file"):
        (tmp_path / name).write_bytes(b"")
    held = {str(tmp_path / "fastrtps_port7411_el"), str(tmp_path / "fastrtps_00ff00ff00ff00ff")}
    stale = sorted(p.name for p in fastdds_shm.stale_files(tmp_path, held))
    assert stale == ["fastrtps_port7413", "sem.fastrtps_port7413_mutex"]


def test_a_file_a_live_process_holds_is_kept_until_it_exits():
    path = fastdds_shm.SHM_DIR / f"fastrtps_port_test_{uuid.uuid4().hex[:12]}"
    path.write_bytes(b"\0" * 64)
    holder = subprocess.Popen([sys.executable, "-c",
                               f"f = open({str(path)!r}, 'rb'); print('open', flush=True); "
                               "import time; time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        assert str(path) in fastdds_shm.held_paths()
        assert path.name not in fastdds_shm.remove_stale() and path.exists()
    finally:
        holder.kill()
        holder.wait(10.0)
    assert path.name in fastdds_shm.remove_stale() and not path.exists()


def _create_node(timeout_s: float):
    """(created?, the process): a node in DOMAIN, given ``timeout_s`` to be created; a
    process still stuck then is SIGKILLed (SIGINT and SIGTERM do not reach it)."""
    env = {**os.environ, "ROS_DOMAIN_ID": str(DOMAIN),
           "FASTRTPS_DEFAULT_PROFILES_FILE": str(paths.config_dir() / "fastdds_localhost.xml")}
    proc = subprocess.Popen([sys.executable, "-c", NODE_SCRIPT], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return "created" in out, proc
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10.0)
        return False, proc


def test_an_uninitialised_port_segment_hangs_node_creation_until_it_is_removed():
    port = fastdds_shm.SHM_DIR / f"fastrtps_port{PORT}"
    fastdds_shm.remove_stale()               # nothing of an earlier run in the way
    assert not port.exists(), f"{port} is held by a live process: domain {DOMAIN} is in use"
    port.write_bytes(b"\0" * PORT_BYTES)
    # held open meanwhile, so no other cleaner (a bringup, another run of these tests) removes
    # it as stale before the node meets it; closed before this test's own removal
    held = open(port, "rb")
    try:
        start = time.monotonic()
        created, proc = _create_node(timeout_s=10.0)
        assert not created and proc.returncode == -signal.SIGKILL, \
            "a node was created over an uninitialised port segment: the hang this module " \
            "guards against did not happen"
        assert time.monotonic() - start >= 10.0
        held.close()
        removed = fastdds_shm.remove_stale()
        assert port.name in removed, removed
        created, proc = _create_node(timeout_s=60.0)
        assert created, "no node after the stale segment was removed"
        assert proc.returncode == 0
    finally:
        held.close()
        port.unlink(missing_ok=True)
        fastdds_shm.remove_stale()


def test_a_death_by_any_signal_but_sigint_may_have_left_a_port():
    from agentic_grasp.ros.graph.launcher import killed_by_signal

    assert [killed_by_signal(c) for c in (None, 0, 1, 78, -signal.SIGINT)] == [False] * 5
    assert all(killed_by_signal(-s) for s in (signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT,
                                               signal.SIGTERM))


@pytest.mark.parametrize("sig, cleans", [(signal.SIGKILL, True), (signal.SIGINT, False)])
def test_the_launcher_cleans_after_a_node_it_stops_died_by_a_signal(monkeypatch, sig, cleans):
    from agentic_grasp.ros.graph import launcher as launcher_mod

    calls = []
    monkeypatch.setattr(launcher_mod.fastdds_shm, "remove_stale", lambda: calls.append(1) or [])
    launcher = launcher_mod.Launcher({})
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    launcher.procs["victim"] = proc
    time.sleep(0.5)
    os.kill(proc.pid, sig)
    proc.wait(10.0)
    codes = launcher.stop(timeout_s=1.0)
    assert codes["victim"] == -sig
    assert calls == ([1] if cleans else [])
