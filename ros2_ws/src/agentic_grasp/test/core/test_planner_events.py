"""The planner's typed events (core/planner/events.py) and their plain-dict form."""
import dataclasses

import pytest

from agentic_grasp.core.planner import EpisodicMemory
from agentic_grasp.core.planner.events import (ObservationEvent, PlanEvent, ReflectionEvent,
                                               ResultEvent, ThoughtEvent)
from agentic_grasp.core.planner.outcomes import AttemptRecord

from test_planner_fakes import ScriptedArm, ok, perception_of, slip
from test_planner_loop import cup, planner

KEYS = {
    "plan": {"event", "target_id", "category", "configuration", "initial_source", "detail",
             "retrieval", "constraints", "prerequisites", "g0"},
    "thought": {"event", "target_id", "attempt", "retry_level", "text", "grasp", "candidate"},
    "phase": {"event", "target_id", "attempt", "phase", "index", "count"},
    "observation": {"event", "target_id", "attempt", "success", "arm_error", "outcome"},
    "reflection": {"event", "target_id", "attempt", "diagnosis", "correction", "executed"},
    "memory": {"event", "target_id", "stored", "category"},
    "result": {"event", "target_id", "success", "status", "attempts", "failure_types",
               "prerequisites", "message"},
}


def _run():
    events = []
    goal = planner().plan_and_execute(perception_of([cup()], "cup_1"), "cup_1",
                                      ScriptedArm([slip(), ok()]), EpisodicMemory(),
                                      on_event=events.append)
    return goal, events


def test_attempt_events_carry_the_core_record_diagnosis_and_correction():
    goal, events = _run()
    first = goal.attempts[0]
    observations = [e for e in events if isinstance(e, ObservationEvent)]
    assert [o.observation.index for o in observations] == [a.index for a in goal.attempts]
    assert [o.observation.grasp for o in observations] == [a.grasp for a in goal.attempts]
    # the record is built once the planner is done with the attempt: the success's comes
    # with its observation, the failure's with its reflection; neither is changed after
    assert observations[0].record is None and observations[1].record is goal.attempts[1]
    assert all(isinstance(a, AttemptRecord) for a in goal.attempts)
    (reflection,) = [e for e in events if isinstance(e, ReflectionEvent)]
    assert reflection.record is first and reflection.diagnosis is first.diagnosis
    assert reflection.correction is first.correction and reflection.executed
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.diagnosis = None
    thoughts = [e for e in events if isinstance(e, ThoughtEvent)]
    assert [t.grasp for t in thoughts] == [a.grasp for a in goal.attempts]
    assert isinstance(events[0], PlanEvent) and isinstance(events[-1], ResultEvent)


def test_to_dict_is_the_plain_event_of_each_kind():
    goal, events = _run()
    kinds = [e.kind for e in events]
    assert kinds == ["plan", "thought", "phase", "phase", "phase", "observation",
                     "reflection", "thought", "phase", "phase", "phase", "observation",
                     "memory", "result"]
    for event in events:
        d = event.to_dict()
        assert d["event"] == event.kind and set(d) == KEYS[event.kind], event.kind
    obs = events[5].to_dict()
    assert obs["attempt"] == 0 and not obs["success"] and obs["arm_error"] == "NONE"
    assert obs["outcome"] == goal.attempts[0].to_dict()["outcome"]
    refl = events[6].to_dict()
    assert refl["diagnosis"] == goal.attempts[0].diagnosis.to_dict()
    assert refl["correction"]["level"] == 1 and refl["executed"] is True
    res = events[-1].to_dict()
    assert res["failure_types"] == ["slip"] and res["attempts"] == 2 and res["success"]

