"""numpy's arithmetic for a few small, hot operations, without numpy's dispatch: the same
floating-point operations in the same order, so every result is numpy's bit for bit
(``test/core/test_numeric.py`` checks each against numpy, signed zeros and NaN included).

Why: the benchmark's trial runs these on scalars and 3-vectors tens of thousands of times,
and for such small inputs numpy's Python-level set-up (argument conversion, broadcasting,
axis moves, temporary copies) costs several times the arithmetic (the sweep's
profile). Callers whose inputs are large keep calling numpy.

Pure Python and numpy; imports nothing from the project.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def clip_float(x: float, lo: float, hi: float) -> float:
    """``float(np.clip(x, lo, hi))`` for floats: ``MIN(MAX(x, lo), hi)`` where each of MAX
    and MIN propagates a NaN from either side and, on a tie (0.0 against -0.0), keeps its
    first argument, as numpy 2's clip loop does (the test checks this against numpy over
    signed zeros, infinities, NaNs and random values)."""
    v = float(x)
    lo, hi = float(lo), float(hi)
    if v != v:
        return v
    if lo != lo:
        return lo
    if lo > v:
        v = lo
    if hi != hi:
        return hi
    return hi if hi < v else v


def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.cross(a, b)`` of float arrays whose last axis has 3 components (broadcast
    against each other): numpy computes each component as one rounded product minus
    another (numpy/_core/numeric.py: ``cp0 = a1*b2; cp0 -= a2*b1`` ...), as here, without
    its copies of both inputs and its axis moves."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out = np.empty(np.broadcast_shapes(a.shape, b.shape),
                   dtype=np.promote_types(a.dtype, b.dtype))
    c0, c1, c2 = out[..., 0], out[..., 1], out[..., 2]
    np.multiply(a1, b2, out=c0)
    c0 -= a2 * b1
    np.multiply(a2, b0, out=c1)
    c1 -= a0 * b2
    np.multiply(a0, b1, out=c2)
    c2 -= a1 * b0
    return out


def cross_list(a: Sequence[float], b: Sequence[float]) -> list:
    """``np.cross(a, b).tolist()`` of two 3-vectors given as floats (Python's float
    arithmetic is IEEE double, as numpy's, and neither fuses a multiply-add)."""
    x, y, z = a
    u, v, w = b
    return [y * w - z * v, z * u - x * w, x * v - y * u]


def allclose_finite(a: Sequence[float], b: Sequence[float], rtol: float = 1e-05,
                    atol: float = 1e-08) -> bool:
    """``np.allclose(a, b, rtol, atol)`` of two equally long sequences of *finite* floats:
    numpy's test is ``|a - b| <= atol + rtol * |b|`` element by element (plus an inf rule
    that finite values never reach)."""
    return all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a, b))


__all__ = ["allclose_finite", "clip_float", "cross3", "cross_list"]
