"""HAA-RAG: the knowledge base of grasp experiences and its retrieval (paper Sec. III-A).

Public API::

    from agentic_grasp.core.retrieval import (
        Experience, KnowledgeBase, validate_kb,                 # the knowledge base
        grasp_to_world, grasp_to_object_frame,                  # object-frame grasps
        Taxonomy,                                               # categories, materials, regions
        RetrievalConfig, HAARAG, ScoredStrategy, RetrievalResult, build_retriever,
        VisualEmbedder, DescriptorEmbedder, OpenClipEmbedder, make_embedder,
        append_experience, experience_from_attempt,             # experience acquisition
        evaluate_retrieval, format_table)                       # Table IV

(Latency and memory at scale: :mod:`agentic_grasp_lab.benchmarks.retrieval_scale`.)

Typical use::

    rag = build_retriever()                       # config/retrieval.yaml, kb_data/, embedder
    result = rag.retrieve("cup", AffordanceDescriptor("Graspable_Handle", "ceramic", 0.3,
                                                      "handle"), crop=rgb_crop)
    grasp = grasp_to_world(result.best.experience, scene_object)
"""
from agentic_grasp.core.retrieval.embedding import (DescriptorEmbedder, OpenClipEmbedder,
                                                    VisualEmbedder, make_embedder)
from agentic_grasp.core.retrieval.kb_vectors import EmbeddingCache
from agentic_grasp.core.retrieval.evaluation import evaluate_retrieval, format_table
from agentic_grasp.core.retrieval.acquired.experience_store import (append_experience,
                                                                    experience_from_attempt)
from agentic_grasp.core.retrieval.haa_rag import HAARAG, EmbeddingModelMismatch, build_retriever
from agentic_grasp.core.retrieval.results import RetrievalResult, ScoredStrategy
from agentic_grasp.core.retrieval.config import RetrievalConfig
from agentic_grasp.core.retrieval.index import RetrievalIndex
from agentic_grasp.core.retrieval.knowledge_base import (Experience, KnowledgeBase,
                                                         grasp_to_object_frame, grasp_to_world,
                                                         validate_kb)
from agentic_grasp.core.retrieval.taxonomy import Taxonomy

__all__ = [
    "DescriptorEmbedder", "EmbeddingCache", "EmbeddingModelMismatch", "Experience", "HAARAG",
    "KnowledgeBase", "OpenClipEmbedder", "RetrievalConfig", "RetrievalIndex",
    "RetrievalResult", "ScoredStrategy", "Taxonomy", "VisualEmbedder", "append_experience",
    "build_retriever", "evaluate_retrieval", "experience_from_attempt",
    "format_table", "grasp_to_object_frame", "grasp_to_world", "make_embedder",
    "validate_kb",
]
