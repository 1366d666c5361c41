"""Live pick-up of acquired experiences: HAA-RAG over the authored KB + a growing file.

:class:`AcquiredLog` follows the acquired-experiences file with an append offset: each
:meth:`~AcquiredLog.poll` is one ``os.stat`` and, when the file grew, one read of the new
bytes up to the last complete line (a line being written, or torn by a SIGKILL, is left for
later; :func:`.jsonl.append_line` cuts a torn tail before the next record). A file that
shrank or was replaced (``kb prune`` rewrites it atomically) is read again from the start.

:class:`LiveRetriever` wraps :class:`.haa_rag.HAARAG`: before every retrieval it polls the
log; new valid records are added to the :class:`.consolidation.Consolidator` (O(1) each),
only the consolidated entries not seen before are embedded, and a new HAARAG over the authored
entries + the consolidated acquired ones that succeeded at least once replaces the old one
(one reference swap). So an experience written by one goal is served to the next, and a
restart, which reads the file once from the start through the same code path, gives the same
state: nothing lost, nothing duplicated (ids are unique; a repeated id is skipped with a
warning, the first one wins).

Invalid acquired records never stop the node: each is skipped with the file:line and field
in a warning (``rejected``); ``kb validate --acquired`` lists them.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from agentic_grasp.core.retrieval.acquired.acquisition import extend_taxonomy
from agentic_grasp.core.retrieval.config import ConsolidationConfig
from agentic_grasp.core.retrieval.acquired.consolidation import Consolidator
from agentic_grasp.core.retrieval.kb_vectors import EmbeddingCache, embed_render_specs
from agentic_grasp.core.retrieval.embedding import VisualEmbedder
from agentic_grasp.core.retrieval.haa_rag import HAARAG, build_retriever
from agentic_grasp.core.retrieval.config import RetrievalConfig
from agentic_grasp.core.retrieval.knowledge_base import (Experience, KnowledgeBase,
                                                         record_problems)

_LOG = logging.getLogger(__name__)


@dataclass
class LogChunk:
    """What one poll found: new (line, record) pairs, unparsable lines, and whether the
    file was replaced (then ``records`` is the whole file again)."""

    records: List[Tuple[int, Any]] = field(default_factory=list)
    errors: List[Tuple[int, str]] = field(default_factory=list)
    reset: bool = False


class AcquiredLog:
    """Follows one JSON Lines file by offset (module docstring)."""

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        self.offset = 0
        self.line = 0
        self._identity: Optional[Tuple[int, int]] = None

    def poll(self) -> LogChunk:
        chunk = LogChunk()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self.offset or self._identity is not None:
                chunk.reset = True            # removed: nothing acquired any more
                self.offset, self.line, self._identity = 0, 0, None
            return chunk
        identity = (st.st_dev, st.st_ino)
        if self._identity is not None and (identity != self._identity
                                           or st.st_size < self.offset):
            chunk.reset = True
            self.offset, self.line = 0, 0
        self._identity = identity
        if st.st_size == self.offset:
            return chunk
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(st.st_size - self.offset)
        end = data.rfind(b"\n")
        if end < 0:
            return chunk                      # only a line in progress (or a torn tail)
        self.offset += end + 1
        for raw in data[:end].split(b"\n"):
            self.line += 1
            text = raw.strip()
            if not text or text.startswith(b"#"):
                continue
            try:
                chunk.records.append((self.line, json.loads(text.decode("utf-8"))))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                chunk.errors.append((self.line, f"not a JSON record: {exc}"))
        return chunk


def _light_problems(record: Any, where: str, taxonomy) -> List[str]:
    """The checks of a record validated at write time: an object with a string id and a
    category of the (extended) taxonomy."""
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        return [f"{where}: not an experience record"]
    if record.get("category") not in taxonomy.superclass_of:
        return [f"{where}: entry '{record['id']}': field 'category': "
                f"'{record.get('category')}' is not a category of the taxonomy"]
    return []


class _MemoryCache:
    """The vectors this process rendered, by render-spec key, in front of the optional disk
    cache: a new consolidated cell whose object looks like one already embedded (the same
    perceived shape, size, colour, material) costs a dict look-up, not a render (~40 ms)."""

    def __init__(self, disk: Optional[EmbeddingCache]) -> None:
        self.disk = disk
        self.vectors: Dict[str, np.ndarray] = {}
        self.directory = getattr(disk, "directory", "")

    def get_many(self, model_id: str, keys) -> Dict[str, np.ndarray]:
        keys = set(keys)
        found = {k: self.vectors[k] for k in keys if k in self.vectors}
        if self.disk is not None and len(found) < len(keys):
            more = self.disk.get_many(model_id, keys - set(found))
            self.vectors.update(more)
            found.update(more)
        return found

    def put_many(self, model_id: str, vectors) -> None:
        self.vectors.update(vectors)
        if self.disk is not None:
            self.disk.put_many(model_id, vectors)


class LiveRetriever:
    """HAA-RAG over the authored knowledge base plus a live acquired file (module doc)."""

    def __init__(self, base: HAARAG, path: Union[str, Path],
                 consolidation: Optional[ConsolidationConfig] = None,
                 cache: Union[EmbeddingCache, None, bool] = False, crop_size: int = 64,
                 source: Any = None) -> None:
        """``source``: what to follow instead of the file at ``path`` (anything with
        ``poll() -> LogChunk``, e.g. the fleet store's :class:`.store.FleetSource`; then
        ``path`` only names it in messages)."""
        self.base = base
        self.path = Path(path)
        self.consolidation = consolidation or ConsolidationConfig()
        self.cache = _MemoryCache(cache if cache is not False else None)
        self.crop_size = int(crop_size)
        self._log = source if source is not None else AcquiredLog(self.path)
        self.source_name = str(getattr(source, "name", self.path))
        self._lock = threading.Lock()
        self._rag = base
        self._config = base.config
        self._vectors: Dict[str, np.ndarray] = {}
        self._taxonomy = base.kb.taxonomy if base.kb is not None else base.taxonomy
        self._reset_state()
        self.pickup_cpu_s: Deque[float] = deque(maxlen=4096)
        self._warm_up()
        self.refresh()
        # A source that can block until it has news (the fleet store's LISTEN/NOTIFY) is
        # followed by a thread: a record another robot commits is read, consolidated,
        # embedded and indexed when its notification arrives, so the next request only swaps
        # nothing in (it still polls, under the same lock: a request never sees less than
        # what was notified before it). The file store has no such signal: it is polled by
        # each request (one stat).
        self._closed = threading.Event()
        self._follower: Optional[threading.Thread] = None
        if callable(getattr(self._log, "wait", None)):
            self._follower = threading.Thread(target=self._follow, name="fleet-pickup",
                                              daemon=True)
            self._follower.start()

    def _warm_up(self) -> None:
        """Render and embed one authored entry now (the result is thrown away): the first
        render in a process loads the object catalogue and the renderer (~2 s of pure-Python
        YAML), and without this the first acquired entry served pays it, measured as a 2.5 s
        commit-to-served delay when the base vectors came from the disk cache."""
        kb, embedder = self.base.kb, self.base.embedder
        if kb is None or kb.vectors is None or embedder is None or not len(kb):
            return
        try:
            embed_render_specs([kb.experiences[0].visual_spec()], embedder, None, self.crop_size)
        except Exception as exc:  # noqa: BLE001 - only a warm-up: the pick-up reports errors
            _LOG.debug("render warm-up failed: %r", exc)

    def _follow(self, every_s: float = 0.5) -> None:
        """The pick-up thread (above): refresh on every notification, and at least every
        ``every_s`` (this robot's spool, a reconnect)."""
        while not self._closed.is_set():
            self._log.wait(every_s)
            if self._closed.is_set():
                break
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - the request path still refreshes
                _LOG.warning("fleet pick-up failed (the next request retries): %r", exc)
                self._closed.wait(every_s)

    def _reset_state(self) -> None:
        self._consolidator = Consolidator(self.consolidation)
        self._seen: Dict[str, str] = {}
        self._raw: List[Any] = []
        self._taxonomy = self.base.kb.taxonomy if self.base.kb is not None else \
            self.base.taxonomy
        self.rejected: List[str] = []
        self.acquired_records = 0
        self.withheld = 0

    # ------------------------------------------------------------------ state
    @property
    def rag(self) -> HAARAG:
        return self._rag

    @property
    def config(self) -> RetrievalConfig:
        return self._config

    @config.setter
    def config(self, value: RetrievalConfig) -> None:
        with self._lock:
            self._config = value
            self._rag = HAARAG(self._rag.kb, value, self._rag.embedder, index=self._rag.index)

    @property
    def kb(self) -> KnowledgeBase:
        return self._rag.kb

    @property
    def index(self):
        return self._rag.index

    @property
    def embedder(self) -> Optional[VisualEmbedder]:
        return self._rag.embedder

    @property
    def dropped(self):
        return list(self._consolidator.dropped)

    def close(self) -> None:
        """Stop following (the pick-up thread, the fleet source's listener thread and
        connection)."""
        self._closed.set()
        if self._follower is not None and self._follower is not threading.current_thread():
            self._follower.join(timeout=5.0)
        close = getattr(self._log, "close", None)
        if close is not None:
            close()

    @property
    def status(self) -> str:
        """What the source says about itself ('' for a file)."""
        return str(getattr(self._log, "status", ""))

    def stats(self) -> Dict[str, Any]:
        return {"acquired_records": self.acquired_records,
                "consolidated": len(self._consolidator), "served": len(self._rag.kb)
                - len(self.base.kb), "dropped": len(self._consolidator.dropped),
                "withheld_never_succeeded": self.withheld, "rejected": len(self.rejected)}

    # ------------------------------------------------------------------ refresh
    def refresh(self) -> bool:
        """Pick up what was appended since the last call; True when the served KB changed.
        A source with a ``backlog`` (the fleet store's full read, in pages) is polled until
        it has none, consolidating page by page, and the served KB is rebuilt once."""
        with self._lock:
            cpu = time.thread_time()
            changed = False
            while True:
                chunk = self._log.poll()
                if chunk.reset:
                    _LOG.info("%s was replaced or shrank: reading it again",
                              self.source_name)
                    self._reset_state()
                for line, message in chunk.errors:
                    self._reject(f"{self.source_name}:{line}: {message}")
                new = self._validated(chunk.records)
                if new:
                    self._consolidator.add(new)
                changed = changed or bool(new) or chunk.reset
                if not getattr(self._log, "backlog", False):
                    break
            if changed:
                self._rebuild()
                self.pickup_cpu_s.append(time.thread_time() - cpu)
            return changed

    def _reject(self, message: str) -> None:
        self.rejected.append(message)
        _LOG.warning("acquired experience skipped: %s", message)

    def _validated(self, records: Sequence[Tuple[int, Any]]) -> List[Experience]:
        out: List[Experience] = []
        if not records:
            return out
        # extend_taxonomy links a category by its FIRST record only: keep just those (not
        # every record: the fleet store may hold 10^6)
        known = self._taxonomy.superclass_of
        firsts = {}
        for _, r in records:
            cat = r.get("category") if isinstance(r, dict) else None
            if isinstance(cat, str) and cat not in known and cat not in firsts:
                firsts[cat] = r
        if firsts:
            self._raw.extend(firsts.values())
            self._taxonomy = extend_taxonomy(self.base.kb.taxonomy, self._raw)
        authored = {e.id for e in self.base.kb}
        # The fleet store's rows were validated against the schema when they were written
        # (FleetStore.append, kb import; ``kb validate --store postgres`` re-checks the
        # table): re-running jsonschema on each (1.6 ms) would make 10^6 records a half-hour
        # start-up. Their category is still checked against the taxonomy, and a row that
        # does not convert is skipped like an invalid line.
        trusted = bool(getattr(self._log, "validated_at_write", False))
        for line, record in records:
            where = f"{self.source_name}:{line}"
            problems = _light_problems(record, where, self._taxonomy) if trusted else \
                record_problems(record, where, self._taxonomy)
            if problems:
                self._reject("; ".join(problems))
                continue
            eid = record["id"]
            if eid in self._seen or eid in authored:
                self._reject(f"{where}: entry '{eid}': field 'id': duplicate of "
                             f"{self._seen.get(eid, 'an authored entry')}")
                continue
            try:
                exp = Experience.from_record(record, where)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                self._reject(f"{where}: entry '{eid}': not an experience ({exc!r})")
                continue
            self._seen[eid] = where
            self.acquired_records += 1
            out.append(exp)
        return out

    def _rebuild(self) -> None:
        merged = self._consolidator.experiences()
        # An acquired grasp that never succeeded is not served: the planner would execute it
        # whenever the successful strategies do not fit the perceived object (it uses
        # retrieved failures as grasps, not as warnings). Its attempts still count in kb stats,
        # and it is served again once one attempt in its cell succeeds (the penalty then
        # scales with its failure rate).
        acquired = [e for e in merged if int((e.outcomes or {}).get("successes", 0)) > 0]
        self.withheld = len(merged) - len(acquired)
        for d in self._consolidator.dropped[-5:]:
            _LOG.info("consolidation dropped %s (%s, %d attempts): %s", d.id, d.category,
                      d.attempts, d.reason)
        base_kb = self.base.kb
        kb = KnowledgeBase(list(base_kb.experiences) + acquired, self._taxonomy,
                           list(base_kb.sources) + [self.source_name])
        embedder = self.base.embedder
        if base_kb.vectors is not None and embedder is not None:
            missing = [e for e in acquired if e.id not in self._vectors]
            if missing:
                vecs = embed_render_specs([e.visual_spec() for e in missing], embedder,
                                          self.cache, self.crop_size)
                for e, v in zip(missing, vecs):
                    self._vectors[e.id] = v
            rows = [base_kb.vectors] + ([np.stack([self._vectors[e.id] for e in acquired])]
                                        if acquired else [])
            kb.set_vectors(np.concatenate(rows, axis=0), base_kb.embedding_model)
        self._rag = HAARAG(kb, self._config, embedder)

    # ------------------------------------------------------------------ retrieval
    def retrieve(self, *args: Any, **kwargs: Any):
        """HAARAG.retrieve after picking up new acquired experiences."""
        self.refresh()
        return self._rag.retrieve(*args, **kwargs)


def build_live_retriever(config: Optional[RetrievalConfig] = None,
                         embedder: Optional[VisualEmbedder] = None,
                         acquired_path: Union[str, Path, None] = None,
                         consolidation: Optional[ConsolidationConfig] = None,
                         source: Any = None):
    """The authored HAA-RAG, wrapped in a LiveRetriever when an acquired path is set
    (``acquired_path`` or the config's ``acquired_experiences_path``) or a ``source`` is
    given (the fleet store's :class:`.store.FleetSource`, followed instead of the file);
    else the plain one."""
    config = config if config is not None else RetrievalConfig.from_config()
    path = acquired_path if acquired_path is not None else config.acquired_experiences_path
    base = build_retriever(replace(config, acquired_experiences_path=""), embedder)
    if not path and source is None:
        return base
    cache_dir = config.embedding.get("cache_dir") or None
    return LiveRetriever(base, path or "postgres", consolidation or
                         ConsolidationConfig.from_config(),
                         cache=EmbeddingCache(cache_dir),
                         crop_size=int(config.embedding.get("crop_size_px", 64)),
                         source=source)


__all__ = ["AcquiredLog", "LiveRetriever", "LogChunk", "build_live_retriever"]
