"""Reading an instruction the way a person phrases it: landmarks, places, ordinals and
attributes pick the targets (core/instructions.read_instruction)."""
import pytest

from agentic_grasp.core.instructions import read_instruction
from agentic_grasp.core.planner.instruction.tasks import names_only_landmarks, plan_subgoals
from agentic_grasp.core.sim import load_catalogue


def scene():
    """Two ceramic cups, -y is the left as the fixed camera (x = 1.15 m) sees the table."""
    cat = load_catalogue()
    tall = cat.instance("ceramic_cup", "cup_2", 0.55, 0.15)
    tall.size = tall.size * [1.0, 1.0, 1.3]
    tall.position[2] = tall.size[2] / 2
    return [cat.instance("ceramic_cup", "cup_1", 0.45, -0.15), tall,
            cat.instance("ceramic_bowl", "bowl_1", 0.6, 0.05),
            cat.instance("glass_vase", "vase_1", 0.4, 0.0),
            cat.instance("wine_glass", "glass_1", 0.62, -0.18),
            cat.instance("toy_block", "block_1", 0.5, -0.05)]


@pytest.mark.parametrize("instruction, targets", [
    ("bring me the cup nearest the bowl", ["cup_2"]),
    ("hand me the cup farther from the bowl", ["cup_1"]),
    ("could you grab the cup on the left", ["cup_1"]),
    ("the cup on the right, please", ["cup_2"]),
    ("get the second cup from the left", ["cup_2"]),
    ("get the first cup from the right", ["cup_2"]),
    ("pick up the tall cup", ["cup_2"]),
    ("pick up the short cup", ["cup_1"]),
    ("grab the toy block between the two cups", ["block_1"]),
    ("take the toy block from between the glass vase and the wine glass", ["block_1"]),
    ("pick up the toy block nearest the vase", ["block_1"]),
    ("pick up the cup nearest the wine glass, the bowl and the toy block",
     ["cup_1", "bowl_1", "block_1"]),
    ("pick up the cups", ["cup_1", "cup_2"]),
    ("clear the table except the cup on the left",
     ["cup_2", "bowl_1", "vase_1", "glass_1", "block_1"]),
    ("grab the toy block next to the cup on the right", ["block_1"]),
    ("pick up cup_2 (the ceramic cup)", ["cup_2"]),
    ("bowl", ["bowl_1"]),
])
def test_targets_of_the_phrasing_a_person_uses(instruction, targets):
    assert plan_subgoals(instruction, scene()).target_ids == targets


def test_landmarks_are_named_apart_and_a_hidden_targets_landmark_is_only_a_landmark():
    reading = read_instruction("take the toy block from between the glass vase and the "
                               "wine glass", scene())
    assert reading.targets == ["block_1"] and reading.landmarks == ["vase_1", "glass_1"]
    vase = [o for o in scene() if o.id == "vase_1"]
    assert names_only_landmarks("could you grab the ball behind the vase", vase)
    assert not names_only_landmarks("grab the vase", vase)


def test_a_material_word_before_a_noun_is_part_of_it_not_another_object():
    """Perception names objects by category: "glass" then names the wine glass (a synonym),
    yet in "the glass vase" it only says what the vase is made of."""
    seen = []
    for o in scene():
        o.category = o.name = o.category.replace("_", " ")     # "wine glass", as the VLM says
        seen.append(o)
    assert plan_subgoals("the glass vase by the bowl, please", seen).target_ids == ["vase_1"]
    assert plan_subgoals("grab the toy block between the cup on the left and the glass vase",
                         seen).target_ids == ["block_1"]
