"""Fast DDS shared-memory files that no live process holds, and their removal.

Why: the graph's Fast DDS profile (``config/fastdds_localhost.xml``) carries large camera
frames over the shared-memory transport, whose ports and segments are files in
``/dev/shm`` (``fastrtps_port<N>``, ``fastrtps_<16 hex>``, their ``_el``/``_sl`` lock files,
``sem.fastrtps_port<N>_mutex``). A process killed while it creates its participant (SIGKILL
from a supervisor or a launcher's last resort, a crash) can leave a port segment that exists
but was never initialised: Boost.Interprocess's open-or-create then spins for ever in every
later participant that takes that port, inside ``rclpy.create_node`` and deaf to SIGINT and
SIGTERM. Fast DDS's own ``fastdds shm clean`` does not remove such a segment (it judges
ports by their lock files, which the dead process never made). Seen here: a test's node
stuck for good in ``Node.__init__`` on ``fastrtps_port23913``, all zeros, 62,640 bytes
(``test/ros/test_fastdds_shm.py`` reproduces it).

A file is removed when it belongs to this user and neither it nor any file of its group
(a port or segment with its lock and mutex files) is open or mapped by any process this user
can see in ``/proc``. Linux only; elsewhere nothing is removed. Callers: the launcher, after
a node of its own died by a signal and before it starts nodes; the tests, between tests.
Imports nothing from rclpy.
"""
from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Set

SHM_DIR = Path("/dev/shm")
PREFIXES = ("fastrtps_", "sem.fastrtps_")
_LOG = logging.getLogger(__name__)
_SUFFIX = re.compile(r"(_el|_sl|_mutex)$")


def group_of(name: str) -> str:
    """The port or segment a file belongs to: ``sem.fastrtps_port7411_mutex``,
    ``fastrtps_port7411_el`` and ``fastrtps_port7411`` are all ``fastrtps_port7411``."""
    if name.startswith("sem."):
        name = name[len("sem."):]
    return _SUFFIX.sub("", name)


def held_paths(proc: Path = Path("/proc")) -> Set[str]:
    """Every path under /dev/shm that a process visible here has open or mapped."""
    held: Set[str] = set()
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return held
    for pid in pids:
        base = proc / pid
        try:
            for fd in os.listdir(base / "fd"):
                try:
                    target = os.readlink(base / "fd" / fd)
                except OSError:
                    continue
                if target.startswith("/dev/shm/"):
                    held.add(target)
        except OSError:
            pass
        try:
            with open(base / "maps", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    at = line.find("/dev/shm/")
                    if at >= 0:
                        held.add(line[at:].rstrip("\n").removesuffix(" (deleted)"))
        except OSError:
            pass
    return held


def stale_files(shm_dir: Path = SHM_DIR, held: Iterable[str] = ()) -> List[Path]:
    """This user's Fast DDS files in ``shm_dir`` whose group no process holds (``held``:
    paths open or mapped, as :func:`held_paths` gives them)."""
    try:
        names = sorted(n for n in os.listdir(shm_dir) if n.startswith(PREFIXES))
    except OSError:
        return []
    held = {str(h) for h in held}
    groups: Dict[str, List[str]] = {}
    for name in names:
        groups.setdefault(group_of(name), []).append(name)
    uid = os.getuid()
    out: List[Path] = []
    for members in groups.values():
        paths = [shm_dir / m for m in members]
        if any(str(p) in held for p in paths):
            continue
        for path in paths:
            try:
                if path.lstat().st_uid == uid:
                    out.append(path)
            except OSError:
                continue
    return out


def remove_stale(shm_dir: Path = SHM_DIR, proc: Path = Path("/proc")) -> List[str]:
    """Remove :func:`stale_files`; the names removed (none off Linux)."""
    if not proc.is_dir():
        return []
    removed: List[str] = []
    for path in stale_files(shm_dir, held_paths(proc)):
        try:
            path.unlink()
            removed.append(path.name)
        except OSError:
            continue
    if removed:
        _LOG.info("%s", summary(removed))
    return removed


def summary(removed: List[str], most: int = 8) -> str:
    """One line on what :func:`remove_stale` removed (at most ``most`` names)."""
    names = ", ".join(removed[:most]) + (" ..." if len(removed) > most else "")
    return (f"removed {len(removed)} Fast DDS shared-memory file(s) no process holds"
            + (f": {names}" if removed else ""))


def main() -> int:
    """``python -m agentic_grasp.ros.common.fastdds_shm``: remove them and say what went."""
    print(summary(remove_stale(), most=1_000_000))
    return 0


__all__ = ["PREFIXES", "SHM_DIR", "group_of", "held_paths", "remove_stale", "stale_files",
           "summary"]


if __name__ == "__main__":
    sys.exit(main())
