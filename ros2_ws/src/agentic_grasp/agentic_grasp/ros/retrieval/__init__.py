"""The retrieval node (HAA-RAG over the knowledge base and the acquired experiences)."""
