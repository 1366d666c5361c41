"""A rosbags typestore that knows agentic_grasp_interfaces (and the ROS 2 Jazzy types).

rosbags ships the standard Jazzy message definitions (std_msgs, geometry_msgs, sensor_msgs,
visualization_msgs, action_msgs, unique_identifier_msgs); our own types are registered from
the ``.msg``/``.srv``/``.action`` text of the installed ``agentic_grasp_interfaces`` share
folder (found on AMENT_PREFIX_PATH) or, without an install, of the package's source folder.
Services and actions are split into their message parts the way rosidl does, so the hidden
action topics (``<action>/_action/feedback``) can be written and read too.

No rclpy import here: bags are read on machines without ROS.
"""
from __future__ import annotations

import logging
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional

from rosbags.typesys import Stores, get_typestore, get_types_from_msg
from rosbags.typesys.store import Typestore

_LOG = logging.getLogger(__name__)

PACKAGE = "agentic_grasp_interfaces"
#: Separator of the goal/result/feedback sections of an .action file.
_SEPARATOR = re.compile(r"^---\s*$", re.MULTILINE)


def interfaces_dir() -> Path:
    """The folder holding msg/, srv/ and action/ of agentic_grasp_interfaces.

    The installed share folder wins (what the running nodes were built from); the source
    folder next to this package is the fallback for a checkout without a colcon install.
    """
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        candidate = Path(prefix) / "share" / PACKAGE
        if prefix and (candidate / "msg").is_dir():
            return candidate
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / PACKAGE
        if (candidate / "msg").is_dir():
            return candidate
        candidate = parent / "src" / PACKAGE
        if (candidate / "msg").is_dir():
            return candidate
    raise FileNotFoundError(f"{PACKAGE} not found on AMENT_PREFIX_PATH nor next to the sources")


def _qualify(text: str) -> str:
    """Bare names of our own messages (``GraspParameters grasp``) -> package/msg/Name.

    rosbags resolves a bare field type against the defining type's namespace, which for the
    parts of an action is ``.../action``: the msg types would not be found there, so they are
    written out in full.
    """
    own = {p.stem for p in (interfaces_dir() / "msg").glob("*.msg")}
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            head, _, rest = stripped.partition(" ")
            base = head.split("[")[0]
            if base in own:
                line = f"{PACKAGE}/msg/{base}{head[len(base):]} {rest}"
        out.append(line)
    return "\n".join(out) + "\n"


def interface_types(root: Optional[Path] = None) -> Dict[str, object]:
    """Every message and action-part type of the package (get_types_from_msg results)."""
    root = root if root is not None else interfaces_dir()
    types: Dict[str, object] = {}
    for path in sorted((root / "msg").glob("*.msg")):
        types.update(get_types_from_msg(path.read_text(), f"{PACKAGE}/msg/{path.stem}"))
    for path in sorted((root / "action").glob("*.action")):
        parts = _SEPARATOR.split(path.read_text())
        base = f"{PACKAGE}/action/{path.stem}"
        for suffix, text in zip(("Goal", "Result", "Feedback"), parts):
            types.update(get_types_from_msg(_qualify(text), f"{base}_{suffix}"))
        # What travels on the hidden topic <action>/_action/feedback.
        types.update(get_types_from_msg(
            f"unique_identifier_msgs/msg/UUID goal_id\n{base}_Feedback feedback\n",
            f"{base}_FeedbackMessage"))
    return types


@lru_cache(maxsize=1)
def typestore() -> Typestore:
    """The Jazzy typestore plus our interfaces (built once per process)."""
    store = get_typestore(Stores.ROS2_JAZZY)
    store.register(interface_types())
    _LOG.debug("typestore with %d types", len(store.types))
    return store


def connection_args(msgtype: str, store: Optional[Typestore] = None) -> Dict[str, str]:
    """``msgdef`` and ``rihs01`` for rosbags' Writer.add_connection.

    rosbags cannot print the definition of a type that nests an action part
    (``X_FeedbackMessage`` holds ``X_Feedback``); that one is written out here in the
    concatenated rosbag2 layout: the top-level fields, then each nested type after a line of
    80 ``=`` and ``MSG: name``.
    """
    store = store if store is not None else typestore()
    rihs01 = store.hash_rihs01(msgtype)
    try:
        msgdef, _ = store.generate_msgdef(msgtype, ros_version=2)
        return {"msgdef": msgdef, "rihs01": rihs01}
    except AssertionError:
        pass
    package, _, name = msgtype.split("/")
    feedback = f"{package}/action/{name[:-len('Message')]}"
    parts = [f"unique_identifier_msgs/UUID goal_id\n{package}/{name[:-len('Message')]} "
             "feedback\n"]
    for nested in ("unique_identifier_msgs/msg/UUID", feedback):
        text, _ = store.generate_msgdef(nested, ros_version=2)
        head = nested.replace("/msg/", "/")
        parts.append("=" * 80 + f"\nMSG: {head}\n{text}")
    return {"msgdef": "".join(parts), "rihs01": rihs01}


def registered(prefix: str = PACKAGE) -> List[str]:
    """Names of the registered types under ``prefix`` (diagnostics, tests)."""
    return sorted(name for name in typestore().types if name.startswith(prefix))
