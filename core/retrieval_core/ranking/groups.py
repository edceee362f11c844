"""The flat form (indexes, preds, target) grouped by query and cut into padded dense blocks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional, Tuple

import torch
from torch import Tensor

from .. import sizing
from .topk import BLOCK_ELEMENTS, row_blocks

__all__ = ["Groups", "BUCKET_ENTRIES", "MAX_BUCKETS", "iter_groups", "group_flat", "iter_flat_blocks"]


@dataclass
class Groups:
    """Queries of a flat input, grouped: query ``q`` holds entries
    ``starts[q] : starts[q] + sizes[q]`` of the grouped arrays, in order of appearance."""

    starts: Tensor
    sizes: Tensor
    ids: Tensor

    @property
    def n_queries(self) -> int:
        return self.ids.numel()


def _segments(keys: Tensor, ids_of=None) -> Groups:
    """Runs of equal keys; ``ids_of(starts)`` maps run starts to query ids (default: the keys)."""
    n = keys.numel()
    change = (keys[1:] != keys[:-1]).nonzero().squeeze(1) + 1
    starts = torch.cat([change.new_zeros(1), change])
    sizes = torch.diff(starts, append=starts.new_full((1,), n))
    return Groups(starts, sizes, keys[starts] if ids_of is None else ids_of(starts))


# Ungrouped flat input is regrouped in id-range buckets of about
# sizing.bucket_entries(device) entries (at most sizing.max_buckets(device) of them):
# the sort and the permuted copies then need a fraction of the input's memory, for
# one range scan of the ids per bucket (nothing of the input's size is stored).
# BUCKET_ENTRIES, when set, overrides the entries per bucket on every device (tests).
BUCKET_ENTRIES: Optional[int] = None
MAX_BUCKETS = sizing.MAX_BUCKETS


def _is_grouped(indexes: Tensor, step: int = 1 << 20) -> Optional[Groups]:
    """The groups when equal ids already stand together (sorted or not), else None.

    The neighbour comparisons run in slices of ``step`` entries (no bool temporary of
    the input's size), and stop once the input is known to be neither sorted nor in
    few runs."""
    n = indexes.numel()
    ascending, changes = True, 0
    for rows in row_blocks(n - 1, 1, step):
        left, right = indexes[rows.start:rows.stop], indexes[rows.start + 1:rows.stop + 1]
        if ascending:
            ascending = bool((right >= left).all())
        changes += int(torch.count_nonzero(right != left))  # (a bool .sum() would copy to int64)
        if not ascending and changes > n // 2:
            return None
    if ascending:
        return _segments(indexes)
    # Contiguous but unsorted groups: worth checking only when runs are few.
    groups = _segments(indexes)
    if groups.ids.unique().numel() == groups.n_queries:
        return groups
    return None


def iter_groups(
    indexes: Tensor, *arrays: Tensor, max_buckets: Optional[int] = None
) -> Iterator[Tuple[Groups, Tuple[Tensor, ...]]]:
    """Group flat entries by query id, keeping each query's entries in order of appearance.

    Yields ``(groups, arrays in grouped order)`` for disjoint ranges of ids that
    together hold every query. Already grouped input is one part with no sort and
    no copy; otherwise each id range is gathered and stably sorted on its own.
    """
    grouped = _is_grouped(indexes)
    if grouped is not None:
        yield grouped, arrays
        return
    n = indexes.numel()
    entries = sizing.bucket_entries(indexes) if BUCKET_ENTRIES is None else BUCKET_ENTRIES
    if max_buckets is None:
        max_buckets = sizing.max_buckets(indexes)
    low, high = (int(v) for v in torch.aminmax(indexes))
    n_buckets = max(1, min(max_buckets, -(-n // entries), high - low + 1))
    if high - low >= 2**62:  # keep the bucket arithmetic inside int64
        n_buckets = 1
    if n_buckets == 1:
        yield _sorted_part(indexes, None, low, arrays)
        return
    width = -(-(high - low + 1) // n_buckets)
    for b in range(n_buckets):
        start = low + b * width
        if start > high:  # the last ranges may hold no id; past 2**63 - 1 a bound is no int64
            break
        where = _positions(indexes, start, min(start + width - 1, high), entries)
        if where.numel():
            yield _sorted_part(indexes, where, start, arrays, width)
        del where


def _positions(indexes: Tensor, first: int, last: int, step: int) -> Tensor:
    """Positions (in order) of the entries with ids in ``[first, last]``, found slice by
    slice (no temporary of the input's size; no stored bucket number per entry: a range
    test of the ids costs about what a test of int8 numbers does), as int32 when they fit."""
    n = indexes.numel()
    dtype = torch.int32 if n < 2**31 else torch.int64
    pieces = []
    for rows in row_blocks(n, 1, step):
        ids = indexes[rows]
        found = ((ids >= first) & (ids <= last)).nonzero().squeeze(1)
        if found.numel():
            pieces.append(found.to(dtype) + rows.start)
    return torch.cat(pieces) if pieces else indexes.new_empty(0, dtype=dtype)


def _sorted_part(indexes: Tensor, where: Optional[Tensor], start: int, arrays: Tuple[Tensor, ...],
                 span: Optional[int] = None):
    """Groups and grouped copies of the entries ``where`` (all if None), ids in
    ``[start, start + span)`` (``span`` None: not known)."""
    if where is None:
        keys = indexes.to(torch.int64, copy=True)
        keys -= start
        if (span if span is not None else int(keys.max()) + 1) <= 2**31 - 1:  # a 32-bit sort is ~1.6x faster on CPU
            keys = keys.to(torch.int32)
    else:
        keys = _range_keys(indexes, where, start, span)
    keys, perm = torch.sort(keys, stable=True)
    first = lambda starts: indexes[perm[starts] if where is None else where[perm[starts]]]  # noqa: E731
    groups = _segments(keys, ids_of=first)
    del keys
    take = perm if where is None else where[perm]
    del perm
    return groups, tuple(a.index_select(0, take) for a in arrays)  # faster than a[take]


def _range_keys(indexes: Tensor, where: Tensor, start: int, span: int, step: int = 1 << 16) -> Tensor:
    """``indexes[where] - start`` (each in ``[0, span)``) in the narrowest of int16, int32
    and int64 that holds ``span - 1`` (exact; a narrower stable sort is faster and needs
    less scratch, with the same order), gathered slice by slice (no int64 copy)."""
    dtype = torch.int16 if span <= 2**15 else torch.int32 if span <= 2**31 else torch.int64
    keys = torch.empty(where.numel(), dtype=dtype, device=indexes.device)
    for rows in row_blocks(where.numel(), 1, step):
        keys[rows] = indexes.index_select(0, where[rows]) - start
    return keys


def group_flat(indexes: Tensor, *arrays: Tensor) -> Tuple[Groups, Tuple[Tensor, ...]]:
    """Group all flat entries at once (one part of :func:`iter_groups`).

    Example:
        >>> g, (p,) = group_flat(torch.tensor([7, 7, 3, 3, 3]), torch.arange(5.0))
        >>> g.ids.tolist(), g.sizes.tolist(), p.tolist()
        ([7, 3], [2, 3], [0.0, 1.0, 2.0, 3.0, 4.0])
    """
    return next(iter_groups(indexes, *arrays, max_buckets=1))


def iter_flat_blocks(
    groups: Groups, preds: Tensor, target: Tensor, block_elements: int = BLOCK_ELEMENTS
) -> Iterator[Tuple[Tensor, Tensor, Tensor, Optional[Tensor]]]:
    """Yield ``(query positions, preds[b, s], target[b, s], mask[b, s] or None)`` blocks
    of grouped flat arrays.

    Queries of equal size are a plain view. Otherwise queries are bucketed by size
    (within a factor of two, so padding at most doubles a block) and each bucket
    is cut into blocks of about ``block_elements`` entries.
    """
    device = preds.device
    sizes = groups.sizes
    if int(sizes.min()) == int(sizes.max()):
        s = int(sizes[0])
        p, t = preds.view(-1, s), target.view(-1, s)
        for rows in row_blocks(groups.n_queries, s, block_elements):
            yield torch.arange(rows.start, rows.stop, device=device), p[rows], t[rows], None
        return
    bucket = torch.log2(sizes.to(torch.float64)).floor().to(torch.int64)
    order = torch.argsort(bucket, stable=True)
    bounds = torch.searchsorted(bucket[order], torch.unique(bucket), right=True).tolist()
    start = 0
    for stop in bounds:
        members = order[start:stop]
        width = int(sizes[members].max())
        uniform = int(sizes[members].min()) == width
        offsets = torch.arange(width, device=device)
        for rows in row_blocks(members.numel(), width, block_elements):
            q = members[rows]
            mask = offsets.unsqueeze(0) < sizes[q].unsqueeze(1)
            pos = torch.where(mask, groups.starts[q].unsqueeze(1) + offsets, 0)
            yield q, preds[pos], target[pos], None if uniform else mask
        start = stop
