"""Gains, eligibility and self-exclusion of query-gallery pairs, and checks of callables'
outputs kept for one host read.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from ..ranking.gains import GAIN_LIMIT
from .frames import DISTANCE_ERROR, Relevance

__all__ = ["Checks", "gains", "eligible", "count_equal", "label_counts", "Exclusion"]


class Checks:
    """Value tests of callables' outputs kept for one host read after a chunk loop
    (where host reads synchronise), instead of a read per chunk.

    Example:
        >>> c = Checks()
        >>> _ = gains(torch.tensor([1]), torch.tensor([1, 2]), lambda a, b: -torch.ones(1, 2), checks=c)
        >>> c.raise_any()
        Traceback (most recent call last):
        ...
        ValueError: relevance gains must be finite and >= 0; got a minimum of -1.0
    """

    def __init__(self):
        self.distances: list = []  # 0-d bool: all distances of a chunk finite
        self.gains: list = []  # [3] float64: (chunk minimum, chunk maximum, 1: NaN/inf/negative, 2: too large)
        self.integer = False  # integer gains (their minimum printed as an int)

    def raise_any(self) -> None:
        """Raise the error that the first failing chunk would have raised (one host read)."""
        if not self.distances and not self.gains:
            return
        device = (self.distances or self.gains)[0].device
        parts = [torch.zeros(1, dtype=torch.float64, device=device)]
        if self.distances:
            parts[0] = torch.stack(self.distances).all().logical_not().to(torch.float64).reshape(1)
        if self.gains:
            g = torch.stack(self.gains)  # [chunks, 3]
            first = (g[:, 2] > 0).to(torch.uint8).argmax()  # the first failing chunk (or chunk 0 when none fails)
            parts.append(g.index_select(0, first.reshape(1)).reshape(3))
        flags = torch.cat(parts).tolist()
        if flags[0]:
            raise ValueError(DISTANCE_ERROR)
        if len(flags) > 1:  # [distances bad, gains' minimum, maximum, gains bad]
            _raise_gains(flags[1], flags[2], flags[3], self.integer)


def _raise_gains(low: float, high: float, bad: float, integer: bool) -> None:
    """The error of a relevance callable's gains (``bad``: 1 NaN/inf/negative, 2 too large)."""
    if bad == 1:
        if integer and low == low:  # as the gains' own minimum prints
            low = int(low)
        raise ValueError(f"relevance gains must be finite and >= 0; got a minimum of {low}")
    if bad == 2:
        raise ValueError(f"relevance gains must be at most 2^960 (about 1e289) so that sums of them fit float64; "
                         f"got a maximum of {high:g}")


_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def gains(
    query_labels: Tensor, gallery_labels: Tensor, relevance: Optional[Relevance] = None,
    checks: Optional[Checks] = None,
) -> Tensor:
    """``[c, G]`` gains: equal label (1-D labels, bool), number of shared labels
    (multi-hot ``[N, C]``), or ``relevance(query_labels, gallery_labels)``.

    Example:
        >>> gains(torch.tensor([1, 2]), torch.tensor([2, 1, 1])).tolist()
        [[False, True, True], [True, False, False]]
    """
    if relevance is not None:
        out = relevance(query_labels, gallery_labels)
        shape = (query_labels.shape[0], gallery_labels.shape[0])
        if not isinstance(out, Tensor) or out.shape != shape:
            got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(f"a relevance callable must return gains [queries, gallery] = {shape}; got {got}")
        if out.is_complex() or out.dtype in _UNSIGNED:
            raise TypeError(f"a relevance callable must return real gains (bool, int8-64, uint8 or floating "
                            f"point); got {out.dtype}")
        if out.dtype != torch.bool and out.numel():
            low, high = torch.aminmax(out)
            bad = (torch.isnan(low) | (low < 0)).to(torch.float64)
            if out.is_floating_point():
                bad = torch.maximum(bad, (~torch.isfinite(out).all()).to(torch.float64))
                bad = torch.where(bad > 0, bad, 2.0 * (high > GAIN_LIMIT))
            if checks is not None:
                checks.gains.append(torch.stack([low.to(torch.float64), high.to(torch.float64), bad]))
                checks.integer = not out.is_floating_point()
            else:
                _raise_gains(*torch.stack([low.to(torch.float64), high.to(torch.float64), bad]).tolist(),
                             not out.is_floating_point())
        return out
    if query_labels.ndim == 1:
        return query_labels.unsqueeze(1) == gallery_labels.unsqueeze(0)
    return query_labels.to(torch.float32) @ gallery_labels.to(torch.float32).T


def eligible(query_ids: Optional[Tensor], gallery_ids: Optional[Tensor]) -> Optional[Tensor]:
    """``[c, G]`` True where the gallery item may be retrieved (its id differs from the query's)."""
    if query_ids is None:
        return None
    return query_ids.unsqueeze(1) != gallery_ids.unsqueeze(0)


def _codes(*columns: Tensor) -> Tensor:
    """One int64 code per row of equal-length key columns (equal rows, equal codes)."""
    code = torch.zeros_like(columns[0], dtype=torch.int64)
    for col in columns:
        values, inverse = torch.unique(col, return_inverse=True)
        code = code * values.numel() + inverse
    return code


def count_equal(query_keys: Tuple[Tensor, ...], gallery_keys: Tuple[Tensor, ...]) -> Tensor:
    """``[Q]`` how many gallery rows equal each query row, keys given as columns.

    Example:
        >>> count_equal((torch.tensor([1, 2, 9]),), (torch.tensor([2, 1, 1]),)).tolist()
        [2, 1, 0]
    """
    n_gallery = gallery_keys[0].shape[0]
    codes = _codes(*(torch.cat([g.to(torch.int64), q.to(torch.int64)]) for q, g in zip(query_keys, gallery_keys)))
    distinct, inverse = torch.unique(codes, return_inverse=True)
    counts = torch.bincount(inverse[:n_gallery], minlength=distinct.numel())
    return counts[inverse[n_gallery:]]


def label_counts(
    query_labels: Tensor, gallery_labels: Tensor, query_ids: Optional[Tensor], gallery_ids: Optional[Tensor]
) -> "tuple[Tensor, Tensor]":
    """(R, candidates) per query for 1-D labels, exactly, without a ``[Q, G]`` matrix:
    gallery items sharing the label (and eligible), and eligible gallery items."""
    n_relevant = count_equal((query_labels,), (gallery_labels,))
    n_candidates = torch.full_like(n_relevant, gallery_labels.shape[0])
    if query_ids is not None:
        n_relevant = n_relevant - count_equal((query_ids, query_labels), (gallery_ids, gallery_labels))
        n_candidates = n_candidates - count_equal((query_ids,), (gallery_ids,))
    return n_relevant, n_candidates


class Exclusion:
    """The (row, column) pairs of a query chunk whose gallery id equals the query's id.

    Example:
        >>> ex = Exclusion(torch.tensor([7, 8]), torch.tensor([8, 7, 8]))
        >>> [t.tolist() for t in ex.pairs(slice(0, 2))]
        [[0, 1, 1], [1, 0, 2]]
    """

    def __init__(self, query_ids: Tensor, gallery_ids: Tensor):
        self.query_ids = query_ids
        self.sorted_ids, self.order = torch.sort(gallery_ids, stable=True)

    def pairs(self, part: slice) -> "tuple[Tensor, Tensor]":
        q = self.query_ids[part]
        lo = torch.searchsorted(self.sorted_ids, q)
        counts = torch.searchsorted(self.sorted_ids, q, right=True) - lo
        rows = torch.repeat_interleave(torch.arange(q.shape[0], device=q.device), counts)
        first = torch.repeat_interleave(lo - (torch.cumsum(counts, 0) - counts), counts)
        cols = self.order[first + torch.arange(rows.shape[0], device=q.device)]
        return rows, cols
