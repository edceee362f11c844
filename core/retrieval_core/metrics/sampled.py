"""The sampled-metric corrections of Krichene & Rendle (2020, "On Sampled Metrics for Item
Recommendation", KDD): a user's one relevant item is ranked among ``m`` sampled
negatives instead of the ``n - 1`` other items; from its sampled rank ``s`` (1..m+1) a
corrected value estimates the metric of its full rank ``r`` (1..n). docs/metrics.md,
"Sampled protocols", gives the formulas and their derivation.

The model (the paper's): the negatives are drawn uniformly with replacement from the
``n - 1`` other items, so ``s - 1``, the negatives above the relevant item, is binomial
``Bin(m, (r - 1) / (n - 1))`` (:func:`binomial_rows`); drawn uniformly without replacement
(``m`` distinct items), it is hypergeometric: ``m`` draws from ``n - 1`` items of which
``r - 1`` are above (:func:`hypergeometric_rows`). Popularity sampling has no such law of
``r`` alone (it depends on which items rank above): no correction models it.

Example:
    >>> import torch
    >>> from retrieval_core.metrics.keys import parse_metrics
    >>> keys = parse_metrics(["hit_rate@2"])
    >>> rank_metric(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), keys, 10)[:, 0].tolist()
    [1.0, 1.0, 0.0]
    >>> correction_table(keys, 11, 2, "mle")[:, 0].tolist()  # s = 1, 2, 3: r = 1, 6, 11
    [1.0, 0.0, 0.0]
    >>> hypergeometric_rows(torch.tensor([2]), 4, 2).tolist()  # 2 of the 3 others, 1 above
    [[0.3333333333333333, 0.6666666666666666, 0.0]]
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
from torch import Tensor

from .keys import MetricKey
from .spec import AT_R, WHOLE


__all__ = ["binomial_rows", "bv_table", "correction_table", "hypergeometric_rows", "law_rows", "mle_ranks",
           "rank_metric", "sampled_rank_values"]

_ROWS = 1 << 16  # full ranks per block of the law's matrix (its memory: _ROWS x (m + 1) float64)


def _cut(key: MetricKey) -> float:
    """The key's cutoff k as a number (the whole list: inf; ``@r`` with one relevant item: 1)."""
    depth = key.depth
    if depth == WHOLE:
        return math.inf
    return 1.0 if depth == AT_R else float(depth)


def rank_metric(ranks: Tensor, keys: Sequence[MetricKey], n: int) -> Tensor:
    """``[len(ranks), K]`` float64: each key's value when the one relevant item of ``n`` ranked
    items is at rank ``ranks`` (float64 >= 1; a real rank, as the MLE's, is allowed): its
    spec's ``at_rank`` (:mod:`retrieval_core.metrics.one_relevant`)."""
    return torch.stack([key.spec.at_rank(ranks, _cut(key), n) for key in keys], dim=1)


def binomial_rows(ranks: Tensor, n: int, m: int) -> Tensor:
    """``[len(ranks), m + 1]`` float64: ``P(s - 1 = j | r)`` for the full ranks ``ranks`` (1..n),
    the binomial ``Bin(m, (r - 1) / (n - 1))`` (``xlogy``: ``0 log 0 = 0`` at p = 0 and 1)."""
    j = torch.arange(m + 1, dtype=torch.float64, device=ranks.device)
    p = ((ranks.to(torch.float64) - 1.0) / max(n - 1, 1)).unsqueeze(1)
    log_choose = math.lgamma(m + 1) - torch.lgamma(j + 1.0) - torch.lgamma(m - j + 1.0)
    return torch.exp(log_choose + torch.xlogy(j, p) + torch.xlogy(m - j, 1.0 - p))


def hypergeometric_rows(ranks: Tensor, n: int, m: int) -> Tensor:
    """``[len(ranks), m + 1]`` float64: ``P(s - 1 = j | r)`` when the ``m`` negatives are distinct
    items drawn uniformly from the ``n - 1`` others (``m <= n - 1``), ``r - 1`` of them above:
    ``C(r - 1, j) C(n - r, m - j) / C(n - 1, m)``, non-zero for ``j`` in ``[lo, hi]``,
    ``lo = max(0, m - (n - r))``, ``hi = min(m, r - 1)``. Computed without the large binomials
    (``lgamma(n)`` would cost a relative error of about ``1e-16 n log n``): across the support
    each term is the previous one times ``(r - 1 - j)(m - j) / ((j + 1)(n - r - m + j + 1))``
    (all factors > 0 there), so the logs are cumulative sums of ``m`` small logs; the row is then
    divided by its sum, which is 1 (Vandermonde's identity)."""
    j = torch.arange(m + 1, dtype=torch.float64, device=ranks.device)
    above = ranks.to(torch.float64).unsqueeze(1) - 1.0  # r - 1
    below = n - 1.0 - above  # n - r
    support = (j >= m - below) & (j <= above)
    step = j[:-1]
    factors = (above - step) * (m - step) / ((step + 1.0) * (below - m + step + 1.0))
    inside = support[:, :-1] & support[:, 1:]  # P(j) and P(j + 1) both > 0: factors > 0
    logs = torch.cumsum(torch.where(inside, torch.log(torch.where(inside, factors, 1.0)), 0.0), 1)
    logs = torch.cat([logs.new_zeros(logs.shape[0], 1), logs], 1).masked_fill(~support, -math.inf)
    rows = torch.exp(logs - logs.max(1, keepdim=True).values)
    return rows / rows.sum(1, keepdim=True)


def law_rows(ranks: Tensor, n: int, m: int, replace: bool = True) -> Tensor:
    """The law of the sampled rank: :func:`binomial_rows` (``replace``) or :func:`hypergeometric_rows`."""
    return binomial_rows(ranks, n, m) if replace else hypergeometric_rows(ranks, n, m)


def bv_table(keys: Sequence[MetricKey], n: int, m: int, gamma: float, device=None, replace: bool = True) -> Tensor:
    """``[m + 1, K]``: the bias-variance corrected value of each sampled rank (row ``s - 1``).

    With ``p(r) = 1/n`` (uniform full ranks), ``A[r, j] = P(s - 1 = j | r)`` and
    ``b[r] = M(r)``, the minimiser of ``sum_r p(r) ((E[M^(s) | r] - M(r))^2 + gamma Var[M^(s) | r])``
    solves ``((1 - gamma) A^T P A + gamma diag(c)) M^ = A^T P b`` with ``c = A^T p``
    (``P = diag(p)``); ``A`` is the law of ``replace`` (:func:`law_rows`). The sums over r run a
    block of ranks at a time; the pseudo-inverse (symmetric) takes the singular systems
    (``gamma = 0`` with n - 1 < m)."""
    gram = torch.zeros(m + 1, m + 1, dtype=torch.float64, device=device)
    c = torch.zeros(m + 1, dtype=torch.float64, device=device)
    rhs = torch.zeros(m + 1, len(keys), dtype=torch.float64, device=device)
    for start in range(1, n + 1, _ROWS):
        ranks = torch.arange(start, min(start + _ROWS, n + 1), dtype=torch.float64, device=device)
        a = law_rows(ranks, n, m, replace) / n  # p(r) A, a block of ranks
        gram += a.T @ (a * n)
        c += a.sum(0)
        rhs += a.T @ rank_metric(ranks, keys, n)
    system = (1.0 - gamma) * gram + gamma * torch.diag(c)
    return torch.linalg.pinv(system, hermitian=True) @ rhs


def mle_ranks(n: int, m: int, device=None) -> Tensor:
    """``[m + 1]`` float64: the rank estimate of each sampled rank ``s = 1..m+1``,
    ``r^ = floor(1 + (s - 1)(n - 1) / m)``, the paper's rank estimate as restated (docs/metrics.md,
    "Sources checked"). ``(s - 1) / m`` is the binomial's maximum-likelihood ``p^`` (and, with or
    without replacement, ``E[s - 1 | r] = m (r - 1) / (n - 1)``, so the unfloored value is
    unbiased for r); the floor makes it a rank. In int64: exact while ``m n < 2^63`` (and each
    ``r^ <= n <= 2^53`` is a float64 exactly)."""
    above = torch.arange(m + 1, dtype=torch.int64, device=device)
    return (1 + torch.div(above * (n - 1), m, rounding_mode="floor")).to(torch.float64)


def correction_table(keys: Sequence[MetricKey], n: int, m: int, correction: str, gamma: float = 0.01,
                     device=None, replace: bool = True) -> Tensor:
    """``[m + 1, K]`` float64: the corrected value of each sampled rank ``s = 1..m+1`` (row ``s - 1``).
    ``"mle"``: the metric at the rank estimate :func:`mle_ranks` (the same with or without
    replacement); ``"bv"``: :func:`bv_table` under the law of ``replace``."""
    if correction == "bv":
        return bv_table(keys, n, m, gamma, device, replace)
    return rank_metric(mle_ranks(n, m, device), keys, n)


def sampled_rank_values(table: Tensor, above: Tensor, tied: Tensor, ties: str,
                        relevant: Optional[Tensor] = None) -> Tensor:
    """``[U, K]``: each user's corrected values from the negatives scored ``above`` and equal to
    (``tied``) its relevant item: at sampled rank ``1 + above`` (``"optimistic"``),
    ``1 + above + tied`` (``"stable"``: the negatives first; ``"pessimistic"``), or the mean
    over every rank in between (``"expected"``: each order of the tie equally likely).
    ``relevant``: False marks a user without a relevant item (NaN)."""
    if ties == "optimistic":
        values = table[above]
    elif ties in ("stable", "pessimistic"):
        values = table[above + tied]
    else:
        sums = torch.cat([table.new_zeros(1, table.shape[1]), torch.cumsum(table, 0)])
        values = (sums[above + tied + 1] - sums[above]) / (tied + 1).unsqueeze(1).to(torch.float64)
    if relevant is not None:
        values = values.masked_fill(~relevant.unsqueeze(1), math.nan)
    return values
