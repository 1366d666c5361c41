"""Where the project's data lives: ``config/``, ``config/scenes/``, ``kb_data/``, ``launch/``;
and, apart from it, where the robot keeps what it learns (:func:`user_data_dir`).

Resolution order (first hit wins), so the same code works from a source checkout, a colcon
install (``share/agentic_grasp/``) and a ROS 2 install:
1. the environment variable ``AGENTIC_GRASP_DATA`` (a folder holding ``config/``);
2. the nearest ancestor of this file that holds ``config/`` and ``kb_data/`` (source tree);
3. ``<prefix>/share/agentic_grasp`` of the colcon install this file lives in.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from agentic_grasp.core.errors import ConfigError


def _is_data_root(path: Path) -> bool:
    return (path / "config").is_dir() and (path / "kb_data").is_dir()


@lru_cache(maxsize=None)
def data_root() -> Path:
    env = os.environ.get("AGENTIC_GRASP_DATA")
    if env:
        root = Path(env).expanduser().resolve()
        if not _is_data_root(root):
            raise ConfigError(f"AGENTIC_GRASP_DATA={env} holds no config/ and kb_data/ folders")
        return root
    here = Path(__file__).resolve()
    for parent in here.parents:
        if _is_data_root(parent):
            return parent
        share = parent / "share" / "agentic_grasp"
        if _is_data_root(share):
            return share
    raise ConfigError(
        "cannot find the agentic_grasp data folder (config/, kb_data/); "
        "set AGENTIC_GRASP_DATA to the repository root")


def config_dir() -> Path:
    return data_root() / "config"


def scenes_dir() -> Path:
    return data_root() / "config" / "scenes"


def kb_dir() -> Path:
    return data_root() / "kb_data"


#: The environment variable that moves the robot's learned experience (``--data-dir`` sets
#: it); AGENTIC_GRASP_DATA_DIR is its older name, still read.
DATA_HOME_ENV = "AGENTIC_GRASP_DATA_HOME"
_DATA_HOME_OLD_ENV = "AGENTIC_GRASP_DATA_DIR"


def user_data_dir() -> Path:
    """The folder of what the robot learns from its own attempts (the acquired experiences,
    the fleet store's spool): ``$AGENTIC_GRASP_DATA_HOME``, else
    ``$XDG_DATA_HOME/agentic_grasp``, else ``~/.local/share/agentic_grasp``.

    Per user and outside the repository, so a fresh clone on the same machine retrieves
    what an earlier run learnt; pointing the variable at an empty folder starts clean. Read
    on every call, not cached: ``agentic-grasp --data-dir`` sets the variable after import.
    """
    root = os.environ.get(DATA_HOME_ENV) or os.environ.get(_DATA_HOME_OLD_ENV)
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "agentic_grasp"


def config_file(name: str) -> Path:
    """Path of ``config/<name>`` (``name`` with or without ``.yaml``)."""
    if not name.endswith((".yaml", ".yml")):
        name += ".yaml"
    return config_dir() / name
