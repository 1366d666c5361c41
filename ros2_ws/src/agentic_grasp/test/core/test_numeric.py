"""core/numeric.py gives numpy's results bit for bit (the benchmark's records must not move
by a bit when a hot path stops calling numpy)."""
from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from agentic_grasp.core.numeric import allclose_finite, clip_float, cross3, cross_list

EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-300, -1e-300, 5e-324, 1e300, math.inf, -math.inf,
         math.nan, 0.1, 0.2, 0.3, 20.0, 0.08]


def _bits(x) -> bytes:
    return struct.pack("<d", float(x))


def _random_floats(rng, n):
    scale = 10.0 ** rng.integers(-12, 12, size=n)
    return (rng.standard_normal(n) * scale).tolist()


def test_clip_float_is_numpys_clip_bit_for_bit():
    rng = np.random.default_rng(7)
    values = EDGES + _random_floats(rng, 400)
    bounds = [(0.0, 1.0), (-0.0, 0.0), (0.0, -0.0), (-1.0, 1.0), (5.0, 70.0), (0.0, 0.08),
              (-math.inf, math.inf), (0.3, 0.3), (1.0, 0.0),
              (math.nan, 1.0), (0.0, math.nan), (math.nan, math.nan)]
    bounds += [tuple(sorted(_random_floats(rng, 2))) for _ in range(40)]
    checked = 0
    for lo, hi in bounds:
        for x in values:
            want = float(np.clip(x, lo, hi))
            got = clip_float(x, lo, hi)
            assert type(got) is float
            assert _bits(got) == _bits(want) or (math.isnan(got) and math.isnan(want)), \
                (x, lo, hi, got, want)
            checked += 1
    assert checked > 10_000


def test_clip_float_keeps_the_value_on_a_signed_zero_tie_as_numpy_does():
    assert _bits(clip_float(-0.0, 0.0, 1.0)) == _bits(-0.0) == _bits(np.clip(-0.0, 0.0, 1.0))
    assert _bits(clip_float(0.0, -1.0, -0.0)) == _bits(0.0) == _bits(np.clip(0.0, -1.0, -0.0))


def test_cross3_is_numpys_cross_bit_for_bit_under_broadcasting():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 1, 3, 1, 3)) * 10.0 ** rng.integers(-8, 8, (4, 1, 3, 1, 3))
    b = rng.standard_normal((1, 5, 1, 3, 3))
    want, got = np.cross(a, b), cross3(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()
    # rotation columns, as the hand model uses them
    R = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    S = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    assert cross3(R.T[:, None, :], S.T[None, :, :]).tobytes() == \
        np.array([np.cross(R[:, i], S[:, j]) for i in range(3) for j in range(3)]).tobytes()


def test_cross_list_is_numpys_cross_bit_for_bit():
    rng = np.random.default_rng(5)
    for _ in range(500):
        a = rng.standard_normal(3) * 10.0 ** rng.integers(-10, 10)
        b = rng.standard_normal(3)
        assert np.array(cross_list(a.tolist(), b.tolist())).tobytes() == np.cross(a, b).tobytes()


@pytest.mark.parametrize("atol", [1e-9, 1e-8, 0.0])
def test_allclose_finite_is_numpys_allclose(atol):
    rng = np.random.default_rng(11)
    for _ in range(2000):
        a = rng.standard_normal(3)
        kind = rng.integers(4)
        if kind == 0:
            b = a.copy()
        elif kind == 1:
            b = a + rng.standard_normal(3) * 10.0 ** rng.integers(-12, -4)
        elif kind == 2:                 # right at the tolerance
            b = a * (1.0 + 1e-05) + atol * rng.choice([-1.0, 1.0], 3)
        else:
            b = rng.standard_normal(3)
        want = bool(np.allclose(a, b, atol=atol))
        assert allclose_finite(a.tolist(), b.tolist(), atol=atol) is want
