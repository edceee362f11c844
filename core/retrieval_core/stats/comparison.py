"""Paired comparison of two systems evaluated on the same queries (docs/statistics.md).

:func:`compare` takes the per-query values of systems A and B (``reduce="none"``
outputs, or ``results.per_query[key]`` with ``keep_per_query=True``), drops the
pairs where either is NaN, and tests whether the mean of the differences
``d = a - b`` is zero:

* ``"permutation"``: the sign-flip test. Under the null hypothesis each
  difference is as likely to have either sign, so the statistic ``|mean(d)|``
  is compared with its values under random sign flips. The p-value counts the
  flips at least as extreme, with the +1 correction that counts the observed
  signs among them: ``(1 + hits) / (1 + n_resamples)`` (never 0, valid at any
  number of resamples). When ``2**n <= n_resamples`` every sign pattern is
  enumerated instead and the p-value is exact: ``hits / 2**n``.
* ``"paired_t"``: Student's t test on the differences (as ``scipy.stats.ttest_rel``),
  with the t interval of the mean difference.
* ``"bootstrap"``: the percentile bootstrap of the mean difference; the p-value
  is that of the bootstrap shifted to the null (resampled means minus the
  observed one): ``(1 + #{|mean* - mean| >= |mean|}) / (1 + n_resamples)``.

The interval is the t interval for ``"paired_t"``, and the percentile bootstrap
interval of the mean difference (``n_resamples`` resamples, ``seed``) for the
other two. Random draws come from a CPU ``torch.Generator`` seeded with ``seed``:
the same result on every machine.
"""
from __future__ import annotations

import math
import numbers
from typing import Dict, Mapping, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from ..validate.options import check_seed
from ..validate.stats import check_level, check_resampling
from .special import t_ppf, t_sf

__all__ = ["Comparison", "compare", "compare_many", "adjust_p_values", "TESTS", "CORRECTIONS"]

TESTS = ("permutation", "paired_t", "bootstrap")
CORRECTIONS = ("holm", "bonferroni", None)
_CHUNK_ELEMENTS = 1 << 16  # entries of one [chunk, n] block of random draws (cache-sized: faster)


class Comparison(NamedTuple):
    """Outcome of :func:`compare`: the mean of ``a - b`` over the ``n`` paired
    queries, its interval at the requested level, the two-sided p-value and the test."""

    mean_difference: float
    ci: Tuple[float, float]
    p_value: float
    n: int
    test: str


def _as_values(x, name: str) -> Tensor:
    if isinstance(x, Tensor):
        t = x.detach().to("cpu")
    else:
        try:
            t = torch.as_tensor(x)
            if t.is_floating_point():  # Python floats are float64: not torch's default float32
                t = torch.as_tensor(x, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{name} must be a 1-D tensor or sequence of numbers (per-query values); "
                            f"got {type(x).__name__}") from None
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"{name} must hold real numbers; got dtype {t.dtype}")
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per query); got shape {tuple(t.shape)}")
    t = t.to(torch.float64)
    if bool(torch.isinf(t).any()):
        raise ValueError(f"{name} holds inf; per-query values must be finite (NaN marks a skipped query)")
    return t


def _check_options(test: str, n_resamples: int, seed: int, ci: float) -> None:
    if test not in TESTS:
        raise ValueError(f"test must be one of {list(TESTS)}; got {test!r}")
    check_resampling(n_resamples, seed)
    check_level(ci)


def _differences(a, b) -> Tensor:
    a, b = _as_values(a, "a"), _as_values(b, "b")
    if a.shape != b.shape:
        raise ValueError(
            f"a and b must hold the values of the same queries: got {a.numel()} and {b.numel()} values"
        )
    keep = ~(torch.isnan(a) | torch.isnan(b))
    return (a - b)[keep]


def _chunks(n_resamples: int, n: int):
    step = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, n_resamples, step):
        yield min(step, n_resamples - start)


def _bootstrap_means(d: Tensor, n_resamples: int, generator: torch.Generator) -> Tensor:
    n = d.numel()
    means = []
    for b in _chunks(n_resamples, n):
        draws = torch.randint(n, (b, n), generator=generator)
        means.append(d[draws].mean(1))
    return torch.cat(means)


def _percentile_interval(means: Tensor, level: float) -> Tuple[float, float]:
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)
    low, high = torch.quantile(means, q).tolist()
    return low, high


def _tolerance(d: Tensor) -> float:
    """Slack for 'at least as extreme': sums of the same values in another order
    differ by rounding, which must not decide a tie."""
    return 1e-12 * max(float(d.abs().max()), 1e-300)


def _signs(start: int, stop: int, n: int) -> Tensor:
    """``[stop - start, n]`` float64 +-1: sign patterns ``start .. stop - 1`` (bit j of the
    pattern's number negates difference j)."""
    patterns = torch.arange(start, stop, dtype=torch.int64).unsqueeze(1)
    return 1.0 - 2.0 * ((patterns >> torch.arange(n)) & 1).to(torch.float64)


def _sign_flip_p(d: Tensor, n_resamples: int, generator: torch.Generator) -> float:
    n = d.numel()
    observed = abs(float(d.mean()))
    tol = _tolerance(d)
    if n <= 62 and 2 ** n <= n_resamples:  # every sign pattern: the exact p-value
        step = max(1, _CHUNK_ELEMENTS // n)  # patterns per chunk: memory bounded whatever n is
        hits = 0
        for start in range(0, 2 ** n, step):
            stats = (_signs(start, min(start + step, 2 ** n), n) @ d).abs() / n
            hits += int((stats >= observed - tol).sum())
        return hits / 2 ** n
    # random signs 8 at a time: a byte picks which of a group of 8 differences are
    # negated, and a table holds the sum of each group's differences for each byte
    groups = -(-n // 8)
    padded = torch.cat([d, d.new_zeros(groups * 8 - n)]).view(groups, 8)
    bits = ((torch.arange(256).unsqueeze(1) >> torch.arange(8)) & 1).to(torch.float64)  # [256, 8]
    table = (padded @ bits.T).reshape(-1)  # [groups * 256]: sum of the negated differences
    offsets = torch.arange(groups) * 256
    total = float(d.sum())
    hits = 0
    for b in _chunks(n_resamples, groups):
        words = torch.randint(1 << 24, (b, -(-groups // 3)), generator=generator)  # 3 random bytes each
        picks = torch.stack([words & 255, (words >> 8) & 255, words >> 16], 2).reshape(b, -1)[:, :groups]
        negated = table[picks + offsets].sum(1)
        hits += int(((total - 2.0 * negated).abs() / n >= observed - tol).sum())
    return (1 + hits) / (1 + n_resamples)


def compare(
    a,
    b,
    *,
    test: str = "permutation",
    n_resamples: int = 10000,
    seed: int = 0,
    ci: float = 0.95,
) -> Comparison:
    """Paired comparison of systems A and B on the same queries: is ``mean(a - b)`` zero?

    Args:
        a, b: ``[Q]`` per-query values of the two systems, query by query
            (tensors, lists or arrays); a pair where either is NaN is skipped.
        test: ``"permutation"`` (sign flips; default), ``"paired_t"`` or
            ``"bootstrap"`` (see the module docs for the p-value of each).
        n_resamples: random sign flips or bootstrap resamples.
        seed: seed of the CPU generator of the draws.
        ci: level of the interval of the mean difference.

    Returns:
        :class:`Comparison` ``(mean_difference, ci, p_value, n, test)``;
        positive ``mean_difference``: A scores higher.

    Example:
        >>> a = [0.9, 0.8, 0.7, 0.95, 0.6, 0.85, 0.75, 0.9]
        >>> b = [0.7, 0.7, 0.6, 0.80, 0.6, 0.70, 0.65, 0.7]
        >>> r = compare(a, b, test="paired_t")
        >>> round(r.mean_difference, 4), r.n, r.p_value < 0.01
        (0.125, 8, True)
        >>> compare(a, b).p_value  # 2**8 sign patterns <= 10000: enumerated, exact (4 of them as extreme)
        0.015625
    """
    _check_options(test, n_resamples, seed, ci)
    n_resamples = int(n_resamples)
    d = _differences(a, b)
    n = d.numel()
    if n == 0:
        raise ValueError("a and b have no query where both values are defined (not NaN); nothing to compare")
    level = float(ci)
    mean = float(d.mean())
    if test == "paired_t":
        if n < 2:
            raise ValueError(f"the paired t test needs at least 2 paired queries; got {n}")
        sd = float(d.std(correction=1))
        if sd == 0.0:  # every difference equal: no spread to test against
            return Comparison(mean, (mean, mean), 1.0 if mean == 0.0 else 0.0, n, test)
        se = sd / math.sqrt(n)
        t = mean / se
        p = min(1.0, 2.0 * t_sf(abs(t), n - 1))
        half = t_ppf((1 + level) / 2, n - 1) * se
        return Comparison(mean, (mean - half, mean + half), p, n, test)
    generator = torch.Generator().manual_seed(check_seed(seed))
    if test == "permutation":
        p = _sign_flip_p(d, n_resamples, generator)
        means = _bootstrap_means(d, n_resamples, generator)
        return Comparison(mean, _percentile_interval(means, level), p, n, test)
    means = _bootstrap_means(d, n_resamples, generator)
    hits = int(((means - mean).abs() >= abs(mean) - _tolerance(d)).sum())
    return Comparison(mean, _percentile_interval(means, level), (1 + hits) / (1 + n_resamples), n, test)


def adjust_p_values(p_values: Mapping[str, float], correction: Optional[str] = "holm") -> Dict[str, float]:
    """Family-wise adjusted p-values: ``"bonferroni"`` multiplies each by the number
    of tests ``m``; ``"holm"`` (step-down) sorts them, multiplies the i-th smallest
    (from 0) by ``m - i`` and keeps the running maximum; None leaves them as they are.
    All are capped at 1.

    Example:
        >>> adjust_p_values({"x": 0.01, "y": 0.04, "z": 0.03})
        {'x': 0.03, 'y': 0.06, 'z': 0.06}
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {list(CORRECTIONS)}; got {correction!r}")
    m = len(p_values)
    if correction is None:
        return dict(p_values)
    if correction == "bonferroni":
        return {k: min(1.0, p * m) for k, p in p_values.items()}
    out, running = {}, 0.0
    for i, (k, p) in enumerate(sorted(p_values.items(), key=lambda kv: kv[1])):
        running = max(running, min(1.0, (m - i) * p))
        out[k] = running
    return {k: out[k] for k in p_values}


def compare_many(
    systems: Mapping[str, object],
    *,
    baseline: str,
    correction: Optional[str] = "holm",
    test: str = "permutation",
    n_resamples: int = 10000,
    seed: int = 0,
    ci: float = 0.95,
) -> Dict[str, Comparison]:
    """Compare every system with ``baseline`` (each ``compare(system, baseline)``),
    the p-values adjusted for the number of comparisons (``correction``: ``"holm"``,
    ``"bonferroni"`` or None). Intervals are per comparison (not adjusted).

    Example:
        >>> base = [0.5, 0.6, 0.4, 0.5, 0.7, 0.3, 0.6, 0.5]
        >>> runs = {"base": base, "same": base, "better": [v + 0.2 for v in base]}
        >>> out = compare_many(runs, baseline="base", test="paired_t")
        >>> sorted(out), out["same"].p_value, round(out["better"].mean_difference, 6)
        (['better', 'same'], 1.0, 0.2)
    """
    if not isinstance(systems, Mapping):
        raise TypeError(f"systems must be a mapping {{name: per-query values}}; got {type(systems).__name__}")
    if baseline not in systems:
        raise ValueError(f"baseline {baseline!r} is not one of the systems {list(systems)}")
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {list(CORRECTIONS)}; got {correction!r}")
    if len(systems) < 2:
        raise ValueError("compare_many needs the baseline and at least one other system")
    results = {name: compare(values, systems[baseline], test=test, n_resamples=n_resamples, seed=seed, ci=ci)
               for name, values in systems.items() if name != baseline}
    adjusted = adjust_p_values({k: r.p_value for k, r in results.items()}, correction)
    return {k: r._replace(p_value=adjusted[k]) for k, r in results.items()}
