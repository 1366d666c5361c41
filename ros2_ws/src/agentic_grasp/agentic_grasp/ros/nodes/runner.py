"""The one ``main()`` body every node shares: init, spin an executor, clean up.

Executors: a node whose callbacks never wait on another callback of the same node (the
retrieval and scene-graph services: one request in, one answer out) spins rclpy's
EventsExecutor (``rclpy.experimental``, C++, single-threaded), which costs far less per
callback than the MultiThreadedExecutor's Python wait-set loop. It runs every callback on one
thread whatever the callback groups say, so a node that blocks in one callback until another
runs (the planner's goal waits on its peers' replies, the executor's goal on the simulator's
phase replies, perception's request on camera frames, the simulator's abort landing while a
phase is still moving) would deadlock or lose that behaviour there, and keeps the
MultiThreadedExecutor. ``AGENTIC_GRASP_EXECUTOR=multi`` (or ``events``) overrides every node's
choice, for measuring one against the other (README, "ROS overhead").

Shutdown order matters: the executor is shut down (its worker threads joined) before the node
is destroyed, so no callback runs on a destroyed entity during Ctrl-C.

Every node announces its liveliness (agentic_grasp.ros.liveness), so its peers learn within a
lease when its process dies.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, List, Optional, Tuple, Type

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from agentic_grasp.core.supervision import EXIT_CONFIG
from agentic_grasp.ros.liveness import announce


#: Environment variable that overrides every node's executor: "multi" or "events".
EXECUTOR_ENV = "AGENTIC_GRASP_EXECUTOR"
EXECUTORS = ("multi", "events")


def make_executor(kind: str, num_threads: int) -> Executor:
    """The executor named ``kind`` (after the EXECUTOR_ENV override)."""
    kind = os.environ.get(EXECUTOR_ENV, "").strip().lower() or kind
    if kind not in EXECUTORS:
        raise ValueError(f"{EXECUTOR_ENV} must be one of {', '.join(EXECUTORS)}, got {kind!r}")
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    return MultiThreadedExecutor(num_threads=num_threads)


def spin_node(factory: Callable[[], Node], num_threads: int = 2,
              args: Optional[List[str]] = None,
              fatal: Tuple[Type[BaseException], ...] = (), executor_kind: str = "multi"
              ) -> None:
    """Run one node until Ctrl-C/SIGTERM; exceptions in ``fatal`` raised while building it are
    logged as FATAL and end the process with status EXIT_CONFIG (78): supervisors see it and
    do not restart a node whose configuration cannot work. ``executor_kind``: "multi" (a
    MultiThreadedExecutor of ``num_threads``) or "events" (module docstring)."""
    rclpy.init(args=args)
    node = None
    executor = None
    code = 0
    try:
        node = factory()
        announce(node)
        executor = make_executor(executor_kind, num_threads)
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
