"""Waiting for an rclpy future from a thread that is not spinning it.

A callback in a ReentrantCallbackGroup (or any thread beside the executor's) may block on
a future that another executor thread completes; it must never spin itself
(ros2/rclpy#1313). The wait is an Event set by the future's done-callback, bounded by a
timeout, and optionally cut short by whoever else holds the event (a cancel, a lost peer).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Optional

#: How a caller waits on the event: ``wait(event, timeout_s)``; returns when it is set, the
#: time is up, or for its own reasons (a cancel).
Waiter = Callable[[threading.Event, float], Any]


def _event_wait(event: threading.Event, timeout_s: float) -> None:
    event.wait(timeout_s)


def wait_done(future: Any, timeout_s: float, *, event: Optional[threading.Event] = None,
              wait: Waiter = _event_wait) -> bool:
    """Block until ``future`` completes or the wait ends; whether the future completed.

    ``event`` (default: a new one) is set when the future completes; pass one that another
    thread can also set to end the wait early. ``wait`` does the blocking, e.g. a goal
    signal's cancel-aware wait. Only ``add_done_callback`` of the future is used, so any
    future-like object (a test stub) works; callers check ``future.done()`` as they need.
    """
    completed = threading.Event()
    wake = event if event is not None else completed

    def on_done(_future: Any) -> None:
        completed.set()
        wake.set()

    future.add_done_callback(on_done)
    wait(wake, timeout_s)
    return completed.is_set()


__all__ = ["Waiter", "wait_done"]
