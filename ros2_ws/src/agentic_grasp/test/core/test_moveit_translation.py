"""MoveIt backend translation: poses, gripper goals, planning scene, outcomes, cancel, config.

moveit_py cannot be installed here; everything the backend computes lives in
agentic_grasp.ros.executor.moveit.translation and is checked against the project's own kinematics
(independent FK) and failure taxonomy (the planner's one diagnosis of the arm's
observation, core/planner/recovery/diagnosis.py).
"""
import dataclasses
import importlib.util
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from agentic_grasp.ros.executor.moveit import translation as mt
from agentic_grasp.ros.executor.moveit import config as mc
from agentic_grasp.ros.executor.moveit import outcome as mo
from agentic_grasp.core import paths
from agentic_grasp.core.camera import Camera
from agentic_grasp.core.config import node_params
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.arm.panda_model import Q_READY
from agentic_grasp.core.arm.kinematics import PandaKinematics
from agentic_grasp.core.arm.closing_axis import closing_axis
from agentic_grasp.core.arm.backend import ArmError, ArmResult
from agentic_grasp.core.grasping.config import HandConfig
from agentic_grasp.core.grasping.hand import HandModel
from agentic_grasp.core.planner.recovery.diagnosis import PAPER_WEIGHTS, assess
from agentic_grasp.core.types import (
    QUALITY_FACTOR_NAMES, FailureType, GraspParameters, GraspType, ObjectInstance, Phase,
    Shape)

CFG = mc.MoveItBackendConfig()
KIN = PandaKinematics()


def _grasp(**kw):
    base = dict(position=[0.5, 0.1, 0.05], approach=[0.0, 0.0, -1.0], width=0.06, force=25.0,
                grasp_type=GraspType.POWER, approach_height=0.10, speed=0.05, wrist_yaw=0.3)
    base.update(kw)
    return GraspParameters(**base)


def _obj(oid="cube_1", shape=Shape.BOX, size=(0.05, 0.05, 0.05), yaw=0.0,
         position=(0.5, 0.1, 0.025)):
    return ObjectInstance(id=oid, category="cube", shape=shape, position=np.array(position),
                          size=np.array(size), yaw=yaw)


# ------------------------------------------------------------------ rotations and frames
def test_quaternion_round_trip_and_known_values():
    rng = np.random.default_rng(3)
    for _ in range(50):
        rpy = rng.uniform(-math.pi, math.pi, 3)
        R = mt.rpy_to_matrix(*rpy)
        q = mt.matrix_to_quaternion(R)
        assert q[3] >= 0.0 and abs(np.linalg.norm(q) - 1.0) < 1e-12
        assert np.allclose(mt.quaternion_to_matrix(q), R, atol=1e-12)
    # A half turn about x is (1, 0, 0, 0); -45 deg about z is (0, 0, -sin 22.5, cos 22.5).
    assert np.allclose(mt.matrix_to_quaternion(np.diag([1.0, -1.0, -1.0])), [1, 0, 0, 0])
    q = mt.matrix_to_quaternion(mt.rpy_to_matrix(0, 0, -math.pi / 4))
    assert np.allclose(q, [0, 0, -math.sin(math.pi / 8), math.cos(math.pi / 8)])


def test_link8_to_tcp_offset_matches_the_panda_kinematics():
    """panda_link8 (flange) composed with the configured offset is the TCP of core FK."""
    rng = np.random.default_rng(0)
    for q in [Q_READY] + [rng.uniform(KIN.q_min, KIN.q_max) for _ in range(20)]:
        frames = KIN.fk_all(q)
        assert np.allclose(frames[7] @ CFG.link_to_tcp(), frames[8], atol=1e-9)


# ------------------------------------------------------------------ motion
def test_pre_grasp_and_grasp_poses_put_the_tcp_where_tcp_pose_says():
    g = _grasp()
    motion = mt.plan_grasp_motion(g, CFG)
    T_tcp = PandaKinematics.tcp_pose(g.position, g.approach, g.wrist_yaw)
    assert np.allclose(motion.grasp.matrix() @ CFG.link_to_tcp(), T_tcp, atol=1e-9)
    T_pre = motion.pre_grasp.matrix() @ CFG.link_to_tcp()
    assert np.allclose(T_pre[:3, 3], g.position - g.approach * g.approach_height)
    assert np.allclose(T_pre[:3, :3], T_tcp[:3, :3])
    # The fingers close along the grasp's closing axis (TCP y).
    assert np.allclose(T_tcp[:3, 1], closing_axis(g.approach, g.wrist_yaw))
    # Top-down: the TCP z axis points down, the flange 0.1034 m above the grasp point.
    assert np.allclose(T_tcp[:3, 2], [0, 0, -1])
    assert motion.grasp.position[2] == pytest.approx(0.05 + 0.1034)


def test_grasp_pose_is_reachable_by_the_panda_ik():
    g = _grasp()
    motion = mt.plan_grasp_motion(g, CFG)
    q = KIN.solve_grasp(g.position, g.approach, g.wrist_yaw)
    assert q is not None
    flange = KIN.fk_all(q)[7]
    # Same flange pose up to the gripper's half-turn symmetry about the approach.
    assert np.allclose(flange[:3, 3], motion.grasp.position, atol=2e-3)


def test_descent_is_a_straight_line_along_the_approach_at_fixed_orientation():
    g = _grasp(approach=[0.3, 0.0, -1.0], approach_height=0.09)
    motion = mt.plan_grasp_motion(g, CFG)
    tcps = [p.matrix() @ CFG.link_to_tcp() for p in motion.descent]
    assert len(tcps) == math.ceil(0.09 / CFG.waypoint_spacing_m)
    start = g.position - g.approach * g.approach_height
    for k, T in enumerate(tcps, start=1):
        expected = start + g.approach * g.approach_height * k / len(tcps)
        assert np.allclose(T[:3, 3], expected, atol=1e-9)
        assert np.allclose(T[:3, :3], tcps[-1][:3, :3], atol=1e-9)
    assert np.allclose(tcps[-1][:3, 3], g.position)


def test_lift_is_vertical_and_split_at_the_liftoff_height():
    g = _grasp(approach=[0.5, 0.0, -1.0])
    motion = mt.plan_grasp_motion(g, CFG)
    liftoff = motion.liftoff[-1].matrix() @ CFG.link_to_tcp()
    top = motion.lift[-1].matrix() @ CFG.link_to_tcp()
    assert np.allclose(liftoff[:3, 3], g.position + [0, 0, CFG.liftoff_height_m])
    assert np.allclose(top[:3, 3], g.position + [0, 0, CFG.lift_height_m])
    # Orientation kept from the grasp (the object does not turn in the hand).
    assert np.allclose(top[:3, :3], motion.tcp_grasp[:3, :3])


def test_velocity_scaling_follows_grasp_speed_over_pilz_limit():
    assert mt.velocity_scaling(0.05, CFG) == pytest.approx(0.05)
    assert mt.velocity_scaling(5.0, CFG) == 1.0
    cfg = mc.MoveItBackendConfig(max_trans_vel_mps=0.5)
    assert mt.plan_grasp_motion(_grasp(speed=0.1), cfg).descent_velocity_scaling == \
        pytest.approx(0.2)


def test_dropoff_pose_is_top_down_at_the_configured_point():
    T = mt.dropoff_pose(CFG).matrix() @ CFG.link_to_tcp()
    assert np.allclose(T[:3, 3], CFG.dropoff_position)
    assert np.allclose(T[:3, 2], [0, 0, -1])


# ------------------------------------------------------------------ gripper goals
def test_open_goal_is_the_commanded_width_clipped_to_the_hand():
    assert mt.gripper_open_goal(_grasp(width=0.06), CFG) == mt.GripperMoveGoal(0.06, 0.1)
    cfg = mc.MoveItBackendConfig(gripper_open_speed_mps=0.5, gripper_max_speed_mps=0.1)
    assert mt.gripper_open_goal(_grasp(width=0.08), cfg).speed == 0.1


def test_grasp_goal_uses_the_perceived_width_along_the_closing_axis():
    box = _obj(size=(0.03, 0.07, 0.05), yaw=0.0)
    # wrist_yaw 0 closes along world y: the 7 cm side; pi/2 closes along x: the 3 cm side.
    along_y = mt.gripper_grasp_goal(_grasp(width=0.08, wrist_yaw=0.0), box, CFG)
    along_x = mt.gripper_grasp_goal(_grasp(width=0.08, wrist_yaw=math.pi / 2), box, CFG)
    assert along_y.width == pytest.approx(0.07)
    assert along_x.width == pytest.approx(0.03)
    assert along_y.epsilon_inner == along_y.epsilon_outer == CFG.grasp_epsilon_m
    assert along_y.force == 25.0 and along_y.speed == CFG.gripper_close_speed_mps
    assert along_y.window == pytest.approx((0.06, 0.08))


def test_grasp_goal_for_a_yawed_box_a_cylinder_and_a_sphere():
    yawed = _obj(size=(0.04, 0.04, 0.05), yaw=math.pi / 4)
    goal = mt.gripper_grasp_goal(_grasp(width=0.08, wrist_yaw=0.0), yawed, CFG)
    assert goal.width == pytest.approx(0.04 * math.sqrt(2))       # across the diagonal
    cyl = _obj(shape=Shape.CYLINDER, size=(0.07, 0.07, 0.22))
    assert mt.gripper_grasp_goal(_grasp(width=0.08), cyl, CFG).width == pytest.approx(0.07)
    ball = _obj(shape=Shape.SPHERE, size=(0.065, 0.065, 0.065))
    assert mt.gripper_grasp_goal(_grasp(width=0.08), ball, CFG).width == pytest.approx(0.065)


def test_grasp_goal_never_expects_more_than_the_opening_nor_a_negative_window():
    big = _obj(size=(0.12, 0.12, 0.05))
    goal = mt.gripper_grasp_goal(_grasp(width=0.05), big, CFG)
    assert goal.width == pytest.approx(0.05)
    thin = _obj(size=(0.005, 0.005, 0.05))
    goal = mt.gripper_grasp_goal(_grasp(width=0.05), thin, CFG)
    assert goal.window[0] >= CFG.min_object_width_m - 1e-12


def test_grasp_goal_without_a_perceived_target_accepts_any_real_contact():
    goal = mt.gripper_grasp_goal(_grasp(width=0.06), None, CFG)
    lo, hi = goal.window
    assert lo == pytest.approx(CFG.min_object_width_m)
    assert hi >= 0.06


def test_finger_width_sums_the_two_finger_joints():
    names = ["panda_joint1", "panda_finger_joint1", "panda_finger_joint2"]
    assert mt.finger_width(names, [0.3, 0.02, 0.021], CFG.gripper_joint_names) == \
        pytest.approx(0.041)
    assert mt.finger_width(names[:2], [0.3, 0.02], CFG.gripper_joint_names) is None


# ------------------------------------------------------------------ planning scene
def test_scene_has_the_table_top_at_z0_and_every_neighbour_but_the_target():
    objects = [_obj("cube_1"), _obj("bottle_1", Shape.CYLINDER, (0.07, 0.07, 0.22),
                                    position=(0.6, -0.1, 0.11)),
               _obj("ball_1", Shape.SPHERE, (0.065,) * 3, position=(0.4, 0.2, 0.0325)),
               _obj("phone_1", size=(0.07, 0.01, 0.15), yaw=0.5, position=(0.7, 0.2, 0.075))]
    specs = {s.id: s for s in mt.scene_collision_objects(objects, "cube_1", CFG)}
    assert set(specs) == {"table", "bottle_1", "ball_1", "phone_1"}
    table = specs["table"]
    assert table.primitive_type == mt.SOLID_BOX and table.frame_id == "panda_link0"
    assert table.pose.position[2] + table.dimensions[2] / 2 == pytest.approx(0.0)
    assert table.dimensions[:2] == (0.6, 0.8)
    pad = CFG.object_padding_m
    bottle = specs["bottle_1"]
    assert bottle.primitive_type == mt.SOLID_CYLINDER
    assert bottle.dimensions == pytest.approx((0.22 + pad, (0.07 + pad) / 2))   # height, radius
    assert specs["ball_1"].primitive_type == mt.SOLID_SPHERE
    assert specs["ball_1"].dimensions == pytest.approx(((0.065 + pad) / 2,))
    phone = specs["phone_1"]
    assert phone.dimensions == pytest.approx((0.07 + pad, 0.01 + pad, 0.15 + pad))
    R = mt.quaternion_to_matrix(phone.pose.orientation)
    assert np.allclose(R, mt.rpy_to_matrix(0, 0, 0.5))
    assert phone.pose.position == pytest.approx((0.7, 0.2, 0.075))


# ------------------------------------------------------------------ observation -> taxonomy
HAND = HandModel(HandConfig())


def _classified(obs, grasp=None, target=None):
    """The MoveIt measurements as the arm's observation, read by the planner's one
    diagnosis against the perceived cube: (outcome, diagnosis)."""
    grasp = grasp or _grasp()
    target = target or _obj()
    observation = mo.arm_observation(obs, grasp)
    a = assess(ArmResult(ArmError.NONE, "attempt executed", observation), grasp, HAND, target,
               [target])
    return a.outcome, a.diagnosis


def _phi(outcome, name):
    return float(outcome.phi[list(QUALITY_FACTOR_NAMES).index(name)])


def test_the_observation_carries_what_was_commanded_and_measured():
    g = _grasp()
    held = _closed(0.04, True, phase=Phase.LIFT, width_after_liftoff_m=0.0398,
                   width_after_lift_m=0.0397, duration_s=4.2)
    obs = mo.arm_observation(held, g)
    assert obs.commanded_width_m == pytest.approx(0.06)
    assert obs.commanded_force_n == pytest.approx(25.0)
    assert obs.commanded_speed_mps == pytest.approx(0.05)
    assert obs.is_grasped and obs.phase_reached == Phase.LIFT and obs.duration_s == 4.2
    assert obs.width_at_contact_m == pytest.approx(0.04)
    assert obs.width_at_liftoff_m == pytest.approx(0.0398)
    assert obs.width_after_lift_m == pytest.approx(0.0397)
    # not wired on the MoveIt arm yet: no wrench, no reflex, no close trace
    assert not obs.wrench_gripped.known and not obs.reflexes and not obs.close_trace_m
    # without the grasp, the measured opening stands for the commanded width
    assert mo.arm_observation(held).commanded_width_m == pytest.approx(0.08)


def test_planning_failure_is_an_unreachable_pose():
    obs = mo.MoveItObservation(planning_error=mo.MOVEIT_ERROR_CODES["NO_IK_SOLUTION"],
                                planning_stage="pre-grasp")
    assert mo.arm_observation(obs).planning_error == "NO_IK_SOLUTION at the pre-grasp pose"
    outcome, diag = _classified(obs)
    assert not outcome.success and diag.failure_type == FailureType.UNREACHABLE_POSE
    assert diag.source == "observation" and "pre-grasp" in diag.detail
    assert _phi(outcome, "position_accuracy") == 0.0
    obs = mo.MoveItObservation(planning_error=mo.MOVEIT_ERROR_CODES["PLANNING_FAILED"],
                                planning_stage="descent", cartesian_fraction=0.4)
    assert _classified(obs)[1].failure_type == FailureType.UNREACHABLE_POSE


def test_goal_in_collision_and_aborted_motion_are_collisions():
    obs = mo.MoveItObservation(planning_error=mo.MOVEIT_ERROR_CODES["GOAL_IN_COLLISION"],
                                planning_stage="pre-grasp")
    assert _classified(obs)[1].failure_type == FailureType.COLLISION
    obs = mo.MoveItObservation(execution_failure="ABORTED", execution_stage="descent")
    assert mo.arm_observation(obs).execution_error == "descent motion stopped: ABORTED"
    outcome, diag = _classified(obs)
    assert diag.failure_type == FailureType.COLLISION and diag.phase == "approach"
    assert _phi(outcome, "approach_clearance") == 0.0


def _closed(width, ok, **kw):
    goal = mt.GripperGraspGoal(0.05, 0.01, 0.01, 0.05, 25.0)
    return mo.MoveItObservation(phase_reached=kw.pop("phase", Phase.CLOSE), grasp_goal=goal,
                                 grasp_action_ok=ok, width_after_close_m=width,
                                 opening_m=0.08, **kw)


def test_gripper_grasp_failure_is_a_width_mismatch_with_its_direction():
    """The Franka Hand's grasp action fails when the fingers stop outside the expected
    width's epsilon window (50 +- 10 mm here): material stopped them, wider or narrower than
    expected, which is no finger closing on nothing."""
    outcome, diag = _classified(_closed(0.075, False), _grasp(width=0.08))   # wider object
    assert diag.failure_type == FailureType.WIDTH_MISMATCH
    assert diag.width_direction == 1                          # open wider next time
    outcome, diag = _classified(_closed(0.012, False), _grasp(width=0.08))   # much narrower
    assert diag.failure_type == FailureType.WIDTH_MISMATCH and diag.width_direction == -1


def test_fingers_closing_on_nothing_is_a_position_error():
    outcome, diag = _classified(_closed(0.0005, False))
    assert diag.failure_type == FailureType.POSITION_ERROR and diag.phase == "close"


def test_object_lost_at_liftoff_is_slip_and_later_is_drop():
    slip = _closed(0.05, True, phase=Phase.LIFT, width_after_liftoff_m=0.0,
                   width_after_lift_m=0.0)
    outcome, diag = _classified(slip)
    assert not outcome.success and diag.failure_type == FailureType.SLIP
    # no wrench on this arm: no load to tell a turn out of the pads from a friction slip
    assert not diag.torque_bound
    drop = _closed(0.05, True, phase=Phase.LIFT, width_after_liftoff_m=0.0495,
                   width_after_lift_m=0.041)
    outcome, diag = _classified(drop)
    assert diag.failure_type == FailureType.DROP
    assert outcome.measurements["width_at_liftoff_m"] == pytest.approx(0.0495)


def test_held_object_after_the_lift_is_a_success_with_full_observed_quality():
    # 40 mm in a 60 mm opening: 10 mm a side, full width compatibility
    held = _closed(0.04, True, phase=Phase.LIFT, width_after_liftoff_m=0.0398,
                   width_after_lift_m=0.0397, duration_s=4.2)
    outcome, diag = _classified(held)
    assert outcome.success and not outcome.events and diag is None
    assert outcome.quality == pytest.approx(1.0) and outcome.duration_s == 4.2
    assert outcome.phase_reached == Phase.LIFT and len(outcome.phi) == 7


def test_failed_attempt_quality_drops_by_the_failed_factor_weight():
    outcome, diag = _classified(_closed(0.0005, False))      # closed on nothing
    assert diag.failure_type == FailureType.POSITION_ERROR
    assert outcome.quality == pytest.approx(1.0 - PAPER_WEIGHTS[0])   # w1, position


def test_system_errors_are_not_grasp_failures():
    assert mo.is_system_error(mo.MOVEIT_ERROR_CODES["INVALID_GROUP_NAME"])
    assert not mo.is_system_error(mo.MOVEIT_ERROR_CODES["NO_IK_SOLUTION"])
    assert mo.moveit_error_name(-31) == "NO_IK_SOLUTION"


# ------------------------------------------------------------------ cancel
def test_cancel_stops_motion_and_never_opens_a_gripper_that_may_hold():
    assert mt.cancel_plan(holding=True, gripper_goal_active=False) == \
        mt.CancelPlan(stop_motion=True, cancel_gripper_goal=False, open_gripper=False)
    assert mt.cancel_plan(holding=False, gripper_goal_active=True) == \
        mt.CancelPlan(stop_motion=True, cancel_gripper_goal=True, open_gripper=False)
    assert mt.cancel_plan(holding=False, gripper_goal_active=False).open_gripper


# ------------------------------------------------------------------ config and params
def test_executor_yaml_moveit_section_builds_a_valid_config():
    params = node_params("executor")
    assert params["arm_backend"] == "sim" and "limits" in params
    cfg = mc.MoveItBackendConfig.from_dict(params["moveit"])
    default = mc.MoveItBackendConfig()              # the yaml documents the defaults
    for f in dataclasses.fields(cfg):
        assert getattr(cfg, f.name) == pytest.approx(getattr(default, f.name)), f.name
    fr3 = yaml.safe_load((paths.config_dir() / "moveit" / "executor_fr3.yaml").read_text())
    cfg = mc.MoveItBackendConfig.from_dict(fr3["executor"]["ros__parameters"]["moveit"])
    assert cfg.planning_group == "fr3_arm" and cfg.gripper_interface == "franka"
    assert np.allclose(cfg.link_to_tcp(), np.eye(4))
    assert cfg.mapping_dict("srdf_mappings") == {"hand": "true", "ee_id": "franka_hand"}


@pytest.mark.parametrize("change", [
    {"cartesian_method": "rrt"}, {"gripper_interface": "robotiq"}, {"lift_height_m": 0.0},
    {"liftoff_height_m": 0.2}, {"transit_velocity_scaling": 1.5}, {"table_size": [0.6, 0.8]},
    {"urdf_mappings": ["no-separator"]}, {"startup_attempts": -1}, {"startup_retry_s": 0.0},
    {"at_rest_velocity_radps": 0.0}])
def test_bad_moveit_config_is_rejected(change):
    with pytest.raises(ConfigError):
        cfg = mc.MoveItBackendConfig.from_dict(change)
        cfg.mapping_dict("urdf_mappings")


def test_unknown_moveit_parameter_is_rejected():
    with pytest.raises(ConfigError, match="unknown moveit parameters: ik_lnk"):
        mc.MoveItBackendConfig.from_dict({"ik_lnk": "x"})


def test_resolve_path_forms():
    shares = {"franka_bringup": "/opt/ros/jazzy/share/franka_bringup"}
    assert mc.resolve_path("package://franka_bringup/urdf/a.xacro", "/pkg", shares.__getitem__) \
        == "/opt/ros/jazzy/share/franka_bringup/urdf/a.xacro"
    assert mc.resolve_path("config/x.yaml", "/pkg", shares.__getitem__) == \
        os.path.join("/pkg", "config/x.yaml")
    assert mc.resolve_path("/abs/x.yaml", "/pkg", shares.__getitem__) == "/abs/x.yaml"
    with pytest.raises(ConfigError):
        mc.resolve_path("package://nopath", "/pkg", shares.__getitem__)


def _shipped_pilz_limits():
    spec = CFG.pilz_cartesian_limits_file
    assert spec.startswith("package://agentic_grasp/config/")
    path = mc.resolve_path(spec, "/unused", lambda _pkg: str(paths.data_root()))
    assert os.path.isfile(path), path
    return yaml.safe_load(open(path).read())


def test_moveit_params_keep_joint_and_cartesian_limits_and_overlay_wins():
    joint_limits = {"robot_description_planning": {"robot_description_planning": {
        "joint_limits": {"panda_joint1": {"max_acceleration": 3.75}}}}}
    # What MoveItConfigsBuilder.pilz_cartesian_limits(file_path=shipped file) holds.
    builder_cartesian = {"robot_description_planning": _shipped_pilz_limits()}
    pipelines = {"planning_pipelines": ["ompl"], "ompl": {"planning_plugins": ["x"],
                                                         "planner_configs": {"A": 1}}}
    overlay = yaml.safe_load((paths.config_dir() / "moveit" / "moveit_py.yaml").read_text())
    params = mc.combine_moveit_params([pipelines, joint_limits, builder_cartesian], overlay)
    planning = params["robot_description_planning"]
    assert planning["joint_limits"]["panda_joint1"]["max_acceleration"] == 3.75
    assert planning["cartesian_limits"]["max_trans_vel"] == CFG.max_trans_vel_mps
    assert planning["cartesian_limits"]["max_trans_dec"] < 0.0
    assert params["planning_pipelines"] == {"pipeline_names": ["ompl",
                                                               "pilz_industrial_motion_planner"]}
    assert params["ompl"]["planner_configs"] == {"A": 1}            # kept from the package
    assert params["ompl"]["planning_plugins"] == ["ompl_interface/OMPLPlanner"]
    for ns in (CFG.transit_request, CFG.cartesian_request):
        assert params[ns]["plan_request_params"]["planning_pipeline"] in \
            params["planning_pipelines"]["pipeline_names"]
    assert params[CFG.cartesian_request]["plan_request_params"]["planner_id"] == "LIN"


def test_pilz_limits_are_shipped_here_checked_and_the_only_copy():
    """franka_fr3_moveit_config has no pilz_cartesian_limits.yaml (no franka_ros2 tag up to
    v3.4.0), and MoveItConfigsBuilder raises without one once Pilz is enabled: the backend
    passes this package's file for every robot."""
    limits = mc.cartesian_limits_from_yaml(_shipped_pilz_limits(), CFG)
    assert limits["max_trans_vel"] == CFG.max_trans_vel_mps
    fr3 = yaml.safe_load((paths.config_dir() / "moveit" / "executor_fr3.yaml").read_text())
    fr3_cfg = mc.MoveItBackendConfig.from_dict(fr3["executor"]["ros__parameters"]["moveit"])
    assert fr3_cfg.pilz_cartesian_limits_file == CFG.pilz_cartesian_limits_file
    assert not fr3_cfg.pilz_cartesian_limits_file.startswith("config/")   # not the FR3 package
    overlay = yaml.safe_load((paths.config_dir() / "moveit" / "moveit_py.yaml").read_text())
    assert "robot_description_planning" not in overlay              # one source of the limits
    with pytest.raises(ConfigError, match="differs"):
        mc.cartesian_limits_from_yaml(_shipped_pilz_limits(),
                                      dataclasses.replace(CFG, max_trans_vel_mps=0.5))
    with pytest.raises(ConfigError, match="missing or malformed"):
        mc.cartesian_limits_from_yaml({"cartesian_limits": {"max_trans_vel": 1.0}}, CFG)
    with pytest.raises(ConfigError, match="max_trans_dec < 0"):
        mc.cartesian_limits_from_yaml({"cartesian_limits": {
            "max_trans_vel": 1.0, "max_trans_acc": 2.0, "max_trans_dec": 5.0,
            "max_rot_vel": 1.0}}, CFG)


def test_scene_monitor_options_hold_only_keys_jazzy_reads():
    """PlanningSceneMonitorOptions::load (moveit_cpp.hpp:69-75, 2.12.4) reads three keys; the
    topics are constants, so a topic key here would be silently ignored."""
    overlay = yaml.safe_load((paths.config_dir() / "moveit" / "moveit_py.yaml").read_text())
    options = overlay["planning_scene_monitor_options"]
    assert set(options) <= {"name", "robot_description", "wait_for_initial_state_timeout"}
    assert options["wait_for_initial_state_timeout"] > 0.0


def test_start_state_velocities_are_zeroed_and_the_fastest_joint_reported():
    measured = {"panda_joint1": 3e-4, "panda_joint2": -0.02, "panda_finger_joint1": math.nan}
    zeroed, fastest = mt.rest_start_velocities(measured)
    assert zeroed == dict.fromkeys(measured, 0.0)
    # Pilz accepts only |v| < 1e-8 for every group joint (trajectory_generator.cpp:147-151).
    assert all(abs(v) < 1e-8 for v in zeroed.values())
    assert fastest == pytest.approx(0.02)
    assert mt.rest_start_velocities({}) == ({}, 0.0)


def test_scene_diff_removes_vanished_objects_and_adds_every_current_one():
    table = mt.table_collision_object(CFG)
    cup = mt.object_collision_object(_obj("cup_1", Shape.CYLINDER), CFG)
    ops = mt.scene_diff(["table", "cup_1", "box_9"], [table, cup])
    assert (mt.COLLISION_REMOVE, "box_9", None) in ops
    assert [o for o in ops if o[0] == mt.COLLISION_REMOVE] == [(mt.COLLISION_REMOVE, "box_9", None)]
    assert [(o[1], o[2]) for o in ops if o[0] == mt.COLLISION_ADD] == [("table", table),
                                                                      ("cup_1", cup)]
    assert mt.scene_diff([], []) == []
    # moveit_msgs/msg/CollisionObject: ADD = 0, REMOVE = 1.
    assert (mt.COLLISION_ADD, mt.COLLISION_REMOVE) == (0, 1)


def test_moveit_start_is_retried_after_a_runtime_error_and_reported():
    calls, reports, sleeps = [], [], []

    def start():
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("Unable to configure planning scene monitor")
        return "moveit"

    result = mt.start_with_retries(start, attempts=0, retry_s=5.0,
                                   on_failure=lambda n, e: reports.append((n, str(e))),
                                   sleep=sleeps.append)
    assert result == "moveit" and len(calls) == 3
    assert reports == [(1, "Unable to configure planning scene monitor"),
                       (2, "Unable to configure planning scene monitor")]
    assert sleeps == [5.0, 5.0]


def test_moveit_start_gives_up_after_the_configured_attempts():
    reports = []

    def start():
        raise mt.JointStatesMissing("no JointState on /joint_states within 5 s")

    with pytest.raises(ConfigError, match="after 2 attempt"):
        mt.start_with_retries(start, attempts=2, retry_s=0.0,
                              on_failure=lambda n, e: reports.append(n), sleep=lambda _s: None)
    assert reports == [1, 2]
    with pytest.raises(KeyError):                   # not a start-up failure: not retried
        mt.start_with_retries(lambda: {}["x"], attempts=0, retry_s=0.0,
                              on_failure=lambda n, e: None, sleep=lambda _s: None)


def test_a_moveit_configuration_error_is_not_retried():
    reports = []

    def start():
        raise RuntimeError("Unable to construct robot model. Please make sure all needed "
                           "information is on the parameter server.")

    with pytest.raises(ConfigError, match="cannot start: Unable to construct robot model"):
        mt.start_with_retries(start, attempts=0, retry_s=0.0,
                              on_failure=lambda n, e: reports.append(n), sleep=lambda _s: None)
    assert reports == [1]
    assert mt.is_transient_start_failure(RuntimeError(mt.PSM_START_FAILURE))


def test_camera_extrinsics_file_matches_the_simulated_camera():
    data = yaml.safe_load((paths.config_dir() / "moveit" / "camera_extrinsics.yaml").read_text())
    ext = mc.camera_extrinsics_from_dict(data)
    assert ext.parent_frame == "panda_link0"
    assert ext.child_frame == Camera().frame_id
    assert np.allclose(ext.T_parent_child, Camera().T_world_cam, atol=1e-6)
    args = ext.static_transform_args()
    assert args[args.index("--frame-id") + 1] == "panda_link0"
    with pytest.raises(ConfigError):
        mc.camera_extrinsics_from_dict({"camera_extrinsics": {"parent_frame": "a"}})


# ------------------------------------------------------------------ import guard
@pytest.mark.skipif(any(importlib.util.find_spec(m) is None
                        for m in ("rclpy", "agentic_grasp_interfaces")),
                    reason="the backend module needs rclpy and the built interfaces before it "
                           "reaches moveit_py (scripts/env.sh sets them up)")
@pytest.mark.skipif(importlib.util.find_spec("moveit") is not None,
                    reason="moveit_py is installed: the import succeeds")
def test_moveit_backend_import_names_moveit_py_when_missing():
    proc = subprocess.run([sys.executable, "-c", "import agentic_grasp.ros.executor.moveit.arm"],
                          capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and "moveit_py" in proc.stderr
    # The package itself and the translation module import without MoveIt.
    proc = subprocess.run([sys.executable, "-c", "import agentic_grasp.ros.executor.moveit, "
                           "agentic_grasp.ros.executor.moveit.translation"],
                          capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert proc.returncode == 0, proc.stderr


def test_fr3_params_score_quality_with_the_simulators_eq2_weights():
    """Q on the robot means what it means in the simulator: the FR3 params file gives the
    MoveIt backend the same Eq. 2 weights as config/sim.yaml."""
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[5] / "config"
    fr3 = yaml.safe_load((root / "moveit" / "executor_fr3.yaml").read_text())
    sim = yaml.safe_load((root / "sim.yaml").read_text())
    sim_params = next(iter(sim.values()))["ros__parameters"]
    assert fr3["executor"]["ros__parameters"]["quality"]["weights"] == \
        sim_params["quality"]["weights"]
