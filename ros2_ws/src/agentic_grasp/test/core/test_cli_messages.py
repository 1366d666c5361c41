"""What the command line tells a new user: its help lists what it accepts, a wrong argument is
reported by the subcommand it follows, the learnt-experience folder can be moved and cleared,
and the planner's messages about a target that is not there say what happened.

No ROS here (the grasp report's exit status is pinned in test/ros/test_cli_report.py).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from agentic_grasp import cli
from agentic_grasp.commands import kb
from agentic_grasp.core.paths import user_data_dir
from agentic_grasp.core.planner.configurations import CONFIGURATIONS, STUDY_CONFIGURATIONS


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def test_top_level_help_names_every_subcommand_of_kb_and_bag():
    parser = cli.build_parser()
    for name in ("kb", "bag"):
        text = cli.COMMANDS[name][1]
        for sub in _subcommands(_subcommands(parser)[name]):
            assert sub in text, f"agentic-grasp --help does not list {name} {sub}"


def test_grasp_help_lists_every_configuration_the_planner_accepts():
    grasp = _subcommands(cli.build_parser())["grasp"]
    text = grasp._option_string_actions["--configuration"].help
    for name in list(CONFIGURATIONS) + list(STUDY_CONFIGURATIONS):
        assert name in text, f"--configuration help does not list {name}"


def test_a_wrong_argument_is_reported_with_its_subcommands_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["grasp", "pick up the cup", "--bogus"])
    assert exc.value.code == 2                                  # a usage error
    err = capsys.readouterr().err
    assert "usage: agentic-grasp grasp" in err and "--bogus" in err
    with pytest.raises(SystemExit) as exc:
        cli.main(["kb", "prune", "--bogus"])
    assert exc.value.code == 2
    assert "usage: agentic-grasp kb prune" in capsys.readouterr().err


def test_data_home_moves_the_learnt_experience(monkeypatch, tmp_path):
    monkeypatch.delenv("AGENTIC_GRASP_DATA_HOME", raising=False)
    monkeypatch.delenv("AGENTIC_GRASP_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert user_data_dir() == tmp_path / "xdg" / "agentic_grasp"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert user_data_dir() == Path.home() / ".local" / "share" / "agentic_grasp"
    monkeypatch.setenv("AGENTIC_GRASP_DATA_HOME", str(tmp_path / "mine"))
    assert user_data_dir() == tmp_path / "mine"
    from agentic_grasp.core.retrieval.acquired.acquisition import default_acquired_path
    from agentic_grasp.core.retrieval.acquired.store import data_dir

    assert default_acquired_path() == tmp_path / "mine" / "acquired_experiences.jsonl"
    assert data_dir() == tmp_path / "mine"


def test_data_dir_option_sets_the_data_home_for_the_command(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("AGENTIC_GRASP_DATA_HOME", str(tmp_path / "elsewhere"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "acquired_experiences.jsonl").write_text("{}\n")
    assert cli.main(["--data-dir", str(tmp_path / "mine"), "kb", "reset", "--yes"]) == 0
    assert not (tmp_path / "mine" / "acquired_experiences.jsonl").exists()
    assert str(tmp_path / "mine") in capsys.readouterr().out


def _reset_args(yes: bool = False) -> argparse.Namespace:
    return argparse.Namespace(kb_command="reset", yes=yes)


def test_kb_reset_asks_and_keeps_everything_unless_told_yes(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("AGENTIC_GRASP_DATA_HOME", str(tmp_path))
    learnt = tmp_path / "acquired_experiences.jsonl"
    spool = tmp_path / "fleet_spool.jsonl"
    other = tmp_path / "notes.txt"                   # not ours: never removed
    learnt.write_text('{"id": 1}\n{"id": 2}\n')
    spool.write_text('{"id": 3}\n')
    other.write_text("keep")
    asked = []

    def say(answer):
        def ask(prompt):
            asked.append(prompt)
            return answer
        return ask

    assert kb._reset(_reset_args(), ask=say("n")) == 1
    assert learnt.exists() and spool.exists() and len(asked) == 1
    out = capsys.readouterr().out
    assert "2 record(s)" in out and "nothing removed" in out

    def no_terminal(prompt):
        raise EOFError

    assert kb._reset(_reset_args(), ask=no_terminal) == 1 and learnt.exists()
    assert kb._reset(_reset_args(), ask=say("y")) == 0
    assert not learnt.exists() and not spool.exists() and other.exists()
    assert kb._reset(_reset_args(), ask=say("y")) == 0      # nothing left: nothing asked
    assert len(asked) == 2 and "nothing to reset" in capsys.readouterr().out


def test_kb_usage_and_system_errors_exit_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("AGENTIC_GRASP_DATA_HOME", str(tmp_path))
    assert cli.main(["kb", "list"]) == 2                        # no acquired file there
    assert cli.main(["kb", "import", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().out


# ---- the planner's words about a target that is not on the table -------------------------
def _run(instruction: str, task: str = "sg_cup"):
    """One in-process trial of ``task``'s scene with ``instruction`` in place of its own."""
    from agentic_grasp.core.planner import episode
    from agentic_grasp.core.planner.planner import ReflectivePlanner

    real = ReflectivePlanner.run_task

    def with_instruction(self, _instruction, *args, **kwargs):
        return real(self, instruction, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ReflectivePlanner, "run_task", with_instruction)
        return episode.run_trial(task, "full", 0, perception="vlm_sim").task


def test_a_target_not_on_the_table_is_said_to_be_not_in_view():
    absent = _run("pick up the banana")
    assert not absent.success and absent.attempts == []        # no grasp was tried
    assert "not in view" in absent.message
    assert "landmark" not in absent.message                   # nothing was named as one
    behind = _run("pick up the banana behind the cup")
    assert "cup_1, which it names, is only a landmark" in behind.message
    assert "cup_1, cup_1" not in behind.message


def test_an_occluder_at_the_hands_opening_is_not_called_wider_than_it():
    from agentic_grasp.core.planner.instruction.uncover import Occluder, _describe
    from agentic_grasp.core.types import ObjectInstance, Shape

    cup = ObjectInstance(id="cup_1", category="cup", shape=Shape.CYLINDER,
                         position=np.zeros(3), size=np.array([0.0802, 0.0802, 0.09]),
                         fragility=0.3)
    occluder = Occluder(cup, np.array([1.0, 0.0]), np.zeros(2), (0.05, 0.05), 0.09, False)
    text = _describe(occluder, fragile_threshold=0.7, hand_width_m=0.08)
    assert "80.2 mm" in text and "80.0 mm" in text
    assert "80 mm hand" not in text

