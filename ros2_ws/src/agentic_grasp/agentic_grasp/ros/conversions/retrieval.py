"""Knowledge-base experiences, retrieval queries and retrieved strategies
(RetrieveStrategies) <-> the core's HAA-RAG types (paper Sec. III-A).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional

import numpy as np

from agentic_grasp.core.errors import ValidationError
from agentic_grasp.core.retrieval import Experience, ScoredStrategy
from agentic_grasp.core.retrieval.results import RetrievalResult
from agentic_grasp.ros.conversions.fields import float32_decimal
from agentic_grasp_interfaces.msg import (Experience as ExperienceMsg,
                                          RetrievedStrategy as RetrievedStrategyMsg)
from agentic_grasp.ros.conversions.grasp import (affordance_from_msg, affordance_to_msg,
                                                 grasp_from_msg, grasp_to_msg)
from agentic_grasp.ros.conversions.images import rgb_from_msg


# ---- retrieval (HAA-RAG) -------------------------------------------------------------------

#: Colour encodings a RetrieveStrategies target_crop may use (turned into RGB for embedding).
CROP_ENCODINGS = ("rgb8", "bgr8", "rgba8", "bgra8")


def experience_to_msg(experience: Experience) -> ExperienceMsg:
    """A knowledge-base experience; its grasp stays in the OBJECT frame (see Experience.msg),
    with the object it was recorded on and its fit record, which grasp fitting needs."""
    spec = experience.render_spec or {}
    fit = experience.fit or {}
    return ExperienceMsg(id=experience.id, category=experience.category,
                         affordance=affordance_to_msg(experience.affordance),
                         grasp=grasp_to_msg(experience.grasp_parameters()),
                         success=bool(experience.success), provenance=experience.provenance,
                         embedding_model=experience.embedding_model,
                         object_shape=str(spec.get("shape", "")),
                         object_size=[float(v) for v in spec.get("size", ())],
                         object_color=[int(min(max(int(c), 0), 255))
                                       for c in spec.get("color", ())],
                         object_material=str(spec.get("material", "")),
                         fit_offset_rel=[float(v) for v in fit.get("offset_rel", ())],
                         fit_opening=str(fit.get("opening", "")),
                         fit_margin_m=float(fit.get("margin_m", 0.0)),
                         fit_yaw_ref=str(fit.get("yaw_ref", "")))


def retrieved_strategy_to_msg(strategy: ScoredStrategy,
                              weights: Mapping[str, float]) -> RetrievedStrategyMsg:
    """One HAA-RAG strategy with its breakdown, in the message's conventions.

    The core keeps the four raw terms of Eq. 1 and the fraction the failure penalty removes;
    RetrievedStrategy.msg carries the weighted terms (they add up to s_aff) and the multiplier
    (0.7 for a failed experience, 1.0 otherwise). ``weights`` are the retriever's Eq. 1
    weights keyed "type", "material", "fragility", "region".
    """
    terms = strategy.s_aff_terms
    return RetrievedStrategyMsg(
        experience=experience_to_msg(strategy.experience), rank=int(strategy.rank),
        s_cat=float(strategy.s_cat), s_aff=float(strategy.s_aff),
        s_aff_type=float(weights["type"] * terms["type"]),
        s_aff_material=float(weights["material"] * terms["material"]),
        s_aff_fragility=float(weights["fragility"] * terms["fragility"]),
        s_aff_region=float(weights["region"] * terms["region"]),
        s_vis=float(strategy.s_vis), penalty=float(1.0 - strategy.penalty),
        s_final=float(strategy.s_final), explanation=strategy.explanation)


def retrieval_query_from_msg(request: Any) -> Dict[str, Any]:
    """Keyword arguments of ``HAARAG.retrieve`` for a RetrieveStrategies request.

    Checks only what the message itself can get wrong and leaves the rest (fragility range,
    mode, embedding model and size, crop size, embedding and crop together) to the core:

    - category and affordance must be given (an all-empty affordance is an error here,
      not a query without affordance: level 2 needs one); its fragility is read as the
      shortest decimal of the float32 (:func:`float32_decimal`);
    - a ``visual_embedding`` needs its ``embedding_model``: cosines are only meaningful
      between vectors of one model, so the caller must say which one made it;
    - ``target_crop`` counts as given when any of its fields is set, and must then be a
      colour image in one of CROP_ENCODINGS;
    - k = 0 and mode = "" become None: the retriever's configured values;
    - ``size`` is empty (not known) or 3 finite extents > 0 (m); ``perception_backend`` ""
      becomes None (not said: no ground-truth experience is served).
    """
    category = str(request.category).strip()
    if not category:
        raise ValidationError("category is empty: name the object's category (e.g. 'mug')")
    try:
        affordance = affordance_from_msg(request.affordance)
    except ValidationError as exc:
        raise ValidationError(f"affordance: {exc}") from None
    if affordance is None:
        raise ValidationError("affordance is empty: type, material, fragility and "
                              "graspable_region are needed for level 2")
    # The float32 field turns 0.3 into 0.30000001; score the decimal the client wrote, so a
    # query scores the same through the service as in-process.
    affordance = dataclasses.replace(
        affordance, fragility=float32_decimal(request.affordance.fragility))
    embedding = None
    if len(request.visual_embedding):
        if not request.embedding_model:
            raise ValidationError("visual_embedding given without embedding_model: name the "
                                  "model that made it")
        embedding = np.asarray(request.visual_embedding, dtype=np.float32)
    crop = None
    image = request.target_crop
    if image.height or image.width or image.encoding or len(image.data):
        if image.encoding not in CROP_ENCODINGS:
            raise ValidationError(f"target_crop encoding {image.encoding!r} is not a colour "
                                  f"image (one of {', '.join(CROP_ENCODINGS)})")
        try:
            crop = rgb_from_msg(image)
        except ValidationError as exc:
            raise ValidationError(f"target_crop is not a valid image: {exc}") from None
    size = None
    if len(request.size):
        size = np.asarray(request.size, dtype=np.float64)
        if size.shape != (3,) or not np.all(np.isfinite(size)) or not np.all(size > 0.0):
            raise ValidationError(f"size must be 3 finite extents > 0 (m) or empty, got "
                                  f"{size.tolist()}")
    return {"category": category, "affordance": affordance, "embedding": embedding,
            "embedding_model": request.embedding_model or None, "crop": crop,
            "k": int(request.k) or None, "mode": request.mode or None, "size": size,
            "perception_backend": str(request.perception_backend).strip() or None}


def experience_from_msg(msg: ExperienceMsg) -> Experience:
    """A knowledge-base experience of a RetrievedStrategy; its grasp stays in the object frame.

    The message carries the object the grasp was recorded on (render_spec) and the fit
    record, so the planner fits the strategy as it does in process; no embedding (the
    planner needs none).
    """
    affordance = affordance_from_msg(msg.affordance)
    if affordance is None:
        raise ValidationError(f"experience {msg.id!r} has no affordance")
    affordance = dataclasses.replace(affordance,
                                     fragility=float32_decimal(msg.affordance.fragility))
    grasp = grasp_from_msg(msg.grasp).to_dict()
    for name in ("width", "force", "approach_height", "speed", "wrist_yaw"):
        grasp[name] = float32_decimal(grasp[name])      # the KB's decimals, not float32 noise
    spec: Dict[str, Any] = {}
    if msg.object_shape:
        spec = {"shape": msg.object_shape, "size": [float(v) for v in msg.object_size],
                "color": [int(c) for c in msg.object_color]}
        if msg.object_material:
            spec["material"] = msg.object_material
    fit = None
    if msg.fit_opening:
        fit = {"offset_rel": [float(v) for v in msg.fit_offset_rel],
               "opening": msg.fit_opening, "margin_m": float(msg.fit_margin_m),
               "yaw_ref": msg.fit_yaw_ref or "principal"}
    return Experience(id=msg.id, category=msg.category, affordance=affordance, grasp=grasp,
                      success=bool(msg.success), provenance=msg.provenance, render_spec=spec,
                      embedding_model=msg.embedding_model, fit=fit)


def retrieved_strategy_from_msg(msg: RetrievedStrategyMsg,
                                weights: Optional[Mapping[str, float]] = None
                                ) -> ScoredStrategy:
    """A ScoredStrategy of a RetrievedStrategy (inverse of retrieved_strategy_to_msg).

    The message carries the weighted Eq. 1 terms; the raw terms of ScoredStrategy come back
    only when the retriever's ``weights`` are given (else ``s_aff_terms`` is empty). The
    penalty goes back from the multiplier to the fraction removed (0.7 -> 0.3).
    """
    terms: Dict[str, float] = {}
    if weights:
        weighted = {"type": msg.s_aff_type, "material": msg.s_aff_material,
                    "fragility": msg.s_aff_fragility, "region": msg.s_aff_region}
        terms = {k: (float(v) / float(weights[k]) if weights.get(k) else 0.0)
                 for k, v in weighted.items()}
    return ScoredStrategy(experience=experience_from_msg(msg.experience),
                          s_cat=float(msg.s_cat), s_aff=float(msg.s_aff), s_aff_terms=terms,
                          s_vis=float(msg.s_vis), penalty=float(1.0 - msg.penalty),
                          s_final=float(msg.s_final), rank=int(msg.rank),
                          explanation=msg.explanation)


def retrieval_result_from_msg(response: Any) -> RetrievalResult:
    """The core RetrievalResult of a RetrieveStrategies response.

    A response with success=false becomes an empty result whose reason is the node's
    message, which is what the planner reports when it falls back to its default grasp.
    """
    if not response.success:
        return RetrievalResult([], f"retrieval refused the query: {response.message}", 0, 0)
    return RetrievalResult([retrieved_strategy_from_msg(s) for s in response.strategies],
                           response.message, int(response.candidates_level1),
                           int(response.candidates_level2))
