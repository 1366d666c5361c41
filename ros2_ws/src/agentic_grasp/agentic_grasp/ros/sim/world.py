"""The sim node's kept world: restored at start from ``world_state_file``, written on each change
(core/sim/world_state.py has the format and why). A mixin of nodes/sim_node.SimNode (it uses the
node's ``sim``, ``_lock``, ``task``, ``_task_loaded``, ``_trial_seed``, ``_version`` and
``_loaded_version``); kept apart so the node file stays a thin translation layer.
"""
from __future__ import annotations

from typing import Optional

from agentic_grasp.core.sim import world_state


class SimWorldKeeping:
    """``_restore_world`` and ``_keep_world`` of the sim node (module docstring)."""

    @staticmethod
    def _world_file_at(path: str) -> Optional[world_state.WorldFile]:
        return world_state.WorldFile(path) if path else None

    def _restore_world(self) -> Optional[str]:
        """Restore the kept world, if there is one: what to say about it, else None."""
        if self._world_file is None:
            return None
        kept, problem = self._world_file.load()
        if problem:
            self.get_logger().error(f"kept world not restored: {problem}; starting task "
                                    f"{self.task}")
        if kept is None:
            return None
        with self._lock:
            try:
                world_state.restore(self.sim, kept)
            except Exception as exc:  # noqa: BLE001 - a scene gone since: start afresh
                self.get_logger().error(f"kept world of {self._world_file.path} not restored: "
                                        f"{exc}; starting task {self.task}")
                return None
            self._task_loaded, self._trial_seed = kept.task, kept.trial_seed
            self._version = kept.world_version
            self._loaded_version = kept.world_version - kept.changes_since_load
            self._keep_world()
        return (f" (world restored from {self._world_file.path}: {len(kept.objects)} on the "
                f"table, {len(kept.binned)} in the bin)")

    def _keep_world(self) -> None:
        """Write the world to world_state_file (hold the simulator's lock)."""
        if self._world_file is None:
            return
        problem = self._world_file.save(world_state.capture(
            self.sim, self._task_loaded, self._trial_seed, self._version,
            self._version - self._loaded_version))
        if problem:
            self.get_logger().warning(problem)


__all__ = ["SimWorldKeeping"]
