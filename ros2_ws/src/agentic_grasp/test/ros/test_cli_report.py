"""``agentic-grasp grasp``'s report of a GraspObject result: the exit status the README gives
(0 success, 1 the goal failed, 2 a usage or system error) for every error code, the word the
result line uses for each, and a wrist-camera view reported as a view, never as a grasp
attempt with a grasp's placeholder type, force and width.

Messages only: no node, no DDS.
"""
from __future__ import annotations

import pytest

from agentic_grasp.commands.grasp import _print_report
from agentic_grasp.core.mcp_tools import grasp_report_text
from agentic_grasp.ros.client.grasp_report import exit_code, outcome_word, result_report
from agentic_grasp.ros.conversions.records import VIEW_LABEL
from agentic_grasp_interfaces.action import GraspObject
from agentic_grasp_interfaces.msg import AttemptRecord

Result = GraspObject.Result

#: error code -> (exit status, the result line's word), as the README gives them
EXPECTED = {
    Result.ERROR_NONE: (0, "SUCCESS"),
    Result.ERROR_GRASP_FAILED: (1, "FAILED"),
    Result.ERROR_TARGET_NOT_FOUND: (1, "FAILED"),
    Result.ERROR_BEYOND_HAND_LIMITS: (1, "FAILED"),
    Result.ERROR_INVALID_GOAL: (2, "ERROR"),
    Result.ERROR_PERCEPTION_FAILED: (2, "ERROR"),
    Result.ERROR_DEPENDENCY_TIMEOUT: (2, "ERROR"),
    Result.ERROR_CANCELED: (2, "ERROR"),
    Result.ERROR_INTERNAL: (2, "ERROR"),
    Result.ERROR_PEER_LOST: (2, "ERROR"),
    Result.ERROR_SENDER_LOST: (2, "ERROR"),
}


def test_every_error_code_has_its_readme_exit_status():
    codes = {v for k, v in vars(Result).items() if k.startswith("ERROR_") and isinstance(v, int)}
    assert codes == set(EXPECTED), "a new error code needs its exit status here"
    for code, (status, word) in EXPECTED.items():
        result = Result(success=code == Result.ERROR_NONE, error_code=code)
        assert exit_code(result) == status, code
        assert outcome_word(result) == word, code


def _view(seen: bool) -> AttemptRecord:
    record = AttemptRecord(subgoal_index=0, target_id="", attempt=0,
                           candidate=f"{VIEW_LABEL}cup_1's above", collision_free=True,
                           clearance_nearest="target not in view (saw cup_1)")
    record.outcome.success = seen
    return record


@pytest.mark.parametrize("seen", [False, True])
def test_a_wrist_camera_view_is_reported_as_a_view(capsys, seen):
    result = Result(success=False, error_code=Result.ERROR_TARGET_NOT_FOUND,
                    message="the target the instruction names is not in view",
                    attempts=[_view(seen)])
    report = result_report(result)
    assert report["attempts"][0]["kind"] == "view"
    assert "grasp" not in report["attempts"][0]
    _print_report(report)
    out = capsys.readouterr().out
    assert out.startswith("result: FAILED (ERROR_TARGET_NOT_FOUND)")
    assert "0 grasp attempt(s), 1 wrist-camera view(s)" in out
    assert "view 1: looked behind cup_1 from above with the wrist camera -> target " \
        + ("seen" if seen else "not seen") in out
    assert "attempt 1" not in out and " N " not in out          # no phantom grasp
    # the MCP tool's text of the same result (core/mcp_tools.py)
    text = grasp_report_text(report)
    assert text.startswith("FAILED (ERROR_TARGET_NOT_FOUND)") and " N " not in text
    assert "view 1: looked behind cup_1 (above) with the wrist camera" in text


def test_a_long_wait_on_the_graph_says_what_it_waits_for(capsys):
    import time

    from agentic_grasp.commands.grasp import waiting

    with waiting("the simulator to load sg_cup", 60.0, every_s=0.2):
        time.sleep(0.7)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 2, lines
    assert lines[0].startswith("... still waiting for the simulator to load sg_cup: 0 s of "
                               "at most 60 s")
    with waiting("x", 60.0, quiet=True, every_s=0.1):
        time.sleep(0.3)
    assert capsys.readouterr().out == ""
