"""``agentic-grasp retrieve``: ask HAA-RAG (paper Sec. III-A) for grasp strategies, as JSON.

By default the query goes to the running retrieval node (``retrieve_strategies``, waited for
up to ``--timeout`` seconds); ``--local`` runs agentic_grasp.core.retrieval in this process
with the same config/retrieval.yaml and no ROS at all. ``--crop-from-object NAME`` renders a
crop of that config/objects.yaml object alone on the table (core/render.render_object_crop)
as the visual query, so level 3 has input, and fills in the category and affordance fields
not given on the command line from the catalogue entry. Without it, s_vis is 0.

Both paths print one JSON shape, mirroring RetrieveStrategies.srv and RetrievedStrategy.msg::

    {"source": "service" | "local", "success": bool, "message": str,
     "candidates_level1": int, "candidates_level2": int, "query": {...},
     "strategies": [{"rank", "id", "category", "success", "affordance": {type, material,
                     fragility, region}, "grasp": {... GraspParameters fields, OBJECT frame},
                     "provenance", "embedding_model", "s_cat", "s_aff",
                     "s_aff_terms": {type, material, fragility, region}   # weighted, sum s_aff
                     "s_vis", "penalty",        # multiplier: 0.7 failed experience, else 1.0
                     "s_final", "explanation"}]}

Numbers are rounded to 6 decimals (the service sends float32). Exit status: 0 with
strategies, 1 for a valid query without any (``message`` says why, e.g. an unknown
category), 2 for bad input, a bad configuration or an unreachable service.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, Optional, Tuple

import numpy as np

from agentic_grasp.core.errors import ConfigError, ValidationError

#: Fields of the query and the command-line option that sets each.
_QUERY_OPTIONS = (("category", "--category"), ("type", "--affordance"),
                  ("material", "--material"), ("fragility", "--fragility"),
                  ("region", "--region"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--category", help="object category, e.g. mug")
    parser.add_argument("--affordance", help="affordance type, e.g. Graspable_Handle")
    parser.add_argument("--material", help="dominant material, e.g. ceramic")
    parser.add_argument("--fragility", type=float, help="fragility in [0, 1]")
    parser.add_argument("--region", help="graspable region, e.g. handle")
    parser.add_argument("--k", type=int, default=0,
                        help="strategies wanted (default 0: the configured k)")
    parser.add_argument("--mode", choices=("haa", "clip_only"), default="",
                        help="retrieval mode (default: the configured mode, haa as shipped)")
    parser.add_argument("--crop-from-object", metavar="NAME", default="",
                        help="render this config/objects.yaml object as the visual query and "
                             "take the fields not given above from its catalogue entry")
    parser.add_argument("--local", action="store_true",
                        help="run the retrieval core in this process instead of asking the "
                             "retrieval node (no ROS needed)")
    parser.add_argument("--params-file", default="",
                        help="retrieval parameters file (default config/retrieval.yaml): "
                             "the configuration of --local and the crop size")
    parser.add_argument("--service", default="retrieve_strategies",
                        help="service name (default retrieve_strategies)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to wait for the service and for its answer")


class UsageError(RuntimeError):
    """The command line does not make a query; the message says what is missing."""


def _rounded(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return round(float(value), 6)
    return value


def build_query(args: argparse.Namespace) -> Tuple[Dict[str, Any], Optional[np.ndarray]]:
    """(query fields, crop or None) from the options and the --crop-from-object entry."""
    query: Dict[str, Any] = {"category": args.category, "type": args.affordance,
                             "material": args.material, "fragility": args.fragility,
                             "region": args.region}
    crop = None
    if args.crop_from_object:
        # on use: cli.py imports every command's module to build its parser
        from agentic_grasp.core.config import node_params
        from agentic_grasp.core.render.views import render_object_crop
        from agentic_grasp.core.sim.objects import load_catalogue

        model = load_catalogue().get(args.crop_from_object)       # ConfigError if unknown
        catalogue = {"category": model.category, "type": model.affordance.value,
                     "material": model.material, "fragility": model.fragility,
                     "region": model.region}
        for key, value in catalogue.items():
            if query[key] is None:
                query[key] = value
        # The knowledge base's crops are rendered at embedding.crop_size_px: so is the query.
        embedding = node_params("retrieval", args.params_file or None).get("embedding") or {}
        crop = render_object_crop(model.instantiate("query", 0.5, 0.0),
                                  size=int(embedding.get("crop_size_px", 64)))
    missing = [option for key, option in _QUERY_OPTIONS if query[key] is None]
    if missing:
        raise UsageError(f"missing {', '.join(missing)} (or give --crop-from-object to take "
                         "them from a catalogue object)")
    query["crop_from_object"] = args.crop_from_object
    return query, crop


def _affordance(query: Dict[str, Any]) -> Dict[str, Any]:
    return {k: query[k] for k in ("type", "material", "fragility", "region")}


# ---- --local: the core in this process -------------------------------------------------------

def retrieve_local(args: argparse.Namespace, query: Dict[str, Any],
                   crop: Optional[np.ndarray]) -> Dict[str, Any]:
    """The report of HAARAG.retrieve run here with the configured knowledge base."""
    # on use: cli.py imports every command's module to build its parser
    from agentic_grasp.core.retrieval import RetrievalConfig, build_retriever

    config = RetrievalConfig.from_config(args.params_file or None)
    rag = build_retriever(config)
    weights = {"type": config.w_type, "material": config.w_material,
               "fragility": config.w_fragility, "region": config.w_region}
    try:
        result = rag.retrieve(query["category"], _affordance(query), crop=crop,
                              k=args.k or None, mode=args.mode or None)
    except ValidationError as exc:
        return {"success": False, "message": str(exc), "candidates_level1": 0,
                "candidates_level2": 0, "strategies": []}
    strategies = []
    for s in result.strategies:
        exp = s.experience
        strategies.append({
            "rank": s.rank, "id": exp.id, "category": exp.category, "success": exp.success,
            "affordance": {"type": exp.affordance.type.value,
                           "material": exp.affordance.material,
                           "fragility": exp.affordance.fragility,
                           "region": exp.affordance.region},
            "grasp": exp.grasp_parameters().to_dict(), "provenance": exp.provenance,
            "embedding_model": exp.embedding_model, "s_cat": s.s_cat, "s_aff": s.s_aff,
            "s_aff_terms": {name: weights[name] * s.s_aff_terms[name] for name in weights},
            "s_vis": s.s_vis, "penalty": 1.0 - s.penalty, "s_final": s.s_final,
            "explanation": s.explanation})
    return {"success": True, "message": result.reason, "candidates_level1": result.n_level1,
            "candidates_level2": result.n_level2, "strategies": strategies}


def run(args: argparse.Namespace) -> int:
    try:
        query, crop = build_query(args)
        if args.local:
            report = retrieve_local(args, query, crop)
        else:
            # on use: cli.py imports every command's module to build its parser
            from agentic_grasp.ros.client.retrieval import retrieve_service

            report = retrieve_service(args.service, args.timeout, query, crop, args.k, args.mode)
    except ImportError as exc:
        print(f"error: {exc}: asking the retrieval node needs ROS 2 (source scripts/env.sh); "
              "--local does not", file=sys.stderr)
        return 2
    except (UsageError, ConfigError, ValidationError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = {"source": "local" if args.local else "service", "success": report["success"],
           "message": report["message"], "candidates_level1": report["candidates_level1"],
           "candidates_level2": report["candidates_level2"],
           "query": {**query, "k": args.k, "mode": args.mode,
                     "visual": "crop" if crop is not None else "none"},
           "strategies": report["strategies"]}
    print(json.dumps(_rounded(out), indent=2))
    if not report["success"]:
        return 2
    return 0 if report["strategies"] else 1
