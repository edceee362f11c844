"""Tie-aware kernels: ties="expected" per-query values in closed form (McSherry and Najork, 2008).

Each metric's specification (:mod:`retrieval_core.metrics.spec`) names its kernel here;
a metric without one (``err``, ``auroc@k``) is refused under ``ties="expected"`` before any work.

Under ``ties="expected"`` each per-query value is the mean of the metric over
every ordering of the candidates that share a score, all orderings equally
likely (McSherry and Najork, 2008). Nothing is sampled or enumerated: a tied
group of ``m`` candidates holding ``h`` relevant ones (gain > 0) and gain ``G``
occupies ranks ``s+1 .. s+m``, each of its candidates is equally likely at each
of those ranks, and every kernel here is a sum over ranks of such group-level
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

import torch
from torch import Tensor

from ..ranking.ranking import Ranking
from ..ranking.tie_groups import TieGroups, safe_div
from . import kernels as K

__all__ = [
    "hit_rate", "precision", "precision_adaptive", "precision_capped", "recall", "f1", "fall_out", "dcg", "dcg_exp",
    "ndcg", "ndcg_exp", "acg", "average_precision", "average_precision_capped", "reciprocal_rank",
    "average_precision_hits", "wap", "auroc", "rbp",
]


def _log_choose(n: Tensor, k: Tensor) -> Tensor:
    """log C(n, k) for float64 tensors with 0 <= k <= n (garbage elsewhere: mask it)."""
    return torch.lgamma(n + 1.0) - torch.lgamma(k + 1.0) - torch.lgamma((n - k).clamp(min=0.0) + 1.0)


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
    return dcg(r, k) / K._ideal_dcg(r, k)


def ndcg_exp(r, k):
    return _dcg(r, k, True) / K._ideal_dcg(r, k, exp=True)  # both scaled alike


def acg(r, k):
    return K.value_at(_mean_gain(r, False).cumsum(1), _cut(r, k)) / K.nominal_k(r, k)


def rbp(r, k, p):
    """(1 - p) sum_i p^(i-1) E[rel_i], E[rel_i] = h/m in a tied group (linear in rel_i)."""
    return K.value_at((_groups(r).p_hit * K.rbp_weights(r, p)).cumsum(1), _cut(r, k))


# -- average precision, reciprocal rank, AUROC ---------------------------------------------


def _ap_terms(g: TieGroups) -> Tensor:
    """E[rel_i * hits@i] per rank: (h/m) (hits ahead + 1 + offset (h-1)/(m-1))."""
    return g.p_hit * (g.hits_before + 1.0 + g.offset * g.pair_hits)


def _ap_numerator(r, k):
    """E[sum_{i<=k} P@i rel_i]."""
    return K.value_at((_ap_terms(_groups(r)) / r.positions).cumsum(1), _cut(r, k))


def average_precision(r, k):
    """E[sum_{i<=k} P@i rel_i] / R (R does not depend on the order)."""
    return _ap_numerator(r, k) / r.n_relevant.to(torch.float64)


def average_precision_capped(r, k):
    """E[sum_{i<=k} P@i rel_i] / min(R, k) (neither R nor k depends on the order)."""
    return _ap_numerator(r, k) / torch.minimum(K.nominal_k(r, k), r.n_relevant.to(torch.float64))


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
    pair = safe_div(g.hits * g.gain - g.gain, g.size * (g.size - 1.0))  # E[rel_i g_j], j != i in the group
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
    value = (p * safe_div(num, den)).sum(1)
    return torch.where(c > 0, value, 0.0)


def average_precision_hits(r, k):
    """E[sum_{i<=k} P@i rel_i / hits@k], 0 without a hit."""
    return _hits_ratio(
        r, k, _ap_terms(_groups(r)),
        lambda g, c, before, t, dh: (before + 1.0) * dh / t,
        lambda g, c, t, d_off: safe_div(d_off, t * (t - 1.0)),
    )


def wap(r, k):
    """E[sum_{i<=k} rel_i acg@i / hits@k], 0 without a hit."""

    def alpha(g, c, before, t, dh):
        mean_relevant = safe_div(g.at_cut(g.gain, c), g.at_cut(g.hits, c))
        return (g.at_cut(g.gain_before, c) + mean_relevant) * dh / t

    def beta(g, c, t, d_off):
        mean_relevant = safe_div(g.at_cut(g.gain, c), g.at_cut(g.hits, c))
        return safe_div(d_off * mean_relevant, t * (t - 1.0))

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
    pairs = negatives * g.hits_before + g.offset * safe_div((g.size - g.hits) * g.hits, g.size * (g.size - 1.0))
    n_pos = r.n_relevant.to(torch.float64)
    n_neg = (r.n_candidates - r.n_relevant).to(torch.float64)
    auc = pairs.sum(1) / (n_pos * n_neg)
    return auc.masked_fill((n_pos == 0) | (n_neg == 0), float("nan"))
