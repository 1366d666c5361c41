"""Episodic memory's lifetime: one policy for the planner node and the episode runner."""
from agentic_grasp.core.planner.memory import MemoryLifetime


def test_memory_lifetime_keeps_one_memory_per_configuration_for_the_session_only():
    lifetime = MemoryLifetime()
    kept = lifetime.memory_for("full", True, "session")
    assert lifetime.memory_for("full", True, "session") is kept
    assert lifetime.memory_for("no_recovery", True, "session") is not kept
    off = lifetime.memory_for("no_episodic_memory", False, "session")
    assert not off.enabled
    for per_run in ("goal", "trial"):
        fresh = lifetime.memory_for("full", True, per_run)
        assert fresh is not kept and fresh.enabled and not len(fresh)
    lifetime.clear()
    assert lifetime.memory_for("full", True, "session") is not kept
