"""Fleet benchmark: do robots that share one PostgreSQL store learn faster than alone?

``agentic-grasp bench fleet``. Four simulated robots, each a separate planner process with its
own objects from the far-OOD and near-OOD sets (config/ood/splits.yaml, dealt round-robin:
robot r gets objects r, r + 4, ...), run ``goals`` goals per object:

1. **Fleet**: every robot appends each attempt to the shared fleet store
   (core/retrieval/store.py, one database) and retrieves through a LiveRetriever following
   it, so it is served what the other three learned.
2. **Alone**: the same robot, the same objects and seeds, with its own empty store (the
   file store: the same LiveRetriever code path, nobody else's records).

Rounds keep the comparison paired and the run repeatable: in round i every robot runs goal i
on each of its objects, then waits for the other robots; its retriever is refreshed at the
start of each round only (in both modes), so a goal is served exactly the records of the
earlier rounds (the fleet's or its own), whatever the processes' speed. Seeds are
``trial_seed(seed, object, i)`` as in ``bench learning``; ``eval_trials`` held-out seeds per
object then compare each robot's final knowledge (fleet vs alone), nothing appended.

Transfer is possible only where another robot's objects share a category or superclass
(the knowledge base's taxonomy plus the links acquisition learns): far-OOD objects are
unknown categories, so a fleet helps them only through a shared superclass link.
"""
from __future__ import annotations

import multiprocessing as mp
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Sequence

from agentic_grasp.core.planner.episode import retriever_for, run_trial
from agentic_grasp.core.retrieval.acquired.acquisition import Acquirer, AcquisitionContext
from agentic_grasp.core.retrieval.acquired.consolidation import wilson_interval
from agentic_grasp.core.retrieval.acquired.live import LiveRetriever
from agentic_grasp.core.retrieval.acquired.store import FileStore, FleetSource, FleetStore
from agentic_grasp.core.retrieval.acquired.pg_store import PostgresStore
from agentic_grasp.core.retrieval.taxonomy import Taxonomy
from agentic_grasp.core.sim.objects import load_catalogue
from agentic_grasp.core.sim.scenes import load_task
from agentic_grasp_lab.evaluation.studies.learning import learning_tasks
from agentic_grasp_lab.evaluation.studies.ood import load_splits
from agentic_grasp_lab.evaluation.sweep import trial_seed

ROBOTS = 4
EVAL_OFFSET = 100003


def fleet_objects(groups: Sequence[str] = ("far_ood", "near_ood")) -> List[str]:
    """Scene paths of the groups, in split order."""
    tasks = learning_tasks()
    splits = load_splits().splits
    return [t for g in groups for t in (tasks.get(g) or (
        [str(p) for p in splits[g].paths] if g in splits else []))]


def target_superclass(scene: str) -> str:
    """The knowledge-base superclass of a scene's (first) target, from the scene file and the
    object catalogue. Benchmark set-up only (which robot gets which object): the planner
    never sees it; it perceives the category from pixels."""
    spec = load_task(scene)
    first = next(o for o in spec.objects_spec if o.id == spec.targets[0])
    category = load_catalogue().models[first.catalogue].category
    taxonomy = Taxonomy.load()
    canonical = taxonomy.canonical(category) or category
    return taxonomy.superclass_of.get(canonical, canonical)


def deal(objects: Sequence[str], robots: int = ROBOTS, how: str = "split") -> List[List[str]]:
    """'split' (the issue's setting): robot r gets objects r, r + robots, ... (each object
    belongs to one robot); 'same': every robot gets every object (on its own seeds), the
    setting where the others' experience is about the very object in front of the robot;
    'category': only objects whose superclass another object of the set shares, each
    superclass's objects dealt to different robots (one object per robot and superclass
    while there are robots), so every robot holds objects whose siblings another robot
    grasps: transfer between different objects of a shared category is possible, and no
    object is shared."""
    if how == "same":
        return [list(objects) for _ in range(robots)]
    if how == "category":
        groups: Dict[str, List[str]] = {}
        for o in objects:
            groups.setdefault(target_superclass(o), []).append(o)
        out: List[List[str]] = [[] for _ in range(robots)]
        start = 0
        for sup in sorted(groups):
            members = groups[sup]
            if len(members) < 2:
                continue                      # nobody else's records can help it
            for j, o in enumerate(members):
                out[(start + j) % robots].append(o)
            start += len(members)             # balance the robots' loads
        return out
    if how != "split":
        raise ValueError(f"unknown deal {how!r} (split, same or category)")
    return [list(objects[r::robots]) for r in range(robots)]


def _robot_main(conn, robot: str, objects: List[str], mode: str, store_arg: str,
                perception: str, seed: int, eval_trials: int) -> None:
    # (``seed`` is this robot's: run_fleet offsets it per robot when robots share objects)
    """Child process: one robot. Receives round numbers (or 'eval' / 'stop') on ``conn``,
    answers each with {object: [success, ...]} for that round."""
    try:
        authored = retriever_for(None)
        work = Path(tempfile.mkdtemp(prefix=f"fleet-{robot}-"))
        if mode == "fleet":
            store = FleetStore(store_arg, spool_path=work / "spool.jsonl", robot=robot,
                               fsync=False)
            live = LiveRetriever(authored, "postgres", cache=False, source=FleetSource(
                store_arg, work / "cache.jsonl", work / "spool.jsonl"))
        else:
            store = FileStore(work / "alone.jsonl", fsync=False)
            live = LiveRetriever(authored, work / "alone.jsonl", cache=False)
        acquirer = Acquirer(work / "unused.jsonl", store=store)
        while True:
            msg = conn.recv()
            if msg == "stop":
                break
            live.refresh()                      # the records of the rounds before this one
            frozen = live.rag                   # ... and nothing newer during the round
            out: Dict[str, List[bool]] = {}
            for task in objects:
                name = Path(task).stem
                if msg == "eval":
                    out[name] = [bool(run_trial(task, "full", seed=trial_seed(
                        seed + EVAL_OFFSET, name, j), perception=perception,
                        retriever=frozen).success) for j in range(eval_trials)]
                    continue
                acquirer.context = AcquisitionContext(
                    goal_id=f"{name}-{msg}", perception_backend=perception,
                    configuration="full", robot=robot)
                out[name] = [bool(run_trial(task, "full", seed=trial_seed(seed, name, msg),
                                            perception=perception, retriever=frozen,
                                            attempt_sink=acquirer).success)]
            conn.send({"results": out, "skipped": acquirer.skipped,
                       "where": acquirer.last_where, "records": live.acquired_records})
        live.close()
        store.close()
        conn.send("bye")
    except BaseException as exc:  # noqa: BLE001 - report, never hang the parent
        conn.send({"error": f"{robot}: {exc!r}\n{traceback.format_exc()}"})


@dataclass
class RobotResult:
    robot: str
    objects: List[str]
    fleet: Dict[str, List[bool]] = field(default_factory=dict)
    alone: Dict[str, List[bool]] = field(default_factory=dict)
    eval_fleet: Dict[str, List[bool]] = field(default_factory=dict)
    eval_alone: Dict[str, List[bool]] = field(default_factory=dict)
    #: acquired records the robot's retriever held at the start of each round, per mode
    served_records: Dict[str, List[int]] = field(default_factory=dict)


@dataclass
class FleetResult:
    robots: List[RobotResult]
    goals: int
    block: int
    wall_s: Dict[str, float] = field(default_factory=dict)
    fleet_records: int = 0
    #: per robot, where each goal's first attempt in the fleet run started (first_sources)
    sources: Dict[str, Dict[str, int]] = field(default_factory=dict)
    how: str = "split"

    def curve(self, robot: RobotResult, mode: str) -> List[Dict[str, Any]]:
        series = robot.fleet if mode == "fleet" else robot.alone
        out = []
        for b in range(0, self.goals, self.block):
            hits = [x for v in series.values() for x in v[b:b + self.block]]
            k, n = sum(hits), len(hits)
            out.append({"block": b // self.block + 1, "successes": k, "n": n,
                        "ci": wilson_interval(k, n)})
        return out

    def to_dict(self) -> Dict[str, Any]:
        return {"goals": self.goals, "block": self.block, "wall_s": self.wall_s, "deal": self.how,
                "fleet_records": self.fleet_records, "first_attempt_sources": self.sources,
                "robots": [{"robot": r.robot, "objects": [Path(o).stem for o in r.objects],
                            "fleet": r.fleet, "alone": r.alone, "eval_fleet": r.eval_fleet,
                            "eval_alone": r.eval_alone, "served_records": r.served_records,
                            "curve_fleet": self.curve(r, "fleet"),
                            "curve_alone": self.curve(r, "alone")} for r in self.robots]}


def _run_mode(mode: str, dealt: List[List[str]], store_arg: str, perception: str,
              seeds: List[int], goals: int, eval_trials: int, results: List[RobotResult],
              progress: bool) -> None:
    ctx = mp.get_context("spawn")          # no inherited sockets, threads or DB connections
    procs, pipes = [], []
    for r, objects in enumerate(dealt):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_robot_main, args=(child, f"robot{r}", objects, mode,
                                                  store_arg, perception, seeds[r],
                                                  eval_trials),
                        daemon=True)
        p.start()
        procs.append(p)
        pipes.append(parent)

    def gather(tag: Any) -> List[Dict[str, Any]]:
        for pipe in pipes:
            pipe.send(tag)
        answers = [pipe.recv() for pipe in pipes]
        for a in answers:
            if isinstance(a, dict) and "error" in a:
                raise RuntimeError(a["error"])
        return answers

    try:
        for i in range(goals):
            for res, ans in zip(results, gather(i)):       # the barrier: all robots, round i
                target = res.fleet if mode == "fleet" else res.alone
                for name, v in ans["results"].items():
                    target.setdefault(name, []).extend(v)
                res.served_records.setdefault(mode, []).append(int(ans["records"]))
            if progress:
                done = sum(sum(sum(v) for v in (r.fleet if mode == "fleet" else r.alone)
                               .values()) for r in results)
                print(f"[fleet] {mode} round {i + 1}/{goals}: {done} successes so far",
                      flush=True)
        if eval_trials > 0:
            for res, ans in zip(results, gather("eval")):
                (res.eval_fleet if mode == "fleet" else res.eval_alone).update(ans["results"])
        for pipe in pipes:
            pipe.send("stop")
            pipe.recv()
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


def first_sources(records: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, int]]:
    """Per robot: how many goals' first attempts started from an authored entry, from an
    entry this robot learned, from one another robot learned (a consolidated cell is named
    by its first record, whose id carries its robot), or from no retrieved strategy. The
    records' own provenance (``acquisition.source_experience``) says it: this is what
    shows whether the fleet's records were ever used, whatever the outcome."""
    out: Dict[str, Dict[str, int]] = {}
    for r in records:
        acq = r.get("acquisition") or {}
        if int(acq.get("attempt", 0) or 0) != 0:
            continue
        robot = str(acq.get("robot", ""))
        src = str(acq.get("source_experience", ""))
        kind = ("none" if not src else "own" if src.startswith(f"acq-{robot}-") else
                "other" if src.startswith("acq-") else "authored")
        counts = out.setdefault(robot, {"authored": 0, "own": 0, "other": 0, "none": 0})
        counts[kind] += 1
    return out


def run_fleet(goals: int = 10, block: int = 5, eval_trials: int = 5, seed: int = 0,
              perception: str = "vlm_sim", groups: Sequence[str] = ("far_ood", "near_ood"),
              dsn: str = "", robots: int = ROBOTS, how: str = "split",
              progress: bool = True) -> FleetResult:
    """Both modes (module docstring) on the fleet store at ``dsn`` (an empty database)."""
    dealt = deal(fleet_objects(groups), robots, how)
    results = [RobotResult(f"robot{r}", objs) for r, objs in enumerate(dealt)]
    out = FleetResult(results, int(goals), int(block), how=how)
    # robots on the same objects must not run the same seeds (they would repeat each other)
    seeds = [seed + (7919 * r if how == "same" else 0) for r in range(robots)]
    for mode in ("fleet", "alone"):
        started = time.perf_counter()
        _run_mode(mode, dealt, dsn, perception, seeds, goals, eval_trials, results, progress)
        out.wall_s[mode] = round(time.perf_counter() - started, 1)
    store = PostgresStore(dsn)
    out.fleet_records = store.count()
    out.sources = first_sources(store.select())
    store.close()
    return out


def format_fleet(result: FleetResult) -> str:
    lines = [f"deal '{result.how}': success per block of {result.block} goals per object "
             "(the robot's objects pooled), fleet vs alone, same seeds"]
    tot = {"fleet": [0, 0], "alone": [0, 0], "eval_fleet": [0, 0], "eval_alone": [0, 0]}
    for r in result.robots:
        names = ", ".join(Path(o).stem.replace("ood_", "") for o in r.objects)
        seen = r.served_records.get("fleet", [])
        alone = r.served_records.get("alone", [])
        lines.append(f"{r.robot} ({names}); acquired records served at the last round: "
                     f"{seen[-1] if seen else 0} fleet, {alone[-1] if alone else 0} alone")
        src = result.sources.get(r.robot)
        if src:
            lines.append(f"  fleet run, first attempts (recorded goals) started from: authored "
                         f"{src['authored']}, its own {src['own']}, another robot's "
                         f"{src['other']}, none retrieved {src['none']}")
        for a, b in zip(result.curve(r, "fleet"), result.curve(r, "alone")):
            lines.append(f"  block {a['block']:>2}: fleet {a['successes']:>3}/{a['n']:<3} "
                         f"alone {b['successes']:>3}/{b['n']:<3}")
        for name in r.fleet:
            f, a = r.fleet[name], r.alone.get(name, [])
            ef, ea = r.eval_fleet.get(name, []), r.eval_alone.get(name, [])
            tot["fleet"][0] += sum(f)
            tot["fleet"][1] += len(f)
            tot["alone"][0] += sum(a)
            tot["alone"][1] += len(a)
            tot["eval_fleet"][0] += sum(ef)
            tot["eval_fleet"][1] += len(ef)
            tot["eval_alone"][0] += sum(ea)
            tot["eval_alone"][1] += len(ea)
            held = f"; held-out {sum(ef)}/{len(ef)} vs {sum(ea)}/{len(ea)}" if ef else ""
            lines.append(f"    {name:<26} series {sum(f)}/{len(f)} fleet vs {sum(a)}/{len(a)} "
                         f"alone{held}")
    lines.append(f"all robots: series {tot['fleet'][0]}/{tot['fleet'][1]} fleet vs "
                 f"{tot['alone'][0]}/{tot['alone'][1]} alone; held-out "
                 f"{tot['eval_fleet'][0]}/{tot['eval_fleet'][1]} vs "
                 f"{tot['eval_alone'][0]}/{tot['eval_alone'][1]}")
    lines.append(f"fleet store: {result.fleet_records} records; wall {result.wall_s}")
    return "\n".join(lines)


__all__ = ["FleetResult", "RobotResult", "deal", "fleet_objects", "format_fleet", "run_fleet"]
