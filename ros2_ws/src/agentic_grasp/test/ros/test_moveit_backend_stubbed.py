"""ros/executor/moveit/arm.py and planning.py against stand-ins of moveit_py, moveit_msgs and
shape_msgs.

MoveIt cannot be installed here. These fakes reproduce only the upstream API surface the
backend calls (moveit2 2.12.4 moveit_py bindings: PlanningComponent.set_start_state(
robot_state=), RobotState.joint_velocities get/set and __copy__, PlanningSceneMonitor
read_only/read_write, MoveItPy.shutdown; moveit_msgs ApplyPlanningScene), so the tests pin
what the backend sends, not what MoveIt does with it.
"""
import importlib
import importlib.util
import sys
import types
import weakref
from contextlib import contextmanager

import numpy as np
import pytest

from agentic_grasp.ros.executor.moveit import translation as mt
from agentic_grasp.ros.executor.moveit import config as mc
from agentic_grasp.ros.executor.moveit import outcome as mo
from agentic_grasp.core import paths
from agentic_grasp.core.arm.backend import ArmError
from agentic_grasp.core.sim.params import QualityParams
from agentic_grasp.core.types import ObjectInstance, Shape

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None
        for m in ("rclpy", "geometry_msgs", "sensor_msgs", "agentic_grasp_interfaces")),
    reason="moveit_arm imports rclpy and the built interfaces (scripts/env.sh sets them up)")


# ------------------------------------------------------------------ stand-ins
class _Msg:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class CollisionObject:
    ADD, REMOVE = 0, 1

    def __init__(self, id="", operation=0):
        self.id, self.operation = id, operation
        self.header = _Msg(frame_id="")
        self.primitives, self.primitive_poses, self.pose = [], [], None


class SolidPrimitive:
    BOX, SPHERE, CYLINDER = 1, 2, 3

    def __init__(self, type=0, dimensions=()):
        self.type, self.dimensions = type, list(dimensions)


class ApplyPlanningScene:
    class Request:
        def __init__(self):
            self.scene = _Msg(is_diff=False, robot_state=_Msg(is_diff=False),
                              world=_Msg(collision_objects=[]))


class GetCartesianPath:
    class Request:
        pass


class RobotState:
    def __init__(self, velocities):
        self._v = dict(velocities)

    @property
    def joint_velocities(self):
        return dict(self._v)

    @joint_velocities.setter
    def joint_velocities(self, values):
        self._v.update(values)

    def __copy__(self):
        return RobotState(self._v)

    def update(self):
        pass


class _Scene:
    def __init__(self, state):
        self.current_state = state
        self.applied = []

    def apply_collision_object(self, msg):
        self.applied.append(msg)


class _Monitor:
    def __init__(self, state):
        self.scene = _Scene(state)

    @contextmanager
    def read_only(self):
        yield self.scene

    @contextmanager
    def read_write(self):
        yield self.scene


class _Future:
    def __init__(self, result):
        self._result = result

    def add_done_callback(self, callback):
        callback(self)

    def result(self):
        return self._result


class _Client:
    def __init__(self, response):
        self.response, self.requests = response, []

    def wait_for_service(self, timeout_sec):
        return True

    def call_async(self, request):
        self.requests.append(request)
        return _Future(self.response)


class _Logger:
    def __init__(self):
        self.lines = []

    def info(self, text):
        self.lines.append(("info", text))

    def warning(self, text):
        self.lines.append(("warning", text))

    def error(self, text):
        self.lines.append(("error", text))


class _PlanningComponent:
    def __init__(self):
        self.calls = []

    def set_start_state_to_current_state(self):
        self.calls.append(("current", None))

    def set_start_state(self, configuration_name=None, robot_state=None):
        self.calls.append(("start", robot_state))

    def set_goal_state(self, **kw):
        self.calls.append(("goal", kw))

    def plan(self, single_plan_parameters=None):
        return _PlanResult()


class _PlanResult:
    trajectory = "trajectory"

    def __bool__(self):
        return True


class MoveItPy:
    instances = []

    def __init__(self, node_name="moveit_py", config_dict=None, **kw):
        self.node_name, self.config_dict, self.kwargs = node_name, config_dict, kw
        self.shut_down = False
        MoveItPy.instances.append(weakref.ref(self))

    def shutdown(self):
        self.shut_down = True


class PlanRequestParameters:
    def __init__(self, moveit, namespace):
        self.namespace = namespace


class _Builder:
    calls = []

    def __init__(self, robot_name, package_name=None):
        _Builder.calls[:] = [("init", robot_name, package_name)]

    def __getattr__(self, name):
        def record(*args, **kw):
            _Builder.calls.append((name, args, kw))
            return self
        return record

    def to_moveit_configs(self):
        _Builder.calls.append(("to_moveit_configs", (), {}))
        return _Msg(robot_description={"robot_description": "<robot/>"})


def _module(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


@pytest.fixture
def moveit_arm(monkeypatch):
    stubs = {
        "moveit": _module("moveit"), "moveit.core": _module("moveit.core"),
        "moveit.core.robot_trajectory": _module("moveit.core.robot_trajectory",
                                                RobotTrajectory=object),
        "moveit.planning": _module("moveit.planning", MoveItPy=MoveItPy,
                                   PlanRequestParameters=PlanRequestParameters),
        "moveit_configs_utils": _module("moveit_configs_utils", MoveItConfigsBuilder=_Builder),
        "moveit_msgs": _module("moveit_msgs"),
        "moveit_msgs.msg": _module("moveit_msgs.msg", CollisionObject=CollisionObject),
        "moveit_msgs.srv": _module("moveit_msgs.srv", ApplyPlanningScene=ApplyPlanningScene,
                                   GetCartesianPath=GetCartesianPath),
        "shape_msgs": _module("shape_msgs"),
        "shape_msgs.msg": _module("shape_msgs.msg", SolidPrimitive=SolidPrimitive),
    }
    # MoveIt's own packages are always replaced; shape_msgs only where it is missing.
    replace = {name for name in stubs if name.startswith("moveit")
               or importlib.util.find_spec(name.split(".")[0]) is None}
    for name in replace:
        monkeypatch.setitem(sys.modules, name, stubs[name])
    backend_modules = ("agentic_grasp.ros.executor.moveit.arm",
                       "agentic_grasp.ros.executor.moveit.planning")
    for name in backend_modules:
        monkeypatch.delitem(sys.modules, name, raising=False)
    module = importlib.import_module("agentic_grasp.ros.executor.moveit.arm")
    yield module
    for name in backend_modules:
        sys.modules.pop(name, None)


def _backend(moveit_arm, velocities=None, **cfg):
    backend = moveit_arm.MoveItArmBackend.__new__(moveit_arm.MoveItArmBackend)
    backend.cfg = mc.MoveItBackendConfig(**cfg)
    backend.quality = QualityParams()
    backend._log = _Logger()
    backend._psm = _Monitor(RobotState(velocities or {"panda_joint1": 0.0}))
    backend._arm = _PlanningComponent()
    backend._moveit = MoveItPy()
    backend._tem = object()
    backend._objects, backend._scene_ids, backend._closed = [], [], False
    backend._cartesian = None
    backend._apply_scene = None
    destroyed = []
    backend._node = types.SimpleNamespace(destroyed=destroyed, destroy_client=destroyed.append)
    backend._gripper = types.SimpleNamespace(destroyed=False)
    backend._gripper.destroy = lambda: setattr(backend._gripper, "destroyed", True)
    return backend


# ------------------------------------------------------------------ tests
def test_every_plan_starts_from_the_current_state_at_rest(moveit_arm):
    measured = {"panda_joint1": 4e-4, "panda_joint2": -2e-3, "panda_finger_joint1": 1e-3}
    backend = _backend(moveit_arm, measured)
    trajectory, code = backend._plan_to(mt.Pose((0.4, 0.0, 0.3), (1.0, 0.0, 0.0, 0.0)),
                                        "cartesian", 0.05)
    assert (trajectory, code) == ("trajectory", None)
    kinds = [kind for kind, _ in backend._arm.calls]
    assert "current" not in kinds                    # would carry the measured velocities
    start = next(state for kind, state in backend._arm.calls if kind == "start")
    assert start.joint_velocities == dict.fromkeys(measured, 0.0)
    assert backend._psm.scene.current_state.joint_velocities == measured   # a copy was zeroed
    assert not [line for line in backend._log.lines if line[0] == "warning"]


def test_a_clearly_moving_arm_is_reported_before_planning(moveit_arm):
    backend = _backend(moveit_arm, {"panda_joint4": 0.3})
    backend._plan_to(mt.Pose((0.4, 0.0, 0.3), (1.0, 0.0, 0.0, 0.0)), "transit", None)
    warnings = [text for kind, text in backend._log.lines if kind == "warning"]
    assert len(warnings) == 1 and "0.300 rad/s" in warnings[0]


def test_service_mode_sends_the_same_scene_to_move_group(moveit_arm):
    backend = _backend(moveit_arm, cartesian_method="service")
    backend._apply_scene = _Client(_Msg(success=True))
    backend._scene_ids = ["table", "gone_1"]
    backend._objects = [
        ObjectInstance(id="cup_1", category="mug", shape=Shape.CYLINDER,
                       position=np.array([0.5, 0.1, 0.05]), size=np.array([0.08, 0.08, 0.1])),
        ObjectInstance(id="banana_1", category="banana", shape=Shape.BOX,
                       position=np.array([0.6, -0.1, 0.02]), size=np.array([0.18, 0.04, 0.04]))]
    backend._update_scene("banana_1", lambda: False)
    applied = backend._psm.scene.applied
    assert [(m.id, m.operation) for m in applied] == [("gone_1", 1), ("table", 0), ("cup_1", 0)]
    (request,) = backend._apply_scene.requests
    assert request.scene.is_diff is True and request.scene.robot_state.is_diff is True
    assert request.scene.world.collision_objects == applied          # same objects, same order
    assert backend._scene_ids == ["table", "cup_1"]


def test_service_mode_refused_scene_is_a_backend_error(moveit_arm):
    backend = _backend(moveit_arm, cartesian_method="service")
    backend._apply_scene = _Client(_Msg(success=False))
    with pytest.raises(RuntimeError, match="did not apply the planning scene"):
        backend._update_scene("x", lambda: False)


def test_pilz_mode_does_not_need_move_group(moveit_arm):
    backend = _backend(moveit_arm)                   # cartesian_method pilz_lin
    backend._update_scene("x", lambda: False)
    assert [m.id for m in backend._psm.scene.applied] == ["table"]


def test_close_shuts_moveit_down_and_deletes_it_once(moveit_arm):
    backend = _backend(moveit_arm, cartesian_method="service")
    backend._cartesian, backend._apply_scene = "cartesian client", "scene client"
    moveit = weakref.ref(backend._moveit)
    backend.close()
    assert moveit() is None                          # deleted now, not at interpreter exit
    assert backend._gripper.destroyed
    assert backend._node.destroyed == ["cartesian client", "scene client"]
    assert backend._arm is None and backend._psm is None and backend._tem is None
    assert ("info", "MoveItPy shut down; deleting MoveItCpp") in backend._log.lines
    backend.close()                                  # a second call does nothing
    assert backend._node.destroyed == ["cartesian client", "scene client"]


def test_close_calls_shutdown_before_dropping_moveit(moveit_arm):
    order = []

    class Recording(MoveItPy):
        def shutdown(self):
            order.append("shutdown")

    backend = _backend(moveit_arm)
    backend._moveit = Recording()
    weakref.finalize(backend._moveit, order.append, "deleted")
    backend.close()
    assert order == ["shutdown", "deleted"]


def test_start_waits_for_joint_states_and_remaps_only_another_topic(moveit_arm, monkeypatch):
    wfm = moveit_arm                 # the backend's own name for rclpy's wait_for_message
    seen = []
    monkeypatch.setattr(wfm, "wait_for_message",
                        lambda msg_type, node, topic, **kw: (seen.append(topic) or (False, None)))
    backend = _backend(moveit_arm, joint_state_topic="/franka/joint_states", startup_retry_s=0.5)
    backend._node = object()
    with pytest.raises(mt.JointStatesMissing, match="no JointState on /franka/joint_states"):
        backend._start_moveit({"p": 1})
    monkeypatch.setattr(wfm, "wait_for_message", lambda *a, **kw: (True, object()))
    moveit = backend._start_moveit({"p": 1})
    # No second /get_planning_scene server beside move_group's.
    assert moveit.kwargs == {"provide_planning_service": False,
                             "remappings": {"joint_states": "/franka/joint_states"}}
    assert moveit.config_dict == {"p": 1}
    backend.cfg = mc.MoveItBackendConfig()           # /joint_states: MoveItCpp's own topic
    assert backend._start_moveit({}).kwargs == {"provide_planning_service": False}


def test_startup_failure_message_names_the_joint_state_cause(moveit_arm):
    backend = _backend(moveit_arm)
    backend._report_start_failure(2, RuntimeError("Unable to configure planning scene monitor"))
    (kind, text), = list(backend._log.lines)
    assert kind == "error" and "attempt 2" in text and "/joint_states" in text
    assert "wait_for_initial_state_timeout" in text and "retrying in 5 s" in text
    backend._report_start_failure(1, RuntimeError("Unable to construct robot model"))
    assert backend._log.lines[-1][1].endswith("not retried: a configuration error")


def test_builder_gets_this_packages_pilz_limits(moveit_arm, monkeypatch, tmp_path):
    shares = {"agentic_grasp": str(paths.data_root()), "franka_fr3_moveit_config": str(tmp_path)}
    monkeypatch.setattr(moveit_arm, "get_package_share_directory", shares.__getitem__)
    backend = _backend(moveit_arm, robot_name="fr3",
                       moveit_config_package="franka_fr3_moveit_config",
                       controllers_file="package://agentic_grasp/config/moveit/"
                                        "controllers_fr3.yaml")
    params = backend._moveit_params()
    (call,) = [c for c in _Builder.calls if c[0] == "pilz_cartesian_limits"]
    limits_file = call[2]["file_path"]
    assert limits_file == str(paths.config_dir() / "moveit" / "pilz_cartesian_limits.yaml")
    names = [c[0] for c in _Builder.calls]
    assert names.index("pilz_cartesian_limits") < names.index("to_moveit_configs")
    assert params["planning_scene_monitor_options"]["wait_for_initial_state_timeout"] > 0


WEIGHTS = [0.3, 0.1, 0.1, 0.1, 0.1, 0.1, 0.2]


def test_the_eq2_weights_are_declared_as_the_sim_nodes(moveit_arm):
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    node = Node("moveit_quality_test",
                parameter_overrides=[Parameter("quality.weights", value=WEIGHTS)])
    try:
        quality = moveit_arm.declare_quality(node)
        assert quality.weights == tuple(WEIGHTS)
        assert [n for n in node._parameters if n.startswith("quality.")] == \
            ["quality.weights"]                              # noqa: SLF001 - what it declared
        assert "Eq. 2" in node.describe_parameter("quality.weights").description
    finally:
        node.destroy_node()


def test_a_canceled_attempt_reports_the_observation_of_what_it_reached(moveit_arm,
                                                                       monkeypatch):
    """A cancel mid-attempt still reports what the arm measured up to there, with the grasp
    it was commanded, for the planner to read (it scores Q, not the backend)."""
    seen = []

    def observed(obs, grasp=None):
        seen.append((obs, grasp))
        return mo.arm_observation(obs, grasp)

    backend = _backend(moveit_arm)
    backend._holding = False
    backend._gripper = types.SimpleNamespace(ready=lambda timeout_s: True, goal_active=False,
                                             move=lambda *_: True)

    def canceled(*_args):
        raise moveit_arm._Canceled()

    monkeypatch.setattr(backend, "_attempt", canceled)
    monkeypatch.setattr(moveit_arm, "arm_observation", observed)
    grasp = types.SimpleNamespace(width=0.04, speed=0.05, force=20.0)
    result = backend.execute("cup_0", grasp, lambda *_: None, lambda: True)
    assert result.error == ArmError.CANCELED and len(seen) == 1 and seen[0][1] is grasp
    obs = result.observation
    assert obs is not None and obs.commanded_width_m == pytest.approx(0.04)
    assert obs.commanded_force_n == pytest.approx(20.0) and obs.is_grasped is None
