"""The studentized range distribution against scipy.stats.studentized_range (where scipy is
accurate), against the exact k = 2 case (the range of two normals over s is sqrt(2) |T|), and
against scipy's adaptive quadrature of the same double integral where scipy's own sf is not
accurate (large df, tiny p)."""
from __future__ import annotations

import itertools
import math

import pytest
import torch

stats = pytest.importorskip("scipy.stats")
from scipy import integrate, special  # noqa: E402

from retrieval_core.stats.studentized import studentized_range_isf, studentized_range_sf  # noqa: E402

QS = [0.1, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0]


@pytest.mark.parametrize("k", [2, 3, 5, 10, 26])
@pytest.mark.parametrize("df", [1, 2, 3, 7, 20, 100, 1000, 10000])
def test_sf_equals_scipy(k, df):
    got = studentized_range_sf(QS, k, df)
    for q, value in zip(QS, got.tolist()):
        ref = stats.studentized_range.sf(q, k, df)
        if ref < 1e-8:  # scipy's own integration loses accuracy in the far tail (test_far_tail)
            continue
        assert value == pytest.approx(ref, rel=1e-6, abs=1e-9), (q, k, df)


@pytest.mark.parametrize("df", [1, 3, 20, 1000, 1e5, 1e6])
def test_two_groups_is_the_t_distribution(df):
    # the range of two standard normals is sqrt(2) |Z|: P(Q > q) = 2 P(T > q / sqrt(2))
    for q in [0.01, 0.3, 1.0, 3.0, 7.0, 12.0, 20.0]:
        ref = 2 * stats.t.sf(q / math.sqrt(2), df)
        if ref < 1e-16:
            continue
        assert studentized_range_sf(q, 2, df) == pytest.approx(ref, rel=1e-11), (q, df)


def _quadrature(q, k, df):
    """The same double integral by scipy's adaptive quadrature (slow, independent)."""
    def range_sf(w):
        def f(z):
            ratio = min(1.0, math.exp(special.log_ndtr(-z - w) - special.log_ndtr(-z)))
            bracket = 1.0 if ratio == 1.0 else -math.expm1((k - 1) * math.log1p(-ratio))
            return k * math.exp(-z * z / 2) / math.sqrt(2 * math.pi) * special.ndtr(-z) ** (k - 1) * bracket
        return integrate.quad(f, -30, 12, epsabs=1e-30, epsrel=1e-12, limit=500)[0]

    log_c = (df / 2) * math.log(df) - special.gammaln(df / 2) - (df / 2 - 1) * math.log(2)
    width = 1 / math.sqrt(2 * df)
    return integrate.quad(lambda t: math.exp(log_c + df * t - df * math.exp(2 * t) / 2) * range_sf(q * math.exp(t)),
                          -14 * width, 14 * width, epsabs=1e-30, epsrel=1e-11, limit=200)[0]


def test_far_tail():
    # scipy.stats.studentized_range.sf(10, 3, 1000) = 9.16e-12 is off by 6%: the quadrature says 8.652e-12
    ref = _quadrature(10.0, 3, 1000)
    assert ref == pytest.approx(8.652e-12, rel=1e-3)
    assert studentized_range_sf(10.0, 3, 1000) == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("k,df,p", [(2, 5, 0.05), (3, 20, 0.05), (5, 245, 0.01), (10, 30, 0.1), (26, 1000, 0.05)])
def test_isf_equals_scipy(k, df, p):
    q = studentized_range_isf(p, k, df)
    assert q == pytest.approx(stats.studentized_range.isf(p, k, df), rel=1e-8)
    assert studentized_range_sf(q, k, df) == pytest.approx(p, rel=1e-9)


@pytest.mark.parametrize("k,df,p", [(3, 1, 1e-6), (4, 3, 0.999), (26, 2, 1e-4)])
def test_isf_in_the_tails(k, df, p):
    # far tails (many regula falsi steps): the sf at the quantile is p
    q = studentized_range_isf(p, k, df)
    assert studentized_range_sf(q, k, df) == pytest.approx(p, rel=1e-9)
    if (k, df) == (3, 1):  # df = 1: P(Q > q) ~ E(range) sqrt(2 / pi) / q, E(range of 3) = 3 / sqrt(pi)
        assert q == pytest.approx(3 / math.sqrt(math.pi) * math.sqrt(2 / math.pi) / p, rel=1e-3)


def test_shapes_and_edges():
    assert studentized_range_sf(0.0, 3, 10) == 1.0 and studentized_range_sf(-1.0, 3, 10) == 1.0
    out = studentized_range_sf(torch.tensor([0.0, 3.0]), 3, 10)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64 and out.shape == (2,)
    assert isinstance(studentized_range_sf(3, 3, 10), float)
    values = studentized_range_sf([float(q) for q in range(12)], 4, 15).tolist()
    assert all(a >= b for a, b in itertools.pairwise(values))  # decreasing in q


@pytest.mark.parametrize("call,match", [
    (lambda: studentized_range_sf(1.0, 1, 10), "k >= 2"),
    (lambda: studentized_range_sf(1.0, 2.5, 10), "k >= 2"),
    (lambda: studentized_range_sf(1.0, 3, 0), "degrees of freedom"),
    (lambda: studentized_range_sf(1.0, 3, math.inf), "degrees of freedom"),
    (lambda: studentized_range_sf(float("nan"), 3, 10), "NaN"),
    (lambda: studentized_range_isf(0.0, 3, 10), r"p must be in \(0, 1\)"),
    (lambda: studentized_range_isf(1.0, 3, 10), r"p must be in \(0, 1\)"),
])
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()
