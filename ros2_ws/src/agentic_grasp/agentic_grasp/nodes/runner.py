"""The one ``main()`` body every node shares: init, spin a MultiThreadedExecutor, clean up.

Shutdown order matters: the executor is shut down (its worker threads joined) before the node
is destroyed, so no callback runs on a destroyed entity during Ctrl-C.

Every node announces its liveliness (agentic_grasp.liveness), so its peers learn within a
lease when its process dies.
"""
from __future__ import annotations

import sys
from typing import Callable, List, Optional, Tuple, Type

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from agentic_grasp.core.supervision import EXIT_CONFIG
from agentic_grasp.liveness import announce


def spin_node(factory: Callable[[], Node], num_threads: int = 2,
              args: Optional[List[str]] = None,
              fatal: Tuple[Type[BaseException], ...] = ()) -> None:
    """Run one node until Ctrl-C/SIGTERM; exceptions in ``fatal`` raised while building it are
    logged as FATAL and end the process with status EXIT_CONFIG (78): supervisors see it and
    do not restart a node whose configuration cannot work."""
    rclpy.init(args=args)
    node = None
    executor = None
    code = 0
    try:
        node = factory()
        announce(node)
        executor = MultiThreadedExecutor(num_threads=num_threads)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except fatal as exc:  # type: ignore[misc]
        rclpy.logging.get_logger(getattr(factory, "NODE_NAME", "agentic_grasp")).fatal(
            f"cannot start: {exc}")
        code = EXIT_CONFIG
    except Exception:
        # SIGINT/SIGTERM shut the context down while the executor was building its wait set:
        # rclpy raises its RCLError ("the given context is not valid") instead of
        # ExternalShutdownException. That is the same orderly stop; anything else is not.
        if executor is None or rclpy.ok():
            raise
    finally:
        if executor is not None:
            executor.shutdown(timeout_sec=2.0)
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.try_shutdown()
    if code:
        sys.exit(code)
