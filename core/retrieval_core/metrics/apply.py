"""Applying parsed metric keys: per-query keys to a Ranking, set-level keys to an evaluation's SetData."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import torch
from torch import Tensor

from ..ranking.ranking import Ranking
from .keys import MetricKey
from .set_level import SetData, SetMetric

__all__ = ["ranking_values", "set_level_values"]


def ranking_values(ranking: Ranking, keys: Sequence[MetricKey]) -> Tensor:
    """Run the kernels of ``keys`` on one Ranking: ``[Q, M]`` float64, NaN where undefined."""
    values = torch.stack([m(ranking) for m in keys], dim=1)
    undefined = torch.stack([m.spec.empty(ranking) for m in keys], dim=1)
    return values.masked_fill(undefined, float("nan"))


def set_level_values(
    keys: Sequence[MetricKey],
    query: Tensor,
    query_labels: Tensor,
    *,
    gallery: Optional[Tensor],
    gallery_labels: Optional[Tensor],
    distance,
    query_ids: Optional[Tensor],
    gallery_ids: Optional[Tensor],
    relevance,
    memory_budget: int,
) -> Dict[str, Tensor]:
    """``{key: value}`` for the set-level ``keys`` (checked inputs, see evaluate_embeddings),
    each computed by its spec's ``set_metric``."""
    data = SetData(query, query_labels, gallery=gallery, gallery_labels=gallery_labels, distance=distance,
                   query_ids=query_ids, gallery_ids=gallery_ids, relevance=relevance, memory_budget=memory_budget)
    groups: Dict[SetMetric, List[MetricKey]] = {}
    for m in keys:
        groups.setdefault(m.spec.set_metric, []).append(m)
    out: Dict[str, Tensor] = {}
    for compute, group in groups.items():
        out.update(zip((m.key for m in group), compute(group, data)))
    return {m.key: out[m.key] for m in keys}
