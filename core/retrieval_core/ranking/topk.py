"""Top-k selection in the stable order (higher score, then lower column): multi-level, checked, deferred, exact."""
from __future__ import annotations

from typing import Callable, Iterator, Optional, Tuple

import torch
from torch import Tensor

from .. import sizing

__all__ = [
    "BLOCK_ELEMENTS", "DEEP_BLOCK_DIVISOR", "SELECTS", "row_blocks", "SHORT_GROUP", "LONG_GROUP", "LONG_ROW",
    "INNER_GROUP", "TWO_LEVEL_MIN_RATIO", "TWO_LEVEL_MIN_COLUMNS", "DEVICE_TWO_LEVEL_MIN_COLUMNS",
    "GAIN_TWO_LEVEL_MIN_COLUMNS", "stable_top", "stable_top_deferred",
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


Visit = Optional[Callable[[Tensor], None]]  # a caller's read of each slice of rows (value checks)


def _group_width(n: int, k: int, inner: bool = False, min_columns: Optional[int] = None) -> int:
    """Columns per group of a level of the top-``k`` of rows of ``n`` (0: plain top-k)."""
    g = INNER_GROUP if inner else (SHORT_GROUP if n < LONG_ROW else LONG_GROUP)
    if min_columns is None:
        min_columns = TWO_LEVEL_MIN_COLUMNS
    if (not inner and n < min_columns) or TWO_LEVEL_MIN_RATIO * (k * g + n // g) > n:
        return 0
    if inner and n % g and n % (g + 1) == 0 and TWO_LEVEL_MIN_RATIO * (k * (g + 1) + n // (g + 1)) <= n:
        return g + 1  # no tail columns to append (250 maxima of 1,000 scores: 50 groups of 5)
    return g


def _candidates(scores: Tensor, k: int, inner: bool = False, min_columns: Optional[int] = None,
                visit: Visit = None) -> Optional[Tensor]:
    """``[B, m]`` columns of each row that hold its ``k`` largest values (see above);
    None when a plain top-k is as cheap (short rows, deep cuts). ``visit``: as in
    :func:`_topk` (called only where the columns are found: the caller visits otherwise)."""
    b, n = scores.shape
    if min_columns is None and scores.device.type != "cpu":
        min_columns = DEVICE_TWO_LEVEL_MIN_COLUMNS
    g = _group_width(n, k, inner, min_columns)
    if g == 0 or scores.dtype == torch.bool:
        return None
    n_groups = n // g
    head = scores[:, :n_groups * g].unflatten(1, (g, n_groups))
    if visit is None:
        maxima = head.amax(1)
    else:  # slice by slice of rows, each handed to visit while the cache holds it
        maxima = scores.new_empty(b, n_groups)
        for rows in row_blocks(b, n, sizing.CPU_CACHE_ELEMENTS):
            torch.amax(head[rows], 1, out=maxima[rows])
            visit(scores[rows])
    groups = _top_columns(maxima, k)  # [B, k]
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


# Deep cuts of long float rows (k >= DEEP_CUT_MIN_K, n >= 4k): with groups as above, the
# k groups with the largest maxima hold ~k * g candidates, too many to gather and rank.
# Their smallest maximum t (the k-th largest group maximum) is a lower bound of the row's
# k-th largest value: the k groups each hold a value >= t, so at least k values are >= t.
# Every value that reaches the top k (>= the k-th value >= t) is thus among the columns
# >= t, ties at the cut included; on continuous scores those are ~k to 1.4k per row (a
# value above t is about as rare as a group maximum above t), found by one comparison
# and one compaction of the row in place of a top-k of the whole row. It reads the host
# once (the widest row), so it runs on the CPU only, where a read costs nothing.
DEEP_CUT_GROUP = 16  # columns per group of the deep-cut path
DEEP_CUT_MIN_K = 512  # below, the group candidates are as cheap (measured: n = 20,000, k = 400: 1.07x their time)
DEEP_CUT_MAX_FRACTION = 4  # at most n / 4 columns >= t in every row, else a plain top-k
# entries per slice of rows compared with t and compacted (4 MiB of float32: the slice and
# its mask stay in the last-level cache; 2**17 and 2**22 were slower at n = 100,000)
DEEP_SLICE_ELEMENTS = 1 << 20


def _deep_top(scores: Tensor, k: int, visit: Visit = None) -> Optional[Tuple[Tensor, Tensor]]:
    """``scores.topk(k, dim=1)`` (values; columns among equal values may differ) of a
    float block by the threshold of the group maxima (see above); None when the path
    does not apply (short rows, small ``k``, integer scores). ``visit``: as in :func:`_topk`."""
    b, n = scores.shape
    g = min(DEEP_CUT_GROUP, n // (2 * k))  # at least 2k groups: ~1.4k columns >= t at most
    if not scores.is_floating_point() or k < DEEP_CUT_MIN_K or g < 2 or scores.device.type != "cpu" or b == 0:
        return None
    n_groups = n // g
    head = scores[:, :n_groups * g].unflatten(1, (g, n_groups))
    maxima = scores.new_empty(b, n_groups)
    for rows in row_blocks(b, n, sizing.CPU_CACHE_ELEMENTS):
        torch.amax(head[rows], 1, out=maxima[rows])
        if visit is not None:
            visit(scores[rows])
    low = maxima.gather(1, _top_columns(maxima, k)).amin(1, keepdim=True)  # [B, 1]: t of each row
    rows, cols, vals = _at_least(scores, low)
    counts = torch.bincount(rows, minlength=b)
    width = int(counts.max())
    # a row whose t is -inf (fewer than k real scores in its groups) keeps every column
    if width * DEEP_CUT_MAX_FRACTION > n:
        vals, pos = scores.topk(k, dim=1)
        return vals, pos
    # pack each row's columns >= t to the left of a [B, width] block padded with -inf
    # (below each row's >= k values >= t > -inf: never among its top k)
    at = torch.arange(rows.numel(), device=scores.device) - (counts.cumsum(0) - counts)[rows]
    packed = scores.new_full((b, width), float("-inf"))
    packed_cols = torch.zeros(b, width, dtype=torch.int64, device=scores.device)
    packed[rows, at] = vals
    packed_cols[rows, at] = cols
    vals, pos = _sorted_topk(packed, k)
    return vals, packed_cols.gather(1, pos)


# A float's bits read as a signed integer, with the magnitude bits of negatives flipped,
# are in the float's order (-0.0 just below 0.0, -inf lowest): torch sorts such integers
# in ~0.7x the time of the floats (deep cuts: k = 1,001 of ~1,400, 0.76x the sorted top-k)
_ORDER_BITS = {torch.float32: (torch.int32, 0x7FFFFFFF), torch.float64: (torch.int64, 0x7FFFFFFFFFFFFFFF)}


def _sorted_topk(scores: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    """``scores.topk(k, dim=1)`` (columns among equal values may differ): the unsorted top
    ``k``, then sorted by the integer keys above (NaN-free scores)."""
    if scores.dtype not in _ORDER_BITS:
        return scores.topk(k, dim=1)
    as_int, magnitude = _ORDER_BITS[scores.dtype]
    vals, pos = scores.topk(k, dim=1, sorted=False)
    bits = vals.view(as_int)
    order = (bits ^ ((bits >> (bits.element_size() * 8 - 1)) & magnitude)).sort(dim=1, descending=True).indices
    return vals.gather(1, order), pos.gather(1, order)


def _at_least(scores: Tensor, low: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """``(rows, cols, values)`` of the entries ``>= low`` (``[B, 1]``), rows ascending: slice
    by slice of rows, each slice's mask and values read while the cache holds it (one mask
    of the whole block, written then read back, and the values gathered after: 1.2x the
    time at n = 100,000, k = 513 and 1,001; the same at n = 20,000)."""
    rows, cols, vals = [], [], []
    for part in row_blocks(scores.shape[0], scores.shape[1], DEEP_SLICE_ELEMENTS):
        block = scores[part]
        r, c = (block >= low[part]).nonzero(as_tuple=True)
        rows.append(r + part.start)
        cols.append(c)
        vals.append(block.reshape(-1).index_select(0, r * block.shape[1] + c))  # ~0.9x block[r, c]
    return torch.cat(rows), torch.cat(cols), torch.cat(vals)


def _topk(scores: Tensor, k: int, visit: Visit = None) -> Tuple[Tensor, Tensor]:
    """``scores.topk(k, dim=1)``: the same values in the same (descending) order; among
    equal values the columns may differ (callers fix tie order and ties at the cut).
    ``visit(rows)`` is called on every row of ``scores`` once: slice by slice of rows
    (``sizing.CPU_CACHE_ELEMENTS``) right after the first level's maxima read it, while
    the cache still holds it (the caller's checks of the scores then cost no second read
    from memory); on the whole block first where there is no such level."""
    deep = _deep_top(scores, k, visit)
    if deep is not None:
        return deep
    cols = _candidates(scores, k, visit=visit)
    if cols is None:
        if visit is not None:
            visit(scores)
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


def stable_top(scores: Tensor, d: int, floor=float("-inf"), visit: Visit = None) -> Tuple[Tensor, Tensor]:
    """The first ``d`` candidates of each row by (score desc, column asc).

    ``floor`` marks padding (None: no padding); ties among padding need no order.
    ``visit``: as in :func:`_topk`.
    """
    n = scores.shape[1]
    if d >= n:
        if visit is not None:
            visit(scores)
        return torch.sort(scores, dim=1, descending=True, stable=True)
    vals, idx = _topk(scores, d + 1, visit)
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


def stable_top_deferred(scores: Tensor, d: int, floor=float("-inf")) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """:func:`stable_top` without host reads: ``(vals, idx, crossing)``.

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
