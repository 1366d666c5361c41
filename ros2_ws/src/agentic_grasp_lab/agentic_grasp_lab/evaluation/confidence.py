"""Confidence intervals of the paper's tables: the mean of per-seed
rates with a Student-t 95% interval (the regularised incomplete beta function written out,
so no SciPy is needed); and the Wilson score interval of one proportion (k successes of n
trials), which stays inside [0, 1] where a t interval of 0/1 outcomes reaches past 100 %.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any, Dict, Sequence, Tuple


# ----------------------------------------------------------------- statistics
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    x = df / (df + t * t)
    tail = 0.5 * _betai(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (bisection on the CDF; p in (0.5, 1))."""
    if not 0.5 <= p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile needs 0.5 <= p < 1 and df > 0, got {p}, {df}")
    lo, hi = 0.0, 1.0
    while student_t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if student_t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


@dataclass
class MeanCI:
    """Mean of per-seed values with its two-sided confidence interval."""

    mean: float
    half_width: float
    lo: float
    hi: float
    n: int
    sd: float
    values: Tuple[float, ...] = ()

    def to_dict(self) -> Dict[str, Any]:
        out = asdict(self)
        out["values"] = list(self.values)
        return out

    def text(self, digits: int = 1) -> str:
        if self.n < 2 or not math.isfinite(self.half_width):
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.half_width:.{digits}f}"


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> MeanCI:
    """mean +- t_{(1+c)/2, n-1} * sd / sqrt(n) over ``values`` (one per seed)."""
    vals = [float(v) for v in values]
    n = len(vals)
    if n == 0:
        nan = float("nan")
        return MeanCI(nan, nan, nan, nan, 0, nan, ())
    mean = sum(vals) / n
    if n < 2:
        return MeanCI(mean, float("nan"), mean, mean, n, float("nan"), tuple(vals))
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return MeanCI(mean, half, mean - half, mean + half, n, sd, tuple(vals))


def wilson_ci(successes: int, n: int, confidence: float = 0.95) -> Tuple[float, float]:
    """(low, high) Wilson score interval of the proportion ``successes / n``, inside [0, 1].

    The interval of a success rate over independent trials: unlike mean +- t * sd / sqrt(n)
    of the 0/1 outcomes, it never leaves [0, 1] and is not zero-width at 0 or n successes
    (Wilson 1927; Brown, Cai and DasGupta 2001 recommend it for any n). n = 0: (0, 1).
    """
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"wilson_ci needs 0 <= successes <= n, got {successes} of {n}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at 0 or n successes the bound is exactly 0 or 1 (the formula leaves a rounding error)
    lo = 0.0 if successes == 0 else max(0.0, centre - spread)
    hi = 1.0 if successes == n else min(1.0, centre + spread)
    return lo, hi


def paired_difference_ci(both: int, first_only: int, second_only: int, neither: int,
                         confidence: float = 0.95) -> Tuple[float, float]:
    """(low, high) interval of p1 - p2 for paired 0/1 outcomes (each unit run under both
    conditions), inside [-1, 1]: Newcombe's hybrid score interval (1998, method 10), built
    from the Wilson intervals of p1 and p2 and the pairs' correlation. A t interval of the
    per-pair differences (-1, 0, +1) reaches past +-100 points with few pairs."""
    n = both + first_only + second_only + neither
    if n <= 0:
        return -1.0, 1.0
    p1, p2 = (both + first_only) / n, (both + second_only) / n
    l1, u1 = wilson_ci(both + first_only, n, confidence)
    l2, u2 = wilson_ci(both + second_only, n, confidence)
    margins = ((both + first_only) * (second_only + neither) * (both + second_only)
               * (first_only + neither))
    phi = (both * neither - first_only * second_only) / math.sqrt(margins) if margins else 0.0
    down = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    up = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    diff = p1 - p2
    return max(-1.0, diff - down), min(1.0, diff + up)


__all__ = ["mean_ci", "MeanCI", "paired_difference_ci", "student_t_cdf", "t_quantile",
           "wilson_ci"]
