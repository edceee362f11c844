"""Builders of :class:`Ranking` from scores.

* :func:`rank_dense` ranks a block of dense rows ``preds[B, N], target[B, N]``.
* :func:`group_flat` groups the flat form ``(indexes, preds, target)`` by query,
  and :func:`iter_flat_blocks` cuts it into padded dense blocks of similar-sized
  queries, so the flat path shares the dense builder and its scratch memory stays
  bounded (never a ``[Q, max group size]`` matrix).
* :func:`sorted_flat_parts` is the flat path of devices where a host read is a
  synchronisation (``sizing.sync_free``): one sort puts every entry in its final
  place, and padded blocks are cut from it with a constant number of host reads.

Tie order ("stable"): higher score first, then lower candidate index (column, or
position of appearance in the flat form), the same on every device and block size.

How the first ``d`` candidates are selected (``select`` of :func:`rank_dense`):
``"checked"`` tests each block for ties (a host read per test: free on CPU);
``"deferred"`` never reads: ties inside the top are always ordered, and rows whose
tie crosses the cut are flagged in ``Ranking.inexact`` for the caller to re-rank
with ``"exact"`` (a full stable sort) after its loop; ``"presorted"`` takes the
first ``d`` columns of rows already in rank order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Tuple

import torch
from torch import Tensor

from . import sizing
from . import kernels as K
from .ranking import EXP_HEADROOM, Ranking

__all__ = [
    "rank_dense", "rank_binary", "rank_flat", "group_flat", "iter_groups", "iter_flat_blocks", "sorted_flat_parts",
    "row_blocks", "Groups", "BLOCK_ELEMENTS", "SELECTS",
]

# Block sizes come from sizing.block_elements(device); these are the CPU's, kept as
# the defaults of the helpers that take an explicit size (benchmarks, tests).
BLOCK_ELEMENTS = sizing.CPU_BLOCK_ELEMENTS
DEEP_BLOCK_DIVISOR = sizing.DEEP_BLOCK_DIVISOR

SELECTS = ("checked", "deferred", "exact", "presorted")


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


def _score_view(preds: Tensor, mask: Optional[Tensor], clash: str = "rows") -> Tuple[Tensor, object, Optional[Tensor]]:
    """``(scores, floor, rows)``: scores in a dtype that ranks them exactly, masked-out
    candidates set to ``floor``, which is below every real score (-inf for floats,
    whose inputs are finite; the widened dtype's minimum for integers).

    Only int64 scores cannot be widened: there a real score may equal the floor,
    and ``rows`` (or None) lists the rows where one does, to be ranked apart.
    ``clash="flags"`` gives a ``[B]`` bool flag per row instead (no host read);
    ``clash="ignore"``: the caller's order needs no clash rows (None).
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
        if scores.dtype == torch.int64 and clash != "ignore":
            found = ((scores == floor) & mask).any(1)
            if clash == "flags":
                rows = found
            elif bool(found.any()):
                rows = found.nonzero().squeeze(1)
        scores = scores.masked_fill(~mask, floor)
    return scores, floor, rows


# Multi-level top-k. A row of n scores is cut into G = n // g groups of g columns
# (group j: columns j, j + G, j + 2G, ..., strided so that the group maxima are an
# elementwise max of g contiguous slices), plus the n - G * g tail columns. The k
# groups with the largest maxima, with the tail, hold the row's k largest values
# (as a multiset, and every value above the k-th): a value above the k-th lies in a
# group whose maximum is above the k-th value too, and there are fewer than k such
# groups; the groups chosen among those whose maximum equals the k-th value hold at
# least one such value each. The k largest group maxima are found the same way
# (with groups of INNER_GROUP), so one pass over the row and top-k of a few small
# arrays replace a top-k of all n. Torch's CPU top-k costs ~3.5-8 ns per value in
# rows under ~4,000 (up to 2x more once k * 64 > n, where it switches from a partial
# sort to nth_element) and ~2 ns in long rows; the maxima ~0.5 ns. Measured on CPU,
# 1 thread, uniform scores, time of torch.topk = 1: n = 512, k = 11: 0.58;
# n = 1,000, k = 11: 0.90; k = 21: 0.57; n = 4,096, k = 11: 0.59; n = 20,000, k = 60:
# 0.48; n = 100,000, k = 11: 0.26. No host read: the sizes depend on the shapes only.
SHORT_GROUP = 4  # columns per group of the first level in rows under LONG_ROW
LONG_GROUP = 8  # in longer rows
LONG_ROW = 8192
INNER_GROUP = 4  # of the levels below (over group maxima)
TWO_LEVEL_MIN_RATIO = 2  # a level only when its candidates are at most half its row
# below this row length a plain top-k is as fast on CPU (measured at n = 128, k = 11)
TWO_LEVEL_MIN_COLUMNS = 256
# Other devices (a GPU's top-k is one launch; each level adds a few): the threshold
# the CPU had before the short-row measurements, not measured on a GPU yet.
DEVICE_TWO_LEVEL_MIN_COLUMNS = 4096
# Gains (the ideal's top-k) are mostly equal zeros, where torch's top-k is ~2x faster
# than on distinct scores: the levels only pay from this row length on (n = 1,000,
# k = 10: 1.15x the plain top-k; measured before at n >= 4,096: faster)
GAIN_TWO_LEVEL_MIN_COLUMNS = 4096


def _group_width(n: int, k: int, inner: bool = False, min_columns: Optional[int] = None) -> int:
    """Columns per group of a level of the top-``k`` of rows of ``n`` (0: plain top-k)."""
    g = INNER_GROUP if inner else (SHORT_GROUP if n < LONG_ROW else LONG_GROUP)
    if min_columns is None:
        min_columns = TWO_LEVEL_MIN_COLUMNS
    if (not inner and n < min_columns) or TWO_LEVEL_MIN_RATIO * (k * g + n // g) > n:
        return 0
    return g


def _candidates(scores: Tensor, k: int, inner: bool = False, min_columns: Optional[int] = None) -> Optional[Tensor]:
    """``[B, m]`` columns of each row that hold its ``k`` largest values (see above);
    None when a plain top-k is as cheap (short rows, deep cuts)."""
    b, n = scores.shape
    if min_columns is None and scores.device.type != "cpu":
        min_columns = DEVICE_TWO_LEVEL_MIN_COLUMNS
    g = _group_width(n, k, inner, min_columns)
    if g == 0 or scores.dtype == torch.bool:
        return None
    n_groups = n // g
    head = scores[:, :n_groups * g].unflatten(1, (g, n_groups))
    groups = _top_columns(head.amax(1), k)  # [B, k]
    cols = (groups.unsqueeze(2) + n_groups * torch.arange(g, device=scores.device)).flatten(1)
    if n > n_groups * g:
        tail = torch.arange(n_groups * g, n, device=scores.device).expand(b, -1)
        cols = torch.cat([cols, tail], 1)
    return cols


def _top_columns(values: Tensor, k: int) -> Tensor:
    """``[B, k]`` columns (in any order) of the ``k`` largest values of each row."""
    cols = _candidates(values, k, inner=True)
    if cols is None:
        return values.topk(k, dim=1, sorted=False).indices
    return cols.gather(1, values.gather(1, cols).topk(k, dim=1, sorted=False).indices)


def _topk(scores: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    """``scores.topk(k, dim=1)``: the same values in the same (descending) order; among
    equal values the columns may differ (callers fix tie order and ties at the cut)."""
    cols = _candidates(scores, k)
    if cols is None:
        return scores.topk(k, dim=1)
    vals, pos = scores.gather(1, cols).topk(k, dim=1)
    return vals, cols.gather(1, pos)


# Gains are >= 0 (validated): the IEEE bits of a non-negative float, read as a signed
# integer of the same size, are in the same order (-0.0 reads as the lowest, and equals
# 0.0 as a gain), and torch's integer top-k is ~0.7x the time of its float one on CPU.
_SAME_ORDER_INT = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
                   torch.bfloat16: torch.int16}


def _top_values(values: Tensor, k: int) -> Tensor:
    """``values.topk(k, dim=1).values`` (the ideal gains, >= 0), by the multi-level
    top-k, on the floats' bits read as integers."""
    as_int = _SAME_ORDER_INT.get(values.dtype)
    if as_int is not None:
        return _top_values(values.view(as_int), k).view(values.dtype)
    cols = _candidates(values, k, min_columns=GAIN_TWO_LEVEL_MIN_COLUMNS)
    if cols is None:
        return values.topk(k, dim=1).values
    return values.gather(1, cols).topk(k, dim=1).values


def _stable_top(scores: Tensor, d: int, floor=float("-inf")) -> Tuple[Tensor, Tensor]:
    """The first ``d`` candidates of each row by (score desc, column asc).

    ``floor`` marks padding (None: no padding); ties among padding need no order.
    """
    n = scores.shape[1]
    if d >= n:
        return torch.sort(scores, dim=1, descending=True, stable=True)
    vals, idx = _topk(scores, d + 1)
    # A row whose d-th and (d+1)-th scores are equal has a tie across the cut:
    # topk may have picked any of the tied columns. Those rows (rare with
    # continuous scores) get an exact stable sort.
    crossing = vals[:, d - 1] == vals[:, d]
    if floor is not None:
        crossing &= vals[:, d - 1] != floor
    vals, idx = vals[:, :d], idx[:, :d]
    if d > 1:
        tied = (vals[:, 1:] == vals[:, :-1]).any(1)
        if bool(tied.any()):  # inside the top d, equal scores go by column (only rows with a tie)
            rows = tied.nonzero().squeeze(1)
            i, perm = idx[rows].sort(dim=1)
            v, perm2 = vals[rows].gather(1, perm).sort(dim=1, descending=True, stable=True)
            vals[rows], idx[rows] = v, i.gather(1, perm2)
    if bool(crossing.any()):
        rows = crossing.nonzero().squeeze(1)
        v, i = torch.sort(scores[rows], dim=1, descending=True, stable=True)
        vals[rows], idx[rows] = v[:, :d], i[:, :d]
    return vals, idx


def _stable_top_deferred(scores: Tensor, d: int, floor=float("-inf")) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """:func:`_stable_top` without host reads: ``(vals, idx, crossing)``.

    Equal scores inside the top ``d`` are always put in column order (two small
    sorts of ``[B, d]``, cheaper on a GPU than a host read that tests for them).
    ``crossing[B]`` flags the rows whose ``d``-th score ties with the next one, where
    the top may hold the wrong tied columns: the caller re-ranks them with
    :func:`_exact_top` (None when the whole row is sorted).
    """
    n = scores.shape[1]
    if d >= n:
        vals, idx = torch.sort(scores, dim=1, descending=True, stable=True)
        return vals, idx, None
    vals, idx = _topk(scores, d + 1)
    crossing = vals[:, d - 1] == vals[:, d]
    if floor is not None:
        crossing &= vals[:, d - 1] != floor
    vals, idx = vals[:, :d], idx[:, :d]
    if d > 1:
        idx, perm = idx.sort(dim=1)
        vals, perm2 = vals.gather(1, perm).sort(dim=1, descending=True, stable=True)
        idx = idx.gather(1, perm2)
    return vals, idx, crossing


def _exact_top(scores: Tensor, mask: Optional[Tensor], d: int) -> Tuple[Tensor, Tensor]:
    """The first ``d`` of each row by (real before padding, score desc, column asc),
    from a full stable sort: the re-ranking of rows flagged by the deferred path."""
    vals, idx = torch.sort(scores, dim=1, descending=True, stable=True)
    if mask is not None and scores.dtype == torch.int64:  # a real score may equal the padding's
        _, j = torch.sort(mask.gather(1, idx).to(torch.int8), dim=1, descending=True, stable=True)
        vals, idx = vals.gather(1, j), idx.gather(1, j)
    return vals[:, :d], idx[:, :d]


def _leading_top(scores: Tensor, d: int) -> Tuple[Tensor, Tensor]:
    """The first ``d`` columns: rows already in rank order (padding last)."""
    idx = torch.arange(d, device=scores.device).expand(scores.shape[0], d)
    return scores[:, :d], idx


def _rank_rows(scores: Tensor, mask: Tensor, rows: Tensor, d: int, vals: Tensor, idx: Tensor) -> None:
    """Re-rank ``rows`` (in place) by (real before padding, score desc, column asc): rows
    where a real int64 score equals the padding value."""
    v, i = torch.sort(scores[rows], dim=1, descending=True, stable=True)
    _, j = torch.sort(mask[rows].gather(1, i).to(torch.int8), dim=1, descending=True, stable=True)
    i = i.gather(1, j)[:, :d]
    vals[rows], idx[rows] = v.gather(1, j)[:, :d], i


# Counting 0/1 bytes: four of them read as one int32 word, whose four bytes then hold
# four separate counts. A sum of at most 255 such words cannot carry from one byte into
# the next, so the count is the sum of the total's four bytes. The bool copy of the
# gains plus this sum cost ~0.45x a sum of the bytes widened to int32 (CPU, 1 thread).
_WORDS_PER_SUM = 255


def _count_relevant(target: Tensor) -> Tensor:
    """Candidates with gain > 0 per row, as exact int64 counts (gains are validated
    non-negative). Never summed in the gains' dtype: float16 counts stop at 2048.

    Example:
        >>> _count_relevant(torch.tensor([[0.0, 2.0, 1.0], [0.0, 0.0, 0.0]])).tolist()
        [2, 0]
    """
    b, n = target.shape
    if n == 0:
        return torch.zeros(b, dtype=torch.int64, device=target.device)
    words = -(-n // 4)
    if words > _WORDS_PER_SUM:
        words = -(-words // _WORDS_PER_SUM) * _WORDS_PER_SUM
    flags = target if target.dtype == torch.bool else target.bool()
    if not (4 * words == n and flags.is_contiguous() and flags.stride(0) % 4 == 0 and flags.storage_offset() % 4 == 0):
        padded = torch.zeros(b, 4 * words, dtype=torch.bool, device=target.device)  # whole words (and sums)
        padded[:, :n] = flags
        flags = padded
    sums = flags.view(torch.uint8).view(torch.int32).unflatten(1, (-1, min(words, _WORDS_PER_SUM)))
    sums = sums.sum(2, dtype=torch.int32)
    counts = (sums & 255) + ((sums >> 8) & 255) + ((sums >> 16) & 255) + ((sums >> 24) & 255)
    return counts.sum(1, dtype=torch.int64)


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
    select: str = "checked",
    max_relevant: Optional[int] = None,
    ties: str = "stable",
) -> Ranking:
    """Rank a block of dense rows to ``depth`` (or deeper: each row's R with ``at_r``).

    ``mask[B, N]`` marks real candidates (False = padding). The Ranking is complete
    when the depth reaches the number of columns. ``top(scores, d)`` replaces the
    stable top-d selection (embedding mode's exact euclidean order; float scores).
    ``select``: how the top is selected (see the module's docstring); with
    ``"deferred"``, ``Ranking.inexact`` flags the rows to re-rank with ``"exact"``.
    ``max_relevant``: the largest R of every block of the call, read once by the
    caller, so that ``at_r`` reads nothing per block. ``ties``: ``"expected"`` adds the
    tie fields at the cut (``with_ties``); ``"optimistic"``/``"pessimistic"`` order equal
    scores by gain, highest/lowest first (then by column).

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
    d = _depth(depth, at_r, n_relevant, max_relevant, n)
    with_ties = with_ties or ties == "expected"
    by_gain = ties in ("optimistic", "pessimistic")
    perm = None
    if by_gain and (select != "checked" or top is not None):  # columns re-ordered by gain up front
        preds, target, mask, select, perm = _gain_order(preds, target, mask, ties, top, select)
        by_gain = False
    inexact = crossing = None
    if top is not None or select == "checked":
        scores, floor, clash_rows = _score_view(preds, mask)
        # rank d+1 shows which rows a tie crosses the cut in
        extra = int((with_ties or by_gain) and top is None and d < n)
        vals, idx, *flags = _stable_top(scores, d + extra, floor) if top is None else top(scores, d)
        inexact = flags[0] if flags else None  # a deferred ``top`` flags the rows it cannot prove
        if clash_rows is not None:
            _rank_rows(scores, mask, clash_rows, d + extra, vals, idx)
        if extra:
            crossing = vals[:, d - 1] == vals[:, d]
            if floor is not None:
                crossing &= vals[:, d - 1] != floor
            vals, idx = vals[:, :d], idx[:, :d]
        if by_gain:
            vals, idx = _gain_ties(scores, target, mask, vals, idx, crossing, ties)
    elif select == "deferred":
        scores, floor, clash = _score_view(preds, mask, clash="flags")
        vals, idx, inexact = _stable_top_deferred(scores, d, floor)
        if clash is not None:  # int64 scores equal to the padding's: re-ranked exactly too
            inexact = clash if inexact is None else inexact | clash
    elif select == "exact":
        scores, floor, _ = _score_view(preds, mask, clash="ignore")
        vals, idx = _exact_top(scores, mask, d)
    elif select == "presorted":
        scores, floor, _ = _score_view(preds, mask, clash="ignore")
        vals, idx = _leading_top(scores, d)
    else:
        raise ValueError(f"select must be one of {SELECTS}; got {select!r}")
    relevance = target.gather(1, idx).to(torch.float64)
    if mask is None:
        valid = torch.ones_like(idx, dtype=torch.bool)
        n_candidates = torch.full_like(n_relevant, n)
    else:
        valid = mask.gather(1, idx)
        relevance = relevance * valid
        n_candidates = _count_relevant(mask)  # a bool sum would make an int64 copy of the block
    ideal = None
    if need_ideal:
        if target.dtype == torch.bool:
            ideal = _binary_ideal(n_relevant, d)
        else:
            ideal = _top_values(target, d).to(torch.float64)
    tie_count = tie_gain = tie_hits = tie_exp_gain = tie_exp_shift = None
    if with_ties:
        tie_count, tie_gain, tie_hits, tie_exp_gain, tie_exp_shift = _past_cut(scores, vals, mask, valid, target,
                                                                              relevance, crossing)
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
        inexact=inexact,
        tie_hits=tie_hits,
        tie_exp_gain=tie_exp_gain,
        tie_exp_shift=tie_exp_shift,
        ties=ties,
        index=idx if perm is None else perm.gather(1, idx),
    )


def _past_cut(scores, vals, mask, valid, target, relevance, crossing=None):
    """``(count, gain, hits, exp_gain, exp_shift)`` ``[B]`` of the candidates past the cut whose
    score equals the score at the last rank (sums in float64: a float16 sum would round;
    ``exp_gain`` scaled by ``2^-exp_shift``, None: 0, as ``Ranking.tie_exp_shift``).
    ``crossing[B]``: the rows that have such candidates, when the caller knows them.
    Where host reads are free, the sums run on those rows only."""
    b, n = scores.shape
    count = torch.zeros(b, dtype=torch.int64, device=scores.device)
    gain, hits = torch.zeros_like(count, dtype=torch.float64), torch.zeros_like(count)
    exp_gain = torch.zeros_like(gain)
    if vals.shape[1] >= n:  # nothing past the cut
        return count, gain, hits, exp_gain, None
    last = vals[:, -1:]
    inside = (vals == last) & valid
    sync_free = sizing.sync_free(scores)
    rows = None
    if not sync_free:
        if crossing is None:
            tied = scores == last
            crossing = (tied if mask is None else tied & mask).sum(1) > inside.sum(1)
        rows = crossing.nonzero().squeeze(1)
        if rows.numel() == 0:
            return count, gain, hits, exp_gain, None
        if rows.numel() == b:
            rows = None

    def take(t):
        return t if rows is None or t is None else t[rows]

    tied = take(scores) == take(last)
    if mask is not None:
        tied &= take(mask)
    inside, rel = take(inside), take(relevance)
    past = torch.where(tied, take(target), torch.zeros((), dtype=target.dtype, device=target.device))
    positive = past > 0
    c = tied.sum(1) - inside.sum(1)
    g = past.sum(1, dtype=torch.float64) - (rel * inside).sum(1)
    h = positive.sum(1) - ((rel > 0) & inside).sum(1)
    # the exponential gains scaled by 2^-shift, shift from the tied group's largest gain
    # (Ranking.exp_shift): 2^g - 1 alone overflows float64 from g = 1024 on
    s = (torch.ceil(past.amax(1).to(torch.float64)) - EXP_HEADROOM).clamp(min=0.0)
    e_in = (K._exp_gain(rel, s) * inside).sum(1)
    if sync_free:
        e = K._exp_gain(past.to(torch.float64), s).sum(1) - e_in
    else:  # 2^g - 1 of the tied relevant candidates only
        r, col = positive.nonzero(as_tuple=True)
        e = torch.zeros_like(e_in).index_add_(0, r, K._exp_gain(past[r, col].to(torch.float64), s[r]))
        e = e - e_in
    if rows is None:
        return c, g, h, e, s
    shift = torch.zeros_like(gain)
    count[rows], gain[rows], hits[rows], exp_gain[rows], shift[rows] = c, g, h, e, s
    return count, gain, hits, exp_gain, shift


def _gain_ties(scores, target, mask, vals, idx, crossing, ties):
    """The stable top ``(vals, idx)`` with equal scores ordered by gain (highest first for
    ``"optimistic"``, lowest for ``"pessimistic"``, then by column): ties inside the top
    are re-ordered there; rows whose tie crosses the cut are ranked again from all
    their columns ordered by gain (host reads: CPU's ``"checked"`` path only)."""
    descending = ties == "optimistic"
    gain = target.gather(1, idx)
    key = gain.to(torch.int8) if gain.dtype == torch.bool else gain
    by_gain = torch.sort(key, dim=1, descending=descending, stable=True).indices
    by_score = torch.sort(vals.gather(1, by_gain), dim=1, descending=True, stable=True).indices
    order = by_gain.gather(1, by_score)
    vals, idx = vals.gather(1, order), idx.gather(1, order)
    if crossing is not None:
        rows = crossing.nonzero().squeeze(1)
        if rows.numel():
            t = target[rows]
            cols = torch.sort(t.to(torch.int8) if t.dtype == torch.bool else t, dim=1, descending=descending,
                              stable=True).indices
            m = None if mask is None else mask[rows].gather(1, cols)
            v, i = _exact_top(scores[rows].gather(1, cols), m, vals.shape[1])
            vals[rows], idx[rows] = v, cols.gather(1, i)
    return vals, idx


def _gain_order(preds, target, mask, ties, top, select):
    """Columns of each row re-ordered by gain (decreasing for ``"optimistic"``, increasing
    for ``"pessimistic"``, stable), so that the stable order of the re-ordered columns
    puts equal scores by gain: ``(preds, target, mask, select, perm)`` (``perm``: the
    original column of each re-ordered one)."""
    if top is not None:
        raise NotImplementedError(f"ties={ties!r} cannot go with a custom top selection (euclidean distances)")
    key = target.to(torch.int8) if target.dtype == torch.bool else target
    perm = torch.sort(key, dim=1, descending=ties == "optimistic", stable=True).indices
    preds, target = preds.gather(1, perm), target.gather(1, perm)
    if mask is not None:
        mask = mask.gather(1, perm)
    return preds, target, mask, "exact" if select == "presorted" else select, perm


def _depth(depth: int, at_r: bool, n_relevant: Tensor, max_relevant: Optional[int], n: int) -> int:
    """The ranking depth of a block: ``depth``, or the largest R when deeper (``at_r``),
    within ``1..n``. ``max_relevant`` given: no host read of this block's R."""
    d = depth
    if at_r and n_relevant.numel():
        d = max(d, int(n_relevant.max()) if max_relevant is None else max_relevant)
    return max(1, min(d, n))


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
    select: str = "checked",
    max_relevant: Optional[int] = None,
) -> Ranking:
    """Rank rows with 0/1 relevance known without a ``[B, N]`` gain matrix.

    ``scores`` holds -inf for excluded candidates; ``relevant_at(idx[B, d])`` gives
    the relevance of the ranked candidates; R and the candidate counts come
    precomputed (embedding mode counts them from labels). ``top``, ``select``
    (``"checked"``, ``"deferred"`` or ``"exact"``) and ``max_relevant`` as in
    :func:`rank_dense`.

    Example:
        >>> labels = torch.tensor([3, 5, 3])
        >>> r = rank_binary(torch.tensor([[0.2, 0.9, float("-inf")]]), 2,
        ...                 lambda idx: labels[idx] == 3, torch.tensor([1]), torch.tensor([2]))
        >>> r.relevance.tolist(), r.valid.tolist()
        ([[0.0, 1.0]], [[True, True]])
    """
    n = scores.shape[1]
    d = _depth(depth, at_r, n_relevant, max_relevant, n)
    inexact = None
    if top is not None or select == "checked":
        vals, idx, *flags = _stable_top(scores, d) if top is None else top(scores, d)
        inexact = flags[0] if flags else None  # a deferred ``top`` flags the rows it cannot prove
    elif select == "deferred":
        vals, idx, inexact = _stable_top_deferred(scores, d)
    elif select == "exact":
        vals, idx = _exact_top(scores, None, d)
    else:
        raise ValueError(f"select must be 'checked', 'deferred' or 'exact' here; got {select!r}")
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
        inexact=inexact,
        index=idx,
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


# Ungrouped flat input is regrouped in id-range buckets of about
# sizing.bucket_entries(device) entries (at most sizing.max_buckets(device) of them):
# the sort and the permuted copies then need a fraction of the input's memory, for
# one cheap int8 scan per bucket. BUCKET_ENTRIES, when set, overrides the entries
# per bucket on every device (tests).
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
    bucket = torch.empty(n, dtype=torch.int8, device=indexes.device)
    for rows in row_blocks(n, 1, entries):  # in slices: no int64 temporary of size n
        bucket[rows] = torch.div(indexes[rows] - low, width, rounding_mode="floor").to(torch.int8)
    for b in range(n_buckets):
        where = _positions(bucket, b, entries)
        if where.numel():
            yield _sorted_part(indexes, where, low + b * width, arrays, width)
            del where


def _positions(bucket: Tensor, b: int, step: int) -> Tensor:
    """Positions (in order) of the entries of bucket ``b``, found slice by slice (no
    bool temporary of the input's size), as int32 when they fit."""
    n = bucket.numel()
    dtype = torch.int32 if n < 2**31 else torch.int64
    pieces = []
    for rows in row_blocks(n, 1, step):
        found = (bucket[rows] == b).nonzero().squeeze(1)
        if found.numel():
            pieces.append(found.to(dtype) + rows.start)
    return torch.cat(pieces) if pieces else bucket.new_empty(0, dtype=dtype)


def _sorted_part(indexes: Tensor, where: Optional[Tensor], start: int, arrays: Tuple[Tensor, ...],
                 span: Optional[int] = None):
    """Groups and grouped copies of the entries ``where`` (all if None), ids in
    ``[start, start + span)`` (``span`` None: not known)."""
    keys = indexes.to(torch.int64, copy=True) if where is None else indexes[where].to(torch.int64)
    keys -= start
    if (span if span is not None else int(keys.max()) + 1) <= 2**31 - 1:  # a 32-bit sort is ~1.6x faster on CPU
        keys = keys.to(torch.int32)
    keys, perm = torch.sort(keys, stable=True)
    first = lambda starts: indexes[perm[starts] if where is None else where[perm[starts]]]  # noqa: E731
    groups = _segments(keys, ids_of=first)
    del keys
    take = perm if where is None else where[perm]
    del perm
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
    entries = sizing.bucket_entries(device) if BUCKET_ENTRIES is None else BUCKET_ENTRIES
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
        position = torch.empty_like(groups.ids)
        position[torch.cat(rows)] = torch.arange(groups.n_queries, device=indexes.device)
        parts.append(Ranking.cat(blocks).select(position))
        ids.append(groups.ids)
    ids = torch.cat(ids)
    order = torch.argsort(ids)
    return ids[order], Ranking.cat(parts).select(order)
