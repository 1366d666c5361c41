"""Experience acquisition: attempt -> experience, consolidation, live pick-up, prune, SIGKILL."""
import json
import math
import os
import signal
import time
from types import SimpleNamespace

import numpy as np
import pytest

from agentic_grasp.core.retrieval.acquired import file as acquired_file
from agentic_grasp.core.retrieval.acquired.acquisition import (Acquirer, AcquisitionContext,
                                                               experience_record, extend_taxonomy,
                                                               resolve_acquired_path)
from agentic_grasp.core.retrieval.config import ConsolidationConfig
from agentic_grasp.core.retrieval.acquired.consolidation import consolidate
from agentic_grasp.core.retrieval.config import RetrievalConfig
from agentic_grasp.core.retrieval.knowledge_base import (Experience, record_problems)
from agentic_grasp.core.retrieval.acquired.live import LiveRetriever
from agentic_grasp.core.retrieval.taxonomy import Taxonomy
from agentic_grasp.core.types import (AffordanceDescriptor, AttemptOutcome, FailureType,
                                      GraspParameters, ObjectInstance, Shape)

TAXONOMY = Taxonomy.load()


def thermos(yaw=0.4, x=0.5):
    return ObjectInstance(id="thermos_1", category="thermos", shape=Shape.CYLINDER,
                          position=np.array([x, 0.1, 0.13]), size=np.array([0.075, 0.075, 0.26]),
                          yaw=yaw, material="metal", color=(90, 90, 100),
                          affordance=AffordanceDescriptor("Graspable_Body", "metal", 0.0, "body"))


def attempt(target, success=True, index=0, dz=-0.04, failure=FailureType.SLIP, width=0.08):
    c, s = math.cos(target.yaw), math.sin(target.yaw)
    grasp = GraspParameters(position=target.position + np.array([0.0, 0.0, dz]),
                            approach=np.array([c, s, 0.0]), width=width, force=30.0,
                            grasp_type="power", wrist_yaw=target.yaw)
    outcome = AttemptOutcome(success=success, quality=0.8 if success else 0.2,
                             phi=np.full(7, 0.5))
    diag = None if success else SimpleNamespace(failure_type=failure)
    return SimpleNamespace(index=index, retry_level=0, grasp=grasp, success=success,
                           outcome=outcome, diagnosis=diag)


def goal(source="bottle-001"):
    return SimpleNamespace(initial_source="retrieval", configuration="full",
                           retrieval={"strategies": [{"id": source, "category": "bottle",
                                                      "success": True}]})


def test_attempt_becomes_a_valid_experience_in_the_perceived_frame():
    target = thermos(yaw=0.4)
    ctx = AcquisitionContext(goal_id="ab" * 16, perception_backend="vlm_sim",
                             configuration="full")
    rec = experience_record(attempt(target, success=False), target, goal(), ctx, TAXONOMY)
    tax = extend_taxonomy(TAXONOMY, [rec])
    assert record_problems(rec, "test", tax) == []
    assert record_problems(rec, "test", TAXONOMY)            # unknown without the link
    assert tax.superclass("thermos") == TAXONOMY.superclass("bottle")
    # object frame: the world approach along the object's yaw is +x of the object
    assert np.allclose(rec["grasp"]["approach"], [1.0, 0.0, 0.0], atol=1e-6)
    assert np.allclose(rec["grasp"]["position"], [0.0, 0.0, -0.04], atol=1e-6)
    assert rec["render_spec"]["size"] == [0.075, 0.075, 0.26]     # perceived, not truth
    assert rec["failure_mode"] == "slip" and rec["success"] is False
    acq = rec["acquisition"]
    assert acq["goal_id"] == "ab" * 16 and acq["perception_backend"] == "vlm_sim"
    assert acq["quality"] == 0.2 and len(acq["phi"]) == 7
    assert acq["source_experience"] == "bottle-001"
    assert rec["fit"]["opening"] == "extent"                 # 80 mm around a 75 mm body


def test_acquirer_never_raises_and_counts_skips(tmp_path):
    target = thermos()
    target.affordance = None
    acq = Acquirer(tmp_path / "a.jsonl", fsync=False)
    assert acq(attempt(target), target, goal()) is None
    assert acq.skipped == 1 and "affordance" in acq.last_error
    assert not (tmp_path / "a.jsonl").exists()


def test_resolve_path(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTIC_GRASP_DATA_HOME", str(tmp_path))
    assert resolve_acquired_path("") is None and resolve_acquired_path("none") is None
    assert resolve_acquired_path("default") == tmp_path / "acquired_experiences.jsonl"
    assert resolve_acquired_path("/x/y.jsonl").as_posix() == "/x/y.jsonl"


def _write(path, n_ok, n_fail, target=None, start=0, dz=-0.04, goal_prefix="g",
           backend="vlm_sim"):
    target = target or thermos()
    acq = Acquirer(path, fsync=False)
    for i in range(n_ok + n_fail):
        acq.context = AcquisitionContext(goal_id=f"{goal_prefix}{start + i}",
                                         perception_backend=backend, configuration="full")
        assert acq(attempt(target, success=i < n_ok, index=0, dz=dz), target, goal())
    return acq


def test_near_duplicates_merge_with_counts_and_the_penalty_uses_them(tmp_path):
    path = tmp_path / "a.jsonl"
    _write(path, 3, 1)                                  # same grasp 4 times: one entry
    _write(path, 0, 2, dz=0.08, start=10)               # another grasp, failed twice
    content = acquired_file.read_acquired(path)
    assert content.problems == [] and len(content.experiences) == 6
    merged, dropped = consolidate(content.experiences)
    assert dropped == [] and len(merged) == 2
    counts = sorted((e.outcomes["successes"], e.outcomes["failures"]) for e in merged)
    assert counts == [(0, 2), (3, 1)]
    good = next(e for e in merged if e.outcomes["successes"] == 3)
    assert good.success and good.failure_rate == pytest.approx(0.25)
    # HAA-RAG: the merged entry's s_final is cut by failure_penalty * 1/4, not 0 or 0.3
    rag = LiveRetriever(_authored(), path)
    res = rag.retrieve("thermos", AffordanceDescriptor("Graspable_Body", "metal", 0.0, "body"),
                       k=10)
    by_id = {s.experience.id: s for s in res.strategies}
    cfg = RetrievalConfig.from_config()
    assert by_id[good.id].penalty == pytest.approx(cfg.failure_penalty * 0.25)


def test_cap_keeps_the_best_and_the_most_recent_and_reports_drops():
    target = thermos()
    exps = []
    for i in range(12):                                  # 12 distinct grasps, 1 attempt each
        rec = experience_record(attempt(target, success=i in (0, 1), dz=-0.1 + 0.02 * i),
                                target, goal(), AcquisitionContext(goal_id=f"g{i}"), TAXONOMY,
                                now=1000.0 + i)
        exps.append(Experience.from_record(rec))
    kept, dropped = consolidate(exps, ConsolidationConfig(cap_per_category=4))
    ids = [e.id for e in kept]
    assert len(kept) == 4 and len(dropped) == 8
    assert exps[0].id in ids and exps[1].id in ids       # the two successes (best)
    assert exps[11].id in ids and exps[10].id in ids     # the two most recent
    assert all("cap 4 per category" in d.reason for d in dropped)


def _authored():
    from agentic_grasp.core.planner.episode import retriever_for

    return retriever_for(None)


def test_live_pick_up_within_one_request_and_restart_gives_the_same_state(tmp_path):
    path = tmp_path / "a.jsonl"
    live = LiveRetriever(_authored(), path)
    n0 = len(live.kb)
    aff = AffordanceDescriptor("Graspable_Body", "metal", 0.0, "body")
    assert live.retrieve("thermos", aff).fallback        # unknown category: fallback
    _write(path, 1, 0)
    res = live.retrieve("thermos", aff)                  # the next request sees it
    assert not res.fallback and res.strategies[0].experience.category == "thermos"
    _write(path, 2, 1, start=5)
    _write(path, 0, 1, dz=0.08, start=20)
    live.refresh()
    with open(path, "ab") as fh:                         # a torn line in progress
        fh.write(b'{"id": "acq-torn", "categ')
    live.refresh()
    state = sorted((e.id, json.dumps(e.outcomes, sort_keys=True)) for e in live.kb)
    restarted = LiveRetriever(_authored(), path)
    assert sorted((e.id, json.dumps(e.outcomes, sort_keys=True))
                  for e in restarted.kb) == state         # nothing lost, nothing duplicated
    # the grasp that only ever failed is withheld (the planner would execute it)
    assert len(live.kb) == n0 + 1 and live.withheld == 1 and live.rejected == []
    # bad input: an invalid line is skipped with its place, the rest keeps being served
    with open(path, "ab") as fh:
        fh.write(b"\n{\"id\": \"bad\"}\n")
    live.refresh()
    assert len(live.kb) == n0 + 1 and any(":" in r and "bad" in r for r in live.rejected)
    # prune the second goal batch: the file is replaced and the view rebuilt from it
    removed, _ = acquired_file.prune(path, goal_ids=["g5", "g6", "g7"])
    assert removed == 3
    live.refresh()
    first = next(e for e in live.kb if e.category == "thermos" and e.success)
    assert first.outcomes["successes"] == 1 and first.outcomes["failures"] == 0


def test_prune_by_time_range_and_refuses_without_criterion(tmp_path):
    path = tmp_path / "a.jsonl"
    _write(path, 2, 0)
    t_mid = time.time()
    time.sleep(0.01)
    _write(path, 1, 0, start=9)
    with pytest.raises(ValueError):
        acquired_file.prune(path)
    assert acquired_file.prune(path, since=t_mid, dry_run=True) == (1, 2)
    assert len(acquired_file.select(path, since=t_mid)) == 1
    assert acquired_file.prune(path, until=t_mid) == (2, 1)
    assert acquired_file.validate_acquired(path) == []


def _acquiring_planner(path, fd):
    """Child: the in-process planner on the far-OOD thermos, acquiring every attempt;
    reports each acknowledged experience id on ``fd``."""
    try:
        from agentic_grasp.core import paths
        from agentic_grasp.core.planner.episode import run_trial

        live = LiveRetriever(_authored(), path)
        acq = Acquirer(path)
        task = str(paths.scenes_dir() / "ood" / "ood_far_thermos.yaml")
        def sink(rec, target, g):
            eid = Acquirer.__call__(acq, rec, target, g)
            if eid:
                os.write(fd, (eid + "\n").encode())
            return eid

        for i in range(10_000):
            acq.context = AcquisitionContext(goal_id=f"kill-{os.getpid()}-{i}",
                                             perception_backend="oracle")
            run_trial(task, "full", seed=i, perception="oracle", retriever=live,
                      attempt_sink=sink)
    finally:
        os._exit(1)


def test_sigkill_of_an_acquiring_planner_loses_at_most_the_attempt_in_flight(tmp_path):
    path = tmp_path / "acquired.jsonl"
    _authored()                                           # build the index before forking
    acked = []
    for trial in range(4):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _acquiring_planner(path, write_fd)
        os.close(write_fd)
        buf = b""
        while buf.count(b"\n") < 3 + trial:                # kill after a few attempts
            chunk = os.read(read_fd, 4096)
            assert chunk, "the planner died before being killed"
            buf += chunk
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        buf += os.read(read_fd, 1 << 16)
        os.close(read_fd)
        acked += [line for line in buf.decode().split("\n") if line]
    content = acquired_file.read_acquired(path)
    assert content.problems == []                          # nothing corrupt
    on_disk = {e.id for e in content.experiences}
    assert set(acked) <= on_disk                           # every acknowledged attempt kept
    assert len(on_disk) - len(acked) <= 4                  # at most one in flight per kill
    live = LiveRetriever(_authored(), path)
    assert live.rejected == [] and live.acquired_records == len(on_disk)


def test_the_perception_result_names_the_backend_over_the_context():
    """The goal carries what perceived the target (the planner fills it from the perception
    result in both paths); a context that says otherwise does not override it."""
    target = thermos()
    ctx = AcquisitionContext(goal_id="g1", perception_backend="", configuration="full")
    perceived = SimpleNamespace(**vars(goal()), perception_backend="oracle")
    rec = experience_record(attempt(target), target, perceived, ctx, TAXONOMY)
    assert rec["acquisition"]["perception_backend"] == "oracle"
    assert "(oracle, full)" in rec["provenance"]
    ctx = AcquisitionContext(goal_id="g1", perception_backend="vlm_sim")
    assert experience_record(attempt(target), target, goal(), ctx,
                             TAXONOMY)["acquisition"]["perception_backend"] == "vlm_sim"


def test_ground_truth_experiences_are_served_to_oracle_runs_only(tmp_path):
    """An experience acquired under the oracle (grasp placed on ground truth) never reaches a
    vlm / vlm_sim run, nor one that does not say, and never merges with a camera one."""
    path = tmp_path / "a.jsonl"
    _write(path, 1, 0, backend="oracle", goal_prefix="o")
    live = LiveRetriever(_authored(), path)
    aff = AffordanceDescriptor("Graspable_Body", "metal", 0.0, "body")
    oracle = live.retrieve("thermos", aff, perception_backend="oracle")
    assert not oracle.fallback and oracle.strategies[0].experience.category == "thermos"
    for backend in ("vlm_sim", "vlm", None):
        res = live.retrieve("thermos", aff, perception_backend=backend)
        assert all(s.experience.acquisition is None
                   or s.experience.acquisition["perception_backend"] != "oracle"
                   for s in res.strategies), backend
        assert not any(s.experience.category == "thermos" for s in res.strategies)
    _write(path, 1, 0, backend="vlm_sim", goal_prefix="v")   # the same grasp, from pixels
    live.refresh()
    thermos_entries = [e for e in live.kb if e.category == "thermos"]
    assert sorted(e.acquisition["perception_backend"] for e in thermos_entries) == \
        ["oracle", "vlm_sim"]                     # two entries: not merged across backends
    res = live.retrieve("thermos", aff, perception_backend="vlm_sim")
    assert [s.experience.acquisition["perception_backend"] for s in res.strategies
            if s.experience.category == "thermos"] == ["vlm_sim"]
