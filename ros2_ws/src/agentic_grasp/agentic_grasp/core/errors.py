"""Typed exceptions of the core (one family, so callers can map them to error codes)."""


class AgenticGraspError(Exception):
    """Base class of every error raised on purpose by agentic_grasp.core."""


class ValidationError(AgenticGraspError, ValueError):
    """An input (message, file, parameter) is malformed or out of range."""


class ConfigError(AgenticGraspError):
    """A configuration or data file is missing or invalid; names the file and field."""


class UnknownTargetError(AgenticGraspError, KeyError):
    """A request names an object id that is not in the scene."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown target"


class WorkspaceError(AgenticGraspError, ValueError):
    """A commanded pose lies outside the robot's workspace."""
