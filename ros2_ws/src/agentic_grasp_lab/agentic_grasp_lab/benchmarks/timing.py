"""Percentiles of latency samples, printed the same way by every benchmark."""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np

from agentic_grasp.core.stats import percentiles


def summarize(samples_s: Sequence[float]) -> Dict[str, float]:
    ms = np.asarray(samples_s, dtype=float) * 1000.0
    p50, p90, p99 = percentiles(ms, (50, 90, 99))
    return {"n": int(ms.size), "p50_ms": p50, "p90_ms": p90, "p99_ms": p99,
            "mean_ms": float(ms.mean())}


def line(label: str, stats: Dict[str, float]) -> str:
    return (f"{label:<44} p50 {stats['p50_ms']:8.3f} ms   p90 {stats['p90_ms']:8.3f} ms   "
            f"p99 {stats['p99_ms']:8.3f} ms   (n={stats['n']})")
