"""``agentic-grasp show``'s pictures read as the terminal does: sub-goals numbered from 1, a
label drawn once (no thicker copy behind it that runs past its end), one label per fact
(a Left_Of b is not also drawn as b Right_Of a), and a contact sheet whose text is legible at
the sheet's own size.

Drawing only: messages built here, no node, no bag.
"""
from __future__ import annotations

import cv2
import numpy as np

from agentic_grasp.core.camera import Camera
from agentic_grasp.ros.recording import show
from agentic_grasp.ros.recording.views import AttemptView, GoalView
from agentic_grasp_interfaces.msg import AttemptRecord, ObjectObservation, PerceptionResult


def _view(subgoal: int = 0, attempt: int = 0, relations=()) -> AttemptView:
    record = AttemptRecord(subgoal_index=subgoal, target_id="cup_1", attempt=attempt)
    record.grasp.gripper_width = 0.031
    record.grasp.grip_force = 66.6
    record.grasp.approach_direction.z = -1.0
    record.grasp.position.x, record.grasp.position.z = 0.5, 0.05
    record.outcome.success = True
    record.outcome.phase_reached = "lift"
    perception = PerceptionResult()
    for oid, y in (("cup_1", -0.05), ("vase_1", 0.08)):
        obj = ObjectObservation(id=oid, category=oid.split("_")[0])
        obj.pose.position.x, obj.pose.position.y, obj.pose.position.z = 0.5, y, 0.05
        obj.pose.orientation.w = 1.0
        obj.size.x = obj.size.y = obj.size.z = 0.08
        perception.objects.append(obj)
    return AttemptView("7b5598a2aaaa", "pick up the ceramic cup", "full", attempt, record,
                       perception=perception, camera=Camera(), relations=list(relations))


def test_sub_goals_are_numbered_from_one_as_in_the_terminal():
    view = _view(subgoal=0, attempt=1)
    panel = [text for _, text in show.panel_lines(view)]
    assert any(t.startswith("sub-goal 1 target cup_1, attempt 2") for t in panel), panel
    assert show.caption(view)[0][1].startswith("sub-goal 1 cup_1, attempt 2")


def test_a_label_is_drawn_once():
    text = "camera image, zoom x2.0"
    img = np.full((60, 300, 3), 128, np.uint8)
    show._label(cv2, img, text, (10, 30), (235, 235, 235), 0.4)
    changed = np.nonzero((img != 128).any(axis=(0, 2)))[0]
    glyphs = np.nonzero((img > 200).any(axis=(0, 2)))[0]
    # a thicker black copy of the text (the old halo) advances wider than the text and ran
    # 9 px past its last glyph, a second, offset print of it
    assert changed.max() - glyphs.max() <= 4


def test_a_relation_and_its_converse_are_one_label(monkeypatch):
    drawn = []
    real = show._label

    def record(cv2_, img, text, *args, **kwargs):
        drawn.append(text)
        return real(cv2_, img, text, *args, **kwargs)

    monkeypatch.setattr(show, "_label", record)
    show.draw_scene(_view(relations=[("cup_1", "Left_Of", "vase_1"),
                                     ("vase_1", "Right_Of", "cup_1"),
                                     ("cup_1", "Adjacent_To", "vase_1"),
                                     ("vase_1", "Adjacent_To", "cup_1")]))
    assert drawn.count("Left_Of") == 1 and drawn.count("Adjacent_To") == 1
    assert not any(t.startswith("Right_Of") for t in drawn), drawn


def test_the_contact_sheet_is_legible_at_its_size():
    views = [_view(attempt=k) for k in range(3)]
    scenes = [show.draw_scene(v) for v in views]
    goal = GoalView("7b5598a2aaaa", "pick up the ceramic cup", "full",
                    "succeeded: all 1 target(s) grasped", views)
    sheet = show.contact_sheet(goal, scenes, [show.caption(v) for v in views])
    h, w = scenes[0].shape[:2]
    assert sheet.shape[1] == 2 * int(round(w * show.SHEET_SCALE))
    # the caption's letters are at least 10 px tall on the sheet itself (the old sheet
    # halved the side panel's 0.4 text to about 5 px)
    assert cv2.getTextSize("Ag", 0, show.CAPTION_SCALE, 1)[0][1] >= 10
    assert sheet.shape[0] > 2 * int(round(h * show.SHEET_SCALE))      # room for captions
