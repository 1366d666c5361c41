"""Replay's comparison and divergence logic, and the episodic memory's recorded state
(ros/recording/compare.py and memory_state.py: plain Python, no rclpy, no bag).

A replay answers each question of the replayed planner from the recording only when it is
the recorded question, asked with the world where it was; anything else is a divergence,
after which a goal's outcome is unobserved, never a failure.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from agentic_grasp.core.planner.memory import EpisodicMemory, LearnedCorrections
from agentic_grasp.core.types import (AffordanceDescriptor, AffordanceType, GraspParameters,
                                      GraspType, ObjectInstance, Shape)
from agentic_grasp.ros.recording.compare import (DIFFERS, OBSERVED, REPRODUCED, UNOBSERVED,
                                                 Divergence, Exchanges, data_diff, grasp_diff,
                                                 summarize, verdict)
from agentic_grasp.ros.recording.memory_state import memory_from_state, memory_state


def _grasp(**changes):
    g = GraspParameters(position=np.array([0.5, 0.0, 0.025]), approach=np.array([0, 0, -1.0]),
                        width=0.05, force=15.0, grasp_type=GraspType.POWER)
    return g.copy(**changes) if changes else g


def test_grasp_diff_names_each_parameter_with_both_values():
    g = _grasp()
    assert grasp_diff(g, g.copy()) == {}
    assert grasp_diff(g, g.copy(wrist_yaw=np.pi)) == {}            # symmetric gripper
    diff = grasp_diff(_grasp(force=20.0, position=np.array([0.5, 0.0, 0.030])), g)
    assert set(diff) == {"force", "position"}
    assert diff["force"] == [20.0, 15.0]
    assert diff["position"] == [[0.5, 0.0, 0.03], [0.5, 0.0, 0.025]]
    diff = grasp_diff(g, g.copy(width=0.06, grasp_type=GraspType.PINCH))
    assert set(diff) == {"width", "grasp_type"} and diff["grasp_type"] == ["power", "pinch"]


def test_data_diff_paths_and_tolerance():
    a = {"scene": {"objects": [{"id": "cup_1", "x": 0.5}]}, "target_id": "cup_1"}
    b = {"scene": {"objects": [{"id": "cup_1", "x": 0.5 + 1e-12}]}, "target_id": "cup_1"}
    assert data_diff(a, b) == {}
    b["scene"]["objects"][0]["x"] = 0.6
    b["target_id"] = "box_1"
    assert data_diff(a, b) == {"scene.objects[0].x": [0.5, 0.6],
                               "target_id": ["cup_1", "box_1"]}
    assert data_diff([1, 2], [1, 2, 3]) == {"": [[1, 2], [1, 2, 3]]}
    assert data_diff(float("nan"), float("nan")) == {}


def _doc(kind, motions=0, request=None, response=None, **extra):
    return {"type": "exchange", "kind": kind, "motions": motions, "request": request or {},
            "response": response, **extra}


def _same(_doc):
    return {}


def test_exchanges_answer_by_kind_in_order_and_count_motions():
    ex = Exchanges([{"type": "goal"}, _doc("perceive", response=1),
                    _doc("retrieve", response="r"), _doc("execute", response="a0"),
                    _doc("perceive", 1, response=2), _doc("execute", 1, response="a1")])
    assert ex.recorded_attempts() == 2
    assert ex.take("perceive", _same)["response"] == 1
    assert ex.take("retrieve", _same)["response"] == "r"
    assert ex.take("execute", _same, "cup_1")["response"] == "a0"
    assert (ex.motions, ex.attempts) == (1, 1)
    assert ex.take("perceive", _same)["response"] == 2        # after one motion, as recorded
    assert ex.unserved() == {"execute": 1}
    ex.take("execute", _same, "cup_1")
    assert ex.unserved() == {} and [a["target_id"] for a in ex.agreed] == ["cup_1", "cup_1"]


def test_a_perception_after_other_motions_is_a_divergence():
    """The recorded answer saw the world after one motion; a replay that made none (another
    configuration that never attempted) cannot use it."""
    ex = Exchanges([_doc("perceive", 1, response="after the attempt")])
    with pytest.raises(Divergence) as err:
        ex.take("perceive", _same)
    assert err.value.kind == "perceive" and "world differs" in err.value.why
    assert err.value.to_dict()["attempt"] == 1


def test_another_question_or_one_too_many_is_a_divergence():
    ex = Exchanges([_doc("execute", request={"x": 1})])
    with pytest.raises(Divergence) as err:
        ex.take("execute", lambda doc: {"force": [20.0, 15.0]}, "cube_1")
    d = err.value.to_dict()
    assert d["kind"] == "execute" and d["parameters"] == ["force"] and d["target_id"] == "cube_1"
    ex = Exchanges([])
    with pytest.raises(Divergence) as err:
        ex.take("retrieve", _same)
    assert "no further retrieve" in err.value.why


def test_recompute_takes_the_recorded_inputs_without_requiring_the_same_world():
    ex = Exchanges([_doc("retrieve", 2, request={"crop": "c"})])
    doc = ex.take("retrieve", lambda d: {"category": ["a", "b"]}, recompute=True)
    assert doc["request"] == {"crop": "c"}
    assert ex.take("retrieve", _same, recompute=True) is None      # none recorded: computed


def test_a_recorded_error_is_raised_again():
    raised = []

    def again(error):
        raised.append(error)
        raise TimeoutError(error["detail"])

    ex = Exchanges([_doc("infer_constraints", error={"type": "DependencyTimeout",
                                                     "detail": "no answer"})], again)
    with pytest.raises(TimeoutError):
        ex.take("infer_constraints", _same)
    assert raised and ex.unserved() == {}


def test_verdicts_never_call_an_unobserved_outcome_a_failure():
    div = Divergence("execute", 2, "the question differs", {"force": [20.0, 15.0]})
    assert verdict(True, div, {}, False) == UNOBSERVED
    assert verdict(False, div, {}, False) == UNOBSERVED
    assert verdict(True, None, {}, True) == REPRODUCED
    assert verdict(True, None, {"execute": 1}, True) == DIFFERS     # asked fewer questions
    assert verdict(True, None, {}, False) == DIFFERS
    assert verdict(False, None, {"execute": 2}, False) == OBSERVED  # fewer retries, observed


def test_summary_counts_and_names_first_divergences():
    def goal(gid, v, agreed, recorded, div=None):
        return {"goal_id": gid * 8, "verdict": v,
                "metrics": {"attempts_agreed": agreed, "recorded_attempts": recorded,
                            "first_divergence": div}}

    div = Divergence("execute", 2, "differs", {"force": [20.0, 15.0],
                                               "position": [[0, 0, 0.03], [0, 0, 0.025]]},
                     "cube_1").to_dict()
    s = summarize([goal("a", REPRODUCED, 2, 2), goal("b", UNOBSERVED, 2, 4, div),
                   goal("c", OBSERVED, 1, 3)])
    assert (s["goals"], s["reproduced"], s["unobserved"], s["observed"], s["differs"]) == \
        (3, 1, 1, 1, 0)
    assert (s["attempts_agreed"], s["recorded_attempts"]) == (5, 9)
    assert s["first_divergences"] == [{"goal_id": "bbbbbbbb", "kind": "execute", "attempt": 3,
                                       "target_id": "cube_1",
                                       "parameters": ["force", "position"]}]


# ---- the episodic memory at a goal's start ---------------------------------------------------

def _cup(obj_id="cup_1", x=0.5):
    return ObjectInstance(id=obj_id, category="cup", shape=Shape.CYLINDER,
                          position=np.array([x, 0.0, 0.05]),
                          size=np.array([0.08, 0.08, 0.10]), yaw=0.3, material="ceramic",
                          fragility=0.7, affordance=AffordanceDescriptor(
                              AffordanceType.GRASPABLE_HANDLE, "ceramic", 0.7, "handle"))


def test_memory_state_round_trips_exactly_through_json():
    memory = EpisodicMemory()
    cup = _cup()
    corrections = LearnedCorrections(grip_up=1.2345678901, why={"grip_up": "slip"})
    memory.store("cup", _grasp(position=np.array([0.51, 0.01, 0.06])), cup, attempts=2,
                 corrections=corrections, handle_yaw=0.3)
    memory.store("cube", _grasp(), _cup("cube_1", 0.4), attempts=1)
    recall = memory.recall_for(_cup("cup_2", 0.6))
    memory.mark_failed(recall, "cup_2")
    state = memory_state(memory)
    back = memory_from_state(json.loads(json.dumps(state)))
    assert memory_state(back) == state
    target = _cup("cup_3", 0.45)
    a, b = memory.recall_for(target), back.recall_for(target)
    assert a.level == b.level and a.text == b.text and a.sources == b.sources
    assert grasp_diff(a.grasp, b.grasp) == {} and a.grasp.force == b.grasp.force
    assert back.recall_for(_cup("cup_2", 0.6)) is None or \
        back.recall_for(_cup("cup_2", 0.6)).sources != recall.sources
    assert memory_from_state(None) is None and memory_state(None) is None


def test_compare_and_memory_state_load_no_rclpy():
    probe = ("import sys; import agentic_grasp.ros.recording.compare, "
             "agentic_grasp.ros.recording.memory_state; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rclpy'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


# ---- the decision-input documents -------------------------------------------------------------

def test_the_tap_numbers_documents_counts_motions_and_records_errors(tmp_path):
    from agentic_grasp.ros.recording.inputs import DecisionTap, parse_documents

    sent = []
    acquired = tmp_path / "acquired.jsonl"
    acquired.write_bytes(b'{"id": "a"}\n')
    tap = DecisionTap(sent.append, type("Acquirer", (), {"path": acquired, "store": None})())
    tap("perceive", {"instruction": "x"}, {"ok": 1})           # outside a goal: nothing
    tap.begin("g1", {"seed": 3})
    tap("perceive", {"instruction": "x"}, {"ok": 1})
    tap("retrieve", {"category": "cup"}, {"strategies": []})
    tap("execute", {"target_id": "cup_1"}, {"error": 0})
    tap.error("perceive", {"instruction": "x"}, TimeoutError("no answer"))
    tap.end()
    tap("execute", {}, {})                                      # after the goal: nothing
    docs = parse_documents(sent)["g1"]
    assert [(d["seq"], d["type"], d.get("kind")) for d in docs] == [
        (0, "goal", None), (1, "exchange", "perceive"), (2, "exchange", "retrieve"),
        (3, "exchange", "execute"), (4, "exchange", "perceive")]
    assert docs[0]["seed"] == 3 and docs[0]["acquired_path"] == str(acquired)
    assert [d.get("motions") for d in docs[1:]] == [0, 0, 0, 1]
    assert docs[2]["acquired_bytes"] == len(b'{"id": "a"}\n')
    assert docs[4]["error"] == {"type": "TimeoutError", "peer": "", "detail": "no answer"}


def test_documents_of_another_format_or_not_documents_are_refused():
    from agentic_grasp.ros.recording.inputs import InputsError, parse_documents

    good = json.dumps({"format": 1, "goal_id": "g", "seq": 0, "type": "goal"})
    assert list(parse_documents([good])) == ["g"]
    with pytest.raises(InputsError, match="format 2"):
        parse_documents([json.dumps({"format": 2, "goal_id": "g", "seq": 0, "type": "goal"})])
    with pytest.raises(InputsError, match="not JSON"):
        parse_documents(["{cut"])
    with pytest.raises(InputsError, match="not a decision-input document"):
        parse_documents(["[1, 2]"])
