"""Grasps grounded in the perceived object.

- :mod:`.hand`: a geometric Franka Hand (palm, wrist, two fingers) swept along an approach;
- :mod:`.fit`: a retrieved strategy fitted to the perceived object (opening from the perceived
  extent, offsets relative to the extents, wrist yaw relative to the principal axis / handle);
- :mod:`.candidates`: clearance-aware candidate grasps around the perceived object, ranked by
  the hand's clearance to the perceived neighbours.

ROS-free; the planner uses only what perception reports (never simulator ground truth).
"""
from agentic_grasp.core.grasping.config import GraspSynthesisConfig, HandConfig
from agentic_grasp.core.grasping.fit import FitResult, fit_record, fit_strategy
from agentic_grasp.core.grasping.hand import HandModel, obb_gap
from agentic_grasp.core.grasping.candidates import Candidate, CandidateSet, generate_candidates

__all__ = ["GraspSynthesisConfig", "HandConfig", "FitResult", "fit_record", "fit_strategy",
           "HandModel", "obb_gap", "Candidate", "CandidateSet", "generate_candidates"]
