"""The executor's MoveIt 2 arm backend. Only arm.py and planning.py talk to MoveIt (moveit_py); the
translation, outcome and config modules import no ROS or MoveIt package and are unit-tested
without them."""
