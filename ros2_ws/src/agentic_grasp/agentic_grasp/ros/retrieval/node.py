"""Retrieval node: serves ``retrieve_strategies`` (RetrieveStrategies.srv), HAA-RAG of Sec. III-A.

At start-up the node loads and validates the knowledge base (``knowledge_base_path`` plus
``acquired_experiences_path``), embeds it with the configured model (cached on disk) and
builds the retriever; the three levels and their constants live in
agentic_grasp.core.retrieval. A malformed knowledge base stops the node there: the
ConfigError names the file, line, entry and field, is logged, and ``main`` exits with 1.

Per request: message -> query (category, affordance descriptor, visual query, k, mode) ->
HAARAG.retrieve -> the top strategies with their full breakdown. Request semantics:

- the visual query is ``visual_embedding`` with the ``embedding_model`` that made it (it
  must be the knowledge base's model and dimension), or ``target_crop`` (rgb8 / bgr8, also
  rgba8 / bgra8), which the node embeds with its own model, or neither: then s_vis = 0 for
  every candidate and the message says so;
- ``k`` = 0 means the configured k (3); ``mode`` "" means the configured mode ("haa" as
  shipped), otherwise "haa" or "clip_only" (the Table IV baseline);
- an unknown category, a category with no experience in its superclass, or no candidate
  above tau_aff is not an error: success=true, no strategies, and ``message`` says why;
- bad input (empty category or affordance, NaN or out-of-range fragility, unknown
  affordance type, an embedding without its model id, of another model or of the wrong
  size, both an embedding and a crop, a crop that is not a colour image, an unknown mode)
  gives success=false and a message naming the problem. Nothing raises into the executor:
  the node keeps serving.

In a response, each RetrievedStrategy carries the weighted Eq. 1 terms (they add up to
s_aff) and the failure penalty as a multiplier (0.7 for a failed experience, else 1.0), as
RetrievedStrategy.msg documents; the Experience carries the object-frame grasp.

Parameters: every key of ``retrieval: ros__parameters:`` in config/retrieval.yaml is a
parameter of the same dotted name (``affordance_weights.type``, ``final_weights.visual``,
``embedding.open_clip.pretrained_path``, ``material_similarity.ceramic.glass``, ...), so
``--params-file config/retrieval.yaml`` (or any file of that shape) configures the node and
the in-process benchmarks read the very same file through RetrievalConfig.from_config. The
declared defaults are the values of the shipped config/retrieval.yaml: the code holds no
scoring constant of its own. ``material_similarity`` is open-ended (ROS parameters have no
map type): every pair of the shipped file is declared, plus every pair a params file or
``-p`` adds under ``material_similarity.``; a pair set to 0.0 counts as absent (s_mat of
two different materials is 0 unless listed), which is how a params file turns a shipped
pair off. Floats must be written as floats (0.0, not 0): ROS parameters are typed.

The scoring constants (k1, k, tau_aff, the category scores, both weight sets,
region_family_score, material_similarity.*, failure_penalty, clip_only_failure_penalty,
mode) may be changed at run time; a combination the core rejects is refused as a whole with
the reason. The knowledge base paths and ``embedding.*`` are read at start-up only (changing
them means reloading and re-embedding the knowledge base: restart the node); setting them
at run time is refused. Acquired experiences appended while the node runs are picked up
before the next request (core/retrieval/live.py: an append offset, consolidated, only new
entries embedded); a restart reads the same file to the same state.

Fleet store (``acquired_store: postgres``, core/retrieval/store.py): the node follows the
PostgreSQL table of every robot's attempts through LISTEN/NOTIFY instead of the file (DSN
from $AGENTIC_GRASP_PG_DSN or libpq's PG* variables, never a parameter), plus this robot's
spool (``fleet.spool_path``). A database that is down at start is not fatal: the node serves
the authored knowledge base + its local cache (``fleet.cache_path``) and says so, and reads
the database once it returns; refused credentials or an unknown schema version are (the
error names host and database, never the password).
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Optional

from rcl_interfaces.msg import SetParametersResult
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.parameter import Parameter

from agentic_grasp.ros.conversions.retrieval import (retrieval_query_from_msg,
                                                     retrieved_strategy_to_msg)
from agentic_grasp.core.config import node_params
from agentic_grasp.core.errors import ConfigError, ValidationError
from agentic_grasp.core.retrieval import HAARAG, RetrievalConfig
from agentic_grasp.core.retrieval.acquired.acquisition import resolve_acquired_path
from agentic_grasp.core.retrieval.acquired.live import LiveRetriever, build_live_retriever
from agentic_grasp.core.retrieval.acquired.store import FleetSource, check_store, resolve_local
from agentic_grasp.ros.common.runner import spin_node
from agentic_grasp.ros.common import params
from agentic_grasp.ros.common.params import declare, warn_undeclared
from agentic_grasp_interfaces.srv import RetrieveStrategies

NODE_NAME = "retrieval"
SERVICE = "retrieve_strategies"
SIMILARITY_PREFIX = "material_similarity."
#: Parameters read once at start-up; changing them needs a reload of the knowledge base.
STARTUP_ONLY = ("knowledge_base_path", "acquired_experiences_path", "embedding.",
                "acquired_store", "fleet.")
#: The fleet store's parameters (not RetrievalConfig's: they say where, not how to score).
FLEET_PARAMS = {
    "acquired_store": ("file", "Where acquired experiences are followed: 'file' (the "
                       "acquired_experiences_path JSONL) or 'postgres' (the fleet store; "
                       "DSN from $AGENTIC_GRASP_PG_DSN or the PG* variables)"),
    "fleet.cache_path": ("default", "Local copy of the fleet records last read, served while "
                         "the database is down at start ('default' = $XDG_DATA_HOME/"
                         "agentic_grasp/fleet_cache.jsonl)"),
    "fleet.spool_path": ("default", "This robot's spool (the planner's acquisition."
                         "spool_path), served beside the database ('default' = "
                         "$XDG_DATA_HOME/agentic_grasp/fleet_spool.jsonl, 'none' = off)"),
}
#: Text of a key of config/retrieval.yaml that RetrievalConfig's field metadata does not know.
FALLBACK_DESCRIPTION = "config/retrieval.yaml: {name}"

def flatten(mapping: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """Nested parameters -> ROS dotted names ({'a': {'b': 1}} -> {'a.b': 1}), as rcl does."""
    out: Dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def affordance_weights(config: RetrievalConfig) -> Dict[str, float]:
    """The Eq. 1 weights keyed as the message's terms."""
    return {"type": config.w_type, "material": config.w_material,
            "fragility": config.w_fragility, "region": config.w_region}


class RetrievalNode(Node):
    """Holds one HAA-RAG retriever over the knowledge base and answers RetrieveStrategies."""

    def __init__(self, **node_kwargs: Any) -> None:
        super().__init__(NODE_NAME, **node_kwargs)
        try:
            self._names = self._declare_parameters()
            config = self._read_config({})
            started = time.perf_counter()
            acquired = resolve_acquired_path(config.acquired_experiences_path)
            source = self._fleet_source()
            try:
                self._rag: HAARAG = build_live_retriever(
                    config, acquired_path=acquired or "", source=source)
            except BaseException:
                if source is not None:
                    source.close()
                raise
        except Exception:
            self.destroy_node()     # a node that cannot serve must not linger on the graph
            raise
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)
        self.create_service(RetrieveStrategies, SERVICE, self._on_retrieve)
        kb = self._rag.kb
        self.get_logger().info(
            f"HAA-RAG ready: {len(kb)} experiences from {len(kb.sources)} files, embedding "
            f"model {self._rag.index.model_id} ({self._rag.index.dim} dims), mode "
            f"{config.mode}, k {config.k}, loaded in {time.perf_counter() - started:.2f} s")
        status = getattr(self._rag, "status", "")
        if status:
            (self.get_logger().warning if "not reachable" in status
             else self.get_logger().info)(f"fleet store: {status}")

    def _fleet_source(self) -> Optional[FleetSource]:
        """The fleet store to follow instead of the file (acquired_store: postgres)."""
        fleet = {n: str(self.get_parameter(n).value) for n in FLEET_PARAMS}
        if check_store(fleet["acquired_store"]) != "postgres":
            return None
        spool = fleet["fleet.spool_path"]
        return FleetSource(cache_path=resolve_local(fleet["fleet.cache_path"],
                                                    "fleet_cache.jsonl"),
                           spool_path=None if spool.lower() == "none" else
                           resolve_local(spool, "fleet_spool.jsonl"))

    def destroy_node(self) -> None:
        rag = getattr(self, "_rag", None)
        if isinstance(rag, LiveRetriever):     # the fleet source's listener thread
            rag.close()
        super().destroy_node()

    @property
    def retriever(self) -> HAARAG:
        """The retriever now in use (replaced when a scoring parameter changes)."""
        return self._rag

    @property
    def config(self) -> RetrievalConfig:
        return self._rag.config

    # ---- parameters ---------------------------------------------------------------------------
    def _declare_parameters(self) -> List[str]:
        """Declare every parameter of config/retrieval.yaml (its values are the defaults)."""
        defaults = flatten(node_params(NODE_NAME))
        overrides = params.overrides(self)
        for name, value in overrides.items():
            if name.startswith(SIMILARITY_PREFIX) and name not in defaults:
                defaults[name] = value          # a pair the params file adds; typed as given
        names = []
        for name, default in defaults.items():
            # the texts are RetrievalConfig's field metadata (its ``name``s, ``keys`` and the
            # material pairs' ``template``)
            text = params.description_of(RetrievalConfig, name, FALLBACK_DESCRIPTION)
            try:
                declare(self, name, default, text)
            except ParameterException as exc:
                raise ConfigError(f"retrieval parameter '{name}': {exc} (ROS parameters are "
                                  "typed: write floats as 0.0, integers as 0)") from None
            names.append(name)
        for name, (default, text) in FLEET_PARAMS.items():
            declare(self, name, default, text)
        warn_undeclared(self, "retrieval")
        return names

    def _read_config(self, changes: Mapping[str, Any]) -> RetrievalConfig:
        """RetrievalConfig of the current values with ``changes``; ConfigError if rejected."""
        values = {name: self.get_parameter(name).value for name in self._names}
        values.update(changes)
        return RetrievalConfig.from_params(values, source="retrieval parameters")

    def _check_parameters(self, params: List[Parameter]) -> SetParametersResult:
        fixed = [p.name for p in params if p.name.startswith(STARTUP_ONLY)]
        if fixed:
            return SetParametersResult(
                successful=False, reason=f"{', '.join(fixed)}: read at start-up only (the "
                "knowledge base is loaded and embedded then); restart the node to change it")
        try:
            self._read_config({p.name: p.value for p in params if p.name in self._names})
        except (ConfigError, ValidationError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _apply_parameters(self, params: List[Parameter]) -> None:
        if not any(p.name in self._names for p in params):
            return
        old = self._rag
        if isinstance(old, LiveRetriever):     # keeps following the acquired file
            old.config = self._read_config({})
            self.get_logger().info("retrieval parameters updated: "
                                   + ", ".join(f"{p.name}={p.value}" for p in params))
            return
        # Same knowledge base, index and embedder: only the scoring constants change. The
        # swap is one reference assignment: a request in flight keeps the retriever it took.
        self._rag = HAARAG(old.kb, self._read_config({}), old.embedder, index=old.index)
        self.get_logger().info("retrieval parameters updated: "
                               + ", ".join(f"{p.name}={p.value}" for p in params))

    # ---- service ------------------------------------------------------------------------------
    def _on_retrieve(self, request: RetrieveStrategies.Request,
                     response: RetrieveStrategies.Response) -> RetrieveStrategies.Response:
        started = time.perf_counter()
        rag = self._rag
        try:
            query = retrieval_query_from_msg(request)
            result = rag.retrieve(**query)
        except ValidationError as exc:       # EmbeddingModelMismatch included
            return self._fail(response, str(exc), request)
        except Exception as exc:  # noqa: BLE001 - a core bug must not take the node down
            self.get_logger().error(f"retrieve_strategies raised: {exc!r}")
            return self._fail(response, f"internal error: {type(exc).__name__}: {exc}",
                              request)
        weights = affordance_weights(rag.config)
        response.success = True
        response.message = result.reason
        response.strategies = [retrieved_strategy_to_msg(s, weights) for s in result.strategies]
        response.candidates_level1 = int(result.n_level1)
        response.candidates_level2 = int(result.n_level2)
        visual = ("embedding" if query["embedding"] is not None
                  else "crop" if query["crop"] is not None else "none")
        self.get_logger().debug(
            f"retrieve {request.category!r} {query['affordance'].type.value}/"
            f"{query['affordance'].material}/{query['affordance'].fragility:g}/"
            f"{query['affordance'].region} visual={visual} mode={result.mode}: "
            f"L1 {result.n_level1}, L2 {result.n_level2} -> "
            f"{[s.experience.id for s in result.strategies]} "
            f"in {1e3 * (time.perf_counter() - started):.1f} ms")
        return response

    def _fail(self, response: RetrieveStrategies.Response, message: str,
              request: RetrieveStrategies.Request) -> RetrieveStrategies.Response:
        response.success = False
        response.message = message
        self.get_logger().warning(f"retrieve_strategies rejected ({request.category!r}): "
                                  f"{message}")
        return response


def main(args: Optional[List[str]] = None) -> None:
    spin_node(RetrievalNode, num_threads=2, args=args, fatal=(ConfigError, ValidationError))


if __name__ == "__main__":
    main()
