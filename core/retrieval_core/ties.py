"""Tie-aware metric values: ``ties="expected"`` in closed form.

Under ``ties="expected"`` each per-query value is the mean of the metric over
every ordering of the candidates that share a score, all orderings equally
likely (McSherry and Najork, 2008). Nothing is sampled or enumerated: a tied
group of ``m`` candidates holding ``h`` relevant ones (gain > 0) and gain ``G``
occupies ranks ``s+1 .. s+m``, each of its candidates is equally likely at each
of those ranks, and every kernel below is a sum over ranks of such group-level
expectations (see docs/metrics.md, "Tie modes", for the derivations). Everything
is vectorised over ``[Q, d]``: no loop over queries, groups or orderings.

Groups are runs of equal scores in ``Ranking.scores`` (padding forms its own
runs); the group that reaches the last rank ``d`` of a partial Ranking extends
past it by ``Ranking.tie_count`` candidates with summed gain ``tie_gain``,
``tie_hits`` relevant ones and summed exponential gain ``tie_exp_gain``.

``"optimistic"`` and ``"pessimistic"`` need no formulas: the builders order each
tied group by gain (highest first, or last) and the stable kernels apply.
"""
from __future__ import annotations

from functools import cached_property
from typing import Callable, Dict, Optional

import torch
from torch import Tensor

from . import kernels as K
from .ranking import Ranking

__all__ = ["TieGroups", "expected_kernel", "EXPECTED_KERNELS"]


def _log_choose(n: Tensor, k: Tensor) -> Tensor:
    """log C(n, k) for float64 tensors with 0 <= k <= n (garbage elsewhere: mask it)."""
    return torch.lgamma(n + 1.0) - torch.lgamma(k + 1.0) - torch.lgamma((n - k).clamp(min=0.0) + 1.0)


def _safe_div(num: Tensor, den: Tensor) -> Tensor:
    """num / den, 0 where den == 0."""
    return torch.where(den != 0, num / torch.where(den != 0, den, torch.ones_like(den)), torch.zeros_like(num))


class TieGroups:
    """Per-rank view of a Ranking's tied groups (all ``[Q, d]`` float64 unless said).

    ``start``/``end``: int64 first and last in-Ranking position (0-based) of the
    group of each rank; ``offset``: rank minus the group's first rank; ``size``:
    the group's candidates (past the cut included); ``hits``, ``gain``,
    ``exp_gain``: the group's relevant count and summed gains; ``hits_before``
    and ``gain_before``: those of every rank ahead of the group.

    Example:
        >>> import torch
        >>> r = Ranking.from_relevance(torch.tensor([[1.0, 0.0, 0.0]]))
        >>> r.scores = torch.tensor([[3.0, 3.0, 1.0]])
        >>> TieGroups(r).p_hit.tolist()
        [[0.5, 0.5, 0.0]]
    """

    def __init__(self, r: Ranking):
        if r.scores is None:
            raise ValueError("ties='expected' needs the scores in the Ranking")
        if not r.complete and r.tie_count is None:
            raise ValueError("ties='expected' needs the tie counts at the cut of a partial Ranking "
                             "(build it with ties='expected')")
        self.r = r
        s, v = r.scores, r.valid
        q, d = s.shape
        device = s.device
        new = torch.ones_like(v)
        new[:, 1:] = (s[:, 1:] != s[:, :-1]) | (v[:, 1:] != v[:, :-1])
        last = torch.ones_like(v)
        last[:, :-1] = new[:, 1:]
        pos = torch.arange(d, device=device)
        self.start = torch.where(new, pos, 0).cummax(1).values
        self.end = torch.where(last, pos, d - 1).flip(1).cummin(1).values.flip(1)
        self.offset = (pos - self.start).to(torch.float64)
        # the group of the last real candidate extends past the cut by tie_count (0 where the
        # row's list ends inside the Ranking; Rankings joined by Ranking.cat keep each part's
        # count at that part's own depth, followed by padding)
        self._past = None
        if not r.complete and r.tie_count is not None:
            self._past = self.end == (v.sum(1) - 1).unsqueeze(1)
        self.size = (self.end - self.start + 1).to(torch.float64) + self._extra(r.tie_count)
        self.hits, self.hits_before = self._sums(r.hit.to(torch.float64), r.tie_hits)
        self.gain, self.gain_before = self._sums(r.relevance, r.tie_gain)

    def _extra(self, past: Optional[Tensor]) -> Tensor:
        if self._past is None or past is None:
            return torch.zeros((), dtype=torch.float64, device=self.r.relevance.device)
        return torch.where(self._past, past.to(torch.float64).unsqueeze(1), 0.0)

    def _sums(self, x: Tensor, past: Optional[Tensor]):
        """(group total of x, total of x ahead of the group) per rank."""
        if self._past is not None and past is None:
            raise ValueError("ties='expected' needs the tie sums at the cut of a partial Ranking")
        c = torch.nn.functional.pad(x.cumsum(1), (1, 0))
        before = c.gather(1, self.start)
        return c.gather(1, self.end + 1) - before + self._extra(past), before

    @cached_property
    def exp_gain(self) -> Tensor:
        if self._past is not None and self.r.tie_exp_gain is None:
            raise ValueError("ties='expected' needs the exponential gain at the cut for dcg_exp/ndcg_exp")
        r = self.r
        past = r.tie_exp_gain
        if past is not None:  # scaled by 2^-tie_exp_shift; exp_shift is at least that
            past = past * torch.exp2((0.0 if r.tie_exp_shift is None else r.tie_exp_shift) - r.exp_shift)
        return self._sums(K._exp_gain(r.relevance, r.exp_shift), past)[0]

    @cached_property
    def p_hit(self) -> Tensor:
        """Probability that the candidate at each rank is relevant: h / m."""
        return self.hits / self.size

    @cached_property
    def cum_hits(self) -> Tensor:
        """Expected hits@i."""
        return self.p_hit.cumsum(1)

    @cached_property
    def pair_hits(self) -> Tensor:
        """(h - 1) / (m - 1): P(another given member of the group is relevant | this one is)."""
        return _safe_div(self.hits - 1.0, self.size - 1.0)

    @cached_property
    def none_yet(self) -> Tensor:
        """P(no relevant candidate among the group's ranks up to and including this one),
        C(m-h, o+1) / C(m, o+1), as a running product of (m-h-j)/(m-j) over the row: right
        wherever no group ahead holds a relevant candidate (every factor there is 1)."""
        factor = ((self.size - self.hits - self.offset) / (self.size - self.offset)).clamp(min=0.0)
        return factor.cumprod(1)

    @cached_property
    def none_before(self) -> Tensor:
        """As :attr:`none_yet`, excluding this rank: C(m-h, o) / C(m, o)."""
        return torch.nn.functional.pad(self.none_yet[:, :-1], (1, 0), value=1.0)

    def at_cut(self, t: Tensor, c) -> Tensor:
        """Row values of ``t[Q, d]`` at 0-based position ``c - 1`` (c an int or [Q] tensor >= 1)."""
        if isinstance(c, Tensor):
            return t.gather(1, (c - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        return t[:, c - 1]


def _cut(r: Ranking, k):
    return K.cut_length(r, k)


def _groups(r: Ranking) -> TieGroups:
    return r.tie_groups


# -- kernels linear in the per-rank gains ------------------------------------------------


def _hits(r: Ranking, k) -> Tensor:
    return K.value_at(_groups(r).cum_hits, _cut(r, k))


def hit_rate(r: Ranking, k) -> Tensor:
    """P(a relevant candidate among the first k): 1 if one is ahead of the cut's group,
    else 1 - C(m - h, t) / C(m, t) for the t ranks of that group inside the cut."""
    g, c = _groups(r), _cut(r, k)
    missed = K.value_at(g.none_yet, c)
    value = torch.where(K.value_at(g.hits_before, c) > 0, 1.0, 1.0 - missed)
    if isinstance(c, Tensor):
        return torch.where(c > 0, value, 0.0)
    return value if c > 0 else torch.zeros_like(value)


def precision(r, k):
    return _hits(r, k) / K.nominal_k(r, k)


def precision_adaptive(r, k):
    return _hits(r, k) / torch.minimum(K.nominal_k(r, k), r.n_candidates.to(torch.float64))


def precision_capped(r, k):
    return _hits(r, k) / torch.minimum(K.nominal_k(r, k), r.n_relevant.to(torch.float64))


def recall(r, k):
    return _hits(r, k) / r.n_relevant.to(torch.float64)


def f1(r, k):
    return 2.0 * _hits(r, k) / (K.nominal_k(r, k) + r.n_relevant.to(torch.float64))


def fall_out(r, k):
    c = _cut(r, k)
    retrieved = K.value_at(r.cum_valid, c).to(torch.float64)  # padding forms its own groups
    return (retrieved - _hits(r, k)) / (r.n_candidates - r.n_relevant).to(torch.float64)


def _mean_gain(r: Ranking, exp: bool) -> Tensor:
    g = _groups(r)
    return (g.exp_gain if exp else g.gain) / g.size


def _dcg(r, k, exp: bool) -> Tensor:
    return K.value_at((_mean_gain(r, exp) * r.discount).cumsum(1), _cut(r, k))


def dcg(r, k):
    return _dcg(r, k, False)


def dcg_exp(r, k):
    return K.unscale(_dcg(r, k, True), r.exp_shift)  # exp_gain is scaled by 2^-exp_shift


def ndcg(r, k):
    return dcg(r, k) / K._dcg(K._ideal(r), r, k)


def ndcg_exp(r, k):
    return _dcg(r, k, True) / K._dcg(K._exp_gain(K._ideal(r), r.exp_shift), r, k)  # both scaled alike


def acg(r, k):
    return K.value_at(_mean_gain(r, False).cumsum(1), _cut(r, k)) / K.nominal_k(r, k)


# -- average precision, reciprocal rank, AUROC ---------------------------------------------


def _ap_terms(g: TieGroups) -> Tensor:
    """E[rel_i * hits@i] per rank: (h/m) (hits ahead + 1 + offset (h-1)/(m-1))."""
    return g.p_hit * (g.hits_before + 1.0 + g.offset * g.pair_hits)


def average_precision(r, k):
    """E[sum_{i<=k} P@i rel_i] / R (R does not depend on the order)."""
    g = _groups(r)
    num = K.value_at((_ap_terms(g) / r.positions).cumsum(1), _cut(r, k))
    return num / r.n_relevant.to(torch.float64)


def reciprocal_rank(r, k):
    """sum_{i<=k} P(first relevant at rank i) / i; the first relevant one lies in the first
    group holding one: P(rank s+o+1) = C(m-h, o)/C(m, o) * h/(m - o)."""
    g = _groups(r)
    first = g.none_before * g.hits / (g.size - g.offset)
    first = torch.where(g.hits_before == 0, first, 0.0)
    return K.value_at((first / r.positions).cumsum(1), _cut(r, k))


def _wap_terms(g: TieGroups) -> Tensor:
    """E[rel_i * (summed gain of ranks <= i)] per rank."""
    own = g.gain / g.size  # E[rel_i g_i] = G / m (gain > 0 exactly where relevant)
    pair = _safe_div(g.hits * g.gain - g.gain, g.size * (g.size - 1.0))  # E[rel_i g_j], j != i in the group
    return g.p_hit * g.gain_before + own + g.offset * pair


def _hits_ratio(r: Ranking, k, terms: Tensor, alpha_of, beta_of) -> Tensor:
    """E[N / hits@k] where N = sum_{i<=k} terms_i / i. Only the group holding rank k makes
    hits@k random: with x of its h relevant ones among its t ranks inside the cut
    (hypergeometric), its contribution to N has conditional mean x alpha + x (x-1) beta;
    ranks ahead of the group contribute their unconditional mean A."""
    g, c = _groups(r), _cut(r, k)
    device = r.relevance.device
    q = r.n_queries
    # the hypergeometric support: x = 0..t, t <= the cut (no host read of a tensor cutoff)
    width = (r.depth if isinstance(c, Tensor) else max(1, min(int(c), r.depth))) + 1
    if not isinstance(c, Tensor):
        c = torch.full((q,), c, dtype=torch.int64, device=device)
    cc = c.clamp(min=1)
    t = g.at_cut(g.offset, cc) + 1.0
    m, h = g.at_cut(g.size, cc), g.at_cut(g.hits, cc)
    before = g.at_cut(g.hits_before, cc)
    start = g.at_cut(g.start, cc)  # 0-based: the group's ranks are start+1 .. c
    harmonic = torch.nn.functional.pad((1.0 / r.positions).cumsum(0), (1, 0))
    dh = harmonic[cc] - harmonic[start]  # sum over the group's ranks inside the cut of 1/i
    d_off = t - (start + 1).to(torch.float64) * dh  # sum of offset/i over those ranks
    weighted = torch.nn.functional.pad((terms / r.positions).cumsum(1), (1, 0))
    ahead = weighted.gather(1, start.unsqueeze(1)).squeeze(1)
    alpha, beta = alpha_of(g, cc, before, t, dh), beta_of(g, cc, t, d_off)
    x = torch.arange(width, dtype=torch.float64, device=device)
    m_, h_, t_ = m.unsqueeze(1), h.unsqueeze(1), t.unsqueeze(1)
    feasible = (x <= h_) & (x <= t_) & (t_ - x <= m_ - h_)
    log_p = (_log_choose(h_, torch.minimum(x, h_)) + _log_choose(m_ - h_, (t_ - x).clamp(min=0.0).minimum(m_ - h_))
             - _log_choose(m_, t_))
    p = torch.where(feasible, torch.exp(log_p), 0.0)
    num = ahead.unsqueeze(1) + x * alpha.unsqueeze(1) + x * (x - 1.0) * beta.unsqueeze(1)
    den = before.unsqueeze(1) + x
    value = (p * _safe_div(num, den)).sum(1)
    return torch.where(c > 0, value, 0.0)


def average_precision_hits(r, k):
    """E[sum_{i<=k} P@i rel_i / hits@k], 0 without a hit."""
    return _hits_ratio(
        r, k, _ap_terms(_groups(r)),
        lambda g, c, before, t, dh: (before + 1.0) * dh / t,
        lambda g, c, t, d_off: _safe_div(d_off, t * (t - 1.0)),
    )


def wap(r, k):
    """E[sum_{i<=k} rel_i acg@i / hits@k], 0 without a hit."""

    def alpha(g, c, before, t, dh):
        mean_relevant = _safe_div(g.at_cut(g.gain, c), g.at_cut(g.hits, c))
        return (g.at_cut(g.gain_before, c) + mean_relevant) * dh / t

    def beta(g, c, t, d_off):
        mean_relevant = _safe_div(g.at_cut(g.gain, c), g.at_cut(g.hits, c))
        return _safe_div(d_off * mean_relevant, t * (t - 1.0))

    return _hits_ratio(r, k, _wap_terms(_groups(r)), alpha, beta)


def auroc(r, k):
    """Whole list: E[(relevant, non-relevant) pairs in order] / (P N); a tied pair counts 1/2
    on average, so this is the AUC that gives tied pairs half credit."""
    if k is not None:
        raise NotImplementedError(
            "auroc@k has no closed form under ties='expected' (how many of each class the top k holds "
            "depends on the order); use auroc (whole list), or ties='stable', 'optimistic' or 'pessimistic'"
        )
    if not r.complete:
        raise ValueError("auroc needs the whole candidate list in the Ranking")
    g = _groups(r)
    negatives = r.valid * (g.size - g.hits) / g.size  # P(non-relevant) per rank
    pairs = negatives * g.hits_before + g.offset * _safe_div((g.size - g.hits) * g.hits, g.size * (g.size - 1.0))
    n_pos = r.n_relevant.to(torch.float64)
    n_neg = (r.n_candidates - r.n_relevant).to(torch.float64)
    auc = pairs.sum(1) / (n_pos * n_neg)
    return auc.masked_fill((n_pos == 0) | (n_neg == 0), float("nan"))


EXPECTED_KERNELS: Dict[Callable, Callable] = {
    K.hit_rate: hit_rate,
    K.precision: precision,
    K.precision_adaptive: precision_adaptive,
    K.precision_capped: precision_capped,
    K.recall: recall,
    K.f1: f1,
    K.average_precision: average_precision,
    K.average_precision_hits: average_precision_hits,
    K.reciprocal_rank: reciprocal_rank,
    K.ndcg: ndcg,
    K.ndcg_exp: ndcg_exp,
    K.dcg: dcg,
    K.dcg_exp: dcg_exp,
    K.fall_out: fall_out,
    K.acg: acg,
    K.wap: wap,
    K.auroc: auroc,
}


def expected_kernel(kernel: Callable) -> Callable:
    """The ``ties="expected"`` counterpart of a stable kernel.

    Example:
        >>> import torch
        >>> from retrieval_core.build import rank_dense
        >>> r = rank_dense(torch.tensor([[0.5, 0.5, 0.5, 0.1]]), torch.tensor([[0, 1, 0, 1]]), 4, ties="expected")
        >>> round(expected_kernel(K.reciprocal_rank)(r, None).item(), 4)  # (1 + 1/2 + 1/3) / 3
        0.6111
    """
    try:
        return EXPECTED_KERNELS[kernel]
    except KeyError:
        raise NotImplementedError(f"{getattr(kernel, '__name__', kernel)} has no ties='expected' form") from None
