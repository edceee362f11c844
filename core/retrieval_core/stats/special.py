"""Special functions for intervals and tests: the regularised incomplete beta
function, its inverse, the highest-density interval of a Beta distribution and
Student's t distribution.

Plain Python floats (``math``), in double precision: the intervals and tests call
them a handful of times per key, so no tensor version is needed, and the core
does not depend on scipy (the tests compare with it).

Example:
    >>> round(betainc(2.0, 3.0, 0.5), 10)  # I_0.5(2, 3) = 11/16
    0.6875
    >>> round(betaincinv(2.0, 3.0, 0.6875), 10)
    0.5
"""
from __future__ import annotations

import math
from typing import Tuple

__all__ = ["betainc", "betaincinv", "beta_hdi", "t_sf", "t_ppf"]

_EPS = 1e-16
_TINY = 1e-300
_MAX_TERMS = 100_000


def _check_shape(a: float, b: float) -> None:
    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"the Beta shape parameters must be finite and > 0; got a={a}, b={b}")


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of ``I_x(a, b)`` (converges fast for x < (a + 1) / (a + b + 2)),
    evaluated by the modified Lentz method."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    f = d
    for m in range(1, _MAX_TERMS):
        # even step: m (b - m) x / ((a + 2m - 1)(a + 2m))
        num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + num / c
        c = c if abs(c) > _TINY else _TINY
        f *= c * d
        # odd step: -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))
        num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + num / c
        c = c if abs(c) > _TINY else _TINY
        step = c * d
        f *= step
        if abs(step - 1.0) < _EPS:
            return f
    raise ArithmeticError(f"the incomplete beta fraction did not converge for a={a}, b={b}, x={x}")


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta ``I_x(a, b)``: the CDF at ``x`` of Beta(a, b).

    Example:
        >>> betainc(1.0, 1.0, 0.25)  # the uniform distribution
        0.25
    """
    _check_shape(a, b)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1]; got {x}")
    if x == 0.0 or x == 1.0:
        return x
    log_front = a * math.log(x) + b * math.log1p(-x) - _log_beta(a, b)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def _log_pdf(a: float, b: float, x: float) -> float:
    return (a - 1.0) * math.log(x) + (b - 1.0) * math.log1p(-x) - _log_beta(a, b)


def betaincinv(a: float, b: float, p: float) -> float:
    """The ``x`` with ``I_x(a, b) = p`` (the quantile of Beta(a, b)): Newton steps
    kept inside a shrinking bracket, bisection when a step leaves it.

    Example:
        >>> betaincinv(1.0, 1.0, 0.25)
        0.25
    """
    _check_shape(a, b)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1]; got {p}")
    if p == 0.0 or p == 1.0:
        return p
    lo, hi = 0.0, 1.0
    x = min(max(a / (a + b), 1e-3), 1 - 1e-3)
    for _ in range(300):
        f = betainc(a, b, x) - p
        if f == 0.0:
            return x
        if f < 0:
            lo = x
        else:
            hi = x
        density = math.exp(_log_pdf(a, b, x))
        new = x - f / density if density > 0.0 else lo - 1.0
        if not lo < new < hi:
            new = 0.5 * (lo + hi)
        if abs(new - x) <= 4 * _EPS * max(new, 1e-300) or hi - lo <= 4 * _EPS * hi:
            return new
        x = new
    return x


def beta_hdi(a: float, b: float, level: float) -> Tuple[float, float]:
    """Highest-density interval of Beta(a, b) holding probability ``level``: the
    shortest interval with that mass; for a unimodal density, the one whose two
    ends have equal density.

    With ``a <= 1 <= b`` (and not both 1) the density never increases: the interval
    starts at 0; with ``b <= 1 <= a`` it ends at 1. Both below 1 (a U-shaped density)
    has no single-interval HDI: NaN. Otherwise the ends solve
    ``I_u - I_l = level`` and ``pdf(l) = pdf(u)`` by damped Newton steps from
    the equal-tailed interval.

    Example:
        >>> low, high = beta_hdi(3.0, 3.0, 0.5)  # symmetric: centred on 1/2
        >>> round(low + high, 12)
        1.0
    """
    _check_shape(a, b)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1); got {level}")
    if a < 1.0 and b < 1.0:
        return float("nan"), float("nan")
    if a == 1.0 and b == 1.0:  # uniform: every interval of the length is one; take the central one
        return 0.5 - level / 2, 0.5 + level / 2
    if a <= 1.0:
        return 0.0, betaincinv(a, b, level)
    if b <= 1.0:
        return betaincinv(a, b, 1.0 - level), 1.0
    mode = (a - 1.0) / (a + b - 2.0)
    low, high = betaincinv(a, b, (1.0 - level) / 2), betaincinv(a, b, (1.0 + level) / 2)

    def residual(lo: float, hi: float) -> Tuple[float, float]:
        return (betainc(a, b, hi) - betainc(a, b, lo) - level,
                (a - 1.0) * (math.log(hi) - math.log(lo)) + (b - 1.0) * (math.log1p(-hi) - math.log1p(-lo)))

    r1, r2 = residual(low, high)
    for _ in range(100):
        if abs(r1) < 1e-14 and abs(r2) < 1e-12:
            break
        p_lo, p_hi = math.exp(_log_pdf(a, b, low)), math.exp(_log_pdf(a, b, high))
        g_lo = (a - 1.0) / low - (b - 1.0) / (1.0 - low)
        g_hi = (a - 1.0) / high - (b - 1.0) / (1.0 - high)
        # Jacobian of (r1, r2) in (low, high): [[-p_lo, p_hi], [-g_lo, g_hi]]
        det = -p_lo * g_hi + p_hi * g_lo
        if det == 0.0 or not math.isfinite(det):
            break
        d_lo = (r1 * g_hi - p_hi * r2) / det
        d_hi = (-p_lo * r2 + g_lo * r1) / det
        t = 1.0
        norm = abs(r1) + abs(r2) * 1e-2
        while t > 1e-6:
            lo_new, hi_new = low - t * d_lo, high - t * d_hi
            if 0.0 < lo_new < mode < hi_new < 1.0:
                n1, n2 = residual(lo_new, hi_new)
                if abs(n1) + abs(n2) * 1e-2 < norm or t < 1e-3:
                    break
            t /= 2
        else:
            break
        low, high, r1, r2 = lo_new, hi_new, n1, n2
    if abs(r1) < 1e-11 and abs(r2) < 1e-7:
        return low, high
    return _hdi_by_bisection(a, b, level)


def _hdi_by_bisection(a: float, b: float, level: float) -> Tuple[float, float]:
    """The interior HDI found the slow, sure way: bisection on the lower tail mass
    ``p``, where ``log pdf(I^-1(p + level)) - log pdf(I^-1(p))`` decreases through 0."""
    lo, hi = 0.0, 1.0 - level
    low = high = float("nan")
    for _ in range(200):
        p = 0.5 * (lo + hi)
        low, high = betaincinv(a, b, p), betaincinv(a, b, p + level)
        if not 0.0 < low < high < 1.0:
            break
        if _log_pdf(a, b, high) > _log_pdf(a, b, low):
            lo = p
        else:
            hi = p
        if hi - lo <= 1e-15 * max(hi, 1e-300):
            break
    return low, high


def t_sf(t: float, df: float) -> float:
    """``P(T > t)`` for Student's t with ``df`` degrees of freedom.

    Example:
        >>> t_sf(0.0, 5.0)
        0.5
    """
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0; got {df}")
    if math.isnan(t):
        return float("nan")
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_ppf(q: float, df: float) -> float:
    """The quantile ``t`` with ``P(T <= t) = q`` of Student's t.

    Example:
        >>> round(t_ppf(0.975, 1e9), 4)  # the normal's 1.96
        1.96
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1); got {q}")
    if q == 0.5:
        return 0.0
    tail = min(q, 1.0 - q)
    x = betaincinv(df / 2.0, 0.5, 2.0 * tail)
    t = math.sqrt(df * (1.0 - x) / x)
    return t if q > 0.5 else -t
