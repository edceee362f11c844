"""Rankings of dense rows: rank_dense (scores and gains) and rank_binary (relevance counts only)."""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import torch
from torch import Tensor

from .. import sizing
from .gains import EXP_HEADROOM, exp_gain as scaled_exp_gain
from .ranking import Ranking
from .topk import (
    _SAME_ORDER_INT, GAIN_TWO_LEVEL_MIN_COLUMNS, SELECTS, _exact_top, _leading_top, _rank_rows, _score_view,
    stable_top, stable_top_deferred, _top_values, row_blocks,
)

__all__ = ["rank_dense", "rank_binary", "count_relevant", "block_depth"]

# Counting 0/1 bytes: four of them read as one int32 word, whose four bytes then hold
# four separate counts. A sum of at most 255 such words cannot carry from one byte into
# the next, so the count is the sum of the total's four bytes. The bool copy of the
# gains plus this sum cost ~0.45x a sum of the bytes widened to int32 (CPU, 1 thread).
_WORDS_PER_SUM = 255


def count_relevant(target: Tensor) -> Tensor:
    """Candidates with gain > 0 per row, as exact int64 counts (gains are validated
    non-negative). Never summed in the gains' dtype: float16 counts stop at 2048.

    Example:
        >>> count_relevant(torch.tensor([[0.0, 2.0, 1.0], [0.0, 0.0, 0.0]])).tolist()
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
    binary: bool = False,
    on_scores: Optional[Callable[[Tensor], None]] = None,
    on_gains: Optional[Callable[[Tensor], None]] = None,
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
    scores by gain, highest/lowest first (then by column). ``binary``: the caller knows
    every gain is 0 or 1 (bool gains are): the ideal gains are R ones, no top-k.
    ``on_scores(rows)`` / ``on_gains(rows)``: the caller's own reads of the block (value
    checks), called on every row of ``preds`` / ``target`` once, in slices of rows right
    after the ranking's pass over them where it reads them slice by slice (CPU), so that
    the cache still holds them; else on the whole block, first.

    Example:
        >>> import torch
        >>> r = rank_dense(torch.tensor([[0.1, 0.9, 0.5]]), torch.tensor([[1, 0, 1]]), 2)
        >>> r.relevance.tolist(), r.n_relevant.tolist()
        ([[0.0, 1.0]], [2])
    """
    n = preds.shape[1]
    if on_scores is not None and (mask is not None or top is not None or select != "checked"):
        on_scores(preds)
        on_scores = None
    if mask is not None:
        if on_gains is not None:
            on_gains(target)
            on_gains = None
        target = target.masked_fill(~mask, 0)
    binary = binary or target.dtype == torch.bool
    # with host reads, one pass over the gains after the top (_gain_pass): the ideal gains, R
    # and the ranked gains (else R first: the depth of @r keys needs it)
    gain_pass = need_ideal and not binary and not at_r and not sizing.sync_free(target)
    n_relevant = None
    if gain_pass:
        d = block_depth(depth, False, None, None, n)
    else:
        if on_gains is not None:
            on_gains(target)
        n_relevant = count_relevant(target)
        d = block_depth(depth, at_r, n_relevant, max_relevant, n)
    with_ties = with_ties or ties == "expected"
    by_gain = ties if ties in ("optimistic", "pessimistic") else None  # equal scores ordered by gain
    perm = None
    if by_gain and (select != "checked" or top is not None):  # columns re-ordered by gain up front
        preds, target, mask, select, perm = _gain_order(preds, target, mask, ties, top, select)
        by_gain = None
    scores, vals, idx, inexact, crossing = _select_top(preds, target, mask, d, top, select, with_ties, by_gain,
                                                       on_scores)
    relevance, valid, n_relevant, n_candidates, ideal = _ranked_gains(target, mask, idx, d, n_relevant, need_ideal,
                                                                      binary, gain_pass, on_gains)
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


def _select_top(preds, target, mask, d: int, top, select: str, with_ties: bool, by_gain: Optional[str],
                on_scores):
    """``(scores, vals, idx, inexact, crossing)``: the top ``d`` of a block as ``select`` (or
    ``top``) finds it, in ``scores`` (the scores' view: see ``_score_view``); ``inexact``, the
    rows a deferred selection cannot prove; ``crossing``, the rows a tie crosses the cut in,
    when the selection shows them (``with_ties``, or ``by_gain``). ``by_gain``: ``"optimistic"``
    or ``"pessimistic"``, equal scores of the stable top re-ordered by gain (``_gain_ties``)."""
    n = preds.shape[1]
    inexact = crossing = None
    if top is not None or select == "checked":
        scores, floor, clash_rows = _score_view(preds, mask)
        if on_scores is not None and scores is not preds:  # converted scores (float16...): read first
            on_scores(preds)
            on_scores = None
        # rank d+1 shows which rows a tie crosses the cut in
        extra = int((with_ties or by_gain is not None) and top is None and d < n)
        vals, idx, *flags = stable_top(scores, d + extra, floor, on_scores) if top is None else top(scores, d)
        inexact = flags[0] if flags else None  # a deferred ``top`` flags the rows it cannot prove
        if clash_rows is not None:
            _rank_rows(scores, mask, clash_rows, d + extra, vals, idx)
        if extra:
            crossing = vals[:, d - 1] == vals[:, d]
            if floor is not None:
                crossing &= vals[:, d - 1] != floor
            vals, idx = vals[:, :d], idx[:, :d]
        if by_gain is not None:
            vals, idx = _gain_ties(scores, target, mask, vals, idx, crossing, by_gain)
    elif select == "deferred":
        scores, floor, clash = _score_view(preds, mask, clash="flags")
        vals, idx, inexact = stable_top_deferred(scores, d, floor)
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
    return scores, vals, idx, inexact, crossing


def _ranked_gains(target, mask, idx, d: int, n_relevant, need_ideal: bool, binary: bool, gain_pass: bool, on_gains):
    """``(relevance, valid, n_relevant, n_candidates, ideal)`` of the ranked columns ``idx``:
    their gains (0 at padding), R (counted here by the one pass over the gains, ``gain_pass``)
    and the ideal gains."""
    n = target.shape[1]
    if gain_pass:
        top_gains, n_relevant, ranked = _gain_pass(target, d, idx, on_gains)
    else:
        ranked = target.gather(1, idx)
    relevance = ranked.to(torch.float64)
    if mask is None:
        valid = torch.ones_like(idx, dtype=torch.bool)
        n_candidates = torch.full_like(n_relevant, n)
    else:
        valid = mask.gather(1, idx)
        relevance = relevance * valid
        n_candidates = count_relevant(mask)  # a bool sum would make an int64 copy of the block
    ideal = None
    if need_ideal:
        if binary:
            ideal = _binary_ideal(n_relevant, d)
        else:
            ideal = (top_gains if gain_pass else _top_values(target, d)).to(torch.float64)
    return relevance, valid, n_relevant, n_candidates, ideal


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
    e_in = (scaled_exp_gain(rel, s) * inside).sum(1)
    if sync_free:
        e = scaled_exp_gain(past.to(torch.float64), s).sum(1) - e_in
    else:  # 2^g - 1 of the tied relevant candidates only
        r, col = positive.nonzero(as_tuple=True)
        e = torch.zeros_like(e_in).index_add_(0, r, scaled_exp_gain(past[r, col].to(torch.float64), s[r]))
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


def block_depth(depth: int, at_r: bool, n_relevant: Tensor, max_relevant: Optional[int], n: int) -> int:
    """The ranking depth of a block: ``depth``, or the largest R when deeper (``at_r``),
    within ``1..n``. ``max_relevant`` given: no host read of this block's R."""
    d = depth
    if at_r and n_relevant.numel():
        d = max(d, int(n_relevant.max()) if max_relevant is None else max_relevant)
    return max(1, min(d, n))


def _gain_pass(target: Tensor, d: int, idx: Tensor, visit: Optional[Callable[[Tensor], None]] = None
               ) -> Tuple[Tensor, Tensor, Tensor]:
    """``(ideal, n_relevant, ranked)``: :func:`_top_values` ``(target, d)``, :func:`count_relevant`
    and ``target.gather(1, idx)``, mostly from one pass over the gains (host reads: the
    CPU policy only).

    Torch's CPU top-k sorts partially while ``k * 64 <= n``, at about the same cost for
    every such k (n = 1,000: k = 15 is 1.05x k = 10): the top ``k`` gains then also
    count R in each row with fewer than ``k`` relevant candidates; only the others are
    counted over their whole row. Long rows (the multi-level top-k) count apart.
    ``visit``: called on every row once; the pass then runs slice by slice of rows
    (``sizing.CPU_CACHE_ELEMENTS``), each slice's ranked gains read and ``visit`` called
    right after its top-k, while the cache holds it (as ``on_gains`` of :func:`rank_dense`).
    """
    b, n = target.shape
    k = min(n, max(d, n // 64))
    if n >= GAIN_TWO_LEVEL_MIN_COLUMNS or b == 0:
        if visit is not None:
            visit(target)
        return _top_values(target, d), count_relevant(target), target.gather(1, idx)
    if visit is None:
        top, ranked = _top_values(target, k), target.gather(1, idx)
    else:
        keys = target.view(_SAME_ORDER_INT[target.dtype]) if target.dtype in _SAME_ORDER_INT else target
        top = torch.empty(b, k, dtype=keys.dtype, device=target.device)
        where = torch.empty(b, k, dtype=torch.int64, device=target.device)
        ranked = target.new_empty(idx.shape)
        for rows in row_blocks(b, n, sizing.CPU_CACHE_ELEMENTS):
            torch.topk(keys[rows], k, dim=1, out=(top[rows], where[rows]))
            torch.gather(target[rows], 1, idx[rows], out=ranked[rows])
            visit(target[rows])
        top = top.view(target.dtype)
    positive = top > 0  # -0.0 and 0 are not relevant; a top-k ends with its zeros
    n_relevant = positive.sum(1)
    if k < n:
        rows = positive[:, -1].nonzero().squeeze(1)  # R >= k: counted over the whole row
        if 2 * rows.numel() > b:
            n_relevant = count_relevant(target)
        elif rows.numel():
            n_relevant[rows] = count_relevant(target.index_select(0, rows))
    return top[:, :d], n_relevant, ranked


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
    d = block_depth(depth, at_r, n_relevant, max_relevant, n)
    inexact = None
    if top is not None or select == "checked":
        vals, idx, *flags = stable_top(scores, d) if top is None else top(scores, d)
        inexact = flags[0] if flags else None  # a deferred ``top`` flags the rows it cannot prove
    elif select == "deferred":
        vals, idx, inexact = stable_top_deferred(scores, d)
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
