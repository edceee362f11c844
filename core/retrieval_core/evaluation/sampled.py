"""Sampled protocols evaluated: each user's positives ranked among its sampled negatives
(:func:`~retrieval_core.sample_negatives`) instead of the whole catalogue, with or without
the correction of Krichene & Rendle (2020) that estimates the full-ranking metric
(docs/metrics.md, "Sampled protocols", which also says why sampled numbers mislead).

Example:
    >>> import torch
    >>> from retrieval_core import sample_negatives
    >>> truth = torch.tensor([[0, 1], [2, 0]])                  # (user, item) pairs
    >>> users, items = torch.randn(2, 4), torch.randn(5, 4)     # a two-tower model
    >>> neg = sample_negatives(truth, 5, 3, seed=0)             # [2, 3] item ids
    >>> pos_scores = (users[truth[0]] * items[truth[1]]).sum(1)  # one per pair
    >>> neg_scores = torch.einsum("ud,und->un", users, items[neg])
    >>> r = evaluate_sampled(pos_scores, neg_scores, truth, ["hit_rate@2", "ndcg@2"])
    >>> sorted(r)
    ['hit_rate@2', 'ndcg@2']
    >>> r = evaluate_sampled(torch.tensor([0.9, 0.1]), torch.tensor([[0.5, 0.2, 0.0], [0.5, 0.2, 0.0]]), truth,
    ...                      ["hit_rate@1"], n_items=5, correction="mle")
    >>> r["hit_rate@1"].item()  # user 0's sampled rank 1 (full rank 1), user 1's 3 (full rank 3)
    0.5
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from ..inputs.sampled import sampled_inputs
from ..inputs.scores import score_value_inputs
from ..metrics.keys import depth_needed, ranking_values
from ..ranking.dense import rank_dense
from ..metrics.sampled import correction_table, sampled_rank_values
from ..stats.aggregate import MetricResults
from ..validate.stats import N_RESAMPLES
from .ranked import _aggregate

__all__ = ["evaluate_sampled"]


def _corrected(positive_scores: Tensor, negative_scores: Tensor, users: Tensor, keys, n_items: int,
               correction: str, gamma: float, ties: str, replace: bool) -> Tensor:
    """``[U, K]``: the corrected values (one relevant item per user; NaN for a user without one)."""
    n_users, m = negative_scores.shape
    counts = torch.bincount(users, minlength=n_users)
    if bool((counts > 1).any()):
        raise ValueError(f"correction={correction!r} estimates the metric of one relevant item per user (the "
                         f"paper's leave-one-out protocol); user {int((counts > 1).nonzero()[0, 0])} has "
                         f"several ({int((counts > 1).sum())} users do, up to {int(counts.max())} each)")
    dtype = torch.promote_types(positive_scores.dtype, negative_scores.dtype)  # compared exactly
    score = torch.zeros(n_users, dtype=dtype, device=users.device)
    score[users] = positive_scores.to(dtype)
    negatives = negative_scores.to(dtype)
    above = (negatives > score.unsqueeze(1)).sum(1)
    tied = (negatives == score.unsqueeze(1)).sum(1)
    table = correction_table(keys, n_items, m, correction, gamma, device=users.device, replace=replace)
    return sampled_rank_values(table, above, tied, ties, relevant=counts == 1)


def _sampled(positive_scores: Tensor, negative_scores: Tensor, users: Tensor, keys, ties: str) -> Tensor:
    """``[U, K]``: the sampled metrics, each user's row its ``m`` negatives then its positives (padded,
    masked), ranked whole (a sampled list is short)."""
    n_users, m = negative_scores.shape
    counts = torch.bincount(users, minlength=n_users)
    width = m + (int(counts.max()) if users.numel() else 0)
    order = torch.sort(users, stable=True).indices
    slot = torch.arange(users.numel(), device=users.device) - (torch.cumsum(counts, 0) - counts)[users[order]]
    dtype = torch.promote_types(positive_scores.dtype, negative_scores.dtype)
    preds = torch.zeros(n_users, width, dtype=dtype, device=users.device)
    preds[:, :m] = negative_scores
    preds[users[order], m + slot] = positive_scores[order].to(dtype)
    target = torch.zeros(n_users, width, dtype=torch.int64, device=users.device)
    target[users[order], m + slot] = 1
    mask = torch.arange(width, device=users.device) < (m + counts).unsqueeze(1)
    inputs = score_value_inputs(preds, target, keys, mask=mask, ties=ties)
    depth, at_r, whole = depth_needed(inputs.keys)
    ranking = rank_dense(inputs.preds, inputs.target, width if whole else depth, mask=inputs.mask, at_r=at_r,
                         need_ideal=any(k.spec.needs_ideal for k in keys), ties=ties)
    return ranking_values(ranking, inputs.keys)


def evaluate_sampled(
    positive_scores: Tensor,
    negative_scores: Tensor,
    truth: Tensor,
    metrics: Sequence[str],
    *,
    n_items: Optional[int] = None,
    correction: Optional[str] = None,
    gamma: float = 0.01,
    replace: bool = True,
    sampling: str = "uniform",
    ties: str = "stable",
    empty: str = "skip",
    reduce: str = "mean",
    categories=None,
    ci: Optional[float] = None,
    ci_method: str = "bootstrap",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    keep_per_query: bool = False,
) -> MetricResults:
    """Evaluate a sampled protocol: each user's positives ranked among its sampled negatives.

    Args:
        positive_scores: ``[E]`` the score of each truth pair (in ``truth``'s column order).
        negative_scores: ``[U, m]`` the scores of each user's ``m`` sampled negatives (the
            items :func:`sample_negatives` gives; a user's row, in any order).
        truth: ``[2, E]`` (user, item) pairs (user < U; each pair once).
        metrics: keys as :func:`~retrieval_core.evaluate_scores` takes them. A user's list is
            its positives and its negatives; the negatives stand first, so ``ties="stable"``
            ranks a positive after the negatives it ties with (as ``"pessimistic"``).
        n_items: the catalogue size n, which a correction needs (the full ranking it estimates).
        correction: None: the sampled metric itself; ``"mle"``: the metric at the
            maximum-likelihood full rank; ``"bv"``: the bias-variance correction with
            ``gamma`` (0: least bias, 1: least mean squared error). A correction needs one
            positive per user and the keys ``hit_rate``, ``recall``, ``precision``, ``f1``,
            ``ndcg``, ``ndcg_exp``, ``mrr``, ``map``, ``map_capped`` (``@k``, ``@r`` or none)
            or ``auroc`` (the specs' ``at_rank``) (docs/metrics.md, "Sampled protocols").
        replace: how the negatives were drawn, as :func:`sample_negatives` takes it: True (the
            default), independently (the sampled rank is binomial, the paper's model); False,
            ``m`` distinct items (hypergeometric; ``m <= n_items - 1``). The corrections use that law.
        sampling: ``"uniform"`` (the default) or ``"popularity"`` (``sample_negatives(popularity=...)``):
            a correction refuses popularity sampling (the law of the sampled rank then depends on
            the popularity of the items above the relevant one, which sampled scores do not give).
        ties, empty, reduce, categories (one per user), ci, ci_method, n_resamples, seed,
            keep_per_query: as :func:`~retrieval_core.evaluate_scores`.

    Returns:
        :class:`MetricResults` over the U users (a user without a positive is empty).
    """
    inputs = sampled_inputs(positive_scores, negative_scores, truth, metrics, n_items=n_items, correction=correction,
                            gamma=gamma, replace=replace, sampling=sampling, ties=ties, empty=empty, reduce=reduce,
                            categories=categories, ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                            keep_per_query=keep_per_query)
    options = inputs.options
    if options["correction"] is None:
        values = _sampled(inputs.positive_scores, inputs.negative_scores, inputs.users, inputs.keys, ties)
    else:
        values = _corrected(inputs.positive_scores, inputs.negative_scores, inputs.users, inputs.keys,
                            options["n_items"], options["correction"], options["gamma"], ties,
                            options["replace"])
    return _aggregate(values, inputs.keys, inputs.categories, None, options)
