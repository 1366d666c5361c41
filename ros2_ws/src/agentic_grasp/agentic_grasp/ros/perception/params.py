"""The perception node's backend parameters (vlm.*, depth.*, oracle.*, vlm_sim.*,
reperception.*), declared from the core configs' field metadata
(agentic_grasp.ros.common.params), and its bound on the wait for a fresh capture."""
from __future__ import annotations

from typing import Any, Dict

from rclpy.node import Node

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.perception import DepthConfig, OracleConfig, VlmConfig
from agentic_grasp.core.perception.config import DEFAULT_CONFUSION_MAP
from agentic_grasp.core.perception.reperception import ReperceptionConfig
from agentic_grasp.core.perception.vlm.config import DEFAULT_FRAGILITY_PRIORS
from agentic_grasp.core.perception.vlm.config import VlmLatencyModel, VlmSimConfig
from agentic_grasp.ros.common.params import declare, declare_fields, declare_map

FRAGILITY_PREFIX = "vlm.fragility_priors."
CONFUSION_PREFIX = "oracle.confusion_map."
SIM_CONFUSION_PREFIX = "vlm_sim.confusion_map."


def declare_backend_params(node: Node, backend_kind: str) -> Dict[str, Any]:
    """Declare every vlm.*, depth.* and oracle.* parameter; their values, nested."""
    # Descriptions (and the fields that are parameters) come from the configs' metadata.
    vlm = declare_fields(node, "vlm", VlmConfig)      # scalars; maps and depth below
    vlm["fragility_priors"] = declare_map(
        node, FRAGILITY_PREFIX, DEFAULT_FRAGILITY_PRIORS,
        "Fragility prior of category '{}' in [0, 1] (Table I), used when the model's "
        "value is unusable")
    depth = declare_fields(node, "depth", DepthConfig, fallback=(
        "Depth geometry parameter '{name}' (see DepthConfig in core/perception/depth.py)"))
    oracle = {"seed": declare(node, "oracle.seed", 0, "Seed of the oracle's noise")}
    oracle.update(declare_fields(node, "oracle", OracleConfig))
    oracle["confusion_map"] = declare_map(
        node, CONFUSION_PREFIX, DEFAULT_CONFUSION_MAP,
        "Categories the oracle may report instead of '{}' (string list)")
    vlm_sim = declare_fields(node, "vlm_sim", VlmSimConfig)
    vlm_sim["latency"] = declare_fields(node, "vlm_sim.latency", VlmLatencyModel)
    vlm_sim["confusion_map"] = declare_map(
        node, SIM_CONFUSION_PREFIX, DEFAULT_CONFUSION_MAP,
        "Categories the simulated VLM may report instead of '{}' (string list)")
    reperception = declare_fields(node, "reperception", ReperceptionConfig)
    return {"backend": backend_kind, "vlm": vlm, "depth": depth, "oracle": oracle,
            "vlm_sim": vlm_sim, "reperception": reperception}


def declare_capture_wait(node: Node) -> float:
    """``capture_wait_s``, the longest wait for a capture at or after a request's not_before.

    Derived when 0 from ``camera_rate_hz``, the slowest rate at which the camera delivers:
    four periods, room for a capture request lost before DDS matched the camera and for a
    frame lost in transport (both asked again every 0.2 s; the simulator re-sends). At 2 Hz
    that is 2 s; the simulator answered a request in p50 0.2 s, p99 0.7 s on the loaded
    2-core machine (60 calls), a streaming camera within a frame period.
    """
    rate = float(declare(node, "camera_rate_hz", 2.0,
                         "Slowest rate at which the camera delivers a capture (Hz; the "
                         "simulator, asked on a loaded machine: p99 about 1 s)"))
    wait = float(declare(node, "capture_wait_s", 0.0,
                         "Longest wait for a capture at or after a request's not_before (s); "
                         "0 = derived: 4 periods of camera_rate_hz (2 s at 2 Hz)"))
    if wait < 0.0 or rate <= 0.0:
        raise ConfigError(f"capture_wait_s must be >= 0 and camera_rate_hz > 0, got {wait}, "
                          f"{rate}")
    return wait if wait > 0.0 else 4.0 / rate


__all__ = ["CONFUSION_PREFIX", "FRAGILITY_PREFIX", "SIM_CONFUSION_PREFIX",
           "declare_backend_params", "declare_capture_wait"]
