"""PML's accuracies from per-query values of the core's kernels.

Each PML accuracy is one of the core's keys (docs/metrics.md), with PML's cutoff
``k`` (the number of neighbours it retrieves):

==============================  =====================================================
PML                             core key(s), per query
==============================  =====================================================
``precision_at_1``              ``cmc@1``
``mean_average_precision``      ``map@k`` (divisor R, not truncated)
``mean_reciprocal_rank``        ``mrr@k``
``mean_average_precision_at_r`` ``map@r``; where R > k, ``map@k`` (PML's truncation)
``r_precision``                 ``r_precision``; where R > k, ``precision@k``
==============================  =====================================================

:func:`knn_label_values` computes them from PML's ``knn_labels`` (a Ranking of depth
``k`` for :func:`retrieval_core.ranking_values`); the embedding path asks
:func:`retrieval_core.evaluate_embeddings` for the same keys. :func:`pml_reduce`
averages as PML does (all queries, ``avg_of_avgs``, or ``return_per_class``).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Union

import torch
from torch import Tensor

from .. import Ranking, parse_metrics, ranking_values
from .pml_knn import relevant_per_query

__all__ = ["KNN_METRICS", "keys_for", "pml_values", "pml_reduce", "knn_label_values", "nan_accuracy"]

KNN_METRICS = ("precision_at_1", "mean_average_precision", "mean_average_precision_at_r",
               "mean_reciprocal_rank", "r_precision")


def keys_for(name: str, k: int, truncated: bool) -> List[str]:
    """The core keys that PML's ``name`` needs at cutoff ``k`` (``truncated``: some
    query has R > k).

    Example:
        >>> keys_for("r_precision", 5, True)
        ['r_precision', 'precision@5']
    """
    if name == "precision_at_1":
        return ["cmc@1"]
    if name == "mean_average_precision":
        return [f"map@{k}"]
    if name == "mean_reciprocal_rank":
        return [f"mrr@{k}"]
    if name == "mean_average_precision_at_r":
        return ["map@r"] + ([f"map@{k}"] if truncated else [])
    if name == "r_precision":
        return ["r_precision"] + ([f"precision@{k}"] if truncated else [])
    raise KeyError(name)


def pml_values(name: str, values: Dict[str, Tensor], relevant: Tensor, k: int) -> Tensor:
    """Per-query values of PML's ``name`` from the core's per-query ``values`` (of
    :func:`keys_for`'s keys) and each query's R.

    Example:
        >>> v = {"r_precision": torch.tensor([0.5, 0.2]), "precision@2": torch.tensor([1.0, 0.5])}
        >>> pml_values("r_precision", v, torch.tensor([2, 5]), 2).tolist()
        [0.5, 0.5]
    """
    keys = keys_for(name, k, True)
    if len(keys) == 1 or keys[1] not in values:
        return values[keys[0]]
    return torch.where(relevant <= k, values[keys[0]], values[keys[1]])


def pml_reduce(values: Tensor, groups: Tensor, avg_of_avgs: bool, return_per_class: bool) -> Union[float, List[float]]:
    """PML's average: of all queries (a float), of the per-label means (``avg_of_avgs``),
    or the per-label means in sorted label order (``return_per_class``, a list).

    Example:
        >>> v, g = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([7, 3, 3])
        >>> pml_reduce(v, g, False, False), pml_reduce(v, g, True, False), pml_reduce(v, g, False, True)
        (0.3333333333333333, 0.5, [0.0, 1.0])
    """
    values = values.to(torch.float64)
    if not (avg_of_avgs or return_per_class):
        return torch.mean(values).item()
    _, inverse = torch.unique(groups, dim=0, return_inverse=True)
    n = int(inverse.max()) + 1 if inverse.numel() else 0
    sums = torch.zeros(n, dtype=torch.float64, device=values.device).index_add_(0, inverse, values)
    sizes = torch.bincount(inverse, minlength=n).to(torch.float64)
    per_class = sums / sizes
    return per_class.cpu().tolist() if return_per_class else torch.mean(per_class).item()


def nan_accuracy(unique_labels, return_per_class: bool) -> Union[float, List[float]]:
    """PML's value when no query has a relevant reference item: NaN (one per label)."""
    return [float("nan")] * len(unique_labels) if return_per_class else float("nan")


def knn_label_values(name: str, knn_labels: Tensor, query_labels: Tensor, not_lone_query_mask: Tensor,
                     ref_includes_query: bool, label_counts, compare: Callable, avg_of_avgs: bool,
                     return_per_class: bool):
    """PML's ``name`` from its kwargs (``knn_labels [Q, k]``...), the queries of lone
    labels left out: a Ranking of depth ``k`` whose R is PML's, run by the core's kernels.

    Example:
        >>> knn = torch.tensor([[1, 0], [0, 0]])
        >>> knn_label_values("mean_reciprocal_rank", knn, torch.tensor([1, 0]), torch.tensor([True, True]),
        ...                  False, ([0, 1], [3, 1]), torch.eq, False, False)
        1.0
    """
    keep = torch.as_tensor(not_lone_query_mask, device=knn_labels.device).to(torch.bool)
    if not bool(keep.any()):
        return nan_accuracy(label_counts[0], return_per_class)
    knn_labels, query_labels = knn_labels[keep], query_labels[keep]
    k = knn_labels.shape[1]
    relevant = relevant_per_query(query_labels, label_counts, ref_includes_query)
    hits = compare(query_labels.unsqueeze(1), knn_labels).to(torch.float64)
    ranking = Ranking(relevance=hits, valid=torch.ones_like(hits, dtype=torch.bool), n_relevant=relevant,
                      n_candidates=torch.full_like(relevant, k))
    keys = keys_for(name, k, True)
    values = ranking_values(ranking, parse_metrics(keys))
    per_query = pml_values(name, dict(zip(keys, values.unbind(1))), relevant, k)
    return pml_reduce(per_query, query_labels, avg_of_avgs, return_per_class)
