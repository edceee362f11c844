"""A per-query confidence read from embeddings alone: how much a query's nearest neighbours agree.

The command line's demo passes it as ``confidence`` to the confidence metrics
(``erc:``, ``conf:``, ``spearman:``; see :mod:`retrieval_core.stats.curves`).
"""
from __future__ import annotations

import torch

__all__ = ["neighbour_agreement"]


def neighbour_agreement(x: torch.Tensor, labels: torch.Tensor, k: int = 10) -> torch.Tensor:
    """The demo's per-query confidence in [0, 1]: the share of the ``k`` nearest other rows
    (cosine) whose label equals the label of the nearest one: a query whose neighbours
    agree is likely to have a correct first result.

    Example:
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.8, 0.2], [0.0, 1.0]])
        >>> neighbour_agreement(x, torch.tensor([0, 0, 1, 1]), k=2).tolist()
        [0.5, 0.5, 1.0, 0.5]
    """
    unit = torch.nn.functional.normalize(x.double(), dim=1)
    sim = unit @ unit.T
    sim.fill_diagonal_(float("-inf"))
    nearest = labels[sim.topk(min(k, x.shape[0] - 1), dim=1).indices]
    return (nearest == nearest[:, :1]).double().mean(1)
