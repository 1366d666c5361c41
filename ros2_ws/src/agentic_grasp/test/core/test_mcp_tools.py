"""core/mcp_tools.py: the MCP tools' bounded inputs and result text, without ROS."""
from __future__ import annotations

import pytest

from agentic_grasp.core import mcp_tools as tools
from agentic_grasp.core.paths import scenes_dir


@pytest.mark.parametrize("value", ["", "   ", "\n\t"])
def test_empty_instruction_is_refused(value):
    with pytest.raises(tools.ToolInputError, match="empty"):
        tools.check_instruction(value)


def test_instruction_bounds_and_types():
    assert tools.check_instruction("  pick up the cup ") == "pick up the cup"
    assert tools.check_instruction("x" * tools.MAX_INSTRUCTION_CHARS)
    with pytest.raises(tools.ToolInputError, match="at most"):
        tools.check_instruction("x" * (tools.MAX_INSTRUCTION_CHARS + 1))
    for bad in (None, 3, ["pick"], {"a": 1}, b"pick"):
        with pytest.raises(tools.ToolInputError, match="must be a string"):
            tools.check_instruction(bad)
    with pytest.raises(tools.ToolInputError, match="control"):
        tools.check_instruction("pick\x00 up")


def test_configuration_names_are_the_planners():
    assert tools.check_configuration(None) == ""
    assert tools.check_configuration("") == ""
    for name in ("full", "no_recovery", "heuristic_box", "no_constraint_inference"):
        assert tools.check_configuration(name) == name
    with pytest.raises(tools.ToolInputError, match="unknown configuration 'fast'.*full"):
        tools.check_configuration("fast")
    with pytest.raises(tools.ToolInputError) as exc:
        tools.check_configuration("y" * 10_000)
    assert len(str(exc.value)) < 600                    # a huge name is not echoed back
    with pytest.raises(tools.ToolInputError, match="must be a string"):
        tools.check_configuration(7)


def test_seed_range():
    assert tools.check_seed(None) is None
    assert tools.check_seed(0) == 0
    assert tools.check_seed(tools.SEED_MAX) == tools.SEED_MAX
    for bad in (-1, tools.SEED_MAX + 1, 2 ** 70):
        with pytest.raises(tools.ToolInputError, match="out of range"):
            tools.check_seed(bad)
    for bad in (True, 1.5, "3"):
        with pytest.raises(tools.ToolInputError, match="integer"):
            tools.check_seed(bad)


def test_tasks_are_the_scene_files_only():
    known = tools.scene_tasks(scenes_dir())
    assert "sg_cup" in known and known["sg_cup"].name == "sg_cup.yaml"
    assert any("/" in name for name in known)          # subfolders as folder/name
    assert tools.check_task(" sg_cup ", known) == "sg_cup"
    for bad in ("../../etc/passwd", "/etc/hosts", "sg_cup.yaml", "nope", "a" * 500):
        with pytest.raises(tools.ToolInputError, match="unknown task"):
            tools.check_task(bad, known)
    with pytest.raises(tools.ToolInputError, match="empty"):
        tools.check_task("", known)
    assert tools.scene_tasks("/nonexistent/folder") == {}


CATALOGUE = [{"name": "ceramic cup", "category": "cup", "type": "Graspable_Handle",
              "material": "ceramic", "fragility": 0.3, "region": "handle"},
             {"name": "glass cup", "category": "cup", "type": "Fragile",
              "material": "glass", "fragility": 0.8, "region": "body"}]


def test_retrieval_query():
    q = tools.check_retrieval_query(category="cup", defaults=CATALOGUE)
    assert q == {"category": "cup", "type": "Graspable_Handle", "material": "ceramic",
                 "fragility": 0.3, "region": "handle", "k": 0, "filled_from": "ceramic cup"}
    q = tools.check_retrieval_query(category="cup", material="glass", k=3, defaults=CATALOGUE)
    assert (q["type"], q["fragility"], q["k"], q["filled_from"]) == ("Fragile", 0.8, 3,
                                                                      "glass cup")
    q = tools.check_retrieval_query("mug", "Graspable_Handle", "ceramic", fragility=0.4,
                                    region="handle")
    assert q["filled_from"] == "" and q["fragility"] == 0.4
    with pytest.raises(tools.ToolInputError, match="no catalogue object.*fragility"):
        tools.check_retrieval_query(category="spaceship", defaults=CATALOGUE)
    with pytest.raises(tools.ToolInputError, match="at least one"):
        tools.check_retrieval_query()
    for k in (0, tools.K_MAX + 1, -4):
        with pytest.raises(tools.ToolInputError, match="k must be in"):
            tools.check_retrieval_query(category="cup", k=k, defaults=CATALOGUE)
    for fragility in (-0.1, 1.5, float("nan"), "high", True):
        with pytest.raises(tools.ToolInputError, match="fragility"):
            tools.check_retrieval_query(category="cup", fragility=fragility,
                                        defaults=CATALOGUE)
    with pytest.raises(tools.ToolInputError, match="short name"):
        tools.check_retrieval_query(category="mug; DROP TABLE")
    with pytest.raises(tools.ToolInputError, match="short name"):
        tools.check_retrieval_query(category="m" * 65)


def test_progress_increases_and_names_the_stage():
    stages = [{"stage": s, "target_id": "cup_1", "attempt": 0, "retry_level": 0}
              for s in ("perceive", "plan", "execute", "reflect", "plan", "done")]
    values = [tools.progress_of(fb, n + 1) for n, fb in enumerate(stages)]
    assert [v[0] for v in values] == sorted({v[0] for v in values})      # strictly rising
    assert values[1][2].startswith("plan cup_1 attempt 1 L0")
    assert values[-1][1] == values[-1][0]                                 # done: total known
    assert all(v[1] is None for v in values[:-1])
    line = tools.feedback_text({"stage": "reflect", "target_id": "cup_1", "attempt": 1,
                                "retry_level": 1, "failure_type": "slip",
                                "correction": "more force", "subgoal_count": 2,
                                "subgoal_index": 0, "thought": "it slipped"})
    assert line == ("reflect sub-goal 1/2 cup_1 attempt 2 L1 failure slip: it slipped "
                    "-> correction: more force")


def _report(success=True):
    attempt = {"subgoal": 0, "target": "cup_1", "attempt": 0, "retry_level": 0,
               "grasp": {"type": "pinch", "force_n": 12.0, "width_mm": 40.0},
               "success": False, "quality": 0.2, "failure_type": "slip",
               "correction": "increase force"}
    second = {**attempt, "attempt": 1, "retry_level": 1, "success": True, "quality": 0.9,
              "failure_type": "none", "correction": ""}
    return {"success": success, "error_code": "ERROR_NONE" if success else
            "ERROR_GRASP_FAILED", "message": "grasped cup_1", "grasped_ids": ["cup_1"],
            "total_time_s": 3.5, "attempts": [attempt, second]}


def test_grasp_report_text():
    text = tools.grasp_report_text(_report())
    lines = text.splitlines()
    assert lines[0] == "SUCCESS (ERROR_NONE): grasped cup_1"
    assert lines[1] == "grasped: cup_1; 2 attempt(s) in 3.50 s"
    assert lines[2].endswith("failed (Q 0.20); failure slip; correction: increase force")
    assert "failure" not in lines[3]
    assert tools.grasp_report_text(_report(False)).startswith("FAILED (ERROR_GRASP_FAILED)")


def test_scene_summary_text_and_structure():
    perception = {"backend": "oracle", "error": "", "warnings": [], "objects": [
        {"id": "cup_1", "category": "mug", "name": "ceramic cup", "position": [0.5, 0.1, 0.05],
         "affordance": "Graspable_Handle", "material": "ceramic", "fragility": 0.6},
        {"id": "plate_1", "category": "plate", "name": "plate", "position": [0.4, -0.1, 0.01],
         "affordance": "Graspable_Edge", "material": "ceramic", "fragility": 0.5}]}
    relations = [{"subject": "cup_1", "relation": "Near", "object": "plate_1"},
                 {"subject": "cup_1", "relation": "Far_From", "object": "x"}]
    text, structured = tools.scene_summary(perception, relations)
    assert "cup_1: mug (ceramic cup), ceramic, affordance Graspable_Handle" in text
    assert "- cup_1 Near plate_1" in text and "- cup_1 Far_From x" not in text
    assert "1 Far_From not listed" in text
    assert structured["objects"][0]["id"] == "cup_1"
    assert len(structured["relations"]) == 2
    text, _ = tools.scene_summary({"backend": "vlm", "error": "timeout", "objects": []}, [],
                                  "relations not available: x")
    assert "perception error: timeout" in text and "relations not available" in text


def test_strategies_text():
    report = {"success": True, "message": "3 strategies", "candidates_level1": 10,
              "candidates_level2": 4, "strategies": [
                  {"rank": 1, "id": "mug-001", "category": "mug", "success": True,
                   "grasp": {"grasp_type": "pinch"}, "s_final": 0.9, "s_cat": 1.0,
                   "s_aff": 0.8, "s_vis": 0.0, "penalty": 1.0, "explanation": "same mug"}]}
    text = tools.strategies_text(report)
    assert "1. mug-001 (mug, success experience): pinch grasp, s_final 0.900" in text
    assert "candidates: 10 after level 1, 4 after level 2" in text


def test_every_tool_has_a_description_and_limits_are_listed():
    assert set(tools.DESCRIPTIONS) == {"grasp", "describe_scene", "load_scene",
                                       "retrieve_strategies", "show_last_attempt", "stop",
                                       "status"}
    assert all(len(d) > 80 for d in tools.DESCRIPTIONS.values())
    assert dict(tools.iter_limits())["seed"].startswith("0..")
