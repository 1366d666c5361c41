"""Acquired experiences: the knowledge base grown during deployment (paper Sec. VI).

- :mod:`.acquisition`: every executed attempt becomes one acquired experience;
  :mod:`.experience_store` appends one to the acquired-experiences file;
- :mod:`.store`: where acquired experiences live, the JSON Lines file (:mod:`.file`: the file
  as a whole) or the fleet's PostgreSQL table (:mod:`.pg_store`);
- :mod:`.live`: HAA-RAG over the authored knowledge base plus the growing file;
- :mod:`.consolidation`: merging and evicting acquired experiences, so the base does not bloat.
"""
