"""The MCP tools' contracts: each tool's ``outputSchema`` and closed input schemas.

An LLM reads a tool's JSON schemas to call it and to read its answer, so they say exactly
what is accepted and what comes back:

- every tool's input schema is closed (``additionalProperties: false``): an argument the tool
  does not take (``speed: 99``) is a tool error naming it, never dropped silently
  (:func:`close_inputs`);
- every tool declares an ``outputSchema`` (the models below, through the SDK's
  ``Annotated[CallToolResult, Model]``); the SDK validates each successful result's
  structured content against it, so the schema cannot drift from what is sent.

Imported on use (pydantic and the SDK are not needed to build the CLI's parser).
"""
from typing import Any, Dict, List, Optional

from pydantic import BaseModel, ConfigDict, Field


class GraspResult(BaseModel):
    """A grasp's result: the goal's (ros/client/grasp_report.result_report) or the server's
    refusal (core/mcp_tools.refused_report)."""

    success: bool
    error_code: str = Field(description="ERROR_NONE, a GraspObject ERROR_* name (e.g. "
                                        "ERROR_GRASP_FAILED, ERROR_CANCELED, ERROR_PEER_LOST) "
                                        "or the server's REFUSED_* / GRAPH_ERROR")
    message: str
    grasped_ids: List[str]
    total_time_s: float
    attempts: List[Dict[str, Any]] = Field(description="one per attempt: subgoal, target, "
                                                       "attempt, retry_level, grasp, success, "
                                                       "quality, failure_type, correction")


class SceneDescription(BaseModel):
    backend: str
    error: str
    warnings: List[str]
    objects: List[Dict[str, Any]] = Field(description="id, category, name, position and size "
                                                      "(m), affordance, material, region, "
                                                      "fragility, confidence, warnings")
    relations: List[Dict[str, Any]] = Field(description="subject, relation, object, "
                                                        "distance_m")


class LoadedScene(BaseModel):
    task: str
    seed: int
    instruction: str
    object_ids: List[str]
    target_ids: List[str]


class Strategies(BaseModel):
    query: Dict[str, Any]
    success: bool
    message: str
    candidates_level1: int
    candidates_level2: int
    strategies: List[Dict[str, Any]]


class AttemptPicture(BaseModel):
    caption: str


class StopReport(BaseModel):
    stopped: bool = Field(description="no grasp goal and no arm goal runs any more")
    goals_canceled: int
    goals_running_before: List[str]
    arm_was_moving: bool
    stop_s: float = Field(description="from the request to the arm being still (s)")
    notes: List[str]


class NodeHealth(BaseModel):
    name: str
    alive: bool
    deaths: int
    restarts: int


class GraphStatus(BaseModel):
    healthy: bool
    nodes: List[NodeHealth]
    running_goals: List[Dict[str, Any]] = Field(description="goal_id, status and the last "
                                                            "feedback (stage, target, attempt)")
    arm_moving: bool
    last_result: Optional[Dict[str, Any]]
    watching_since_unix_s: float
    this_server: Dict[str, Any]


def close_inputs(server: Any) -> None:
    """Make every registered tool's arguments closed: unknown ones are refused and the
    published input schema says ``additionalProperties: false``.

    MCPServer builds each tool's argument model on its own base, whose pydantic default
    ignores extra keys; the SDK has no option for it, so each tool's model is replaced by a
    subclass that forbids them (the SDK reads ``fn_metadata.arg_model`` and ``parameters``
    on each call and listing)."""
    for tool in server._tool_manager.list_tools():
        base = tool.fn_metadata.arg_model
        strict = type(base.__name__, (base,), {
            "model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True),
            "__module__": base.__module__})
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)


__all__ = ["AttemptPicture", "GraphStatus", "GraspResult", "LoadedScene", "SceneDescription",
           "StopReport", "Strategies", "close_inputs"]
