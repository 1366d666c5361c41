"""FrameStore: captures paired by stamp, never older than not_before (no DDS here)."""
from __future__ import annotations

import re
import threading
import time

from builtin_interfaces.msg import Time
from sensor_msgs.msg import CameraInfo, Image

from agentic_grasp.ros.perception.inputs import FrameStore, Truth

TOPICS = ("rgb", "depth", "info")
S = 1_000_000_000


def _image(sec: int, nanosec: int = 0) -> Image:
    msg = Image()
    msg.header.stamp = Time(sec=sec, nanosec=nanosec)
    return msg


def _store(*secs: int, truth_secs=()) -> FrameStore:
    store = FrameStore(max_skew_s=0.05)
    store.set_info(CameraInfo())
    for sec in secs:
        store.add_rgb(_image(sec))
        store.add_depth(_image(sec))
    for version, sec in enumerate(truth_secs, start=1):
        store.add_truth(Truth(sec * S, version, []))
    return store


def test_the_newest_capture_at_or_after_not_before_is_taken_never_an_older_one():
    store = _store(10, 11, 12)
    capture, why = store.find(TOPICS, 11 * S)
    assert why == "" and capture.stamp_ns == 12 * S
    capture, why = store.find(TOPICS, 13 * S)
    assert capture is None
    assert why == "no camera frame taken at or after 13.000 s on rgb (newest 12.000 s)"


def test_a_resent_capture_keeps_its_place_and_an_older_one_is_ignored():
    store = _store(10, 12)
    store.add_rgb(_image(10))                 # a re-send of the 10 s capture, late
    store.add_depth(_image(10))
    assert store.newest_rgb_stamp() == 12.0
    assert store.find(TOPICS, 0)[0].stamp_ns == 12 * S


def test_truth_pairs_with_its_own_capture_only():
    store = _store(10, 12, truth_secs=(10,))
    capture, why = store.find(TOPICS, 12 * S, truth_topic="truth")
    assert capture is None and why == ("no ground truth on truth for the capture at 12.000 s "
                                       "(newest truth at 10.000 s, world version 1)")
    capture, _ = store.find(TOPICS, 0, truth_topic="truth")   # any age: the 10 s pair
    assert capture.stamp_ns == 10 * S and capture.world_version == 1
    store.add_truth(Truth(12 * S, 2, []))
    capture, why = store.find(TOPICS, 12 * S, truth_topic="truth")
    assert why == "" and capture.world_version == 2


def test_a_capture_waits_for_its_own_truth_and_depth_not_an_earlier_instants():
    """The simulator sends a capture per world change, and two can be closer than the skew:
    a colour image whose own depth and truth are still on their way is not read with the
    previous capture's (an answer would show the world before the change)."""
    store = FrameStore(max_skew_s=0.05)
    store.set_info(CameraInfo())
    store.add_rgb(_image(10))
    store.add_depth(_image(10))
    store.add_truth(Truth(10 * S, 5, []))                    # world version 5 at 10.000 s
    store.add_rgb(_image(10, 47_000_000))                    # version 7, 47 ms later
    capture, why = store.find(TOPICS, 10 * S + 1, truth_topic="truth")
    assert capture is None
    assert why == "the depth image of the capture at 10.047 s has not come yet (newest " \
                  "depth 10.000 s)"
    store.add_depth(_image(10, 47_000_000))
    capture, why = store.find(TOPICS, 10 * S + 1, truth_topic="truth")
    assert capture is None
    assert why == "the ground truth of the capture at 10.047 s has not come yet on truth " \
                  "(newest truth at 10.000 s)"
    assert store.find(TOPICS, 0, truth_topic="truth")[0].world_version == 5   # older: settled
    store.add_truth(Truth(10 * S + 47_000_000, 7, []))
    capture, why = store.find(TOPICS, 10 * S + 1, truth_topic="truth")
    assert why == "" and capture.world_version == 7 and capture.stamp_ns == 10_047_000_000
    store.add_rgb(_image(10, 60_000_000))                    # a real camera's skew: its depth
    store.add_depth(_image(10, 62_000_000))                  # 2 ms after the colour image
    store.add_truth(Truth(10 * S + 60_000_000, 8, []))
    capture, _ = store.find(TOPICS, 10 * S + 50_000_000, truth_topic="truth")
    assert capture.stamp_ns == 10_060_000_000 and capture.world_version == 8


def test_depth_of_another_instant_is_not_paired():
    store = FrameStore(max_skew_s=0.05)
    store.set_info(CameraInfo())
    store.add_rgb(_image(10))
    store.add_depth(_image(10, 200_000_000))
    capture, why = store.find(TOPICS, 0)
    assert capture is None and why.startswith("no depth image within max_frame_skew_s=0.05 s")


def test_wait_capture_asks_the_camera_and_takes_the_capture_it_sends():
    store = _store(10)
    asked = []

    def request(not_before_ns: int) -> None:
        asked.append(not_before_ns)
        if len(asked) == 2:                   # the first request is lost
            threading.Timer(0.02, lambda: (store.add_rgb(_image(20)),
                                           store.add_depth(_image(20)))).start()

    started = time.monotonic()
    capture, why = store.wait_capture(TOPICS, 15 * S, 5.0, request=request)
    assert why == "" and capture.stamp_ns == 20 * S
    assert asked == [15 * S, 15 * S] and time.monotonic() - started < 2.0


def test_wait_capture_is_bounded():
    store = _store(10)
    started = time.monotonic()
    capture, why = store.wait_capture(TOPICS, 15 * S, 0.3, request=lambda _ns: None)
    elapsed = time.monotonic() - started
    assert capture is None and 0.3 <= elapsed < 1.0
    assert re.search(r"\(newest 10\.000 s\) \(waited 0\.30 s; asked [12] times; heard 0 "
                     r"colour images and 0 capture_current meanwhile\)$", why), why


def test_a_failed_wait_says_what_the_camera_sent_meanwhile():
    """Answers that came but did not do (an older frame, a capture current only up to
    before not_before) are counted in the error: a camera that answered and one whose answers
    never arrived read differently."""
    store = _store(10)

    def answer(_ns):
        store.add_rgb(_image(9))                         # older than what the store has
        store.add_current(10 * S, 12 * S, 1)             # current, but only up to 12 s

    capture, why = store.wait_capture(TOPICS, 15 * S, 0.3, request=answer)
    assert capture is None
    assert re.search(r"asked ([12]) times; heard \1 colour images and \1 capture_current "
                     r"meanwhile\)$", why), why
    capture, why = store.wait_capture(TOPICS, 15 * S, 0.3)    # nothing to ask
    assert why.endswith("(waited 0.30 s; heard 0 colour images and 0 capture_current "
                        "meanwhile)"), why


def test_a_capture_declared_current_counts_for_not_before_and_keeps_its_stamp():
    store = _store(10, truth_secs=(10,))                     # world version 1 at 10 s
    assert store.find(TOPICS, 15 * S, truth_topic="truth")[0] is None
    store.add_current(10 * S, 14 * S, 1)                     # still current at 14 s: no
    assert store.find(TOPICS, 15 * S, truth_topic="truth")[0] is None
    store.add_current(10 * S, 16 * S, 1)                     # at 16 s: yes
    capture, why = store.find(TOPICS, 15 * S, truth_topic="truth")
    assert why == "" and capture.stamp_ns == 10 * S and capture.world_version == 1
    store.add_current(10 * S, 12 * S, 1)                     # a late, older word: kept 16 s
    assert store.find(TOPICS, 15 * S, truth_topic="truth")[0] is not None


def test_a_current_word_for_another_world_version_is_not_taken():
    store = _store(10, truth_secs=(10,))                     # the truth shows version 1
    store.add_current(10 * S, 16 * S, 2)
    capture, why = store.find(TOPICS, 15 * S, truth_topic="truth")
    assert capture is None and why == ("the capture at 10.000 s was declared current for "
                                       "world version 2, its ground truth shows 1")


def test_wait_capture_takes_a_capture_declared_current_on_request():
    store = _store(10, truth_secs=(10,))

    def request(not_before_ns: int) -> None:                 # the simulator's answer
        threading.Timer(0.02, store.add_current, (10 * S, not_before_ns + 1, 1)).start()

    capture, why = store.wait_capture(TOPICS, 15 * S, 2.0, truth_topic="truth",
                                      request=request)
    assert why == "" and capture.stamp_ns == 10 * S
