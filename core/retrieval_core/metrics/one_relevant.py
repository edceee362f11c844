"""The value of a metric when the query has one relevant item, at rank r of n ranked items: a
fact of the metrics that the sampled-metric corrections (:mod:`retrieval_core.metrics.sampled`)
estimate. Each function takes ``ranks`` (float64 >= 1, real ranks allowed: the MLE's), the
cutoff ``k`` (``inf`` for the whole list) and ``n``; the specs name them (``at_rank``).

Example:
    >>> import math, torch
    >>> ranks = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    >>> hit(ranks, 3, 10).tolist(), reciprocal(ranks, math.inf, 10).tolist()
    ([1.0, 1.0, 0.0], [1.0, 0.5, 0.25])
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["area_under_roc", "f1", "hit", "ndcg", "precision", "reciprocal"]


def _inside(ranks: Tensor, k: float) -> Tensor:
    return (ranks <= k).to(torch.float64)


def hit(ranks: Tensor, k: float, n: int) -> Tensor:
    """hit_rate@k and recall@k (R = 1): ``[r <= k]``."""
    return _inside(ranks, k)


def precision(ranks: Tensor, k: float, n: int) -> Tensor:
    """precision@k: ``[r <= k] / k``."""
    return _inside(ranks, k) / k


def f1(ranks: Tensor, k: float, n: int) -> Tensor:
    """f1@k, the harmonic mean of 1/k and 1 at a hit: ``2 [r <= k] / (k + 1)``."""
    return _inside(ranks, k) * 2.0 / (k + 1.0)


def ndcg(ranks: Tensor, k: float, n: int) -> Tensor:
    """ndcg(@k), any gain (the ideal DCG is the gain at rank 1): ``[r <= k] / log2(r + 1)``."""
    return _inside(ranks, k) / torch.log2(ranks + 1.0)


def reciprocal(ranks: Tensor, k: float, n: int) -> Tensor:
    """mrr(@k), and map(@k) and map_capped@k (AP of one relevant item): ``[r <= k] / r``."""
    return _inside(ranks, k) / ranks


def area_under_roc(ranks: Tensor, k: float, n: int) -> Tensor:
    """auroc (the whole list): the share of the n - 1 other items ranked below, ``(n - r) / (n - 1)``."""
    return (n - ranks) / max(n - 1, 1)
