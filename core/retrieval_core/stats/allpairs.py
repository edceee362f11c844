"""Every pair of several systems evaluated on the same queries (docs/statistics.md, "Every pair").

:func:`compare_all` takes ``{run: per-query values}`` (one metric), keeps the queries
where every run has a value (not NaN), and compares each pair of runs:

* ``method="holm"`` (default), ``"bonferroni"`` or None: the paired test of
  :func:`~retrieval_core.stats.comparison.compare` (``test=``) on each pair, the
  p-values adjusted over the ``k (k - 1) / 2`` pairs (Holm's step-down, Bonferroni, or none);
* ``method="tukey"``: Tukey's HSD as ranx's ``compare(..., stat_test="tukey")``, which calls
  ``scipy.stats.tukey_hsd``: the runs taken as independent groups (one-way ANOVA: the
  pooled variance within runs, ``k (Q - 1)`` degrees of freedom), the pairing ignored;
* ``method="tukey_paired"``: Tukey's HSD on the two-way (query x run) ANOVA: the
  variance left after removing each query's and each run's mean, ``(k - 1)(Q - 1)``
  degrees of freedom (the form Sakai recommends for IR: query difficulty no longer
  counts as noise).

Tukey's statistic for runs i and j is ``|mean_i - mean_j| / sqrt(MSE / Q)``, its p-value
the studentized range's survival function with ``k`` groups (already family-wise: no
further adjustment) and its interval ``difference ± q_(1-ci) sqrt(MSE / Q)`` (simultaneous).

Each pair carries its effect size: Cohen's ``d_z``, the mean of the paired differences
over their standard deviation (``n - 1`` in the denominator), whatever the method;
``±inf`` when every difference is the same non-zero number, 0 when all are 0.

A pair is *significant* when its adjusted p-value is below ``alpha``; ``better[run]``
lists the runs it beats (significant, higher mean) and ``groups[run]`` is a compact
letter display: runs that share a letter are not separable at ``alpha``; letters
are given in the order of the best run of each group (``a``: the group of the best run).
"""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..validate.stats import check_level
from .comparison import TESTS, _as_values, adjust_p_values, compare
from .studentized import studentized_range_isf, studentized_range_sf

__all__ = ["PairComparison", "AllPairs", "compare_all", "letter_groups", "METHODS"]

METHODS = ("holm", "bonferroni", None, "tukey", "tukey_paired")
_GROUP_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class PairComparison(NamedTuple):
    """One pair ``(a, b)`` of :class:`AllPairs`: the mean of ``a - b``, its interval, the
    p-value before and after the adjustment, Cohen's ``d_z`` and whether ``adjusted_p_value < alpha``."""

    mean_difference: float
    ci: Tuple[float, float]
    p_value: float
    adjusted_p_value: float
    effect_size: float
    significant: bool


class AllPairs(NamedTuple):
    """Outcome of :func:`compare_all`. ``pairs[(a, b)]``: ``a`` before ``b`` in ``runs``, the
    difference ``a - b``; :meth:`pair` gives either order."""

    runs: Tuple[str, ...]
    means: Dict[str, float]
    pairs: Dict[Tuple[str, str], PairComparison]
    method: Optional[str]
    test: Optional[str]
    alpha: float
    n: int
    better: Dict[str, List[str]]
    groups: Dict[str, str]

    def pair(self, a: str, b: str) -> PairComparison:
        """The comparison of ``a`` with ``b`` (difference ``a - b``), in either order."""
        if (a, b) in self.pairs:
            return self.pairs[(a, b)]
        if (b, a) not in self.pairs:
            raise KeyError(f"no pair of runs {a!r} and {b!r}; the runs are {list(self.runs)}")
        c = self.pairs[(b, a)]
        return c._replace(mean_difference=-c.mean_difference, ci=(-c.ci[1], -c.ci[0]), effect_size=-c.effect_size)


def _matrix(runs: Mapping[str, object]) -> Tuple[List[str], Tensor]:
    """``(names, [Q, k] float64)``: the queries where every run has a value."""
    if not isinstance(runs, Mapping):
        raise TypeError(f"runs must be a mapping {{name: per-query values}}; got {type(runs).__name__}")
    names = [str(name) for name in runs]
    if len(names) < 2:
        raise ValueError(f"compare_all needs at least 2 runs; got {len(names)}")
    if len(set(names)) < len(names):
        raise ValueError(f"run names must be distinct as text; got {names}")
    columns = [_as_values(v, f"runs[{name!r}]") for name, v in zip(names, runs.values())]
    sizes = {c.numel() for c in columns}
    if len(sizes) > 1:
        shown = ", ".join(f"{n}: {c.numel()}" for n, c in zip(names, columns))
        raise ValueError(f"the runs must hold the values of the same queries; got different numbers of values "
                         f"({shown})")
    x = torch.stack(columns, 1)
    x = x[~torch.isnan(x).any(1)]
    if x.shape[0] < 2:
        raise ValueError(f"the runs have {x.shape[0]} queries where every run has a value (not NaN); "
                         "comparing them needs at least 2")
    return names, x


def cohens_dz(d: Tensor) -> float:
    """Cohen's ``d_z``: ``mean(d) / sd(d)`` of paired differences (``±inf`` if ``sd`` is 0 and the
    mean is not, 0 if both are)."""
    mean, sd = float(d.mean()), float(d.std(correction=1))
    if sd == 0.0:
        return 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    return mean / sd


def _tukey_mse(x: Tensor, paired: bool) -> Tuple[float, float]:
    """``(MSE, degrees of freedom)`` of Tukey's HSD on ``x [Q, k]``."""
    q, k = x.shape
    if paired:  # two-way ANOVA without interaction: residual of query + run effects
        residual = x - x.mean(0, keepdim=True) - x.mean(1, keepdim=True) + x.mean()
        df = (k - 1) * (q - 1)
    else:  # one-way ANOVA: pooled variance within runs (scipy.stats.tukey_hsd, ranx)
        residual = x - x.mean(0, keepdim=True)
        df = k * (q - 1)
    return float((residual * residual).sum()) / df, float(df)


def _tukey(x: Tensor, names: List[str], paired: bool, level: float) -> Dict[Tuple[str, str], tuple]:
    """``{(a, b): (difference, interval, p)}`` of Tukey's HSD."""
    q, k = x.shape
    mse, df = _tukey_mse(x, paired)
    se = math.sqrt(mse / q)
    means = x.mean(0).tolist()
    half = studentized_range_isf(1.0 - level, k, df) * se
    out = {}
    for i in range(k):
        for j in range(i + 1, k):
            diff = means[i] - means[j]
            if se == 0.0:  # no spread at all: a difference is certain, none is not
                p = 1.0 if diff == 0.0 else 0.0
            else:
                p = studentized_range_sf(abs(diff) / se, k, df)
            out[(names[i], names[j])] = (diff, (diff - half, diff + half), p)
    return out


def _paired_tests(x: Tensor, names: List[str], test: str, n_resamples: int, seed: int, level: float):
    out = {}
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            c = compare(x[:, i], x[:, j], test=test, n_resamples=n_resamples, seed=seed, ci=level)
            out[(names[i], names[j])] = (c.mean_difference, c.ci, c.p_value)
    return out


def _check_method(method: Optional[str], test: str, alpha: float) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}; got {method!r}")
    if test not in TESTS:
        raise ValueError(f"test must be one of {list(TESTS)}; got {test!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be a number in (0, 1); got {alpha!r}")


def compare_all(
    runs: Mapping[str, object],
    *,
    method: Optional[str] = "holm",
    test: str = "permutation",
    alpha: float = 0.05,
    n_resamples: int = 10000,
    seed: int = 0,
    ci: float = 0.95,
) -> AllPairs:
    """Compare every pair of runs evaluated on the same queries (see the module docs).

    Args:
        runs: ``{name: [Q] per-query values}`` of one metric, the same queries in the same
            order for every run (``reduce="none"`` outputs or ``results.per_query[key]``);
            a query where any run is NaN is left out of every pair.
        method: ``"holm"``, ``"bonferroni"``, None (the paired ``test`` on each pair, p-values
            adjusted over the pairs or not), ``"tukey"`` (as ranx and ``scipy.stats.tukey_hsd``)
            or ``"tukey_paired"`` (two-way ANOVA).
        test: the paired test of the first three methods (as :func:`compare`); not used by Tukey's.
        alpha: the level at which a pair is significant (adjusted p-value ``< alpha``).
        n_resamples, seed: of the permutation and bootstrap tests (and their intervals).
        ci: the level of the intervals of the differences (Tukey: simultaneous).

    Returns:
        :class:`AllPairs`.

    Example:
        >>> from retrieval_core import compare_all
        >>> base = [0.50, 0.61, 0.40, 0.52, 0.70, 0.33, 0.64, 0.55, 0.47, 0.58]
        >>> runs = {"bm25": base, "dense": [v + 0.10 + 0.01 * (i % 3) for i, v in enumerate(base)],
        ...         "hybrid": [v + 0.11 + 0.01 * (i % 2) for i, v in enumerate(base)]}
        >>> out = compare_all(runs, method="holm", test="paired_t")
        >>> out.better["dense"], out.better["hybrid"], out.groups
        (['bm25'], ['bm25'], {'bm25': 'b', 'dense': 'a', 'hybrid': 'a'})
        >>> p = out.pair("hybrid", "dense")
        >>> round(p.mean_difference, 3), p.significant
        (0.006, False)
        >>> compare_all(runs, method="tukey").groups  # ranx's Tukey: the runs as independent samples
        {'bm25': 'a', 'dense': 'a', 'hybrid': 'a'}
    """
    _check_method(method, test, alpha)
    check_level(ci)
    names, x = _matrix(runs)
    if method in ("tukey", "tukey_paired"):
        raw = _tukey(x, names, method == "tukey_paired", float(ci))
        adjusted = {pair: p for pair, (_, _, p) in raw.items()}
        used_test = None
    else:
        raw = _paired_tests(x, names, test, n_resamples, seed, float(ci))
        adjusted = adjust_p_values({pair: p for pair, (_, _, p) in raw.items()}, method)
        used_test = test
    column = {name: i for i, name in enumerate(names)}
    pairs = {}
    for (a, b), (diff, interval, p) in raw.items():
        dz = cohens_dz(x[:, column[a]] - x[:, column[b]])
        pairs[(a, b)] = PairComparison(diff, interval, p, adjusted[(a, b)], dz, bool(adjusted[(a, b)] < alpha))
    means = dict(zip(names, x.mean(0).tolist()))
    better: Dict[str, List[str]] = {name: [] for name in names}
    for (a, b), c in pairs.items():
        if c.significant:
            winner, loser = (a, b) if c.mean_difference > 0 else (b, a)
            better[winner].append(loser)
    better = {name: sorted(losers, key=column.get) for name, losers in better.items()}
    significant = [pair for pair, c in pairs.items() if c.significant]
    return AllPairs(tuple(names), means, pairs, method, used_test, float(alpha), int(x.shape[0]), better,
                    letter_groups(names, means, significant))


def letter_groups(names: Sequence[str], means: Mapping[str, float],
                  separated: Sequence[Tuple[str, str]]) -> Dict[str, str]:
    """A compact letter display: a letter per group of runs no two of which are ``separated``
    (Piepho's insert-and-absorb), so that two runs share a letter exactly when they are not
    separated; letters in the order of each group's best mean.

    Example:
        >>> letter_groups(["x", "y", "z"], {"x": 0.3, "y": 0.5, "z": 0.4}, [("x", "y")])
        {'x': 'b', 'y': 'a', 'z': 'ab'}
    """
    columns: List[frozenset] = [frozenset(names)]
    for a, b in separated:
        split: List[frozenset] = []
        for c in columns:
            split += [c - {a}, c - {b}] if a in c and b in c else [c]
        unique = list(dict.fromkeys(split))
        columns = [c for c in unique if c and not any(c < d for d in unique)]
    rank = {name: i for i, name in enumerate(sorted(names, key=lambda n: (-means[n], list(names).index(n))))}
    columns.sort(key=lambda c: sorted(rank[n] for n in c))
    if len(columns) > len(_GROUP_LETTERS):
        raise ValueError(f"{len(columns)} groups: more than the {len(_GROUP_LETTERS)} letters of a letter display")
    return {name: "".join(_GROUP_LETTERS[i] for i, c in enumerate(columns) if name in c) for name in names}
