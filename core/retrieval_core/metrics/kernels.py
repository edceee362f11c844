"""Per-query metric kernels: pure functions ``f(ranking, k) -> Tensor[Q]`` (float64).

``k`` is the cutoff: a positive int, a ``[Q]`` int64 tensor of per-query cutoffs
(``@r``: each query's R), or None for the whole candidate list. No kernel
averages, syncs or loops over queries. Values of queries for which a metric is
undefined (see :data:`EMPTY_RULES`) are arbitrary here; the evaluator marks them.

Notation (docs/metrics.md): hits@k = relevant candidates among the first k,
R = ``ranking.n_relevant``, P@i = hits@i / i, rel_i = 1 if rank i is relevant.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Union

import torch
from torch import Tensor

from ..ranking.gains import exp_gain
from ..ranking.ranking import Ranking, discounts

Cutoff = Optional[Union[int, Tensor]]
Kernel = Callable[[Ranking, Cutoff], Tensor]


def cut_length(r: Ranking, k: Cutoff) -> Union[int, Tensor]:
    """How many ranked positions the cutoff covers (k clipped to the depth)."""
    if k is None:
        return r.depth
    if isinstance(k, Tensor):
        return k.clamp(max=r.depth)
    return min(k, r.depth)


def value_at(cum: Tensor, c: Union[int, Tensor]) -> Tensor:
    """Row-wise value of a cumulative ``[Q, d]`` array after ``c`` positions (0 if c = 0)."""
    if isinstance(c, Tensor):
        got = cum.gather(1, (c - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        return torch.where(c > 0, got, torch.zeros_like(got))
    if c <= 0:
        return cum.new_zeros(cum.shape[0])
    return cum[:, c - 1]


def nominal_k(r: Ranking, k: Cutoff) -> Tensor:
    """The cutoff as a float64 divisor: k itself, R for @r, the list length for None."""
    if k is None:
        return r.n_candidates.to(torch.float64)
    if isinstance(k, Tensor):
        return k.to(torch.float64)
    return torch.full((r.n_queries,), float(k), dtype=torch.float64, device=r.relevance.device)


def _hits(r: Ranking, k: Cutoff) -> Tensor:
    """hits@k as float64 (counted exactly in integers)."""
    return value_at(r.cum_hits, cut_length(r, k)).to(torch.float64)


def _ratio_or_zero(num: Tensor, den: Tensor) -> Tensor:
    """num / den, 0 where den == 0 (for 'no hit gives 0' definitions)."""
    return torch.where(den > 0, num / den.clamp(min=1e-300), torch.zeros_like(num))


def hit_rate(r: Ranking, k: Cutoff) -> Tensor:
    """1 if any of the first k candidates is relevant."""
    return (_hits(r, k) > 0).to(torch.float64)


def precision(r: Ranking, k: Cutoff) -> Tensor:
    """hits@k / k."""
    return _hits(r, k) / nominal_k(r, k)


def precision_adaptive(r: Ranking, k: Cutoff) -> Tensor:
    """hits@k / min(k, n_candidates)."""
    return _hits(r, k) / torch.minimum(nominal_k(r, k), r.n_candidates.to(torch.float64))


def precision_capped(r: Ranking, k: Cutoff) -> Tensor:
    """hits@k / min(k, R)."""
    return _hits(r, k) / torch.minimum(nominal_k(r, k), r.n_relevant.to(torch.float64))


def recall(r: Ranking, k: Cutoff) -> Tensor:
    """hits@k / R."""
    return _hits(r, k) / r.n_relevant.to(torch.float64)


def f1(r: Ranking, k: Cutoff) -> Tensor:
    """Harmonic mean of precision@k and recall@k, which is 2 hits@k / (k + R)."""
    return 2.0 * _hits(r, k) / (nominal_k(r, k) + r.n_relevant.to(torch.float64))


def average_precision(r: Ranking, k: Cutoff) -> Tensor:
    """sum_{i<=k} P@i rel_i / R (trec map_cut, PML map@r with k = R)."""
    return value_at(r.cum_precision_hits, cut_length(r, k)) / r.n_relevant.to(torch.float64)


def average_precision_capped(r: Ranking, k: Cutoff) -> Tensor:
    """sum_{i<=k} P@i rel_i / min(R, k) (RecBole's, torch_geometric's LinkPredMAP and
    ml_metrics' MAP@k: a list of k items can hold at most k of the R relevant ones)."""
    cap = torch.minimum(nominal_k(r, k), r.n_relevant.to(torch.float64))
    return value_at(r.cum_precision_hits, cut_length(r, k)) / cap


def average_precision_hits(r: Ranking, k: Cutoff) -> Tensor:
    """sum_{i<=k} P@i rel_i / hits@k, 0 without a hit (OML map@k, torchmetrics MAP top_k)."""
    c = cut_length(r, k)
    return _ratio_or_zero(value_at(r.cum_precision_hits, c), _hits(r, k))


def reciprocal_rank(r: Ranking, k: Cutoff) -> Tensor:
    """1 / rank of the first relevant candidate within k, else 0."""
    first = r.first_hit
    inside = (first > 0) & (first <= cut_length(r, k))
    return torch.where(inside, 1.0 / first.clamp(min=1).to(torch.float64), torch.zeros_like(first, dtype=torch.float64))


def _dcg(gains: Tensor, r: Ranking, k: Cutoff) -> Tensor:
    return value_at((gains * r.discount).cumsum(1), cut_length(r, k))


def _ideal(r: Ranking) -> Tensor:
    if r.ideal is None:
        raise ValueError("this Ranking was built without ideal gains; nDCG needs them")
    return r.ideal


# ranks summed at a time by discount_sums: its memory stays constant whatever R
DISCOUNT_CHUNK = 1 << 20
# ranks added one by one; past them, the rest of the sum is Euler-Maclaurin's (_discount_tail)
DISCOUNT_EXACT = 1 << 20


def discount_sums(n: Tensor, chunk: int = DISCOUNT_CHUNK, exact: int = DISCOUNT_EXACT,
                  bound: Optional[int] = None) -> Tensor:
    """``[Q]`` float64: sum_{i <= n_q} 1 / log2(i + 1), the ideal DCG of n_q gains of 1.

    Up to ``exact`` ranks, added rank by rank as a cumulative sum over the ranks gives it
    (the same bits as an ideal of ones), in chunks of ``chunk`` ranks. Past ``exact``, the
    sum so far plus the tail by :func:`_discount_tail` (Euler-Maclaurin; within 5e-15 of the
    exact sum, closer than 10^8 terms added one by one come), so that an R of 10^18 costs
    what an R of 10^6 does.

    ``bound``: a host number at least every ``n_q``: the ranks are summed to it, with no
    read of the largest ``n_q`` (the same values: the sums of the ranks to each ``n_q`` are
    the same prefix sums, and the ranks past them are read by no count).

    Example:
        >>> [round(x, 4) for x in discount_sums(torch.tensor([0, 1, 3]), chunk=2).tolist()]   # 1 + 1/log2(3) + 1/2
        [0.0, 1.0, 2.1309]
        >>> f"{discount_sums(torch.tensor([10**18])).item():.6e}"   # ~ ln 2 li(10^18)
        '1.714843e+16'
    """
    out = torch.zeros(n.shape, dtype=torch.float64, device=n.device)
    if bound is not None:
        top = min(bound, exact)
    else:
        top = min(int(n.max()), exact) if n.numel() else 0
    buf = out.new_empty(min(chunk, top) + 1)  # [the sum so far, this chunk's discounts]: one buffer
    buf[0] = 0.0
    for start in range(0, top, chunk):
        stop = min(start + chunk, top)
        # discounts(start, stop) in place, the same bits: rank + 1 counted exactly, 1.0 / x is x.reciprocal()
        torch.arange(start + 2, stop + 2, dtype=torch.float64, out=buf[1:stop - start + 1]).log2_().reciprocal_()
        cum = buf[:stop - start + 1].cumsum(0)  # cum[j]: the first start + j ranks
        inside = (n > start) & (n <= stop)
        out = torch.where(inside, cum[(n - start).clamp(0, stop - start)], out)
        buf[0] = cum[-1]
    beyond = n > exact
    if (bool(beyond.any()) if bound is None else bound > exact):  # buf[0]: the sum of the first `exact` ranks
        out = torch.where(beyond, buf[0] + _discount_tail(exact, n.clamp(min=exact).to(torch.float64)), out)
    return out


_LN2 = math.log(2.0)
_EULER_GAMMA = 0.5772156649015329


def _li(x: Tensor) -> Tensor:
    """The logarithmic integral li(x) for x > 1, by Ramanujan's series (it converges for
    every x; 100 terms reach float64 for x up to 2^64): with u = ln x,
    li(x) = gamma + ln u + sqrt(x) sum_m (-1)^(m-1) u^m / (m! 2^(m-1)) sum_{j < (m+1)/2} 1/(2j+1)."""
    u = x.log()
    total, term, inner = torch.zeros_like(x), torch.ones_like(x), 0.0
    for m in range(1, 101):
        term = term * u / (1 if m == 1 else 2 * m)  # u^m / (m! 2^(m-1))
        if m % 2 == 1:
            inner += 1.0 / m  # 1/1 + 1/3 + ... + 1/m
        total = total + (term if m % 2 == 1 else -term) * inner
    return _EULER_GAMMA + u.log() + x.sqrt() * total


def _discount_tail(a: int, b: Tensor) -> Tensor:
    """sum_{a < i <= b} f(i) for f(i) = 1 / log2(i + 1) = ln 2 / ln(i + 1), by Euler-Maclaurin:
    the integral ln 2 (li(b + 1) - li(a + 1)) + (f(b) - f(a)) / 2 + (f1(b) - f1(a)) / 12 with
    the derivative f1(x) = -ln 2 / ((x + 1) ln^2(x + 1)); the next term (the third
    derivative's, over 720) is below 1e-22 for a >= 2^20."""
    def f(x):
        return _LN2 / torch.log1p(x)

    def f1(x):
        return -_LN2 / ((x + 1) * torch.log1p(x) ** 2)

    start = torch.full_like(b, float(a))
    integral = _LN2 * (_li(b + 1) - _li(start + 1))
    return integral + (f(b) - f(start)) / 2 + (f1(b) - f1(start)) / 12


def _ideal_dcg(r: Ranking, k: Cutoff, exp: bool = False) -> Tensor:
    """DCG@k of the ideal order (the whole ideal for None): of ``r.ideal``, over its own width
    (which may exceed the list's), or of ``r.ideal_ones`` gains of 1 (2^1 - 1 = 1 too)."""
    if r.ideal_ones is not None:
        n, bound = r.ideal_ones, r.ideal_ones_max
        if isinstance(k, Tensor):
            n = torch.minimum(n, k)
        elif k is not None:  # a host cutoff: no copy to the device
            n, bound = n.clamp(max=k), None if bound is None else min(bound, k)
        return discount_sums(n, bound=bound)
    ideal = _ideal(r)
    if isinstance(k, Tensor):  # per-query cutoffs (@r): no host read of their largest
        width, c = ideal.shape[1], k.clamp(max=ideal.shape[1])
    else:
        width = ideal.shape[1] if k is None else min(k, ideal.shape[1])
        c = width
    gains = ideal[:, :width]
    if exp:
        gains = exp_gain(gains, r.exp_shift)
    discount = r.discount[:width] if width <= r.depth else discounts(0, width, gains.device)
    return value_at((gains * discount).cumsum(1), c)


def unscale(x: Tensor, shift: Tensor) -> Tensor:
    """``x * 2^shift`` (x >= 0), inf where float64 cannot hold it and never NaN: a power of
    two 2^shift alone may overflow where the product does not (x < 1), so the exponent is
    added to x's own (frexp) instead."""
    mantissa, exponent = torch.frexp(x)  # x = mantissa * 2^exponent, mantissa in [0.5, 1)
    big = 2.0 * mantissa * torch.exp2(exponent.to(x.dtype) - 1.0 + shift)  # 2^(e-1+s) <= 2^1023 when it fits
    return torch.where((x > 0) & (shift > 0), big, x)


def dcg(r: Ranking, k: Cutoff) -> Tensor:
    """sum_{i<=k} g_i / log2(i + 1) with linear gain g = relevance."""
    return _dcg(r.relevance, r, k)


def dcg_exp(r: Ranking, k: Cutoff) -> Tensor:
    """sum_{i<=k} (2^g_i - 1) / log2(i + 1); inf where float64 cannot hold it (the
    aggregation refuses that)."""
    return unscale(_dcg(r.exp_relevance, r, k), r.exp_shift)


def ndcg(r: Ranking, k: Cutoff) -> Tensor:
    """DCG@k over the DCG@k of the ideal order, linear gain."""
    return dcg(r, k) / _ideal_dcg(r, k)


def ndcg_exp(r: Ranking, k: Cutoff) -> Tensor:
    """nDCG@k with gain 2^rel - 1 (both DCGs scaled by 2^-exp_shift: the ratio stays exact)."""
    return _dcg(r.exp_relevance, r, k) / _ideal_dcg(r, k, exp=True)


def rbp_weights(r: Ranking, p: float) -> Tensor:
    """``[d]`` float64: (1 - p) p^(i - 1) for the ranks i = 1..d (underflowing to 0 far down)."""
    return (1.0 - p) * torch.pow(torch.full_like(r.positions, p), r.positions - 1.0)


def rbp(r: Ranking, k: Cutoff, p: float) -> Tensor:
    """Rank-biased precision (Moffat and Zobel, 2008): (1 - p) sum_i p^(i-1) rel_i over the
    list (its first k with a cutoff), rel_i = 1 for a relevant candidate (gain > 0), as
    ir_measures' ``RBP(p=p)`` at relevance level 1.

    Example:
        >>> round(rbp(Ranking.from_relevance(torch.tensor([[1.0, 0.0, 3.0]])), None, 0.5).item(), 4)  # .5 + .5/4
        0.625
    """
    return value_at((r.hit * rbp_weights(r, p)).cumsum(1), cut_length(r, k))


def top_gain(r: Ranking) -> Tensor:
    """``[Q]`` float64: the largest gain of each query (of its ideal, or of the list where larger)."""
    listed = r.relevance.amax(1) if r.depth else r.relevance.new_zeros(r.n_queries)
    if r.ideal_ones is not None:
        return torch.maximum((r.ideal_ones > 0).to(torch.float64), listed)
    ideal = _ideal(r)
    return torch.maximum(ideal[:, 0], listed) if ideal.shape[1] else listed


def err(r: Ranking, k: Cutoff) -> Tensor:
    """Expected reciprocal rank (Chapelle et al., 2009): sum_{i<=k} (1/i) R_i prod_{j<i} (1 - R_j)
    with R_i = (2^g_i - 1) / 2^g_max and g_max the query's largest gain.

    Example:
        >>> r = Ranking.from_relevance(torch.tensor([[1.0, 2.0]]))
        >>> r.ideal = torch.tensor([[2.0, 1.0]])
        >>> err(r, None).item()   # R = 1/4, 3/4: 1/4 + (1/2)(3/4)(3/4)
        0.53125
    """
    stop = exp_gain(r.relevance, top_gain(r))  # (2^g - 1) 2^-g_max, exactly scaled; in [0, 1)
    survive = torch.nn.functional.pad(torch.cumprod(1.0 - stop, 1)[:, :-1], (1, 0), value=1.0)
    return value_at((stop * survive / r.positions).cumsum(1), cut_length(r, k))


def fall_out(r: Ranking, k: Cutoff) -> Tensor:
    """Non-relevant candidates in the top k over all non-relevant candidates."""
    c = cut_length(r, k)
    retrieved = value_at(r.cum_valid, c).to(torch.float64)
    negatives = (r.n_candidates - r.n_relevant).to(torch.float64)
    return (retrieved - _hits(r, k)) / negatives


def acg(r: Ranking, k: Cutoff) -> Tensor:
    """Average cumulative gain: sum_{i<=k} g_i / k."""
    return value_at(r.cum_gain, cut_length(r, k)) / nominal_k(r, k)


def wap(r: Ranking, k: Cutoff) -> Tensor:
    """Weighted mean average precision: sum_{i<=k} 1[g_i>0] acg@i / hits@k, 0 without a hit."""
    c = cut_length(r, k)
    weighted = (r.hit * r.cum_gain / r.positions).cumsum(1)
    return _ratio_or_zero(value_at(weighted, c), _hits(r, k))


def partial_auroc(r: Ranking, k: Cutoff, max_fpr: Optional[float] = None) -> Tensor:
    """ROC AUC of each query's first ``k`` candidates (the whole list with None),
    up to a false-positive rate ``max_fpr`` with McClish's standardisation (as
    scikit-learn's ``roc_auc_score(max_fpr=...)``); NaN where either class is missing.

    In the stable order the ROC curve is a staircase: each non-relevant candidate
    moves the false-positive rate by 1/N at a true-positive rate of (relevant
    above it) / P.
    """
    if k is None and not r.complete:
        raise ValueError("auroc needs the whole candidate list in the Ranking")
    c = r.depth if k is None else min(int(k), r.depth)
    hit = r.hit[:, :c]
    negative = r.valid[:, :c] & ~hit  # relevant candidates are valid ones
    n_pos, n_neg = hit.sum(1).to(torch.float64), negative.sum(1).to(torch.float64)
    tpr = r.cum_hits[:, :c] / n_pos.unsqueeze(1)
    if max_fpr is None or max_fpr >= 1.0:
        auc = (tpr * negative).sum(1) / n_neg
    else:
        step = negative.cumsum(1, dtype=r.count_dtype).to(torch.float64)  # j at the j-th non-relevant candidate
        width = (torch.clamp(step / n_neg.unsqueeze(1), max=max_fpr) - (step - 1) / n_neg.unsqueeze(1)).clamp(min=0.0)
        partial = (tpr * negative * width).sum(1)
        min_area = 0.5 * max_fpr**2
        auc = 0.5 * (1.0 + (partial - min_area) / (max_fpr - min_area))
    return auc.masked_fill((n_pos == 0) | (n_neg == 0), float("nan"))


def auroc(r: Ranking, k: Cutoff) -> Tensor:
    """ROC AUC of the ranking (of its first k candidates for ``auroc@k``): the fraction
    of (relevant, non-relevant) pairs in which the relevant candidate is ranked first."""
    return partial_auroc(r, k)


def no_relevant(r: Ranking) -> Tensor:
    """The usual empty query: R = 0."""
    return r.n_relevant == 0


def no_relevant_or_candidate(r: Ranking) -> Tensor:
    """``precision_adaptive@k``'s empty query: R = 0, or an empty list (no rank to divide by:
    a list cut from a collection, R given, may retrieve nothing)."""
    return no_relevant(r) | (r.n_candidates == 0)


def no_candidate(r) -> Tensor:
    """The empty user of a beyond-accuracy metric (:mod:`retrieval_core.metrics.items`): the
    list holds no item (``r``: the :class:`~retrieval_core.metrics.items.ItemLists`, -1 first)."""
    if r.ids.shape[1] == 0:
        return torch.ones(r.ids.shape[0], dtype=torch.bool, device=r.ids.device)
    return r.ids[:, 0] < 0


def no_irrelevant(r: Ranking) -> Tensor:
    """Fall-out's empty query: every candidate is relevant."""
    return r.n_candidates == r.n_relevant


def no_relevant_or_irrelevant(r: Ranking) -> Tensor:
    """AUROC's empty query: it needs at least one of each."""
    return no_relevant(r) | no_irrelevant(r)


def recall_at_fixed_precision(precision: Tensor, recall: Tensor, k: Tensor, min_precision: float):
    """From a precision/recall curve over ``k`` (1-D, one point per k): the largest
    recall whose precision is at least ``min_precision``, and its k (the largest k
    among equal recalls). No such point, or a best recall of 0: recall 0 and k = the
    curve's length (torchmetrics' RetrievalRecallAtFixedPrecision documents this).

    Example:
        >>> p, r = torch.tensor([1.0, 0.5, 0.67]), torch.tensor([0.5, 0.5, 1.0])
        >>> recall_at_fixed_precision(p, r, torch.tensor([1, 2, 3]), 0.6)
        (tensor(1.), tensor(3))
    """
    reached = precision >= min_precision
    if not bool(reached.any()):
        return torch.zeros((), dtype=recall.dtype, device=recall.device), torch.tensor(len(k))
    best = recall[reached].max()
    if best == 0:
        return best, torch.tensor(len(k), dtype=k.dtype, device=k.device)
    return best, k[reached & (recall == best)].max()
