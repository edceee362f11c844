"""Rankings of the flat form: rank_flat, and sorted_flat_parts (one sort, no host read per block)."""
from __future__ import annotations

from typing import Iterator, Optional, Tuple

import torch
from torch import Tensor

from .. import sizing
from . import groups as grouping  # the module (BUCKET_ENTRIES: a test hook read at each call)
from .dense import rank_dense
from .groups import iter_flat_blocks, iter_groups
from .ranking import Ranking
from .topk import _int_scores, row_blocks

__all__ = ["SORT_MEMORY_SHARE", "SORT_MEMORY_FLOOR", "sorted_flat_parts", "rank_flat"]

# Bits of the score part of a composite (query, score) sort key.
_SCORE_BITS = 32
_N_SIZE_BUCKETS = 64  # query sizes bucketed by floor(log2(size)) < 64


def _desc_score_key32(preds: Tensor) -> Optional[Tensor]:
    """int32 keys that increase as the score decreases, equal for equal scores (-0.0 and
    +0.0 included); None for scores that need more than 32 bits (float64, int64, uint64)."""
    if preds.dtype in (torch.float16, torch.bfloat16, torch.float32):
        bits = (preds.to(torch.float32) + 0.0).view(torch.int32)  # a copy; + 0.0 turns -0.0 into +0.0
        # IEEE order as int32: negative floats have their magnitude bits flipped
        bits ^= (bits >> 31) & 0x7FFFFFFF
    elif preds.dtype in (torch.int8, torch.int16, torch.int32, torch.uint8, torch.uint16):
        bits = preds.to(torch.int32)
    elif preds.dtype == torch.uint32:
        bits = (preds.to(torch.int64) - 2**31).to(torch.int32)
    else:
        return None
    return torch.bitwise_not(bits)  # ~x = -1 - x: decreasing


def _flat_order(indexes: Tensor, preds: Tensor, low: int, span: int) -> Tuple[Tensor, Tensor, Tensor]:
    """One stable sort of flat entries with ids in ``[low, low + span)`` by (query id,
    score desc, position).

    Returns ``(order, run_key, starts)``: the entries in rank order query by query, a
    key per sorted entry equal within a query and increasing with the id (``id - low``),
    and the first sorted position of each query (one host read: the number of queries).
    """
    score_key = _desc_score_key32(preds) if span <= 2**31 else None
    if score_key is not None:
        # (id - low) in the high 32 bits, the score's rank key in the low 32: one sort
        key = indexes.to(torch.int64) - low
        key <<= _SCORE_BITS
        key += score_key
        del score_key
        key += 2**31  # the score key from [-2**31, 2**31) to [0, 2**32)
        run_key, order = torch.sort(key, stable=True)
        del key
        run_key >>= _SCORE_BITS
    else:
        # scores of 64 bits: by score (stable: position breaks ties), then by id (stable)
        scores = _int_scores(preds) if not preds.is_floating_point() else preds + 0.0
        order = torch.argsort(scores, descending=True, stable=True)
        del scores
        run_key, by_id = torch.sort(indexes[order].to(torch.int64) - low, stable=True)
        order = order[by_id]
    change = (run_key[1:] != run_key[:-1]).nonzero().squeeze(1)
    starts = torch.cat([change.new_zeros(1), change + 1])
    return order, run_key, starts


# The sorted flat path sorts id ranges one at a time when one sort of every entry
# (sizing.BYTES_PER_GROUPED_ENTRY bytes each: positions, composite keys, the sort's
# output and scratch, copies) would take more than SORT_MEMORY_SHARE times the inputs'
# bytes, or more than the device's bucket of entries; at most sizing.max_buckets ranges.
# A fifth of the inputs: with the blocks' own scratch, the extra peak stays within a
# quarter of the inputs (10M entries forced on CPU: +21% live, 1.25 gave +33%).
SORT_MEMORY_SHARE = 0.2
SORT_MEMORY_FLOOR = 64 * 2**20  # scratch below this is never split


def _n_sorted_parts(n: int, input_bytes: int, device, span: int) -> int:
    entries = sizing.bucket_entries(device) if grouping.BUCKET_ENTRIES is None else grouping.BUCKET_ENTRIES
    parts = -(-n // entries)
    scratch = n * sizing.BYTES_PER_GROUPED_ENTRY
    if scratch > SORT_MEMORY_FLOOR:
        allowed = max(1, int(SORT_MEMORY_SHARE * input_bytes) - n)  # less the int8 range number per entry
        parts = max(parts, -(-scratch // allowed))
    return max(1, min(parts, sizing.max_buckets(device), span))


def sorted_flat_parts(
    indexes: Tensor,
    preds: Tensor,
    target: Tensor,
    block_elements: int,
    with_max_relevant: bool = False,
) -> Iterator[Tuple[Tensor, Optional[int], Iterator[Tuple[Tensor, Tensor, Tensor, Optional[Tensor]]]]]:
    """The flat form cut into padded blocks whose rows are already in rank order.

    Yields ``(ids, max_relevant, blocks)`` for disjoint, increasing ranges of ids:
    the query ids (increasing), the largest R of those queries (with
    ``with_max_relevant``, else None), and an iterator of ``(query positions,
    preds[b, s], target[b, s], mask[b, s] or None)`` blocks, to be ranked with
    ``select="presorted"``; consume each part's blocks before the next part.
    Queries are bucketed by size within a factor of two (padding at most doubles a
    block) and each bucket is cut into blocks of about ``block_elements`` entries.

    Host reads: the id range, then per part the number of queries and the bucket
    sizes (with the largest R), and, when there are several parts, the part's
    entries. Their count does not depend on the number of blocks: one part unless
    one sort would exceed the memory bounds (see ``_n_sorted_parts``).

    Example:
        >>> ((ids, _, blocks),) = sorted_flat_parts(torch.tensor([5, 2, 5, 2, 2]),
        ...     torch.tensor([1.0, 2.0, 9.0, 3.0, 2.0]), torch.tensor([1, 0, 0, 1, 1]), 100)
        >>> (q, p, t, m), = blocks  # one block: queries of 3 and 2 entries, padded to 3
        >>> ids.tolist(), q.tolist(), m.tolist(), p[m].tolist(), t[m].tolist()
        ([2, 5], [0, 1], [[True, True, True], [True, True, False]], [3.0, 2.0, 2.0, 9.0, 1.0], [1, 0, 1, 0, 1])
    """
    n = indexes.numel()
    low, high = torch.stack(torch.aminmax(indexes)).to(torch.int64).tolist()
    span = high - low + 1
    input_bytes = n * (preds.element_size() + target.element_size() + indexes.element_size())
    parts = 1 if high - low >= 2**62 else _n_sorted_parts(n, input_bytes, indexes, span)
    if parts == 1:
        yield _presorted_part(indexes, preds, target, low, span, block_elements, with_max_relevant)
        return
    width = -(-span // parts)
    part_of = torch.empty(n, dtype=torch.int8, device=indexes.device)
    for rows in row_blocks(n, 1, sizing.bucket_entries(indexes)):  # in slices: no int64 temporary of size n
        part_of[rows] = torch.div(indexes[rows] - low, width, rounding_mode="floor").to(torch.int8)
    for b in range(parts):
        where = (part_of == b).nonzero().squeeze(1)  # in order of appearance
        if where.numel():
            part = _presorted_part(indexes[where], preds[where], target[where], low + b * width, width,
                                   block_elements, with_max_relevant)
            del where  # the part holds its own copies
            yield part
            del part


def _presorted_part(indexes, preds, target, low, span, block_elements, with_max_relevant):
    """``(ids, max_relevant, blocks)`` of :func:`sorted_flat_parts` for entries whose ids
    lie in ``[low, low + span)``."""
    device = preds.device
    n = indexes.numel()
    order, run_key, starts = _flat_order(indexes, preds, low, span)
    ids = (run_key[starts] + low).to(indexes.dtype)
    del run_key
    sizes = torch.diff(starts, append=starts.new_full((1,), n))
    bucket = torch.log2(sizes.to(torch.float64)).floor().to(torch.int64)
    # per size bucket: queries, widest and narrowest query; then the largest R: one read
    nb = _N_SIZE_BUCKETS
    stats = torch.zeros(3 * nb + 1, dtype=torch.int64, device=device)
    stats[:nb].index_add_(0, bucket, torch.ones_like(bucket))
    stats[nb:2 * nb].scatter_reduce_(0, bucket, sizes, "amax")
    stats[2 * nb:3 * nb] = n
    stats[2 * nb:3 * nb].scatter_reduce_(0, bucket, sizes, "amin")
    if with_max_relevant:
        hit = (target != 0)[order]
        cum = hit.cumsum(0, dtype=torch.int32 if n < 2**31 else torch.int64)
        n_relevant = cum[starts + sizes - 1] - cum[starts] + hit[starts]
        del hit, cum
        stats[-1] = n_relevant.max()
    stats = stats.tolist()
    counts, widths, narrowest = stats[:nb], stats[nb:2 * nb], stats[2 * nb:3 * nb]
    members_all = torch.argsort(bucket, stable=True)

    def blocks():
        start = 0
        for b in range(nb):
            if counts[b] == 0:
                continue
            members = members_all[start:start + counts[b]]
            start += counts[b]
            width = widths[b]
            uniform = narrowest[b] == width
            offsets = torch.arange(width, device=device)
            for rows in row_blocks(counts[b], width, block_elements):
                q = members[rows]
                pos = starts[q].unsqueeze(1) + offsets
                mask = None
                if not uniform:
                    mask = offsets < sizes[q].unsqueeze(1)
                    pos = torch.where(mask, pos, 0)
                entries = order[pos]
                yield q, preds[entries], target[entries], mask

    return ids, (stats[-1] if with_max_relevant else None), blocks()


def rank_flat(
    indexes: Tensor,
    preds: Tensor,
    target: Tensor,
    depth: int,
    *,
    need_ideal: bool = False,
    block_elements: Optional[int] = None,
    ties: str = "stable",
) -> Tuple[Tensor, Ranking]:
    """Rank the flat form ``(indexes, preds, target)`` to ``depth``: ``(query ids, Ranking)``
    with queries in increasing id. Memory O(n + Q * depth) on CPU; where host reads
    synchronise (``sizing.sync_free``), one sort of the entries (see :func:`sorted_flat_parts`).
    ``block_elements``: entries per padded block (None: ``sizing.block_elements``).

    Example:
        >>> ids, r = rank_flat(torch.tensor([5, 2, 5, 2]), torch.tensor([0.1, 0.2, 0.9, 0.3]),
        ...                    torch.tensor([1, 0, 0, 1]), 1)
        >>> ids.tolist(), r.relevance.tolist()
        ([2, 5], [[1.0], [0.0]])
    """
    if block_elements is None:
        block_elements = sizing.block_elements(preds)
    if sizing.sync_free(preds):
        parts, ids = [], []
        for part_ids, _, blocks in sorted_flat_parts(indexes, preds, target, block_elements):
            rankings, rows = [], []
            for q, p, t, m in blocks:
                rankings.append(rank_dense(p, t, depth, mask=m, need_ideal=need_ideal, select="presorted", ties=ties))
                rows.append(q)
            position = torch.empty_like(part_ids, dtype=torch.int64)
            position[torch.cat(rows)] = torch.arange(part_ids.numel(), device=indexes.device)
            parts.append(Ranking.cat(rankings).select(position))
            ids.append(part_ids)
        return torch.cat(ids), Ranking.cat(parts)
    parts, ids = [], []
    for groups, (p_, t_) in iter_groups(indexes, preds, target):
        blocks, rows = [], []
        for q, p, t, m in iter_flat_blocks(groups, p_, t_, block_elements):
            blocks.append(rank_dense(p, t, depth, mask=m, need_ideal=need_ideal, ties=ties))
            rows.append(q)
        position = torch.empty_like(groups.ids, dtype=torch.int64)  # ids may be int8-int32
        position[torch.cat(rows)] = torch.arange(groups.n_queries, device=indexes.device)
        parts.append(Ranking.cat(blocks).select(position))
        ids.append(groups.ids)
        del p_, t_, p, t  # this part's grouped copies go before the next part's sort (peak memory)
    ids = torch.cat(ids)
    order = torch.argsort(ids)
    return ids[order], Ranking.cat(parts).select(order)
