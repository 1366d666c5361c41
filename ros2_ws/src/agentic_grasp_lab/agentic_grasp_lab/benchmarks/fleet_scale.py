"""Retrieval with N fleet records: the PostgreSQL store beside the file store, one run.

``agentic-grasp bench fleet --scale-records N`` (10^6 for the issue's number). N synthetic
acquired records (each an authored experience of one of the 10 knowledge-base categories with
its grasp shifted to one of ``cells`` tolerance cells, success drawn per record, robot and
time spread over a fleet of four) go into a JSON Lines file and, with COPY, into a fresh
database. Then, in this one process:

- start-up: a LiveRetriever over each store is built from nothing (wall and CPU seconds):
  reading every record, consolidating them into cells, the per-category cap, embedding the
  survivors (the file store validates each line with the JSON schema; the fleet store's rows
  were validated when written);
- per-request latency: the same queries (category + affordance + the visual embedding of an
  authored entry of the category) against both, p50 / p90, each request including its poll
  (the file store's ``stat``, the fleet store's listener flag): the in-memory index in both;
  the stores' requests are interleaved so a shared machine's load falls on both alike.

``file_records`` limits the file store's part (jsonschema costs about 1.6 ms a record, so
10^6 lines take about half an hour of CPU); the report says which count each store held.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import resource
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from agentic_grasp.core.planner.episode import retriever_for
from agentic_grasp.core.retrieval.acquired.live import LiveRetriever
from agentic_grasp.core.retrieval.acquired.pg_store import PostgresStore
from agentic_grasp.core.retrieval.acquired.store import FleetSource, FleetStore
from agentic_grasp.core.retrieval.knowledge_base import KnowledgeBase
from agentic_grasp.core.sim.objects import load_catalogue

CATEGORY_FILES = ("cup", "bottle", "bowl", "fruit", "glass", "ball", "block", "phone", "tool",
                  "other")


def synthetic_records(n: int, cells: int = 100, seed: int = 0, robots: int = 4):
    """Yield n valid acquired records (see module docstring)."""
    kb = KnowledgeBase.load()
    templates: Dict[str, Any] = {}
    for e in kb:
        if e.success and e.category not in templates:
            templates[e.category] = e.to_record()
    cats = sorted(templates)[:10]
    rng = np.random.default_rng(seed)
    t0 = 1.7e9
    for i in range(n):
        cat = cats[i % len(cats)]
        rec = json.loads(json.dumps(templates[cat]))
        cell = int(rng.integers(cells))
        pos = rec["grasp"]["position"]         # cells 12 mm apart on a 5 x 5 x k grid
        off = ((cell % 5) - 2, ((cell // 5) % 5) - 2, (cell // 25) - cells // 50)
        rec["grasp"]["position"] = [round(float(np.clip(p + 0.012 * o, -0.49, 0.49)), 4)
                                    for p, o in zip(pos, off)]
        ok = bool(rng.random() < 0.7)
        robot = f"robot{i % robots}"
        rec.update({"id": f"syn-{i:07d}", "success": ok,
                    "failure_mode": None if ok else "slip",
                    "provenance": f"acquired: synthetic {i}",
                    "acquisition": {"goal_id": f"syn-goal-{i // 3}", "robot": robot,
                                    "time": round(t0 + i * 0.5, 3),
                                    "perception_backend": "vlm_sim", "configuration": "full",
                                    "attempt": i % 3, "subgoal": 0}})
        rec.pop("outcomes", None)
        yield rec


def _cell_templates(cells: int) -> List[Dict[str, Any]]:
    """One record per (category, cell): synthetic_records' first ``10 x cells`` variants."""
    seen: Dict[Any, Dict[str, Any]] = {}
    for rec in synthetic_records(40 * cells, cells, seed=0):
        key = (rec["category"], tuple(rec["grasp"]["position"]))
        seen.setdefault(key, rec)
    return list(seen.values())


def fill(dsn: str, path: Path, n: int, file_records: int, cells: int) -> Dict[str, float]:
    """n rows made by the server (generate_series over the (category, cell) templates, a
    seeded random success, robot and time spread over the fleet), then the first
    ``file_records`` of them, as they are in the table, written to the JSONL file: both
    stores hold the very same records. Rows are inserted in generation order (``ORDER BY
    g.i``: seq follows i, whose cell is random), so any prefix of the table, the file's
    included, spans every cell (without it the join's order put 20 cells in the first
    2 x 10^4 rows, and the file side served 20 entries, not 400). Python-side generation
    would take minutes of CPU at 10^6."""
    from psycopg.types.json import Jsonb    # as pg_store: the driver loads where a server runs


    store = PostgresStore(dsn)
    conn = store.connection()
    started = time.perf_counter()
    templates = _cell_templates(cells)
    with conn.transaction():
        conn.execute("CREATE TEMP TABLE syn_base (k integer, category text, record jsonb)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO syn_base VALUES (%s, %s, %s)",
                            [(k, t["category"], Jsonb(t)) for k, t in enumerate(templates)])
        conn.execute("SELECT setseed(0.25)")
        conn.execute(
            """INSERT INTO acquired_experience (id, robot, goal_id, subgoal, attempt, time,
                   perception_backend, configuration, category, success, record)
               SELECT g.id, g.robot, g.goal, 0, g.i %% 3, g.t, 'vlm_sim', 'full', b.category,
                      g.ok, b.record || jsonb_build_object(
                        'id', g.id, 'success', g.ok,
                        'failure_mode', CASE WHEN g.ok THEN NULL ELSE 'slip' END,
                        'provenance', 'acquired: synthetic ' || g.i,
                        'acquisition', jsonb_build_object(
                          'goal_id', g.goal, 'robot', g.robot, 'time', g.t,
                          'perception_backend', 'vlm_sim', 'configuration', 'full',
                          'attempt', g.i %% 3, 'subgoal', 0))
               FROM (SELECT i, 'syn-' || lpad(i::text, 7, '0') AS id,
                            'robot' || (i %% 4) AS robot, 'syn-goal-' || (i / 3) AS goal,
                            round((1.7e9 + i * 0.5)::numeric, 3)::float8 AS t,
                            random() < 0.7 AS ok, floor(random() * %s)::int AS k
                     FROM generate_series(0, %s - 1) AS i) AS g
               JOIN syn_base b ON b.k = g.k
               ORDER BY g.i""", (len(templates), int(n)))
    with open(path, "w", encoding="utf-8") as fh:
        for (rec,) in conn.execute("SELECT record FROM acquired_experience ORDER BY seq "
                                   "LIMIT %s", (int(file_records),)):
            fh.write(json.dumps(rec, separators=(", ", ": ")) + "\n")
    store.close()
    return {"fill_s": round(time.perf_counter() - started, 1)}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _startup(build) -> Dict[str, Any]:
    wall, cpu = time.perf_counter(), _cpu()
    live = build()
    return {"live": live, "wall_s": round(time.perf_counter() - wall, 2),
            "cpu_s": round(_cpu() - cpu, 2), "records": live.acquired_records,
            "served": live.stats()["served"]}


def _summary(times: List[float]) -> Dict[str, float]:
    arr = np.asarray(times) * 1e3
    return {"p50_ms": round(float(np.percentile(arr, 50)), 4),
            "p90_ms": round(float(np.percentile(arr, 90)), 4), "n": len(times)}


def _latency(lives: List[Any], queries: List[Dict[str, Any]], repeats: int
             ) -> List[Dict[str, float]]:
    """Per-request latency of each retriever, interleaved (query by query, the order
    alternating each repeat), so that a shared machine's load falls on all of them alike."""
    times: List[List[float]] = [[] for _ in lives]
    for rep in range(repeats):
        for q in queries:
            order = range(len(lives)) if rep % 2 == 0 else reversed(range(len(lives)))
            for k in order:
                t = time.perf_counter()
                lives[k].retrieve(**q)
                times[k].append(time.perf_counter() - t)
    return [_summary(t) for t in times]


def run_scale(dsn: str, workdir: Path, records: int = 10 ** 5,
              file_records: Optional[int] = None, cells: int = 100,
              repeats: int = 40) -> Dict[str, Any]:
    file_records = records if file_records is None else min(int(file_records), records)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "fleet_scale.jsonl"
    out: Dict[str, Any] = {"records": records, "file_records": file_records, "cells": cells}
    out.update(fill(dsn, path, records, file_records, cells))
    authored = retriever_for(None)
    kb = authored.kb
    queries = []
    for e in kb:
        if e.success and e.embedding is not None and \
                all(q["category"] != e.category for q in queries):
            queries.append({"category": e.category, "affordance": e.affordance,
                            "embedding": np.asarray(e.embedding),
                            "embedding_model": kb.embedding_model})
    if not queries:                        # vectors live in the KB's matrix, not per entry
        for i, e in enumerate(kb):
            if e.success and all(q["category"] != e.category for q in queries):
                queries.append({"category": e.category, "affordance": e.affordance,
                                "embedding": np.asarray(kb.vectors[i]),
                                "embedding_model": kb.embedding_model})

    load_catalogue()          # the renderer's catalogue: loaded once per process, not timed
    pg = _startup(lambda: LiveRetriever(authored, "postgres", cache=False, source=FleetSource(
        dsn, workdir / "cache.jsonl", None)))
    fl = _startup(lambda: LiveRetriever(authored, path, cache=False))
    _latency([authored, pg["live"], fl["live"]], queries, 2)       # warm-up, not counted
    base, lat_pg, lat_file = _latency([authored, pg["live"], fl["live"]], queries, repeats)
    pg["live"].close()
    for d in (pg, fl):
        d.pop("live")
    out.update({"startup_postgres": pg, "startup_file": fl, "latency_authored_only": base,
                "latency_postgres": lat_pg, "latency_file": lat_file,
                "ratio_p50_postgres_over_file": round(lat_pg["p50_ms"] / lat_file["p50_ms"],
                                                      3)})
    return out


def format_scale(r: Dict[str, Any]) -> str:
    pg, fl = r["startup_postgres"], r["startup_file"]
    return "\n".join([
        f"retrieval at fleet scale: {r['records']} records in PostgreSQL, {r['file_records']} "
        f"in the file ({r['cells']} cells per category; server-side fill + file write "
        f"{r['fill_s']} s)",
        f"  start-up postgres: {pg['wall_s']} s wall, {pg['cpu_s']} s CPU, {pg['records']} "
        f"records -> {pg['served']} served entries",
        f"  start-up file:     {fl['wall_s']} s wall, {fl['cpu_s']} s CPU, {fl['records']} "
        f"records -> {fl['served']} served entries",
        f"  per request p50/p90: postgres {r['latency_postgres']['p50_ms']:.3f}/"
        f"{r['latency_postgres']['p90_ms']:.3f} ms, file {r['latency_file']['p50_ms']:.3f}/"
        f"{r['latency_file']['p90_ms']:.3f} ms, authored only "
        f"{r['latency_authored_only']['p50_ms']:.3f}/"
        f"{r['latency_authored_only']['p90_ms']:.3f} ms",
        f"  postgres / file p50: {r['ratio_p50_postgres_over_file']:.2f} x (target <= 1.5)"])


def _writer(dsn: str, n: int, gap_s: float, conn) -> None:
    """Child: commits n records, one every ``gap_s``, sending (id, commit time) of each."""
    store = FleetStore(dsn, robot="writer", fsync=False)
    for rec in synthetic_records(n, cells=n, seed=7):
        rec["id"] = "delay-" + rec["id"]
        store.append(rec)
        conn.send((rec["id"], time.time()))
        time.sleep(gap_s)
    conn.send(None)
    store.close()


def run_delay(dsn: str, workdir: Path, n: int = 200, gap_s: float = 0.2,
              request_every_s: float = 0.005) -> Dict[str, Any]:
    """Commit-to-served delay: a writer process (another robot) commits ``n`` records; two
    retrievers here (two robots' retrieval) send a request every ``request_every_s`` and
    note when each record is first served (it is in the consolidated KB the request used).
    The machine's load average is reported beside it (the tail is scheduling on a shared
    machine); the pick-up CPU is the thread CPU of each refresh that changed the served KB
    (now done by the retriever's pick-up thread when the notification arrives)."""
    authored = retriever_for(None)
    lives = [LiveRetriever(authored, "postgres", cache=False, source=FleetSource(
        dsn, workdir / f"delay-cache{i}.jsonl", None)) for i in range(2)]
    for live in lives:
        live.pickup_cpu_s.clear()              # the start-up read is not a pick-up
    e0 = next(e for e in authored.kb if e.success)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_writer, args=(dsn, n, gap_s, child), daemon=True)
    load_before = os.getloadavg()
    proc.start()
    committed: Dict[str, float] = {}
    served: List[Dict[str, float]] = [{}, {}]
    refresh_cpu: List[float] = []
    done = False
    # generous: on a loaded machine the writer's own appends (jsonschema, commit) are slower
    # than ``gap_s``; the measurement needs every record committed
    deadline = time.time() + 4 * n * gap_s + 120
    while time.time() < deadline:
        while parent.poll():
            msg = parent.recv()
            if msg is None:
                done = True
            else:
                committed[msg[0]] = msg[1]
        for live, seen in zip(lives, served):
            # the ids read before this request are all in the view it serves (a refresh
            # reads and rebuilds under one lock); taken before it, so a record this request
            # itself picks up counts from the next one (5 ms late at most, never early)
            with live._lock:
                ids = tuple(live._seen)
            live.retrieve(e0.category, e0.affordance)
            now = time.time()
            for rid in ids:
                if rid.startswith("delay-") and rid not in seen:
                    seen[rid] = now
        if done and all(len(s) >= len(committed) for s in served):
            break
        time.sleep(request_every_s)
    proc.join(timeout=10)
    load_after = os.getloadavg()
    for live in lives:
        refresh_cpu.extend(live.pickup_cpu_s)
        live.close()
    delays = sorted(s[rid] - committed[rid] for s in served for rid in s if rid in committed)
    missing = 2 * len(committed) - len(delays)
    arr = np.asarray(delays) * 1e3 if delays else np.asarray([np.nan])
    return {"records": len(committed), "served_pairs": len(delays), "never_served": missing,
            "p50_ms": round(float(np.percentile(arr, 50)), 1),
            "p99_ms": round(float(np.percentile(arr, 99)), 1),
            "max_ms": round(float(arr.max()), 1), "request_every_ms": 1e3 * request_every_s,
            "loadavg_1min_before_after": [round(load_before[0], 1), round(load_after[0], 1)],
            "cpus": os.cpu_count(),
            # CPU of the request that picked a record up (read, consolidate, embed the new
            # cell, rebuild the index): what the delay costs on an idle core
            "pickup_cpu_p50_ms": round(1e3 * float(np.median(refresh_cpu)), 1)
            if refresh_cpu else None,
            "pickup_cpu_p99_ms": round(1e3 * float(np.percentile(refresh_cpu, 99)), 1)
            if refresh_cpu else None}


__all__ = ["fill", "format_scale", "run_delay", "run_scale", "synthetic_records"]
