"""The perceived geometry (shape, real yaw, handle side, open interior, warnings) survives
the ObjectObservation message both ways (no rclpy.init needed: messages only)."""
import math

import numpy as np
import pytest

from agentic_grasp.ros.conversions.perception import (object_from_msg, perceived_object_from_msg,
                                                      perceived_object_to_msg,
                                                      perception_result_from_msg,
                                                      perception_result_to_msg)
from agentic_grasp.core.perception import PerceivedObject, PerceptionResult
from agentic_grasp.core.types import ObjectState, Shape


def perceived(**kw):
    base = dict(id="mug_1", category="mug", pixel=(300.0, 200.0), bbox=(280, 170, 330, 240),
                position=np.array([0.5, 0.1, 0.05]), size=np.array([0.07, 0.07, 0.10]),
                state=ObjectState.EMPTY, fragility=0.3, affordance=None, confidence=0.9,
                shape=Shape.CYLINDER, yaw=1.2, yaw_known=True, upright=True, handle_yaw=1.2,
                rim_z=0.10, interior_depth=0.07, warnings=["the point is not on an object"])
    base.update(kw)
    return PerceivedObject(**base)


def test_geometry_fields_round_trip():
    obj = perceived()
    msg = perceived_object_to_msg(obj)
    assert msg.shape == msg.SHAPE_CYLINDER and msg.yaw_known and msg.upright
    assert msg.handle_known and msg.handle_yaw == pytest.approx(1.2)
    assert msg.rim_height == pytest.approx(0.10) and msg.interior_depth == pytest.approx(0.07)
    assert list(msg.warnings) == ["the point is not on an object"]
    back = perceived_object_from_msg(msg)
    assert back.shape == Shape.CYLINDER and back.yaw == pytest.approx(1.2)
    assert back.handle_yaw == pytest.approx(1.2) and back.rim_z == pytest.approx(0.10)
    assert back.interior_depth == pytest.approx(0.07) and back.warnings == obj.warnings
    np.testing.assert_allclose(back.size, obj.size)
    assert object_from_msg(msg).shape == Shape.CYLINDER


def test_unknowns_stay_unknown():
    obj = perceived(shape=None, handle_yaw=None, rim_z=None, interior_depth=None,
                    yaw_known=False, yaw=0.0, warnings=[])
    msg = perceived_object_to_msg(obj)
    assert msg.shape == msg.SHAPE_UNKNOWN and not msg.handle_known and not msg.yaw_known
    assert math.isnan(msg.rim_height) and math.isnan(msg.interior_depth)
    back = perceived_object_from_msg(msg)
    assert back.shape is None and back.handle_yaw is None and back.rim_z is None
    assert back.interior_depth is None


def test_a_lying_cylinder_keeps_the_knocked_over_convention():
    obj = perceived(size=np.array([0.07, 0.07, 0.22]), yaw=-0.4, upright=False,
                    handle_yaw=None, rim_z=None, interior_depth=None)
    result = PerceptionResult(backend="vlm", target_found=True, target=obj, objects=[obj])
    back = perception_result_from_msg(perception_result_to_msg(result))
    inst = back.target.to_object_instance()
    assert inst.shape == Shape.CYLINDER and not inst.upright
    np.testing.assert_allclose(inst.size, [0.07, 0.07, 0.22], atol=1e-6)
    assert inst.yaw == pytest.approx(-0.4, abs=1e-6)


def test_enums_are_read_by_the_constants_name():
    """The code a message carries is looked up through its own class's constants (rclpy or
    rosbags alike), never as a bare integer of ours."""
    from agentic_grasp.core.errors import ValidationError
    from agentic_grasp.core.types import GraspType
    from agentic_grasp.ros.conversions.fields import GRASP_TYPE_NAMES, enum_code, enum_value

    class Renumbered:                       # a message type whose codes differ from ours
        GRASP_POWER, GRASP_PINCH, GRASP_SIDE = 7, 5, 9
        grasp_type = 5

    assert enum_value(Renumbered(), GRASP_TYPE_NAMES, 5, "grasp_type") is GraspType.PINCH
    assert enum_code(Renumbered, GRASP_TYPE_NAMES, GraspType.SIDE) == 9
    with pytest.raises(ValidationError, match="GRASP_POWER"):
        enum_value(Renumbered(), GRASP_TYPE_NAMES, 1, "grasp_type")
