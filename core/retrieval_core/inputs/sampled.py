"""The sampled protocols' inputs, checked once: :func:`sampling_inputs` for
:func:`~retrieval_core.sample_negatives` (the positives and the excluded items as one sorted
per-user CSR, the popularity weights) and :func:`sampled_inputs` for
:func:`~retrieval_core.evaluate_sampled` (the scores, the truth pairs, keys and options).

Example:
    >>> import torch
    >>> s = sampling_inputs(torch.tensor([[0, 0, 1], [1, 3, 0]]), 5, 2, exclude=torch.tensor([[0], [1]]))
    >>> s.forbidden.offsets.tolist(), s.forbidden.items.tolist()
    ([0, 2, 3], [1, 3, 0])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from ..metrics.keys import MetricKey, parse_metrics
from ..metrics.spec import REGISTRY
from ..validate import (
    as_categories, as_tensors, check_categories, check_correction, check_popularity, check_sampled_scores,
    check_sampling, check_score_options, check_stats_options,
)
from ..validate.stats import N_RESAMPLES
from .pairs import UserItems, user_items

__all__ = ["SampledInputs", "SamplingInputs", "sampled_inputs", "sampling_inputs"]


@dataclass(frozen=True)
class SamplingInputs:
    """Checked inputs of :func:`~retrieval_core.sample_negatives`: each user's ``forbidden``
    items (positives and excluded, sorted, once each), the ``weights`` (``popularity ** alpha``,
    float64; None: uniform) and the options."""

    forbidden: UserItems
    weights: Optional[Tensor]
    n: int
    replace: bool
    seed: int


@dataclass(frozen=True)
class SampledInputs:
    """Checked inputs of :func:`~retrieval_core.evaluate_sampled`: the scores, ``users`` (each
    truth pair's user, in the pairs' order, int64), parsed ``keys``, ``categories`` and
    ``options`` (``ties``, ``correction``, ``gamma``, ``n_items``, ``replace``, and the aggregation's)."""

    positive_scores: Tensor
    negative_scores: Tensor
    users: Tensor
    keys: Tuple[MetricKey, ...]
    categories: Any
    options: Dict[str, Any]


def _n_users(truth) -> int:
    """The users of ``truth``: a sparse tensor's rows, else the largest user id of ``[2, E]`` pairs + 1."""
    if not isinstance(truth, Tensor):
        return 0  # the check of truth refuses it
    if truth.layout != torch.strided:
        return int(truth.shape[0])
    if truth.ndim == 2 and truth.shape[0] == 2 and truth.numel() and not truth.is_floating_point():
        return int(truth[0].max()) + 1
    return 0


def _forbidden(truth: UserItems, exclude: Optional[UserItems]) -> UserItems:
    """One sorted CSR of each user's positives and excluded items (a pair in both once)."""
    if exclude is None:
        return truth
    keys = []
    for part in (truth, exclude):
        rows, items, _ = part.pairs(slice(0, part.n_users))
        keys.append(rows * part.n_items + items)
    keys = torch.unique(torch.cat(keys))  # sorted: by user, then item
    counts = torch.bincount(keys // truth.n_items, minlength=truth.n_users)
    offsets = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    return UserItems(offsets, keys % truth.n_items, None, truth.n_items, offsets.cpu())


def sampling_inputs(truth, n_items: int, n: int, *, n_users: Optional[int] = None, exclude=None,
                    popularity=None, alpha: float = 1.0, replace: bool = True, seed: int = 0) -> SamplingInputs:
    """Check every input of :func:`~retrieval_core.sample_negatives` once (arguments as there)."""
    truth, exclude, popularity = as_tensors(truth=truth, exclude=exclude, popularity=popularity)
    check_sampling(n_items, n, alpha=alpha, replace=replace, seed=seed)
    n_users = _n_users(truth) if n_users is None else n_users
    positives = user_items("truth", truth, n_users, n_items, repeats=True)
    device = positives.items.device
    seen = None if exclude is None else user_items("exclude", exclude, n_users, n_items, repeats=True, device=device)
    weights = None if popularity is None else check_popularity(popularity, n_items, alpha).to(device)
    return SamplingInputs(_forbidden(positives, seen), weights, int(n), replace, int(seed))  # NumPy ints as ints


def sampled_inputs(positive_scores, negative_scores, truth, metrics, *, n_items: Optional[int] = None,
                   correction: Optional[str] = None, gamma: float = 0.01, replace: bool = True,
                   sampling: str = "uniform", ties: str = "stable",
                   empty: str = "skip", reduce: str = "mean", categories=None, ci: Optional[float] = None,
                   ci_method: str = "bootstrap", n_resamples: int = N_RESAMPLES, seed: int = 0,
                   keep_per_query: bool = False) -> SampledInputs:
    """Check every input of :func:`~retrieval_core.evaluate_sampled` once (arguments as there)."""
    positive_scores, negative_scores, truth = as_tensors(positive_scores=positive_scores,
                                                         negative_scores=negative_scores, truth=truth)
    check_score_options(ties=ties, empty=empty, reduce=reduce)
    keys = tuple(parse_metrics(metrics))
    check_correction(correction, gamma, keys, n_items, tuple(n for n, s in REGISTRY.items() if s.at_rank),
                     replace=replace, sampling=sampling)
    stats = check_stats_options(keys, reduce=reduce, ci=ci, ci_method=ci_method, n_resamples=n_resamples,
                                seed=seed, keep_per_query=keep_per_query)
    check_sampled_scores(positive_scores, negative_scores, truth,
                         None if correction is None or replace else n_items - 1)
    n_users = negative_scores.shape[0]
    device = negative_scores.device
    user_items("truth", truth.to(device), n_users,
               n_items if n_items is not None else (2**63 - 1) // max(n_users, 1))
    categories = as_categories(categories, device)
    if categories is not None:
        check_categories(categories, n_users, "user (row of negative_scores)")
    options = dict(stats, empty=empty, reduce=reduce, ties=ties, correction=correction, gamma=float(gamma),
                   n_items=n_items, replace=replace)
    return SampledInputs(positive_scores, negative_scores, truth[0].to(device=device, dtype=torch.int64), keys,
                         categories, options)
