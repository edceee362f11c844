"""Top-k recommendation lists evaluated: ``[U, k]`` item ids in rank order and the truth
as ``[2, E]`` (user, item) pairs or a sparse ``[U, I]`` tensor of gains in, ``MetricResults``
out (the accuracy keys of every entry point, ``map_capped@k``, and the beyond-accuracy
keys of :mod:`retrieval_core.metrics.items`).

Example:
    >>> import torch
    >>> topk = torch.tensor([[2, 0, 5], [1, 4, -1]])          # user 1 got 2 items
    >>> truth = torch.tensor([[0, 0, 1, 1], [0, 3, 4, 6]])     # (user, item) pairs
    >>> r = evaluate_topk(topk, truth, ["recall@3", "map_capped@3", "coverage@3"], n_items=8)
    >>> [round(r[k].item(), 4) for k in ("recall@3", "map_capped@3", "coverage@3")]
    [0.5, 0.25, 0.625]
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from .. import sizing
from ..inputs.topk import TopkInputs, ideal_width, topk_inputs, topk_ranking
from ..metrics.items import item_set_values, item_values
from ..metrics.keys import MetricKey, ranking_values
from ..ranking.topk import row_blocks
from ..stats.aggregate import MetricResults
from ..validate.stats import N_RESAMPLES
from .ranked import _aggregate

__all__ = ["evaluate_topk", "evaluate_topk_inputs", "topk_values"]


def evaluate_topk(
    topk: Tensor,
    truth: Tensor,
    metrics: Sequence[str],
    *,
    n_items: Optional[int] = None,
    item_popularity: Optional[Tensor] = None,
    item_categories: Optional[Tensor] = None,
    item_embeddings: Optional[Tensor] = None,
    tail_ratio: float = 0.1,
    history: Optional[Tensor] = None,
    empty: str = "skip",
    reduce: str = "mean",
    categories=None,
    ci: Optional[float] = None,
    ci_method: str = "bootstrap",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    keep_per_query: bool = False,
) -> MetricResults:
    """Evaluate top-k recommendation lists against sparse truth.

    Args:
        topk: ``[U, k]`` integer item ids of each user's recommendations in rank order
            (rank 1 first); ``-1`` pads a short list, after its items. No item twice in a list.
        truth: ``[2, E]`` integer (user, item) pairs (gain 1 each, each pair once: a pair
            given twice is an error), or a sparse ``[U, I]`` tensor (COO or CSR) whose
            values are the gains (finite, >= 0, at most 2^960; 0 is not relevant). R,
            each user's relevant items, counts the listed and the unlisted ones (recall@k = hits@k / R, as trec_eval).
        metrics: the accuracy keys (``precision@k``, ``recall@k``, ``f1@k``, ``ndcg@k``,
            ``mrr@k``, ``hit_rate@k``, ``map@k``, ``map_capped@k``...; no cutoff past the
            lists' width, no key that needs every candidate: ``auroc``, ``fall_out``) and
            the beyond-accuracy keys (``coverage@k``, ``gini@k``, ``entropy@k``,
            ``personalization@k``: one value over all users; ``popularity@k``,
            ``novelty@k``, ``diversity@k``, ``tail@k``, ``serendipity@k``: per user). docs/metrics.md defines them.
        n_items: the catalogue size (default: a sparse truth's columns, else the item
            data's length); ``coverage@k`` and ``gini@k`` need it.
        item_popularity: ``[I]`` each item's popularity (e.g. its training
            interactions), for ``popularity@k`` and ``novelty@k``.
        item_categories, item_embeddings: ``[I]`` integer categories or ``[I, D]``
            embeddings, for ``diversity@k`` (categories first when both are given).
        tail_ratio: the long tail of ``tail@k``, as RecBole's ``tail_ratio``: the share of
            the items seen in training (popularity > 0) that are least popular (at least
            one; ties by lower id), or with a value above 1 the items seen at most that often.
        history: each user's training items, ``[2, H]`` (user, item) pairs or a sparse
            ``[U, I]`` tensor (its entries > 0), for ``serendipity@k``; a pair given twice
            counts once (as ``exclude=`` of the other entry points).
        empty, reduce, categories, ci, ci_method, n_resamples, seed, keep_per_query:
            as :func:`~retrieval_core.evaluate_scores` (one category per user; a user
            without a relevant item is empty for the accuracy keys, a user with an
            empty list for the per-user beyond-accuracy keys).

    No dense ``[U, I]`` tensor is built; the users are ranked a block at a time.
    """
    inputs = topk_inputs(topk, truth, metrics, n_items=n_items, item_popularity=item_popularity,
                         item_categories=item_categories, item_embeddings=item_embeddings, tail_ratio=tail_ratio,
                         history=history, empty=empty, reduce=reduce,
                         categories=categories, ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                         keep_per_query=keep_per_query)
    return evaluate_topk_inputs(inputs)


def topk_values(inputs: TopkInputs, keys: Sequence[MetricKey]) -> Tensor:
    """``[U, M]`` float64 values of the per-query (accuracy) ``keys``, NaN where undefined,
    a block of users at a time."""
    ids = inputs.lists.ids
    width = ideal_width(inputs, keys)
    step = sizing.block_elements(ids.device, deep=True)
    blocks = list(row_blocks(ids.shape[0], max(ids.shape[1], width), step))
    if not blocks:
        return torch.zeros((0, len(keys)), dtype=torch.float64, device=ids.device)
    return torch.cat([ranking_values(topk_ranking(inputs, rows, width), keys) for rows in blocks])


def evaluate_topk_inputs(inputs: TopkInputs) -> MetricResults:
    """:func:`evaluate_topk` of checked inputs."""
    keys = inputs.keys
    accuracy = [m for m in keys if m.spec.per_query]
    per_user = [m for m in keys if m.spec.item_kernel is not None]
    set_keys = [m for m in keys if m.spec.items and m.spec.set_metric is not None]
    columns = accuracy + per_user
    results = MetricResults(n_queries=torch.tensor(inputs.lists.ids.shape[0]))
    if columns:
        parts = ([topk_values(inputs, accuracy)] if accuracy else []) + \
            ([item_values(per_user, inputs.lists)] if per_user else [])
        results = _aggregate(torch.cat(parts, dim=1), columns, inputs.categories, None, inputs.options)
    results.update(item_set_values(set_keys, inputs.lists))
    return results.reordered([m.key for m in keys])
