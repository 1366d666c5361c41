"""Latency percentiles, computed one way for every benchmark and report.

numpy's default (linear interpolation between the two nearest ranks), one call per
percentile, so every site that reports a p50 / p90 / p95 / p99 means the same number.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np


def percentiles(samples: Sequence[float], qs: Sequence[float],
                scale: float = 1.0) -> List[float]:
    """The ``qs``-th percentiles (0..100) of ``samples * scale`` (e.g. scale 1e3: s -> ms).

    ``samples`` must not be empty (numpy raises); callers that may have none report nan.
    """
    values = np.asarray(samples, dtype=float) * scale
    return [float(np.percentile(values, q)) for q in qs]


__all__ = ["percentiles"]
