"""The peer-call benchmark, small: the planner's PeerCall beside ros2/examples' awaited call.

What the awaited call does when its peer is killed depends on DDS timing, so it is printed,
not asserted. What is asserted holds anywhere: every PeerCall is answered, in steady state,
across a SIGKILL and respawn of the scene-graph node (within the goal's restart budget), and
as a fresh client's first call.
"""
from agentic_grasp_lab.ros.benchmarks import peer_calls


def test_peer_calls_are_answered_across_a_kill_and_respawn():
    result = peer_calls.run(n=10, rounds=1, fresh=1, deadline_s=25.0)
    print(peer_calls.report(result))
    assert result["latency"]["peer_call_lost"] == 0
    assert result["latency"]["peer_call"]["n"] == 10
    killed = result["killed"]["peer_call"]
    assert killed["answered"] == 1, result["killed"]["peer_call_errors"]
    assert result["fresh_client"]["peer_call"]["answered"] == 1
