"""Experience acquisition: crash-safe appends, including real SIGKILLs mid-loop."""
import json
import os
import signal

import numpy as np
import pytest

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.retrieval.acquired.experience_store import (append_experience,
                                                                    experience_from_attempt)
from agentic_grasp.core.retrieval.jsonl import append_line, read_jsonl
from agentic_grasp.core.retrieval.knowledge_base import KnowledgeBase
from agentic_grasp.core.retrieval.taxonomy import Taxonomy
from agentic_grasp.core.types import (AffordanceDescriptor, FailureType, GraspParameters,
                                      ObjectInstance)

TAXONOMY = Taxonomy.load()


def record(i, padding=0):
    rec = {"id": f"acq-{i:05d}", "category": "cup",
           "affordance": {"type": "Graspable_Handle", "material": "ceramic",
                          "fragility": 0.3, "region": "handle"},
           "grasp": {"position": [0.05, 0.0, 0.0], "approach": [0.0, 0.0, -1.0],
                     "width": 0.03, "force": 15.0, "grasp_type": "pinch"},
           "success": True, "failure_mode": None, "provenance": f"acquired: trial {i}",
           "render_spec": {"shape": "cylinder", "size": [0.08, 0.08, 0.09],
                           "color": [240, 240, 240], "material": "ceramic"}}
    if padding:
        rec["notes"] = (f"{i:05d}" * (padding // 5 + 1))[:padding]
    return rec


def test_append_then_load(tmp_path):
    path = tmp_path / "acquired.jsonl"
    append_experience(path, record(1), TAXONOMY)
    append_experience(path, record(2), TAXONOMY)
    kb = KnowledgeBase.load(path)
    assert [e.id for e in kb] == ["acq-00001", "acq-00002"]
    assert kb.experiences[0].to_record() == record(1)


def test_invalid_experience_is_not_appended(tmp_path):
    path = tmp_path / "acquired.jsonl"
    append_experience(path, record(1), TAXONOMY)
    before = path.read_bytes()
    bad = record(2)
    bad["grasp"]["width"] = 0.2
    with pytest.raises(ValidationError, match="grasp.width"):
        append_experience(path, bad, TAXONOMY)
    assert path.read_bytes() == before


def test_next_append_cuts_an_interrupted_line(tmp_path):
    path = tmp_path / "acquired.jsonl"
    append_experience(path, record(1), TAXONOMY)
    with open(path, "ab") as handle:                  # what a crash mid-write leaves
        handle.write(json.dumps(record(2)).encode()[:57])
    content = read_jsonl(path)
    assert len(content.records) == 1 and content.partial_tail is not None
    assert [e.id for e in KnowledgeBase.load(path)] == ["acq-00001"]
    append_experience(path, record(3), TAXONOMY)
    content = read_jsonl(path)
    assert content.partial_tail is None and content.errors == []
    assert [r["id"] for _, r in content.records] == ["acq-00001", "acq-00003"]


def test_next_append_terminates_a_complete_unterminated_line(tmp_path):
    path = tmp_path / "hand_edited.jsonl"
    path.write_text(json.dumps(record(1)))            # valid, but no final newline
    append_line(path, record(2))
    assert [r["id"] for _, r in read_jsonl(path).records] == ["acq-00001", "acq-00002"]


def _appender(path, first, padding, fd):
    """Child process: append records first, first + 1, ... until killed.

    Messages on ``fd`` (5 bytes): b"W" + id just before the record's os.write, b"A" + id
    once append_experience returned (the record is on disk).
    """
    import agentic_grasp.core.retrieval.jsonl as jsonl_module

    class AnnouncingOs:
        current = first

        def __getattr__(self, name):
            return getattr(os, name)

        def write(self, target, data):
            if len(data) > 4096:
                os.write(fd, b"W" + AnnouncingOs.current.to_bytes(4, "little"))
            return os.write(target, data)

    jsonl_module.os = AnnouncingOs()
    try:
        i = first
        while True:
            AnnouncingOs.current = i
            append_experience(path, record(i, padding), TAXONOMY)
            os.write(fd, b"A" + i.to_bytes(4, "little"))
            i += 1
    finally:
        os._exit(1)


def test_sigkill_during_appends_never_corrupts_the_file(tmp_path):
    """20 appender processes SIGKILLed while appending 1 MiB records: half at a random
    moment (after 1-3 acknowledged appends), half the instant a write starts. The file must
    load and every acknowledged record must be intact."""
    path = tmp_path / "acquired.jsonl"
    rng = np.random.default_rng(1)
    padding = 1024 * 1024
    acked, torn, next_id = [], 0, 0
    for trial in range(20):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _appender(path, next_id, padding, write_fd)
        os.close(write_fd)
        during_write = trial % 2 == 1
        wanted = int(rng.integers(1, 4))
        got, highest = [], next_id
        while True:
            msg = os.read(read_fd, 5)
            assert len(msg) == 5, "appender died before being killed"
            kind, i = msg[:1], int.from_bytes(msg[1:], "little")
            highest = max(highest, i)
            if kind == b"A":
                got.append(i)
            if (during_write and kind == b"W" and len(got) >= wanted - 1) or \
                    (not during_write and len(got) >= wanted):
                os.kill(pid, signal.SIGKILL)
                break
        os.waitpid(pid, 0)
        rest = os.read(read_fd, 1 << 16)
        os.close(read_fd)
        for j in range(0, len(rest) - 4, 5):
            highest = max(highest, int.from_bytes(rest[j + 1:j + 5], "little"))
            if rest[j:j + 1] == b"A":
                got.append(int.from_bytes(rest[j + 1:j + 5], "little"))
        acked += got
        next_id = highest + 2                         # never reuse an id that may be on disk
        torn += read_jsonl(path).partial_tail is not None
    content = read_jsonl(path)
    assert content.errors == []                       # no corrupt line in the middle
    kb = KnowledgeBase.load(path)                     # loads (a torn tail is only a warning)
    ids = [e.id for e in kb]
    assert len(ids) == len(set(ids))
    assert {f"acq-{i:05d}" for i in acked} <= set(ids)   # acknowledged = durable
    for e in kb:
        assert e.to_record() == record(int(e.id.split("-")[1]))
    for _, rec in content.records:
        assert rec["notes"] == record(int(rec["id"].split("-")[1]), padding)["notes"]
    print(f"{len(acked)} acknowledged appends, {len(ids)} records on disk, "
          f"{torn} of 20 kills left a torn last line")


def test_experience_from_attempt_stores_the_object_frame(tmp_path):
    cup = ObjectInstance(id="cup_1", category="cup", shape="cylinder",
                         position=[0.6, -0.1, 0.045], size=[0.08, 0.08, 0.09], yaw=np.pi,
                         material="ceramic", color=(235, 232, 220), name="ceramic cup")
    grasp = GraspParameters(position=[0.5475, -0.1, 0.045], width=0.03, force=15.0,
                            grasp_type="pinch")
    aff = AffordanceDescriptor("Graspable_Handle", "ceramic", 0.3, "handle")
    exp = experience_from_attempt(cup, aff, grasp, False, "task sg_cup trial 4",
                                  failure=FailureType.SLIP, experience_id="acq-cup-1")
    assert np.allclose(exp.grasp["position"], [0.0525, 0.0, 0.0], atol=1e-6)
    assert exp.provenance == "acquired: task sg_cup trial 4"
    assert exp.failure_mode == "slip" and exp.render_spec["shape"] == "cylinder"
    path = tmp_path / "acquired.jsonl"
    append_experience(path, exp, TAXONOMY)
    assert KnowledgeBase.load(path).get("acq-cup-1").failure_mode == "slip"
    with pytest.raises(ValidationError):
        experience_from_attempt(cup, aff, grasp, False, "no failure type")
