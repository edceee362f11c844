"""Sampled protocols evaluated: each user's positives ranked among its sampled negatives
(:func:`~retrieval_core.sample_negatives`) instead of the whole catalogue, with or without
the correction of Krichene & Rendle (2020) that estimates the full-ranking metric
(docs/metrics.md, "Sampled protocols", which also says why sampled numbers mislead).

Example:
    >>> import torch
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

from ..metrics.keys import parse_metrics
from ..metrics.sampled import CORRECTABLE, CORRECTIONS, correction_table, sampled_rank_values
from ..stats.aggregate import MetricResults
from ..validate import (
    as_categories, as_tensors, check_categories, check_correction, check_sampled_scores, check_score_options,
    check_stats_options, check_user_items,
)
from ..validate.stats import N_RESAMPLES
from .negatives import sample_negatives
from .ranked import _aggregate
from .scores import score_values

__all__ = ["evaluate_sampled"]


def _corrected(positive_scores: Tensor, negative_scores: Tensor, users: Tensor, keys, n_items: int,
               correction: str, gamma: float, ties: str) -> Tensor:
    """``[U, K]``: the corrected values (one relevant item per user; NaN for a user without one)."""
    n_users, m = negative_scores.shape
    counts = torch.bincount(users, minlength=n_users)
    if bool((counts > 1).any()):
        raise ValueError(f"correction={correction!r} estimates the metric of one relevant item per user (the "
                         f"paper's leave-one-out protocol); user {int((counts > 1).nonzero()[0, 0])} has "
                         f"{int(counts.max())} at most")
    score = torch.zeros(n_users, dtype=torch.float64, device=users.device)
    score[users] = positive_scores.to(torch.float64)
    negatives = negative_scores.to(torch.float64)
    above = (negatives > score.unsqueeze(1)).sum(1)
    tied = (negatives == score.unsqueeze(1)).sum(1)
    table = correction_table(keys, n_items, m, correction, gamma, device=users.device)
    return sampled_rank_values(table, above, tied, ties, relevant=counts == 1)


def evaluate_sampled(
    positive_scores: Tensor,
    negative_scores: Tensor,
    truth: Tensor,
    metrics: Sequence[str],
    *,
    n_items: Optional[int] = None,
    correction: Optional[str] = None,
    gamma: float = 0.01,
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
            ``ndcg``, ``mrr``, ``map``, ``map_capped`` (``@k`` or none) or ``auroc``; it
            models negatives drawn uniformly with replacement (docs/metrics.md, "Sampled protocols").
        ties, empty, reduce, categories (one per user), ci, ci_method, n_resamples, seed,
            keep_per_query: as :func:`~retrieval_core.evaluate_scores`.

    Returns:
        :class:`MetricResults` over the U users (a user without a positive is empty).
    """
    positive_scores, negative_scores, truth = as_tensors(positive_scores=positive_scores,
                                                         negative_scores=negative_scores, truth=truth)
    check_score_options(ties=ties, empty=empty, reduce=reduce)
    keys = tuple(parse_metrics(metrics))
    check_correction(correction, gamma, keys, n_items, CORRECTABLE, CORRECTIONS)
    stats = check_stats_options(keys, reduce=reduce, ci=ci, ci_method=ci_method, n_resamples=n_resamples,
                                seed=seed, keep_per_query=keep_per_query)
    n_pairs = truth.shape[1] if isinstance(truth, Tensor) and truth.ndim == 2 else -1
    check_sampled_scores(positive_scores, negative_scores, n_pairs)
    n_users, m = negative_scores.shape
    check_user_items("truth", truth.to(negative_scores.device), n_users,
                     n_items if n_items is not None else (2**63 - 1) // max(n_users, 1))
    users = truth[0].to(device=negative_scores.device, dtype=torch.int64)  # in the pairs' order
    categories = as_categories(categories, negative_scores.device)
    if categories is not None:
        check_categories(categories, n_users, "user (row of negative_scores)")
    if correction is not None:
        values = _corrected(positive_scores, negative_scores, users, keys, n_items, correction, float(gamma), ties)
        return _aggregate(values, keys, categories, None, dict(stats, empty=empty, reduce=reduce))
    dtype = torch.promote_types(positive_scores.dtype, negative_scores.dtype)
    preds = torch.cat([negative_scores.reshape(-1).to(dtype), positive_scores.to(dtype)])
    target = torch.cat([torch.zeros(n_users * m, dtype=torch.int64, device=preds.device),
                        torch.ones(users.numel(), dtype=torch.int64, device=preds.device)])
    indexes = torch.cat([torch.arange(n_users, device=preds.device).repeat_interleave(m), users])
    values = score_values(preds, target, keys, indexes=indexes, ties=ties).values
    return _aggregate(values, keys, categories, None, dict(stats, empty=empty, reduce=reduce))
