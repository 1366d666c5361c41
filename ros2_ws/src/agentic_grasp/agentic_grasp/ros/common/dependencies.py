"""What a goal's peer calls share: their errors, the goal's signal, an ordered action client.

The planner node runs one GraspObject goal in an executor thread and, from there, calls its
peers through common.peer_call.PeerCall (timeouts, cancel, lost and restarting peers).
The errors it raises travel through the planner core unchanged (it does not catch what its
callbacks raise) up to the node, which ends the goal accordingly:
:class:`DependencyTimeout` (ERROR_DEPENDENCY_TIMEOUT, naming the peer), :class:`PeerLost`
(ERROR_PEER_LOST), :class:`GoalCanceled`. :class:`GoalSignal` is one goal's cancel flag,
its restart budget and the first peer loss it cannot go on after; it wakes every wait of the
goal at once. :class:`OrderedActionClient` is an ActionClient whose requests may be sent
from any thread (see there).
"""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Set

from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from unique_identifier_msgs.msg import UUID

from agentic_grasp.ros.common.futures import wait_done


class DependencyError(RuntimeError):
    """A peer node answered with an error the goal cannot continue after."""

    def __init__(self, peer: str, detail: str) -> None:
        super().__init__(f"{peer}: {detail}")
        self.peer = peer
        self.detail = detail


class DependencyTimeout(DependencyError):
    """A peer node did not answer (or did not appear) within its timeout."""


class PeerLost(DependencyError):
    """A peer node died (lost its liveliness) while the goal needed it."""


class GoalCanceled(RuntimeError):
    """The goal was canceled while it waited for a peer."""


class GoalSignal:
    """Cancel flag of one goal that also wakes every wait on a peer at once.

    The action server's cancel callback calls :meth:`cancel` before rclpy moves the goal to
    CANCELING, so the planner's cancel check reads this flag rather than waiting for the
    goal handle's state.
    """

    def __init__(self, restart_budget_s: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._canceled = False
        self._lost: Optional[PeerLost] = None
        self._waiters: Set[threading.Event] = set()
        #: How long, in all, this goal's calls may wait for restarting peers (s; PeerCall).
        self.restart_budget_s = float(restart_budget_s)
        self._restart_spent = 0.0

    def restart_left(self) -> float:
        """What is left of the goal's restart budget (s)."""
        return self.restart_budget_s - self._restart_spent

    def spend_restart(self, seconds: float) -> None:
        self._restart_spent += max(0.0, float(seconds))

    @property
    def canceled(self) -> bool:
        return self._canceled

    @property
    def lost(self) -> Optional[PeerLost]:
        """The first peer lost during this goal (None while every peer lives)."""
        return self._lost

    def lose(self, peer: str, detail: str) -> PeerLost:
        """The goal cannot go on without ``peer``: every wait ends now and raises PeerLost."""
        return self.fail(PeerLost(peer, detail))

    def fail(self, lost: PeerLost) -> PeerLost:
        """Record ``lost`` as the goal's end (the first one stays) and wake every wait."""
        with self._lock:
            if self._lost is None:
                self._lost = lost
            waiters = list(self._waiters)
        for event in waiters:
            event.set()
        return self._lost

    def poke(self) -> None:
        """Wake every wait without ending it (a peer died: each call checks its own peers,
        PeerCall)."""
        with self._lock:
            waiters = list(self._waiters)
        for event in waiters:
            event.set()

    def raise_if_lost(self) -> None:
        if self._lost is not None:
            raise self._lost

    def cancel(self) -> None:
        with self._lock:
            self._canceled = True
            waiters = list(self._waiters)
        for event in waiters:
            event.set()

    def wait_event(self, event: threading.Event, timeout_s: float) -> None:
        """Block until ``event`` is set, the goal is canceled, or ``timeout_s`` passes."""
        with self._lock:
            if self._canceled or self._lost is not None:
                return
            self._waiters.add(event)
        try:
            event.wait(max(0.0, timeout_s))
        finally:
            with self._lock:
                self._waiters.discard(event)

    def wait_future(self, future: Any, timeout_s: float) -> str:
        """Wait for an rclpy future: "done", "lost" (a peer died), "canceled" or "timeout"."""
        if not future.done():
            wait_done(future, timeout_s, wait=self.wait_event)
        if future.done():
            return "done"
        if self._lost is not None:
            return "lost"
        return "canceled" if self._canceled else "timeout"


#: A goal request unanswered this long is sent again, with the same goal id (s), by
#: OrderedActionClient.send_goal_resending. DDS matches the two sides of a connection on their
#: own: a client that already sees the server (wait_for_server) may send before the server
#: has matched the client, and the server's volatile reader then skips that request for good
#: (CI: a fresh ``agentic-grasp grasp`` waited 30 s for an answer that could not come). The
#: same goal id makes a copy harmless: rclpy's action server rejects a goal id it already
#: tracks, so a goal never runs twice. Four times peer_call.RESEND_S: a goal is not a query,
#: and copies are only for a lost first one.
GOAL_RESEND_S = 2.0
#: How long a rejected copy waits for the action's status to list the goal (s): the server
#: publishes the status list (latched) as it accepts, before the goal runs.
STATUS_WAIT_S = 2.0


class OrderedActionClient(ActionClient):
    """An ActionClient whose requests may be sent from any thread while its node spins.

    rclpy's ActionClient (Jazzy) sends a goal, result or cancel request first and registers
    the future that awaits the reply afterwards, without a lock; when an executor thread
    takes the reply in between, it is dropped ("Ignoring unexpected goal response") and the
    caller waits forever. Services do not have this race (Client.call_async holds a lock).
    Here a request holds a lock from sending to registering, and the executor passes through
    the same lock before it looks a reply up, so the reply always finds its future.

    This works around ros2/rclpy#1123 ("Race condition in ActionClient.*_goal_async functions
    which result in futures that never complete": send_goal_async, _cancel_goal_async and
    _get_result_async). Its fix (ros2/rclpy#1308 and its backports) takes such a lock inside
    rclpy; the pinned rclpy 7.1.6 does not have it. Two of the three are private rclpy
    methods (ClientGoalHandle calls them), so overriding them ties this class to rclpy's
    internals: it lives in common/, the one place that may, and goes once the pinned rclpy
    has the fix.

    :meth:`send_goal_resending` sends a goal again when its request or its answer was lost
    (GOAL_RESEND_S); the last status list of the server is kept for it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._request_lock = threading.RLock()
        self._status_changed = threading.Condition()
        self._statuses: Dict[bytes, int] = {}
        super().__init__(*args, **kwargs)

    def send_goal_resending(self, goal: Any, feedback_callback: Optional[Callable] = None,
                            timeout_s: float = 10.0) -> Optional[Any]:
        """The goal's ClientGoalHandle (check ``accepted``), None when no copy was answered
        within ``timeout_s``. Copies carry one goal id; when a copy is rejected after an
        earlier one was sent, the server's status list tells whether the earlier one was
        accepted with its answer lost (rclpy rejects a goal id it already tracks)."""
        goal_id = UUID(uuid=list(uuid.uuid4().bytes))
        answered = threading.Event()
        futures: List[Any] = []
        deadline = time.monotonic() + timeout_s
        while not answered.is_set() and time.monotonic() < deadline:
            future = self.send_goal_async(goal, feedback_callback=feedback_callback,
                                          goal_uuid=goal_id)
            future.add_done_callback(lambda _f: answered.set())
            futures.append(future)
            answered.wait(min(GOAL_RESEND_S, max(0.0, deadline - time.monotonic())))
        done = [f.result() for f in futures if f.done() and f.result() is not None]
        if not done:
            return None
        handle = next((h for h in done if h.accepted), done[0])
        if not handle.accepted and len(futures) > 1:
            handle = self.accepted_copy(goal_id, futures) or handle
        return handle

    def accepted_copy(self, goal_id: Any, futures: List[Any]) -> Optional[Any]:
        """The handle of the goal when an earlier copy was accepted, else None."""
        key = bytes(goal_id.uuid)
        deadline = time.monotonic() + STATUS_WAIT_S
        with self._status_changed:
            while key not in self._statuses and time.monotonic() < deadline:
                self._status_changed.wait(max(0.0, deadline - time.monotonic()))
            known = key in self._statuses
        late = next((f.result() for f in futures if f.done() and f.result() is not None
                     and f.result().accepted), None)
        if late is not None:                         # the first copy's answer came after all
            return late
        if not known:
            return None
        response = self._action_type.Impl.SendGoalService.Response(accepted=True)
        return ClientGoalHandle(self, goal_id, response)

    # The three request paths of ros2/rclpy#1123, each held from send to registration.
    def send_goal_async(self, *args: Any, **kwargs: Any) -> Any:
        with self._request_lock:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, goal_handle: Any) -> Any:
        with self._request_lock:
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle: Any) -> Any:
        with self._request_lock:
            return super()._get_result_async(goal_handle)

    async def execute(self, taken_data: Any) -> None:
        with self._request_lock:
            pass                        # a request being sent has registered its future
        if "status" in taken_data:
            with self._status_changed:
                self._statuses = {bytes(st.goal_info.goal_id.uuid): int(st.status)
                                  for st in taken_data["status"].status_list}
                self._status_changed.notify_all()
        await super().execute(taken_data)


class GoalCopies:
    """One goal sent, perhaps more than once, under one goal id through an
    OrderedActionClient (peer_call.goal_call): ``send`` and ``abandon`` for PeerCall.call,
    ``handle`` for the answer it returned, ``give_up`` when the call raised.

    A copy refused after an earlier one was sent most likely stands for that earlier one,
    taken with its answer lost: the server's status list says so
    (OrderedActionClient.accepted_copy). Copies left unanswered are canceled should the
    server take them once nobody follows the goal (the call gave up, or no copy was
    taken); while the goal is followed a late answer to a copy is the goal itself.
    """

    def __init__(self, client: "OrderedActionClient", goal: Any,
                 feedback_callback: Optional[Callable] = None, goal_id: Any = None) -> None:
        self._client, self._goal, self._feedback = client, goal, feedback_callback
        self.goal_id = goal_id if goal_id is not None else UUID(uuid=list(uuid.uuid4().bytes))
        self._lock = threading.Lock()
        self._futures: List[Any] = []
        self._given_up = False

    def send(self) -> Any:
        future = self._client.send_goal_async(self._goal, feedback_callback=self._feedback,
                                              goal_uuid=self.goal_id)
        with self._lock:
            self._futures.append(future)
        return future

    def abandon(self, future: Any) -> None:
        future.add_done_callback(self._cancel_if_given_up)

    def give_up(self) -> None:
        with self._lock:
            self._given_up = True
            futures = list(self._futures)
        for future in futures:
            if future.done():
                self._cancel_if_given_up(future)

    def handle(self, answered: Any) -> Any:
        with self._lock:
            futures = list(self._futures)
        if answered.accepted or len(futures) < 2:
            return answered
        taken = self._client.accepted_copy(self.goal_id, futures)
        if taken is None:
            self.give_up()          # refused: an earlier copy taken late is nobody's goal
            return answered
        return taken

    def _cancel_if_given_up(self, future: Any) -> None:
        with self._lock:
            given_up = self._given_up
        if given_up and future.exception() is None and future.result() is not None \
                and future.result().accepted:
            future.result().cancel_goal_async()


__all__ = ["GOAL_RESEND_S", "DependencyError", "DependencyTimeout", "GoalCanceled",
           "GoalCopies", "GoalSignal", "PeerLost", "OrderedActionClient"]
