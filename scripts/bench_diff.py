#!/usr/bin/env python3
"""Diff two `agentic-grasp bench paper` output folders, ignoring wall-clock fields.

Usage: scripts/bench_diff.py BEFORE_DIR AFTER_DIR

Compares tables.json and every *records.jsonl. Keys that measure this machine's wall clock
(wall_s, setup_s, trials_per_s, mean_trial_wall_ms) and the worker count are dropped; everything else (success,
attempts, failure types, modelled times) must be identical. Exit 0 when identical, 1 when not,
printing the first differences. Used to show that a refactoring left behaviour unchanged.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

WALL_CLOCK = {"wall_s", "setup_s", "trials_per_s", "mean_trial_wall_ms", "workers"}


def strip(obj):
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items() if k not in WALL_CLOCK}
    if isinstance(obj, list):
        return [strip(v) for v in obj]
    return obj


def diff(a, b, path="", out=None):
    out = [] if out is None else out
    if type(a) is not type(b):
        out.append(f"{path}: {a!r} != {b!r}")
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'after' if k not in a else 'before'}")
            else:
                diff(a[k], b[k], f"{path}/{k}", out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append(f"{path}: length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b and not (isinstance(a, float) and a != a and b != b):     # nan == nan here
        out.append(f"{path}: {a!r} != {b!r}")
    return out


def main(argv) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    before, after = Path(argv[1]), Path(argv[2])
    names = ["tables.json"] + sorted(p.name for p in before.glob("*records.jsonl"))
    bad = 0
    for name in names:
        pa, pb = before / name, after / name
        if not pb.exists():
            print(f"{name}: missing in {after}")
            bad += 1
            continue
        if name.endswith(".json"):
            a, b = strip(json.loads(pa.read_text())), strip(json.loads(pb.read_text()))
        else:
            a = [strip(json.loads(line)) for line in pa.read_text().splitlines() if line]
            b = [strip(json.loads(line)) for line in pb.read_text().splitlines() if line]
        d = diff(a, b, name)
        print(f"{name}: {'identical' if not d else f'{len(d)} difference(s)'}")
        for line in d[:10]:
            print("   ", line)
        bad += bool(d)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
