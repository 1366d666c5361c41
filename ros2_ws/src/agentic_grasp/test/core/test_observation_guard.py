"""The robot's mind reads what a Panda senses, never the simulator's truth.

Two guards: an import rule (the mind's packages cannot reach the simulator, where its truth
type lives), and a behavioural one: scrambling everything only the simulator knows (its
failure labels, crush limits, friction and margins in the truth it returns) changes no
decision of the planner, because the planner reads the arm's observation alone.
"""
import ast
import dataclasses
import pathlib

import numpy as np
import pytest

import agentic_grasp
from agentic_grasp.core.arm.observation import ArmObservation
from agentic_grasp.core.planner.episode import run_trial
from agentic_grasp.core.sim import Simulator
from agentic_grasp.core.types import AttemptOutcome, PhysicalEvent

PACKAGE = pathlib.Path(agentic_grasp.__file__).parent
#: The robot's mind: what it may import is what perception, the knowledge base and the arm's
#: observation give it.
MIND = ("core/planner", "core/grasping", "core/scene_graph", "core/retrieval",
        "core/arm/observation.py", "core/arm/backend.py")
#: The in-process trial harness is the world's side of a trial (it loads the scene into the
#: simulator and scores what was really taken): it lives beside the loop it drives.
WORLD_SIDE = {"core/planner/episode.py"}


def _imports(path: pathlib.Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def _mind_files():
    for entry in MIND:
        path = PACKAGE / entry
        yield from ([path] if path.suffix == ".py" else sorted(path.rglob("*.py")))


def test_the_minds_packages_cannot_reach_the_simulator():
    reaching = {}
    for path in _mind_files():
        rel = str(path.relative_to(PACKAGE))
        if rel in WORLD_SIDE:
            continue
        found = sorted(m for m in _imports(path) if m.startswith("agentic_grasp.core.sim"))
        if found:
            reaching[rel] = found
    assert reaching == {}
    # the rule reads imports: the harness, which must reach the simulator, is seen doing so
    assert any(m.startswith("agentic_grasp.core.sim")
               for m in _imports(PACKAGE / "core/planner/episode.py"))


def test_the_observation_holds_only_sensor_fields():
    """Every field of the arm's observation is one a Panda reports (its docstring names the
    source of each); a field named after a simulator quantity fails here."""
    names = {f.name for f in dataclasses.fields(ArmObservation)}
    forbidden = ("crush", "friction", "mass", "limit", "margin", "label", "failure", "event",
                 "other_id", "truth", "capacity")
    assert not [n for n in names if any(word in n for word in forbidden)]
    assert {"width_at_contact_m", "is_grasped", "wrench_liftoff", "reflexes",
            "planning_error"} <= names


def _scrambled(outcome: AttemptOutcome, rng: np.random.Generator) -> AttemptOutcome:
    """The simulator's truth with its labels and internal quantities replaced by garbage."""
    return AttemptOutcome(
        success=bool(rng.integers(2)), quality=float(rng.random()), phi=rng.random(7),
        events=[PhysicalEvent("slip", e.phase, "scrambled", "nobody") for e in outcome.events],
        phase_reached=outcome.phase_reached,
        measurements={k: float(rng.normal()) for k in outcome.measurements},
        duration_s=outcome.duration_s)


def _decisions(result):
    return [(a.grasp.to_dict(), a.failure_type, a.success,
             None if a.correction is None else a.correction.text)
            for a in result.task.attempts]


#: trials whose attempts fail and are corrected (a width mismatch, slips, a landing, a
#: collision): each decision there reads a diagnosis
@pytest.mark.parametrize("task,seed", [("it_cup_near_vase", 4), ("lh_clear_table", 4),
                                       ("it_phone_near_wine_glass", 0),
                                       ("it_phone_near_wine_glass", 1)])
def test_scrambling_what_only_the_simulator_knows_changes_no_decision(monkeypatch, task, seed):
    sim = Simulator.from_config()
    honest = run_trial(task, "full", seed, simulator=sim, perception="oracle")
    assert any(not a.success for a in honest.task.attempts)
    original = Simulator.advance
    rng = np.random.default_rng(0)

    def advance(self, attempt_id, phase):
        return _scrambled(original(self, attempt_id, phase), rng)

    monkeypatch.setattr(Simulator, "advance", advance)
    scrambled = run_trial(task, "full", seed, simulator=sim, perception="oracle")
    assert _decisions(scrambled) == _decisions(honest)
    assert [a.observation.to_dict() for a in scrambled.task.attempts] == \
        [a.observation.to_dict() for a in honest.task.attempts]
