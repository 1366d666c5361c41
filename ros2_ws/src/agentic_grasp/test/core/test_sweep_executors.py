"""Sweep executors: the records journal and --resume for both executors, Ray
as one task per (task, seed) group of units with the local pool's records, and a real
two-node Ray cluster whose worker node is killed mid-sweep.

The Ray tests need the optional extra (scripts/setup.sh --with-ray). Without it they skip,
loudly; scripts/test.sh sets AGENTIC_GRASP_REQUIRE_RAY=1, which turns that skip into a
failure.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from agentic_grasp_lab.evaluation.executors import Journal, split_done
from agentic_grasp_lab.evaluation.sweep import make_units, run_units

CONFS = ["full", "no_recovery"]
TASKS = ["sg_banana", "sg_cup", "it_cup_near_vase"]


def _units(trials=2, seeds=(0,)):
    return make_units(CONFS, TASKS, trials, list(seeds), perception="vlm_sim",
                      visual_query="camera")


def _same(a, b):
    assert [r.comparable() for r in a] == [r.comparable() for r in b]


@pytest.fixture(scope="module")
def reference():
    """The local pool's records of the small sweep (one worker, in process)."""
    return run_units(_units(), workers=1, progress=False).records


class _Stop(KeyboardInterrupt):
    pass


def _interrupt_after(n_batches):
    seen = []

    def on_records(batch):
        seen.append(len(batch))
        if len(seen) >= n_batches:
            raise _Stop()
    return on_records


@pytest.mark.parametrize("workers", [1, 2])
def test_interrupted_sweep_resumes_to_the_same_records(tmp_path, reference, workers):
    path = tmp_path / "records.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_units(_units(), workers=workers, progress=False, journal=path,
                  on_records=_interrupt_after(2))
    left = Journal(path).load()
    assert len(left) == 4                       # two whole units of two trials, flushed
    resumed = run_units(_units(), workers=workers, progress=False, journal=path, resume=True)
    _same(resumed.records, reference)
    assert resumed.n_units == 6
    _same(Journal(path).load(), reference)      # the file is rewritten in sweep order


def _interrupted_bench(cmd, journal: Path, total: int, preexec=None):
    """Run ``cmd`` (a sweep of ``total`` records journalled to ``journal``) and send SIGINT
    to its process group once the journal holds 2 records: (the process, its output, how
    many records the journal held when SIGINT was sent; None: never sent)."""
    import signal
    import subprocess

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=preexec)
    deadline = time.monotonic() + 300.0
    sent_at = None
    while proc.poll() is None and time.monotonic() < deadline:
        lines = len(journal.read_text().splitlines()) if journal.exists() else 0
        if lines >= 2:
            os.killpg(proc.pid, signal.SIGINT)      # what Ctrl-C sends to the terminal's group
            sent_at = lines
            break
        time.sleep(0.05)
    output = proc.communicate(timeout=300)[0]
    return proc, output, sent_at


def _bench_cmd(out: Path):
    return [sys.executable, "-m", "agentic_grasp_lab.commands.bench_paper", "--only", "table2",
            "--configurations", ",".join(CONFS), "--tasks", ",".join(TASKS), "--trials", "2",
            "--seeds", "0", "--no-figures", "--no-progress", "--no-oracle-comparison",
            "--workers", "2", "--out", str(out)]


def assert_stopped_by_sigint(proc, output: str, sent_at, total: int) -> None:
    """The bench stopped on the SIGINT it was sent mid-sweep: never a skip. SIGINT is sent
    when the journal holds 2 of ``total`` records; the sweep's groups (one per task and
    seed, 4 records each) finish one at a time on 2 workers, so at least one group is still
    to run then, seconds of work."""
    assert sent_at is not None, "the journal never held 2 records: " + output[-2000:]
    assert sent_at < total, (f"the journal was complete ({sent_at} records) before SIGINT "
                             "was sent: the interrupt cannot be tested on this sweep")
    assert proc.returncode != 0, ("the bench ran to its end after SIGINT reached it mid-sweep "
                                  f"({sent_at} of {total} records): it ignores SIGINT")
    assert proc.returncode == 130, output[-2000:]


def test_ctrl_c_on_the_bench_command_then_resume(tmp_path, reference):
    """SIGINT to a running ``bench`` (2 pool workers): exit 130 with the --resume hint, the
    finished units on disk; the same command with --resume completes the same records."""
    import subprocess

    from agentic_grasp_lab.evaluation.records import read_records

    out = tmp_path / "bench"
    journal = out / "records.jsonl"
    cmd = _bench_cmd(out)
    proc, output, sent_at = _interrupted_bench(cmd, journal, len(reference))
    assert_stopped_by_sigint(proc, output, sent_at, len(reference))
    assert "--resume" in output
    left = read_records(journal)
    assert 2 <= len(left) < len(reference)
    done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    _same(read_records(journal), reference)


def test_a_bench_that_ignores_sigint_fails_the_interrupt_check(tmp_path, reference):
    """The check above fails, not skips, on a bench that goes on after SIGINT: here the
    bench starts with SIGINT ignored (Python then installs no KeyboardInterrupt handler)."""
    import signal

    out = tmp_path / "bench"
    proc, output, sent_at = _interrupted_bench(
        _bench_cmd(out), out / "records.jsonl", len(reference),
        preexec=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.returncode == 0, output[-2000:]             # it did run to its end
    with pytest.raises(AssertionError, match="ignores SIGINT"):
        assert_stopped_by_sigint(proc, output, sent_at, len(reference))


def test_resume_ignores_a_torn_line_and_partial_units(tmp_path, reference):
    path = tmp_path / "records.jsonl"
    journal = Journal(path)
    journal.start(reference[:3])                # unit 1 whole, unit 2 half
    journal.close()
    with path.open("a") as handle:
        handle.write('{"task_id": "sg_ban')     # a write killed half-way
    todo, kept = split_done(_units(), Journal(path).load())
    assert len(kept) == 2 and len(todo) == 5
    resumed = run_units(_units(), workers=1, progress=False, journal=path, resume=True)
    _same(resumed.records, reference)


def test_resume_of_a_complete_file_runs_nothing(tmp_path, reference):
    path = tmp_path / "records.csv"
    Journal(path).finish(reference)
    calls = []
    again = run_units(_units(), workers=1, progress=False, journal=path, resume=True,
                      on_records=calls.append)
    assert calls == []
    _same(again.records, reference)


def test_without_resume_the_journal_starts_again(tmp_path, reference):
    path = tmp_path / "records.jsonl"
    Journal(path).finish(reference[:2])
    again = run_units(_units(), workers=1, progress=False, journal=path)
    _same(again.records, reference)


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_journal_writes_the_sorted_file_from_its_blocks(tmp_path, reference, suffix):
    """Units appended in any order (one of them in two pieces, trials reversed) give the
    bytes write_records writes for the sorted records: the driver needs no record for it."""
    from agentic_grasp_lab.evaluation.records import sort_records, write_records

    units = {}
    for r in reference:
        units.setdefault((r.configuration, r.task_id), []).append(r)
    pieces = list(units.values())[::-1]
    split = pieces.pop(0)
    pieces += [[split[1]], [split[0]]]                   # last trial first
    journal = Journal(tmp_path / f"records.{suffix}")
    journal.start()
    for piece in pieces:
        journal.append(piece)
    journal.finish_units(CONFS)
    expected = write_records(sort_records(reference, CONFS), tmp_path / f"ref.{suffix}")
    assert journal.path.read_bytes() == expected.read_bytes()


def test_a_journalled_sweep_holds_no_records(tmp_path, reference):
    """With a records file the driver keeps none while it runs (flat memory);
    SweepResult.records reads them back from the file."""
    path = tmp_path / "records.jsonl"
    result = run_units(_units(), workers=1, progress=False, journal=path)
    assert result.held is None
    assert result.n_records == len(reference) == result.totals()["trials"]
    _same(result.records, reference)


def test_unknown_executor_is_refused():
    from agentic_grasp.core.errors import ConfigError

    with pytest.raises(ConfigError, match="executor"):
        run_units(_units(), workers=1, progress=False, executor="dask")


def test_core_does_not_import_ray():
    import subprocess

    code = ("import sys; import agentic_grasp_lab.evaluation as e; "
            "import agentic_grasp_lab.evaluation.executors; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ Ray
def _ray():
    try:
        import ray
    except ImportError:
        if os.environ.get("AGENTIC_GRASP_REQUIRE_RAY") == "1":
            pytest.fail("ray is required here (AGENTIC_GRASP_REQUIRE_RAY=1): run "
                        "scripts/setup.sh --with-ray")
        pytest.skip("RAY TEST SKIPPED (not a pass): ray is not installed "
                    "(scripts/setup.sh --with-ray)")
    return ray


def test_ray_local_cluster_gives_the_local_records(tmp_path, reference):
    _ray()
    path = tmp_path / "records.jsonl"
    result = run_units(_units(), workers=2, progress=False, executor="ray", journal=path)
    _same(result.records, reference)
    _same(Journal(path).load(), reference)


def test_ray_interrupted_sweep_resumes(tmp_path, reference):
    _ray()
    path = tmp_path / "records.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_units(_units(), workers=2, progress=False, executor="ray", journal=path,
                  on_records=_interrupt_after(1))
    assert 2 <= len(Journal(path).load()) < len(reference)
    resumed = run_units(_units(), workers=2, progress=False, executor="ray", journal=path,
                        resume=True)
    _same(resumed.records, reference)


def test_two_node_cluster_survives_a_worker_node_killed_mid_sweep(tmp_path):
    """A head and a worker node (separate ``ray start`` processes, 1 CPU each) and a driver
    process (``bench paper --executor ray --ray-address``, its Ray tasks held at their start:
    agentic_grasp_lab.testing.ray_hold, driven by ray_hold_driver.py). One task (a task
    and seed under both configurations: 2 units of 5 trials) is let run to the records
    file; then, while a held task occupies the head's CPU, Ray runs the next one on the
    worker node, and the worker node is SIGKILLed with that task running there. The
    records file must equal the local pool's, trial for trial. No sleep decides anything:
    the test waits on markers."""
    _ray()
    import subprocess

    from agentic_grasp_lab.evaluation.records import read_records
    from agentic_grasp_lab.testing.ray_cluster import LocalRayCluster
    from agentic_grasp_lab.testing.ray_hold import HOLD_ENV, held_tasks, release

    units = _units(trials=5, seeds=(0, 1))     # 12 units of 5 trials, 6 Ray tasks of 2 units
    local = run_units(units, workers=1, progress=False).records
    out = tmp_path / "bench"
    journal = out / "records.jsonl"
    hold = tmp_path / "hold"
    hold.mkdir()
    with LocalRayCluster(extra_env={HOLD_ENV: str(hold)}) as cluster:
        driver_script = Path(__file__).with_name("ray_hold_driver.py")
        cmd = [sys.executable, str(driver_script), "--only", "table2",
               "--configurations", ",".join(CONFS), "--tasks", ",".join(TASKS),
               "--trials", "5", "--seeds", "0,1", "--no-figures", "--no-progress",
               "--no-oracle-comparison", "--executor", "ray", "--ray-address",
               cluster.address, "--out", str(out)]
        driver = subprocess.Popen(cmd, env=dict(os.environ, **cluster.driver_env()),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            first = killed_at = None
            nodes_seen = set()
            deadline = time.monotonic() + 600.0
            while driver.poll() is None and time.monotonic() < deadline:
                started = held_tasks(hold)
                for pid in started.values():
                    nodes_seen.add("worker" if cluster.on_worker_node(pid) else "head")
                if first is None and started:
                    first = min(started)              # one unit runs to the records file
                    release(hold, first)
                done = len(journal.read_text().splitlines()) if journal.exists() else 0
                if killed_at is None and done >= 10:
                    on_worker = [n for n, pid in started.items()
                                 if n != first and cluster.on_worker_node(pid)]
                    if on_worker:                     # held there: it is running there
                        cluster.kill_worker()
                        killed_at = done
                        release(hold)                 # every task from now on runs
                time.sleep(0.02)
            output = driver.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
        finally:
            if driver.poll() is None:
                driver.kill()
        assert driver.returncode == 0, output[-3000:]
        assert killed_at == 10, f"the worker node died mid-sweep ({killed_at} records before)"
        assert nodes_seen == {"head", "worker"}
        deadline = time.monotonic() + 30.0
        while cluster.alive_nodes() != 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert cluster.alive_nodes() == 1
    records = read_records(journal)
    _same(records, local)                             # none lost, none counted twice
    keys = [(r.configuration, r.task_id, r.seed, r.trial) for r in records]
    assert len(keys) == len(set(keys)) == 60
