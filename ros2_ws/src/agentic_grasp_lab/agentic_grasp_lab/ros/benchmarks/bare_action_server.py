"""A do-nothing ExecuteGrasp server: the bare rclpy action round trip, for comparison."""
from rclpy.action import ActionServer
from rclpy.node import Node

from agentic_grasp.ros.common.runner import spin_node
from agentic_grasp_interfaces.action import ExecuteGrasp


class BareActionServer(Node):
    def __init__(self) -> None:
        super().__init__("bare_action_server")
        # Same result retention as the executor, so the comparison is like for like.
        self._server = ActionServer(self, ExecuteGrasp, "bare_execute_grasp", self._execute,
                                    result_timeout=30)

    def _execute(self, goal_handle):
        goal_handle.succeed()
        return ExecuteGrasp.Result()


def main(args=None) -> None:
    # The same executor as the executor node (4 threads), so only the work differs.
    spin_node(BareActionServer, num_threads=4, args=args)


if __name__ == "__main__":
    main()
