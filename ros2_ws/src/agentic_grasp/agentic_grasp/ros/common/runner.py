"""The one ``main()`` body every node shares: init, spin an executor, clean up.

Executors: every node spins rclpy's MultiThreadedExecutor. rclpy's EventsExecutor
(``rclpy.experimental``, C++, single-threaded) costs far less per callback, but with the
pinned rclpy 7.1.6 and Fast DDS here it answered no service call at all (a plain service
served by it, or called from a client spun by it: every call timed out; README, "ROS overhead";
``python -m agentic_grasp.ros.benchmarks.executor_probe`` repeats it with no project code),
and it runs every callback on one thread whatever the callback groups say, so a node that
blocks in one callback until another runs (the planner's goal waits on its peers' replies,
the executor's goal on the simulator's reply, perception's request on camera frames, the
simulator's abort landing while an attempt moves) would deadlock there anyway. The choice
stays (``spin_node(..., executor_kind="events")``, and ``AGENTIC_GRASP_EXECUTOR=multi`` or
``events`` overrides every node's), to measure it again on a newer rclpy.

Shutdown order matters: the executor is shut down (its worker threads joined) before the node
is destroyed, so no callback runs on a destroyed entity during Ctrl-C.

A callback still blocked when the node stops (a goal's thread waiting on a peer that stopped
with it: its answer will never come, and the executor no longer delivers it) would hold the
process until its own timeout: Python joins every executor worker thread at exit, and rclpy's
MultiThreadedExecutor never stops them. The graph's launcher gives a node 5 s after SIGINT
and 2 s after SIGTERM before SIGKILL, which the test suite saw on the executor after a vLLM
goal. So once the executor stops, callbacks still running get :data:`STOP_GRACE_S` to end (before
the node is destroyed: rclpy's Executor.shutdown does not wait for them, and a callback that
publishes on a destroyed entity fails or, in the C layer, can crash the process at exit), and
then the process ends without them (``os._exit``, streams flushed, the blocked workers
named on stderr): what they would have done is lost either way, as with the SIGKILL.

Every node announces its liveliness (agentic_grasp.ros.common.liveness), so its peers learn within a
lease when its process dies, and logs when every service and action it calls is discovered
(agentic_grasp.ros.common.readiness: bringup's "ready").

A stopped node's DDS teardown can deadlock inside Fast DDS 2.14 (the wheels' version): the
participant's event thread, running the WLP timer that asserts an AUTOMATIC liveliness with a
finite lease (the ``alive/<node>`` publisher's), waits for the discovery (PDP) mutex, while a
receiving thread that holds that mutex, removing a peer's writer that stopped at the same
moment, waits for the event thread (``ResourceEvent::unregister_timer`` from
``WriterProxy::stop``); destroying any writer then waits for the event thread too, for ever,
holding the GIL. Caught with py-spy and gdb in 2 of 80 stops of a whole graph here (upstream:
eProsima/Fast-DDS#6502 is the same cycle through another timer); it also hangs the
participant's deletion when the interpreter collects the context at exit. Two measures: the
liveliness publisher is destroyed before the node's other entities, which ends the
participant's WLP timer before most of its peers' removals arrive; and once a node has
stopped, :data:`TEARDOWN_S` bounds its whole teardown (to the process's end): a
signal (core.supervision.TEARDOWN_SIGNAL, SIGALRM) writes the stacks and ends the process
by its default action (status -14, which supervisors count as a clean stop). Nothing of the
node's own is lost then: its callbacks have ended, and what it keeps goes to disk record by
record; what is skipped is the participant's orderly exit (its peers saw its liveliness
writer go first).

A stopping node could also die by SIGSEGV in rclpy's own signal thread (rclpy 7.1.5): on
SIGINT that thread walks the list of registered SIGINT guard conditions without a lock and
triggers each (``trigger_guard_conditions``, rclpy/src/rclpy/signal_handler.cpp); the first
trigger wakes this node's executor, whose ``Executor.shutdown`` then unregisters its guard
condition (which frees the list being walked) and destroys it, so the thread can trigger a
destroyed guard condition or read a freed list. Core dumps of it show the crash in
``rcl_trigger_guard_condition`` on that thread (2 in 13 stops of a whole graph beside a busy
loop). The executor's guard condition is therefore taken out of it before it shuts down and
kept, registered and alive, until the process ends.

A stop is asked for once. A terminal's Ctrl-C reaches every process of launch's group, and
launch then sends each node its own SIGINT (and SIGTERM after its grace), so a node sees two or
three signals, the later ones while it stops. rclpy's SIGINT handler chains to Python's, which
raises KeyboardInterrupt each time: a second one landing in the stop path (destroying a
publisher, joining a worker) left it half done and ended the process with a traceback and status
-2 (seen on every node after goals). :class:`_StopSignals` is Python's handler under rclpy's (it
is installed before ``rclpy.init``, which chains to it): the first SIGINT raises
KeyboardInterrupt as before (it also interrupts a node still being built), later ones and any
SIGINT or SIGTERM once the stop has begun are ignored (rclpy's handler has shut the context
down on the first). The teardown watchdog stays the last resort for a stop that hangs.

Teardown at exit: a node's action servers and clients are destroyed with the node's other
entities (:func:`_destroy_waitables`). rclpy's Node.destroy_node leaves them, and each holds
the rcl node, so the node's DDS endpoints and its participant used to be torn down by the
garbage collection of Python's exit (a planner ended by its watchdog showed only
"Garbage-collecting, <no Python frame>"): after the context had shut down, in no order, and
after everything else, so a slow one on a loaded machine ran past the watchdog (status -14).
Now the whole DDS teardown is done in order inside spin_node, and the interpreter's exit
has no DDS left to tear down. What was left of the exit was still slow on a loaded machine:
the planner's final garbage collection (82,000 objects), its modules' teardown and the
native libraries' static destructors took 1.6-3.4 s at load 27 on 2 cores, most of the
watchdog's 2.5 s (the same stacks, "Garbage-collecting"; 0.02-0.04 s with ``os._exit``), to
free memory the process was giving back anyway. So once the node is torn down, spin_node
runs the exit handlers, flushes the streams and ends the process (:func:`_end_process`).

Every node can say where it is stuck: SIGUSR1 writes every thread's Python stack to stderr
(core.supervision.STACKS_SIGNAL, ``faulthandler``), and a crash (SIGSEGV, SIGABRT, ...) writes them
before the process dies. The launcher sends SIGUSR1 to a node still running after SIGINT
before it escalates, so a node that will not stop is named with its stacks, not only
SIGKILLed (CI saw a node SIGKILLed at a test's teardown with nothing to say why).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Tuple, Type

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from agentic_grasp.core.supervision import (EXIT_CONFIG, arm_teardown_watchdog,
                                            enable_stack_dumps)
from agentic_grasp.ros.common.liveness import announce
from agentic_grasp.ros.common.readiness import ClientReadiness


#: How long threads still running after the node is destroyed may take to end (s): well
#: inside the launcher's 5 s between SIGINT and SIGTERM (module docstring).
STOP_GRACE_S = 2.0
#: Exit status of a node stopped by an exception from a callback (Python's own for an uncaught
#: exception): a crash, which supervisors restart.
EXIT_CRASH = 1
#: The executors' SIGINT guard conditions, kept until the process ends (_keep_sigint_guard).
_SIGINT_GUARDS: List[object] = []
#: How long a stopped node's DDS teardown (its entities, the context, the participant at exit)
#: may take before its watchdog ends the process (s; module docstring). Measured here: under
#: 0.5 s for a whole graph, 2.0 s at most beside two busy loops; with the 2 s callback grace
#: before it, still inside the launcher's 5 s between SIGINT and SIGTERM when callbacks end.
TEARDOWN_S = 2.5
#: Environment variable naming a folder: every node traces its Python allocations
#: (tracemalloc) and writes a snapshot there every :data:`TRACE_EVERY_S` (diagnosis of a
#: node's growth under a soak; docs/performance.md, "Soak"). Unset: no tracing (it costs).
TRACE_ENV = "AGENTIC_GRASP_TRACEMALLOC_DIR"
TRACE_EVERY_S = 60.0
#: Environment variable that overrides every node's executor: "multi" or "events".
EXECUTOR_ENV = "AGENTIC_GRASP_EXECUTOR"
EXECUTORS = ("multi", "events")


class _StopSignals:
    """Python's SIGINT handler under rclpy's, and the signals ignored once the node stops
    (module docstring): a stop is asked for once."""

    def __init__(self) -> None:
        self.stopping = False
        # Python sets handlers in the main thread only; elsewhere Python's own stay.
        self._main = threading.current_thread() is threading.main_thread()

    def install(self) -> None:
        """Before ``rclpy.init``, so rclpy's SIGINT handler chains to this one."""
        if self._main:
            signal.signal(signal.SIGINT, self._on_sigint)

    def begin_stop(self) -> None:
        """From here on SIGINT and SIGTERM are ignored, in the process itself (not only in
        Python, whose exit sets its handled signals back to their default action, which would
        kill a node that is ending anyway with -2 or -15). rclpy's handlers are then out of
        the chain; the context is already shut down, or is by rclpy.try_shutdown below."""
        self.stopping = True
        if self._main:
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_IGN)

    def _on_sigint(self, _signum, _frame) -> None:
        if self.stopping:
            return
        self.stopping = True
        raise KeyboardInterrupt


def make_executor(kind: str, num_threads: int) -> Executor:
    """The executor named ``kind`` (after the EXECUTOR_ENV override)."""
    kind = os.environ.get(EXECUTOR_ENV, "").strip().lower() or kind
    if kind not in EXECUTORS:
        raise ValueError(f"{EXECUTOR_ENV} must be one of {', '.join(EXECUTORS)}, got {kind!r}")
    if kind == "events":
        # on use: the experimental events executor only where it is chosen
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    return MultiThreadedExecutor(num_threads=num_threads)


def spin_node(factory: Callable[[], Node], num_threads: int = 2,
              args: Optional[List[str]] = None,
              fatal: Tuple[Type[BaseException], ...] = (), executor_kind: str = "multi",
              end_process: bool = True) -> None:
    """Run one node until Ctrl-C/SIGTERM; exceptions in ``fatal`` raised while building it are
    logged as FATAL and end the process with status EXIT_CONFIG (78): supervisors see it and
    do not restart a node whose configuration cannot work. ``executor_kind``: "multi" (a
    MultiThreadedExecutor of ``num_threads``) or "events" (module docstring).
    ``end_process``: once the node is torn down, end the process without the interpreter's
    finalization (:func:`_end_process`); False returns instead (a caller with more to do)."""
    enable_stack_dumps()
    # the node's package folder names it (ros/<node>/node.py, run as python -m)
    _trace_allocations(os.path.basename(os.path.dirname(sys.argv[0] or "node")) or "node")
    signals = _StopSignals()
    signals.install()
    rclpy.init(args=args)
    logger = rclpy.logging.get_logger(getattr(factory, "NODE_NAME", "agentic_grasp"))
    node = None
    executor = None
    alive = None
    code = 0
    stopped = False            # asked to stop (SIGINT, SIGTERM, a shutdown), not failed
    try:
        node = factory()
        alive = announce(node)
        # says in the log when every peer this node calls is discovered (bringup's "ready")
        readiness = ClientReadiness(node)  # noqa: F841 - kept while the node spins
        executor = make_executor(executor_kind, num_threads)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        stopped = True
    except fatal as exc:  # type: ignore[misc]
        logger.fatal(f"cannot start: {exc}")
        code = EXIT_CONFIG
    except Exception:
        # SIGINT/SIGTERM shut the context down while the executor was building its wait set,
        # or while the node was still being built (a slow start on a loaded machine, stopped
        # by the launcher before it was up; CI saw it on the front node): rclpy raises its
        # RCLError ("the given context is not valid") instead of ExternalShutdownException.
        # That is the same orderly stop; an error with the context still valid is not.
        if rclpy.ok():
            # A callback's exception comes out of executor.spin() (MultiThreadedExecutor
            # re-raises it): say it here, since a callback still blocked below ends the
            # process with os._exit, before Python could print it (a fresh-clone run saw a
            # planner stop mid-goal with nothing but "callback(s) still blocked").
            logger.fatal(f"stopped by an exception: {traceback.format_exc()}")
            code = EXIT_CRASH
            raise
        stopped = True
        if node is None:
            logger.info("stopped while starting")
    finally:
        signals.begin_stop()          # a later SIGINT or SIGTERM is ignored (docstring)
        if executor is not None:
            _keep_sigint_guard(executor)
            executor.shutdown(timeout_sec=2.0)
            # before the node is destroyed: a callback still running would use its entities
            _end_without_blocked_callbacks(executor, code, STOP_GRACE_S)
        if stopped:
            arm_teardown_watchdog(TEARDOWN_S)
        if alive is not None:
            # before the node's other entities (rclpy destroys publishers in creation order,
            # and this one came last): the participant's liveliness timer ends before most
            # removals of its peers' writers arrive (module docstring: Fast DDS deadlock)
            node.destroy_publisher(alive)
        if node is not None:
            _destroy_waitables(node)
            node.destroy_node()
        if rclpy.ok():
            rclpy.try_shutdown()
    if end_process:
        _end_process(code)
    if code:
        sys.exit(code)


def _trace_allocations(name: str) -> None:
    """With :data:`TRACE_ENV` set, trace allocations and write a snapshot every
    :data:`TRACE_EVERY_S` from a daemon thread (the executor may not return to Python for
    long), named ``<node>-<pid>-<n>.tracemalloc``; compare two with tracemalloc's
    ``Snapshot.compare_to``."""
    folder = os.environ.get(TRACE_ENV, "").strip()
    if not folder:
        return
    import tracemalloc     # on use: only a traced run pays for it

    os.makedirs(folder, exist_ok=True)
    tracemalloc.start(16)

    def dump() -> None:
        count = 0
        while True:
            time.sleep(TRACE_EVERY_S)
            count += 1
            path = os.path.join(folder, f"{name}-{os.getpid()}-{count:04d}.tracemalloc")
            tracemalloc.take_snapshot().dump(path)
            # beside it, what the C heap holds: Python's traced bytes flat while the heap's
            # in-use bytes grow is native growth; both flat while RSS grows, fragmentation
            with open(os.path.join(folder, f"{name}-{os.getpid()}.heap"), "a") as log:
                log.write(f"{time.time():.0f} {_heap_line()} traced "
                          f"{tracemalloc.get_traced_memory()[0]}\n")

    threading.Thread(target=dump, name="tracemalloc_dump", daemon=True).start()


def _heap_line() -> str:
    """RSS and glibc's heap totals of this process (mallinfo2, every arena), for
    :func:`_trace_allocations`."""
    import ctypes    # on use: only a traced run

    class MallInfo2(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks",
                                                   "hblkhd", "usmblks", "fsmblks",
                                                   "uordblks", "fordblks", "keepcost")]

    rss = "?"
    try:
        with open("/proc/self/status") as status:
            rss = next(r.split()[1] for r in status if r.startswith("VmRSS:"))
    except (OSError, StopIteration):
        pass
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = MallInfo2
        info = libc.mallinfo2()
        heap = (f"arena {info.arena} mmap {info.hblkhd} in_use {info.uordblks} "
                f"free {info.fordblks}")
    except (AttributeError, OSError):
        heap = "mallinfo2 n/a"
    return f"rss_kb {rss} {heap}"


def _end_process(code: int) -> None:
    """End a node's process whose teardown is complete, skipping the interpreter's
    finalization (module docstring: teardown at exit): exit handlers run and the streams are
    flushed, as Python's exit would; what is skipped is the final garbage collection, the
    modules' teardown and the native libraries' static destructors, which only free memory
    the process is giving back anyway."""
    import atexit    # on use: only a node that ends

    # CPython's own list of exit handlers (logging's flush among them): run as Python would
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _destroy_waitables(node: Node) -> None:
    """Destroy the node's action servers and clients (module docstring: teardown at exit).

    rclpy 7.1.6's Node.destroy_node destroys publishers, subscriptions, clients, services,
    timers and guard conditions but not waitables, and each action server or client holds
    the rcl node (its three services and two topics are DDS endpoints of the node). The
    node, its endpoints and the process's DDS participant then outlived destroy_node and
    were torn down by the garbage collection of Python's exit, after the context had shut
    down, outside any order, in the last moments of the teardown watchdog."""
    for waitable in list(node.waitables):
        destroy = getattr(waitable, "destroy", None)
        if callable(destroy):
            try:
                destroy()
            except Exception as exc:  # noqa: BLE001 - the rest of the teardown must run
                sys.stderr.write(f"destroying {type(waitable).__name__} failed: {exc!r}\n")


def _keep_sigint_guard(executor: Executor) -> None:
    """Take the executor's SIGINT guard condition out of it before it shuts down, and keep it
    (registered, alive) until the process ends (module docstring: rclpy's signal thread)."""
    # rclpy internals, needed: Executor keeps the guard in ``_sigint_gc`` and destroys it in
    # shutdown() (rclpy/executors.py, 7.1.6), with no public way to keep it. Without the
    # attribute (another rclpy) nothing is taken and the executor shuts down as rclpy does.
    guard = getattr(executor, "_sigint_gc", None)
    if guard is not None:
        executor._sigint_gc = None
        _SIGINT_GUARDS.append(guard)


def _end_without_blocked_callbacks(executor: Optional[Executor], code: int,
                                   grace_s: float) -> None:
    """Stop the executor's worker threads, wait up to ``grace_s`` for those still in a
    callback, and end the process now if some are still blocked (module docstring; the node
    is then not destroyed: its peers see its liveliness lapse instead).

    rclpy's MultiThreadedExecutor keeps its workers in a ThreadPoolExecutor (``_executor``,
    rclpy/executors.py) that it never shuts down; shutting it down here lets idle workers
    end at once, so only a callback that is really blocked is waited for."""
    # rclpy internals, needed: the worker pool is MultiThreadedExecutor's ``_executor``
    # (rclpy/executors.py, 7.1.6), which rclpy neither shuts down nor exposes. Any other
    # executor (EventsExecutor) or rclpy has no such pool here, and this returns.
    pool = getattr(executor, "_executor", None)
    if not isinstance(pool, ThreadPoolExecutor):
        return
    # The callbacks queued and not started are dropped, on purpose: the node is stopping.
    # Their handler coroutines are then never awaited, which Python reports at exit as a
    # RuntimeWarning naming rclpy's handler; that one warning says nothing here.
    warnings.filterwarnings("ignore", category=RuntimeWarning,
                            message=r"coroutine 'Executor\._make_handler\.<locals>\.handler' "
                                    r"was never awaited")
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + grace_s
    # The pool's worker threads (ThreadPoolExecutor keeps them in ``_threads``; the standard
    # library offers no public list): the ones still alive are the blocked callbacks.
    workers = list(getattr(pool, "_threads", ()))
    for thread in workers:
        thread.join(max(0.0, deadline - time.monotonic()))
    blocked = [t.name for t in workers if t.is_alive()]
    if not blocked:
        return
    sys.stderr.write(f"{len(blocked)} callback(s) still blocked {grace_s:g} s after the node "
                     f"stopped ({', '.join(blocked)}); ending the process without them\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
