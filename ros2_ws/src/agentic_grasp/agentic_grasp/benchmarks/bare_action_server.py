"""A do-nothing ExecuteGrasp server: the bare rclpy action round trip, for comparison."""
import rclpy
from rclpy.action import ActionServer
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

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
    rclpy.init(args=args)
    node = None
    try:
        node = BareActionServer()
        executor = MultiThreadedExecutor(num_threads=4)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.try_shutdown()


if __name__ == "__main__":
    main()
