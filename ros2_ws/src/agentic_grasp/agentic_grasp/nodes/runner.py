"""The one ``main()`` body every node shares: init, spin a MultiThreadedExecutor, clean up.

Shutdown order matters: the executor is shut down (its worker threads joined) before the node
is destroyed, so no callback runs on a destroyed entity during Ctrl-C.
"""
from __future__ import annotations

import sys
from typing import Callable, List, Optional, Tuple, Type

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node


def spin_node(factory: Callable[[], Node], num_threads: int = 2,
              args: Optional[List[str]] = None,
              fatal: Tuple[Type[BaseException], ...] = ()) -> None:
    """Run one node until Ctrl-C/SIGTERM; exceptions in ``fatal`` raised while building it are
    logged as FATAL and end the process with status 1 (launch and supervisors see it)."""
    rclpy.init(args=args)
    node = None
    executor = None
    code = 0
    try:
        node = factory()
        executor = MultiThreadedExecutor(num_threads=num_threads)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except fatal as exc:  # type: ignore[misc]
        rclpy.logging.get_logger(getattr(factory, "NODE_NAME", "agentic_grasp")).fatal(
            f"cannot start: {exc}")
        code = 1
    finally:
        if executor is not None:
            executor.shutdown(timeout_sec=2.0)
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.try_shutdown()
    if code:
        sys.exit(code)
