"""Perception (paper Sec. III, V-A): Qwen3-VL through vLLM, or the simulator's ground truth.

Public API::

    from agentic_grasp.core.perception import (
        PerceivedObject, PerceptionResult, PerceptionBackend,   # result types, interface
        VlmBackend, VlmConfig,                                   # Qwen3-VL via vLLM
        OracleBackend, OracleConfig, resolve_targets,            # ground truth (+ noise)
        VlmSimBackend, VlmSimConfig,                             # simulated VLM (error model)
        create_backend, load_params)                             # from config/perception.yaml

``create_backend(load_params(), ground_truth_provider=sim.objects)`` gives the backend
named by ``backend`` ("vlm_sim" by default, the simulated VLM, which also needs
``segmentation_provider``; "vlm" to use the server at ``vlm.url``; "oracle", ground truth,
only when asked).
"""
from __future__ import annotations

from typing import Any, Callable, List, Mapping, Optional

from agentic_grasp.core.config import nested
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.perception.backend import (PerceivedObject, PerceptionBackend,
                                                   PerceptionResult)
from agentic_grasp.core.perception.config import DepthConfig
from agentic_grasp.core.perception.oracle import OracleBackend, resolve_targets
from agentic_grasp.core.perception.config import OracleConfig
from agentic_grasp.core.perception.params import NODE_NAME, load_params
from agentic_grasp.core.perception.vlm.client import VlmBackend
from agentic_grasp.core.perception.vlm.config import VlmConfig
from agentic_grasp.core.perception.vlm.sim import SegmentationProvider, VlmSimBackend
from agentic_grasp.core.perception.vlm.config import VlmSimConfig
from agentic_grasp.core.types import ObjectInstance

BACKENDS = ("oracle", "vlm", "vlm_sim")

__all__ = [
    "BACKENDS", "DepthConfig", "NODE_NAME", "OracleBackend", "OracleConfig", "PerceivedObject",
    "PerceptionBackend", "PerceptionResult", "VlmBackend", "VlmConfig", "VlmSimBackend",
    "VlmSimConfig", "create_backend", "load_params", "resolve_targets",
]


def create_backend(params: Optional[Mapping[str, Any]] = None, *,
                   ground_truth_provider: Optional[Callable[[], List[ObjectInstance]]] = None,
                   segmentation_provider: Optional[SegmentationProvider] = None,
                   seed: Optional[int] = None) -> PerceptionBackend:
    """The backend ``params["backend"]`` names, configured from ``params``.

    ``params`` is the ``ros__parameters`` mapping, nested or with ROS-style dotted keys
    (``vlm.url``). The oracle needs ``ground_truth_provider``, vlm_sim needs
    ``segmentation_provider`` (object-id mask + labels of a frame); ``seed`` overrides
    ``oracle.seed`` / ``vlm_sim.seed`` (benchmarks seed each trial).
    """
    flat_or_nested = dict(params if params is not None else load_params())
    cfg = nested(flat_or_nested) if any("." in k for k in flat_or_nested) else flat_or_nested
    backend = str(cfg.get("backend", "vlm_sim")).lower()
    if backend == "vlm":
        return VlmBackend(VlmConfig.from_params(cfg.get("vlm"), cfg.get("depth")))
    if backend == "vlm_sim":
        if segmentation_provider is None:
            raise ConfigError("perception backend 'vlm_sim' needs a segmentation_provider")
        sim_cfg = VlmSimConfig.from_params(cfg.get("vlm_sim"))
        return VlmSimBackend(segmentation_provider, sim_cfg,
                             VlmConfig.from_params(cfg.get("vlm"), cfg.get("depth")),
                             seed=seed)
    if backend == "oracle":
        if ground_truth_provider is None:
            raise ConfigError("perception backend 'oracle' needs a ground_truth_provider")
        oracle_cfg = dict(cfg.get("oracle") or {})
        oracle_seed = int(oracle_cfg.get("seed", 0)) if seed is None else int(seed)
        return OracleBackend(ground_truth_provider, OracleConfig.from_params(oracle_cfg),
                             seed=oracle_seed)
    raise ConfigError(f"perception.backend must be one of {', '.join(BACKENDS)}, "
                      f"got {backend!r}")
