"""``agentic-grasp retrieve`` against the running retrieval node: one RetrieveStrategies call.

The command (commands/retrieve.py) builds the query and prints the report; this module is
its ROS side: the request, a short-lived node, and the answer as the same JSON strategies
that ``--local`` prints.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import rclpy
from rclpy.node import Node

from agentic_grasp.ros.conversions.grasp import grasp_from_msg
from agentic_grasp.ros.conversions.images import rgb_to_msg
from agentic_grasp_interfaces.msg import AffordanceDescriptor
from agentic_grasp_interfaces.srv import RetrieveStrategies


def strategy_from_msg(msg: Any) -> Dict[str, Any]:
    """One RetrievedStrategy message as the JSON strategy (same keys as --local)."""
    exp = msg.experience
    return {
        "rank": int(msg.rank), "id": exp.id, "category": exp.category,
        "success": bool(exp.success),
        "affordance": {"type": exp.affordance.type, "material": exp.affordance.material,
                       "fragility": exp.affordance.fragility,
                       "region": exp.affordance.graspable_region},
        "grasp": grasp_from_msg(exp.grasp).to_dict(), "provenance": exp.provenance,
        "embedding_model": exp.embedding_model, "s_cat": msg.s_cat, "s_aff": msg.s_aff,
        "s_aff_terms": {"type": msg.s_aff_type, "material": msg.s_aff_material,
                        "fragility": msg.s_aff_fragility, "region": msg.s_aff_region},
        "s_vis": msg.s_vis, "penalty": msg.penalty, "s_final": msg.s_final,
        "explanation": msg.explanation}


def retrieve_service(service: str, timeout: float, query: Dict[str, Any],
                     crop: Optional[np.ndarray], k: int, mode: str) -> Dict[str, Any]:
    """The report of one RetrieveStrategies call; RuntimeError if the node does not answer."""
    if not 0 <= k < 2 ** 32:
        return {"success": False, "message": f"k must be >= 0, got {k}",
                "candidates_level1": 0, "candidates_level2": 0, "strategies": []}
    request = RetrieveStrategies.Request(
        category=query["category"], k=k, mode=mode,
        affordance=AffordanceDescriptor(type=query["type"], material=query["material"],
                                        fragility=float(query["fragility"]),
                                        graspable_region=query["region"]))
    if crop is not None:
        request.target_crop = rgb_to_msg(crop)
    own_context = not rclpy.ok()
    if own_context:
        rclpy.init()
    node = Node("agentic_grasp_retrieve")
    try:
        client = node.create_client(RetrieveStrategies, service)
        if not client.wait_for_service(timeout_sec=timeout):
            raise RuntimeError(
                f"service {service} is not available after {timeout:g} s: start the "
                "retrieval node (ros2 run agentic_grasp retrieval_node, or agentic-grasp "
                "bringup) or use --local")
        future = client.call_async(request)
        rclpy.spin_until_future_complete(node, future, timeout_sec=timeout)
        if not future.done():
            future.cancel()
            raise RuntimeError(f"{service}: no answer within {timeout:g} s")
        response = future.result()
    finally:
        node.destroy_node()
        if own_context and rclpy.ok():
            rclpy.try_shutdown()
    return {"success": bool(response.success), "message": response.message,
            "candidates_level1": int(response.candidates_level1),
            "candidates_level2": int(response.candidates_level2),
            "strategies": [strategy_from_msg(s) for s in response.strategies]}
