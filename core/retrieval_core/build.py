"""Builders of :class:`Ranking` from scores.

* :func:`rank_dense` ranks a block of dense rows ``preds[B, N], target[B, N]``.
* :func:`group_flat` groups the flat form ``(indexes, preds, target)`` by query,
  and :func:`iter_flat_blocks` cuts it into padded dense blocks of similar-sized
  queries, so the flat path shares the dense builder and its scratch memory stays
  bounded (never a ``[Q, max group size]`` matrix).

Tie order ("stable"): higher score first, then lower candidate index (column, or
position of appearance in the flat form), the same on every device and block size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Tuple

import torch
from torch import Tensor

from .ranking import Ranking

__all__ = ["rank_dense", "rank_binary", "rank_flat", "group_flat", "iter_groups", "iter_flat_blocks", "row_blocks", "Groups", "BLOCK_ELEMENTS"]

# Scratch of one block, in matrix elements. Blocks keep temporaries small enough
# to be re-used by the allocator (on a 2-core CPU a pass over 2M elements is ~7x
# faster per element than over a fresh 10M-element temporary) and few enough that
# per-block overhead stays small. Whole-list rankings hold ~8 float64 [B, N]
# arrays, so they use blocks DEEP_BLOCK_DIVISOR times smaller.
BLOCK_ELEMENTS = 1 << 21
DEEP_BLOCK_DIVISOR = 8


def row_blocks(n_rows: int, n_cols: int, block_elements: int = BLOCK_ELEMENTS) -> Iterator[slice]:
    """Slices of rows so that each block holds about ``block_elements`` entries."""
    step = max(1, block_elements // max(n_cols, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


_INT64_MIN = torch.iinfo(torch.int64).min
# integer scores widened to a dtype with a value below every real score (for padding)
_WIDER = {torch.uint8: torch.int32, torch.int8: torch.int32, torch.int16: torch.int32, torch.int32: torch.int64}


def _int_scores(preds: Tensor) -> Tensor:
    """Integer scores in a dtype topk/sort take, in the same order (never through floats:
    int64 above 2**53, such as timestamps, would tie)."""
    if preds.dtype == torch.uint64:  # flipping the top bit maps 0..2**64-1 onto int64 in order
        return preds.view(torch.int64) ^ _INT64_MIN
    if preds.dtype in (torch.uint16, torch.uint32):
        return preds.to(torch.int64)
    return preds


def _score_view(preds: Tensor, mask: Optional[Tensor]) -> Tuple[Tensor, object, Optional[Tensor]]:
    """``(scores, floor, rows)``: scores in a dtype that ranks them exactly, masked-out
    candidates set to ``floor``, which is below every real score (-inf for floats,
    whose inputs are finite; the widened dtype's minimum for integers).

    Only int64 scores cannot be widened: there a real score may equal the floor,
    and ``rows`` (or None) lists the rows where one does, to be ranked apart.
    """
    if preds.is_floating_point():
        scores = preds.float() if preds.dtype in (torch.float16, torch.bfloat16) else preds
        floor = float("-inf")
    else:
        scores = _int_scores(preds)
        if mask is None:
            return scores, None, None
        scores = scores.to(_WIDER.get(scores.dtype, torch.int64))
        floor = torch.iinfo(scores.dtype).min
    rows = None
    if mask is not None:
        if scores.dtype == torch.int64:
            clash = ((scores == floor) & mask).any(1)
            if bool(clash.any()):
                rows = clash.nonzero().squeeze(1)
        scores = scores.masked_fill(~mask, floor)
    return scores, floor, rows


def _stable_top(scores: Tensor, d: int, floor=float("-inf")) -> Tuple[Tensor, Tensor]:
    """The first ``d`` candidates of each row by (score desc, column asc).

    ``floor`` marks padding (None: no padding); ties among padding need no order.
    """
    n = scores.shape[1]
    if d >= n:
        return torch.sort(scores, dim=1, descending=True, stable=True)
    vals, idx = scores.topk(d + 1, dim=1)
    # A row whose d-th and (d+1)-th scores are equal has a tie across the cut:
    # topk may have picked any of the tied columns. Those rows (rare with
    # continuous scores) get an exact stable sort.
    crossing = vals[:, d - 1] == vals[:, d]
    if floor is not None:
        crossing &= vals[:, d - 1] != floor
    vals, idx = vals[:, :d], idx[:, :d]
    if d > 1 and bool((vals[:, 1:] == vals[:, :-1]).any()):
        # Inside the top d, equal scores go by column.
        idx, perm = idx.sort(dim=1)
        vals, perm2 = vals.gather(1, perm).sort(dim=1, descending=True, stable=True)
        idx = idx.gather(1, perm2)
    if bool(crossing.any()):
        rows = crossing.nonzero().squeeze(1)
        v, i = torch.sort(scores[rows], dim=1, descending=True, stable=True)
        vals[rows], idx[rows] = v[:, :d], i[:, :d]
    return vals, idx


def _rank_rows(scores: Tensor, mask: Tensor, rows: Tensor, d: int, vals: Tensor, idx: Tensor) -> None:
    """Re-rank ``rows`` (in place) by (real before padding, score desc, column asc): rows
    where a real int64 score equals the padding value."""
    v, i = torch.sort(scores[rows], dim=1, descending=True, stable=True)
    _, j = torch.sort(mask[rows].gather(1, i).to(torch.int8), dim=1, descending=True, stable=True)
    i = i.gather(1, j)[:, :d]
    vals[rows], idx[rows] = v.gather(1, j)[:, :d], i


def _count_relevant(target: Tensor) -> Tensor:
    """Candidates with gain > 0 per row, as exact int64 counts (gains are validated
    non-negative). Never summed in the gains' dtype: float16 counts stop at 2048."""
    if target.dtype == torch.float64 or (target.dtype == torch.float32 and target.shape[1] <= 2**24):
        # the 0-"norm" counts non-zeros as a reduction, without a [B, N] temporary;
        # its float sums are exact integers up to 2**53 (float64) or 2**24 (float32)
        return torch.linalg.vector_norm(target, ord=0, dim=1).to(torch.int64)
    return torch.count_nonzero(target, dim=1)


def rank_dense(
    preds: Tensor,
    target: Tensor,
    depth: int,
    *,
    mask: Optional[Tensor] = None,
    at_r: bool = False,
    need_ideal: bool = False,
    with_ties: bool = False,
    top: Optional[Callable[[Tensor, int], Tuple[Tensor, Tensor]]] = None,
) -> Ranking:
    """Rank a block of dense rows to ``depth`` (or deeper: each row's R with ``at_r``).

    ``mask[B, N]`` marks real candidates (False = padding). The Ranking is complete
    when the depth reaches the number of columns. ``top(scores, d)`` replaces the
    stable top-d selection (embedding mode's exact euclidean order; float scores).

    Example:
        >>> import torch
        >>> r = rank_dense(torch.tensor([[0.1, 0.9, 0.5]]), torch.tensor([[1, 0, 1]]), 2)
        >>> r.relevance.tolist(), r.n_relevant.tolist()
        ([[0.0, 1.0]], [2])
    """
    n = preds.shape[1]
    if mask is not None:
        target = target.masked_fill(~mask, 0)
    n_relevant = _count_relevant(target)
    d = depth
    if at_r and n_relevant.numel():
        d = max(d, int(n_relevant.max()))
    d = max(1, min(d, n))
    scores, floor, clash_rows = _score_view(preds, mask)
    vals, idx = _stable_top(scores, d, floor) if top is None else top(scores, d)
    if clash_rows is not None:
        _rank_rows(scores, mask, clash_rows, d, vals, idx)
    relevance = target.gather(1, idx).to(torch.float64)
    if mask is None:
        valid = torch.ones_like(idx, dtype=torch.bool)
        n_candidates = torch.full_like(n_relevant, n)
    else:
        valid = mask.gather(1, idx)
        relevance = relevance * valid
        n_candidates = mask.sum(1)
    ideal = None
    if need_ideal:
        if target.dtype == torch.bool:
            ideal = _binary_ideal(n_relevant, d)
        else:
            ideal = target.topk(d, dim=1).values.to(torch.float64)
    tie_count = tie_gain = None
    if with_ties:
        last = vals[:, -1:]
        tied_all = scores == last
        if mask is not None:
            tied_all &= mask
        tied_in = (vals == last) & valid
        tie_count = tied_all.sum(1) - tied_in.sum(1)
        # summed in float64: a float16/bfloat16 sum would round (2048 + 1 == 2048)
        tied_gain = torch.where(tied_all, target, torch.zeros((), dtype=target.dtype, device=target.device))
        tie_gain = tied_gain.sum(1, dtype=torch.float64) - (relevance * tied_in).sum(1)
    return Ranking(
        relevance=relevance,
        valid=valid,
        n_relevant=n_relevant,
        n_candidates=n_candidates,
        ideal=ideal,
        complete=d >= n,
        scores=vals,
        tie_count=tie_count,
        tie_gain=tie_gain,
    )


def _binary_ideal(n_relevant: Tensor, d: int) -> Tensor:
    """The ideal gains of 0/1 relevance: R ones, then zeros."""
    ranks = torch.arange(d, device=n_relevant.device)
    return (ranks < n_relevant.unsqueeze(1)).to(torch.float64)


def rank_binary(
    scores: Tensor,
    depth: int,
    relevant_at: Callable[[Tensor], Tensor],
    n_relevant: Tensor,
    n_candidates: Tensor,
    *,
    at_r: bool = False,
    need_ideal: bool = False,
    top: Optional[Callable[[Tensor, int], Tuple[Tensor, Tensor]]] = None,
) -> Ranking:
    """Rank rows with 0/1 relevance known without a ``[B, N]`` gain matrix.

    ``scores`` holds -inf for excluded candidates; ``relevant_at(idx[B, d])`` gives
    the relevance of the ranked candidates; R and the candidate counts come
    precomputed (embedding mode counts them from labels). ``top`` as in :func:`rank_dense`.

    Example:
        >>> labels = torch.tensor([3, 5, 3])
        >>> r = rank_binary(torch.tensor([[0.2, 0.9, float("-inf")]]), 2,
        ...                 lambda idx: labels[idx] == 3, torch.tensor([1]), torch.tensor([2]))
        >>> r.relevance.tolist(), r.valid.tolist()
        ([[0.0, 1.0]], [[True, True]])
    """
    n = scores.shape[1]
    d = depth
    if at_r and n_relevant.numel():
        d = max(d, int(n_relevant.max()))
    d = max(1, min(d, n))
    vals, idx = _stable_top(scores, d) if top is None else top(scores, d)
    valid = vals > float("-inf")
    relevance = (relevant_at(idx) & valid).to(torch.float64)
    return Ranking(
        relevance=relevance,
        valid=valid,
        n_relevant=n_relevant,
        n_candidates=n_candidates,
        ideal=_binary_ideal(n_relevant, d) if need_ideal else None,
        complete=d >= n,
        scores=vals,
    )


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


# Ungrouped flat input is regrouped in id-range buckets of about BUCKET_ENTRIES
# entries (at most MAX_BUCKETS of them): the sort and the permuted copies then
# need a fraction of the input's memory, for one cheap int8 scan per bucket.
BUCKET_ENTRIES = 1 << 20
MAX_BUCKETS = 127  # bucket numbers are int8


def _is_grouped(indexes: Tensor) -> Optional[Groups]:
    """The groups when equal ids already stand together (sorted or not), else None."""
    n = indexes.numel()
    if n == 1 or bool((indexes[1:] >= indexes[:-1]).all()):
        return _segments(indexes)
    # Contiguous but unsorted groups: worth checking only when runs are few.
    if int((indexes[1:] != indexes[:-1]).sum()) <= n // 2:
        groups = _segments(indexes)
        if groups.ids.unique().numel() == groups.n_queries:
            return groups
    return None


def iter_groups(
    indexes: Tensor, *arrays: Tensor, max_buckets: int = MAX_BUCKETS
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
    low, high = (int(v) for v in torch.aminmax(indexes))
    n_buckets = max(1, min(max_buckets, -(-n // BUCKET_ENTRIES), high - low + 1))
    if high - low >= 2**62:  # keep the bucket arithmetic inside int64
        n_buckets = 1
    if n_buckets == 1:
        yield _sorted_part(indexes, None, low, arrays)
        return
    width = -(-(high - low + 1) // n_buckets)
    bucket = torch.empty(n, dtype=torch.int8, device=indexes.device)
    for rows in row_blocks(n, 1, BUCKET_ENTRIES):  # in slices: no int64 temporary of size n
        bucket[rows] = torch.div(indexes[rows] - low, width, rounding_mode="floor").to(torch.int8)
    for b in range(n_buckets):
        where = (bucket == b).nonzero().squeeze(1)  # in order of appearance
        if where.numel():
            yield _sorted_part(indexes, where, low + b * width, arrays)


def _sorted_part(indexes: Tensor, where: Optional[Tensor], start: int, arrays: Tuple[Tensor, ...]):
    """Groups and grouped copies of the entries ``where`` (all if None), ids >= ``start``."""
    ids = indexes if where is None else indexes[where]
    keys = ids - start
    if int(keys.max()) < 2**31 - 1:  # a 32-bit sort is ~1.6x faster on CPU
        keys = keys.to(torch.int32)
    keys, perm = torch.sort(keys, stable=True)
    groups = _segments(keys, ids_of=lambda starts: ids[perm[starts]])
    take = perm if where is None else where[perm]
    del ids, keys, perm, where
    return groups, tuple(a.index_select(0, take) for a in arrays)  # faster than a[take]


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


def rank_flat(
    indexes: Tensor,
    preds: Tensor,
    target: Tensor,
    depth: int,
    *,
    need_ideal: bool = False,
    block_elements: int = BLOCK_ELEMENTS,
) -> Tuple[Tensor, Ranking]:
    """Rank the flat form ``(indexes, preds, target)`` to ``depth``: ``(query ids, Ranking)``
    with queries in increasing id. Memory O(n + Q * depth).

    Example:
        >>> ids, r = rank_flat(torch.tensor([5, 2, 5, 2]), torch.tensor([0.1, 0.2, 0.9, 0.3]),
        ...                    torch.tensor([1, 0, 0, 1]), 1)
        >>> ids.tolist(), r.relevance.tolist()
        ([2, 5], [[1.0], [0.0]])
    """
    parts, ids = [], []
    for groups, (p_, t_) in iter_groups(indexes, preds, target):
        blocks, rows = [], []
        for q, p, t, m in iter_flat_blocks(groups, p_, t_, block_elements):
            blocks.append(rank_dense(p, t, depth, mask=m, need_ideal=need_ideal))
            rows.append(q)
        position = torch.empty_like(groups.ids)
        position[torch.cat(rows)] = torch.arange(groups.n_queries, device=indexes.device)
        parts.append(Ranking.cat(blocks).select(position))
        ids.append(groups.ids)
    ids = torch.cat(ids)
    order = torch.argsort(ids)
    return ids[order], Ranking.cat(parts).select(order)
