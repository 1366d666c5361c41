"""One call of a peer node on behalf of a goal: the one place that waits on a peer.

Every planner-side port implementation (perception, retrieval, scene graph, the executor's
arm) reaches its node through :meth:`PeerCall.call`, and so does ``GraphClient``. One call
covers, in this order:

1. **A peer that is restarting.** A peer the planner's liveness watch (PeerMonitor) knows
   dead and not back yet, or one that came back within :data:`BACK_S` and whose service is
   not discovered yet, is waited for: out of the goal's restart budget
   (``GoalSignal.restart_left``, the planner's ``timeouts.restart_wait_s``, shared by every
   call of the goal), not the call's own timeout. A peer that was never lost and does not
   appear within the call's timeout is "did not appear" (DependencyTimeout), as before,
   except while the calling node starts: a server this call never saw is waited for until
   :attr:`PeerCall.startup_until` (the node's start-up window), so a goal sent as the graph
   comes up waits for discovery instead of failing (common.readiness says why discovery can
   outlast a call's timeout).
2. **Timeout.** The answer must come within ``timeout_s`` of the request (of the last one
   sent after a restart wait): DependencyTimeout naming the peer.
3. **Cancel.** A cancel of the goal ends every wait at once: GoalCanceled.
4. **A lost peer.** A peer of ``depends`` that dies while the call waits for its answer (the
   watch's loss count moved; the planner pokes the goal's signal on every loss so the wait
   wakes at once) is handled by the call's kind: a *query* (``resend=True``: perceive,
   retrieve, infer constraints; answering a copy twice changes nothing) and an action goal
   not answered yet (``again_after_loss``: the dead instance never said it took it) wait for
   the peer to come back (1.) and send the request again; a running action (an arm motion
   under way, :meth:`PeerCall.follow`: its fate is unknown, the world may have changed)
   raises PeerLost, which ends the goal with ERROR_PEER_LOST.
5. **Resend to a restarted peer.** DDS matches a new server's endpoints one by one, and a
   server whose response writer is not matched yet drops its answer ("failed to send
   response (timeout)"). While a peer came back less than BACK_S ago, a query unanswered
   after ``resend_s`` is sent again, until the timeout.

How the goal's thread waits: the planner core is synchronous (ReflectivePlanner.run_task
calls its ports and uses their answers), so the goal's own executor thread blocks here,
once, on an event set by the future's done-callback, the goal's cancel or a peer's loss;
the responses are delivered by the node's other executor threads (it never spins itself:
ros2/rclpy#1313). Everything that can be awaited without a synchronous core is: the front
action server (ros/front/node.py) awaits its forwarded goal in a coroutine.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional, Protocol, Sequence

from agentic_grasp.ros.common.dependencies import (GOAL_RESEND_S, DependencyError,
                                                   DependencyTimeout, GoalCanceled, GoalCopies,
                                                   GoalSignal, PeerLost)

#: After a peer restarted, an unanswered query is sent again this often (s).
RESEND_S = 0.5
#: A peer that came back less than this long ago counts as restarting (s): its service may
#: not be discovered yet (a wait for it is the restart budget's) and its answers may be
#: dropped while DDS matches (queries are resent). Retrieval takes 3-5 s to serve after its
#: process starts (it embeds its knowledge base), so 10 s.
BACK_S = 10.0
#: How often a wait for a peer to appear re-checks the graph (s). rclpy's own
#: wait_for_service sleeps 0.25 s between checks and cannot be interrupted by a cancel.
DISCOVERY_POLL_S = 0.05


class PeerWatch(Protocol):
    """What a call needs of the liveness watch (agentic_grasp.ros.common.liveness.PeerMonitor)."""

    def lost(self, peer: str) -> bool: ...

    def losses(self, peer: str) -> int: ...

    def back_within(self, peer: str, seconds: float) -> bool: ...

    def describe_loss(self, peer: str) -> str: ...


class PeerCall:
    """Calls of one peer (``peer``: the node that answers) for goals (module docstring).

    ``depends``: the nodes whose death ends or restarts the call (default: ``peer``; the
    executor's arm depends on the sim as well). ``watch``: the liveness watch; without one
    (a client outside the planner) a call has no restart handling and ``resend_always``
    resends an unanswered request every ``resend_s`` (a fresh client's first request may be
    lost to DDS matching).
    """

    def __init__(self, peer: str, timeout_s: float, watch: Optional[PeerWatch] = None,
                 depends: Sequence[str] = (), resend_s: float = RESEND_S,
                 back_s: float = BACK_S, resend_always: bool = False) -> None:
        if not timeout_s > 0.0:
            raise ValueError(f"timeout for {peer} must be > 0 s, got {timeout_s}")
        self.peer = peer
        self.timeout_s = float(timeout_s)
        self.watch = watch
        self.depends = tuple(depends) or (peer,)
        self.resend_s = float(resend_s)
        self.back_s = float(back_s)
        self.resend_always = resend_always
        #: Until when (time.monotonic) a server this call never saw is waited for instead of
        #: the call's timeout (module docstring, 1.); 0: no start-up window.
        self.startup_until = 0.0
        self._seen: set = set()             # the ``what`` of servers seen ready once

    # ---- the peer's state ---------------------------------------------------------------------
    def _lost_now(self) -> Optional[str]:
        watch = self.watch
        return next((p for p in self.depends if watch is not None and watch.lost(p)), None)

    def _restarting(self) -> bool:
        watch = self.watch
        return watch is not None and any(watch.back_within(p, self.back_s)
                                         for p in self.depends)

    def _losses(self) -> tuple:
        watch = self.watch
        return tuple(watch.losses(p) if watch is not None else 0 for p in self.depends)

    def _lost_since(self, losses: tuple) -> Optional[str]:
        now = self._losses()
        return next((p for p, a, b in zip(self.depends, losses, now) if a != b), None)

    def _peer_lost(self, signal: GoalSignal, peer: str, detail: str = "") -> PeerLost:
        why = self.watch.describe_loss(peer) if self.watch is not None else f"{peer} died"
        return signal.fail(PeerLost(peer, why + detail))

    # ---- 1. waiting for the peer --------------------------------------------------------------
    def await_peer(self, signal: GoalSignal, ready: Callable[[], bool], what: str) -> None:
        """Return once no peer of ``depends`` is lost and ``ready()`` holds (module docstring,
        1.); GoalCanceled, DependencyTimeout ("did not appear") or PeerLost (not back within
        the goal's restart budget)."""
        poll = threading.Event()             # never set: a cancel-aware sleep
        appear_deadline = time.monotonic() + self.timeout_s
        while True:
            signal.raise_if_lost()
            if signal.canceled:
                raise GoalCanceled(f"canceled while waiting for {what}")
            lost = self._lost_now()
            if lost is None and ready():
                self._seen.add(what)
                return
            now = time.monotonic()
            if lost is not None or self._restarting():
                left = signal.restart_left()
                if left <= 0.0:
                    gone = lost or self.peer
                    raise self._peer_lost(signal, gone, f"; not back within the goal's "
                                          f"restart budget ({signal.restart_budget_s:g} s)")
                t0 = time.monotonic()
                signal.wait_event(poll, min(DISCOVERY_POLL_S, left))
                signal.spend_restart(time.monotonic() - t0)
                appear_deadline = time.monotonic() + self.timeout_s
                continue
            deadline = appear_deadline if what in self._seen \
                else max(appear_deadline, self.startup_until)
            if now >= deadline:
                raise DependencyTimeout(self.peer, f"{what} did not appear within "
                                                   f"{self.timeout_s:.1f} s (is the "
                                                   f"{self.peer} node running?)")
            signal.wait_event(poll, min(DISCOVERY_POLL_S, deadline - now))

    # ---- the call -----------------------------------------------------------------------------
    def call(self, signal: Optional[GoalSignal], what: str, ready: Callable[[], bool],
             send: Callable[[], Any], abandon: Callable[[Any], None],
             resend: bool = True, again_after_loss: Optional[bool] = None,
             resend_s: Optional[float] = None, resend_always: bool = False) -> Any:
        """``send()`` (returns an rclpy future) until it completes; its result.

        ``ready()``: whether the peer's service or action is discovered; ``abandon(future)``:
        drop an unanswered request (a client's pending entry, an action goal's cancel).
        ``resend``: the request is a query (module docstring, 4. and 5.).
        ``again_after_loss`` (default: ``resend``): a request its peer died before answering
        is sent again once the peer is back, but never periodically (an action goal: the
        dead instance never said it took it, and its arm was stopped with it). ``resend_s``:
        this call's resend period (default the caller's; :func:`goal_call` uses a longer
        one); ``resend_always``: resend an unanswered request every period even to a peer that
        never restarted (a fresh client's first request may be lost to DDS matching). An
        answer that is an exception raises DependencyError naming ``what``.
        """
        signal = signal if signal is not None else GoalSignal()
        again = resend if again_after_loss is None else again_after_loss
        while True:
            self.await_peer(signal, ready, what)
            losses = self.losses()
            future = send()
            outcome = self._wait(signal, future, losses, send, abandon, resend, what,
                                 self.timeout_s, again, resend_s, resend_always)
            if outcome is not None:
                return self._answer(outcome, what)
            # a query whose peer died: wait for it to come back, and ask again

    def follow(self, signal: GoalSignal, future: Any, what: str, abandon: Callable[[Any], None],
               since: tuple, timeout_s: Optional[float] = None) -> Any:
        """Wait for an ``future`` already sent (an action goal's result) as :meth:`call` does,
        never resending it: a loss of a peer after ``since`` (:meth:`losses` when the request
        that led to it was sent) raises PeerLost."""
        send = lambda: future  # noqa: E731 - never called: resend=False
        return self._answer(self._wait(signal, future, since, send, abandon, False, what,
                                       self.timeout_s if timeout_s is None else timeout_s,
                                       False), what)

    def lost_within(self, signal: GoalSignal, since: tuple, seconds: float) -> Optional[PeerLost]:
        """PeerLost (recorded on ``signal``) when a peer of ``depends`` was lost after
        ``since``, waiting up to ``seconds`` for the watch's verdict; else None. For an
        answer that says a dependency is gone before our own watch says so (the executor
        notices the sim's death first and answers BACKEND_UNAVAILABLE)."""
        poll = threading.Event()
        deadline = time.monotonic() + seconds
        while True:
            lost = self._lost_since(since)
            if lost is not None:
                return self._peer_lost(signal, lost)
            left = deadline - time.monotonic()
            if self.watch is None or left <= 0.0 or signal.canceled:
                return None
            signal.wait_event(poll, min(DISCOVERY_POLL_S, left))

    def losses(self) -> tuple:
        """The loss counts of ``depends`` now (a baseline for :meth:`follow`)."""
        return self._losses()

    def _answer(self, future: Any, what: str) -> Any:
        exc = future.exception()
        if exc is not None:
            raise DependencyError(self.peer, f"{what} failed: {exc}")
        return future.result()

    def _wait(self, signal: GoalSignal, future: Any, losses: tuple, send: Callable[[], Any],
              abandon: Callable[[Any], None], resend: bool, what: str,
              timeout_s: float, again: bool,
              resend_s: Optional[float] = None,
              resend_always: bool = False) -> Optional[Any]:
        """The first copy of the request that completes, or None after a loss of a query's
        peer (to send again). Copies sent to a restarting peer stay outstanding (a slow
        answer to an earlier copy is as good as a later one); the rest are abandoned."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        woke = threading.Event()
        copies = [future]
        future.add_done_callback(lambda _f: woke.set())

        def drop() -> None:
            for copy in copies:
                if not copy.done():
                    abandon(copy)

        while True:
            restarting = resend and (self.resend_always or resend_always
                                     or self._restarting())
            left = deadline - time.monotonic()
            if not any(c.done() for c in copies):
                period = self.resend_s if resend_s is None else resend_s
                signal.wait_event(woke, min(left, period) if restarting else left)
            done = next((c for c in copies if c.done()), None)
            if done is not None:
                drop()
                return done
            woke.clear()
            if signal.canceled:
                drop()
                raise GoalCanceled(f"canceled while waiting for {what}")
            lost = self._lost_since(losses)
            if lost is not None:
                drop()
                if not again:
                    raise self._peer_lost(signal, lost)
                return None
            signal.raise_if_lost()
            if time.monotonic() >= deadline:
                drop()
                raise DependencyTimeout(self.peer, f"{what} did not answer within "
                                                   f"{timeout_s:.1f} s")
            if restarting:
                copy = send()
                copy.add_done_callback(lambda _f: woke.set())
                copies.append(copy)


def service_call(caller: PeerCall, client: Any, request: Any,
                 signal: Optional[GoalSignal] = None) -> Any:
    """A service request through ``caller``: the response (PeerCall.call, as a query)."""
    return caller.call(signal, f"service {client.srv_name}", client.service_is_ready,
                       lambda: client.call_async(request), client.remove_pending_request)


def goal_call(caller: PeerCall, client: Any, goal: Any, what: str,
              signal: Optional[GoalSignal] = None, feedback_callback: Optional[Callable] = None,
              goal_id: Any = None) -> Any:
    """An action goal (``what``: "action <name>") through ``caller`` and ``client`` (an
    OrderedActionClient): its ClientGoalHandle (check ``accepted``).

    A peer that came back moments ago may take a goal and drop its answer (its response
    writer not matched yet: "failed to send response (timeout)"), so the goal is sent again
    to it, as a query is (module docstring, 5.), every GOAL_RESEND_S, as is one to any peer
    unanswered that long (a client just started, e.g. a respawned planner, may send before
    the server matched it: CI saw a respawned planner's first ExecuteGrasp go unanswered for
    its whole 15 s); every copy carries
    one goal id (``goal_id``, default a new one): rclpy's server refuses an id it holds, so
    the goal runs once, and a refused copy after an unanswered one stands for the goal an
    earlier copy started (:class:`GoalCopies`). A goal its peer died before answering is
    sent again once the peer is back; copies left when the call gives up are canceled
    should the server still take them.
    """
    copies = GoalCopies(client, goal, feedback_callback, goal_id)
    try:
        answered = caller.call(signal, what, client.server_is_ready, copies.send,
                               copies.abandon, resend=True, resend_s=GOAL_RESEND_S,
                               resend_always=True)
    except BaseException:
        copies.give_up()
        raise
    return copies.handle(answered)


__all__ = ["BACK_S", "DISCOVERY_POLL_S", "PeerCall", "PeerWatch", "RESEND_S", "goal_call",
           "service_call"]
