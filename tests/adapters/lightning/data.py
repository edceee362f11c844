"""Data shared by the lightning adapter tests (also imported by the DDP worker)."""
from __future__ import annotations

from typing import List, Tuple

import torch
from torch import Tensor

from tests.references import distinct_scores, graded_gains


def dense_batches(seed: int, sizes: List[int], n_candidates: int = 12, first_id: int = 0):
    """``[(preds[b, N], gains[b, N], ids[b], categories[b])]``: continuous distinct scores,
    graded gains 0..3, some rows without a relevant candidate, ids counting up."""
    g = torch.Generator().manual_seed(seed)
    out, next_id = [], first_id
    for b in sizes:
        preds = distinct_scores((b, n_candidates), g)
        target = graded_gains((b, n_candidates), g, p_relevant=0.2)
        target[0] = 0  # a query with no relevant candidate in every batch
        ids = torch.arange(next_id, next_id + b)
        next_id += b
        out.append((preds, target, ids, ids % 3))
    return out


def flat_queries(seed: int, n_queries: int, max_size: int, *, first_id: int = 0) -> Tuple[Tensor, Tensor, Tensor]:
    """Flat ``(indexes, preds, gains)``: query sizes 1..max_size, ids spread out and
    interleaved, scores strictly positive and distinct, graded gains 0..3; queries
    without a relevant entry and queries whose entries are all relevant included."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, max_size + 1, (n_queries,), generator=g)
    sizes[:3] = torch.tensor([1, max_size, 2])
    ids = first_id + torch.randperm(5 * n_queries, generator=g)[:n_queries]
    gains = [graded_gains((int(s),), g, p_relevant=0.3) for s in sizes]
    gains[0][:] = 0
    gains[3][:] = 0
    gains[2][:] = torch.tensor([2, 1])  # all relevant
    gains[4][:] = torch.randint(1, 4, (int(sizes[4]),), generator=g)  # all relevant
    gains[1][-1] = 1
    indexes = ids.repeat_interleave(sizes)
    target = torch.cat(gains)
    perm = torch.randperm(indexes.numel(), generator=g)
    indexes, target = indexes[perm], target[perm]
    preds = distinct_scores((indexes.numel(),), g)
    return indexes, preds, target


def clustered_embeddings(seed: int, n: int, dim: int = 8, n_classes: int = 4) -> Tuple[Tensor, Tensor]:
    """float32 embeddings around class centres, int64 labels."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, n_classes, (n,), generator=g)
    centres = torch.randn(n_classes, dim, generator=g)
    return centres[labels] + 0.8 * torch.randn(n, dim, generator=g), labels
