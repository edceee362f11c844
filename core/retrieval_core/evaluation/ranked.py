"""Already-ranked lists: gains in rank order, with R (and the ideal gains) given from
outside the list, as a retrieval run, OML's ``gt_tops``/``n_gts`` or PML's
``knn_labels`` hold them.

A list need not hold every relevant item: ``n_relevant`` (R) counts the relevant
items of the whole collection, so ``map``, ``recall@k``, ``r_precision`` and the
nDCG ideal use it (trec_eval's semantics: an unretrieved relevant item adds 0 to
the numerators and 1 to R).

Example:
    >>> import torch
    >>> gains = torch.tensor([[1, 0, 1], [0, 0, 0]])   # two queries, their top 3
    >>> r = evaluate_ranked(gains, ["map", "recall@3", "r_precision"], n_relevant=torch.tensor([4, 1]))
    >>> [round(r[k].item(), 4) for k in ("map", "recall@3", "r_precision")]
    [0.2083, 0.25, 0.25]
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..metrics.keys import MetricKey, parse_metrics, ranking_values
from .. import sizing
from ..ranking.groups import group_flat
from ..ranking.topk import row_blocks
from ..ranking.ranking import Ranking
from ..stats.aggregate import MetricResults, aggregate_checked
from ..inputs.ranked import RankedInputs, check_indexes, ranked_inputs
from ..validate import widen_unsigned
from ..validate.stats import N_RESAMPLES

__all__ = ["evaluate_ranked", "evaluate_ranked_inputs", "ranked_values", "ranked_lists", "rank_scores", "scores_ranked_values"]


def _as_gains(gains: Tensor, name: str = "gains") -> Tensor:
    if not isinstance(gains, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(gains).__name__}")
    if gains.is_complex():
        raise TypeError(f"{name} must be bool, integer or floating point; got {gains.dtype}")
    g = gains.to(torch.float64)
    if g.numel() and not bool(((g >= 0) & torch.isfinite(g)).all()):
        raise ValueError(f"{name} must be finite and >= 0")
    return g


def _padded_rows(indexes: Tensor, *arrays: Tensor):
    """The flat form as padded rows, no sort when equal ids already stand together:
    ``(arrays as [Q, d], valid [Q, d] or None when no row is padded, query_ids [Q])``, each
    query's entries in the order given, queries by increasing id; padding holds zeros."""
    if indexes.numel() == 0:
        return tuple(a.new_zeros((0, 0)) for a in arrays), indexes.new_zeros((0, 0), dtype=torch.bool), \
            indexes.new_zeros(0, dtype=torch.int64)
    groups, grouped = group_flat(indexes, *arrays)
    ids, sizes, q = groups.ids.to(torch.int64), groups.sizes, groups.n_queries
    depth = int(sizes.max())
    if depth * q == indexes.numel():  # every query of one size: a view
        rows, valid = tuple(a.view(q, depth) for a in grouped), None
    else:
        row = torch.repeat_interleave(torch.arange(q, device=indexes.device), sizes)
        col = torch.arange(indexes.numel(), device=indexes.device) - groups.starts[row]
        rows = []
        for a in grouped:
            out = a.new_zeros((q, depth))
            out[row, col] = a
            rows.append(out)
        valid = torch.zeros((q, depth), dtype=torch.bool, device=indexes.device)
        valid[row, col] = True
    if q > 1 and not bool((ids[1:] > ids[:-1]).all()):  # groups in order of appearance: by id
        order = torch.argsort(ids)
        ids, rows = ids[order], tuple(r[order] for r in rows)
        valid = None if valid is None else valid[order]
    return tuple(rows), valid, ids


def ranked_lists(gains: Tensor, indexes: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """The flat form as padded rows: ``(gains [Q, d], valid [Q, d], query_ids [Q])``, the
    entries of each query in the order given (their rank order), queries by increasing id.

    Example:
        >>> g, valid, ids = ranked_lists(torch.tensor([1, 0, 2, 3]), torch.tensor([7, 7, 2, 7]))
        >>> g.tolist(), valid.tolist(), ids.tolist()
        ([[2.0, 0.0, 0.0], [1.0, 0.0, 3.0]], [[True, False, False], [True, True, True]], [2, 7])
    """
    check_indexes(gains, indexes, "gains")
    (g,), valid, ids = _padded_rows(indexes, gains.to(torch.float64))
    return g, torch.ones_like(g, dtype=torch.bool) if valid is None else valid, ids


def _ideal(ideal: Optional[Tensor], gains: Tensor, hits: Tensor, n_relevant: Optional[Tensor], needs: bool
           ) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """``(ideal gains [Q, m] in decreasing order, or a count of ideal gains of 1 [Q])`` of rows
    of ``gains`` (masked entries 0), (None, None) where no key needs them."""
    if ideal is not None:
        ideal = _as_gains(ideal, "ideal").sort(dim=1, descending=True).values  # its shape: _given_r
        if n_relevant is not None and not torch.equal((ideal > 0).sum(1), n_relevant):
            raise ValueError("ideal and n_relevant disagree: each query's positive ideal gains must number R")
        _check_ideal_holds(ideal, gains, hits)
        return ideal, None
    if not needs:
        return None, None
    if n_relevant is None:
        return gains.sort(dim=1, descending=True).values, None
    if gains.numel() and not bool(((gains == 0) | (gains == 1)).all()):
        raise ValueError("nDCG of graded gains with n_relevant given needs ideal= (the ideal gains of each query's "
                         "relevant items, retrieved or not)")
    return None, n_relevant  # R ones: a count, not R slots


def _check_ideal_holds(ideal: Tensor, gains: Tensor, hits: Tensor) -> None:
    """Each positive gain of a list must be one of its query's ideal gains (``[Q, m]``,
    descending), as many times as it occurs in the list (the ideal holds every relevant
    item's gain, the listed ones too): so no DCG@k of the list exceeds the ideal's and nDCG
    stays within [0, 1]. Exact: equal floats. ``hits``: the positive gains of each row."""
    h = int(hits.max()) if hits.numel() else 0
    if h == 0:
        return
    top = gains.topk(h, dim=1).values  # descending: every positive gain of the row, then zeros
    best, m = ideal.flip(1).contiguous(), ideal.shape[1]  # ascending
    j = torch.arange(h, device=gains.device)
    new_run = torch.ones_like(top, dtype=torch.bool)
    new_run[:, 1:] = top[:, 1:] != top[:, :-1]
    before = j - torch.where(new_run, j, 0).cummax(1).values  # equal gains ahead of it in the list
    # its (before + 1)-th copy in the ideal: at the first copy's position + before
    at = (torch.searchsorted(best, top) if m else torch.zeros_like(top, dtype=torch.int64)) + before
    held = (at < m) & (best.gather(1, at.clamp(max=max(m - 1, 0))) == top if m else False)
    bad = (top > 0) & ~held
    if bool(bad.any()):
        row, col = (int(x) for x in bad.nonzero()[0])
        gain = top[row, col]
        raise ValueError(f"ideal does not hold the gains of the list in {int(bad.any(1).sum())} queries (row {row}: "
                         f"gain {float(gain)!r} occurs {int((top[row] == gain).sum())} times in the list, "
                         f"{int((ideal[row] == gain).sum())} in ideal): ideal must be the gains of every relevant "
                         "item of the query, the retrieved ones included (otherwise nDCG could exceed 1)")


def evaluate_ranked(
    gains: Tensor,
    metrics: Sequence[str],
    *,
    n_relevant: Optional[Tensor] = None,
    ideal: Optional[Tensor] = None,
    mask: Optional[Tensor] = None,
    indexes: Optional[Tensor] = None,
    empty: str = "skip",
    reduce: str = "mean",
    categories=None,
    ci: Optional[float] = None,
    ci_method: str = "bootstrap",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    keep_per_query: bool = False,
) -> MetricResults:
    """Evaluate ranked lists: each query's gains in rank order (rank 1 first).

    Args:
        gains: ``[Q, d]`` gains in rank order (bool, integer or float >= 0; padding
            marked by ``mask``), or ``[n]`` with ``indexes``: the query of each entry,
            each query's entries in rank order (a retrieval run, query by query).
        metrics: keys as for :func:`~retrieval_core.evaluate_scores`; ``auroc`` and
            ``fall_out`` need every candidate of the collection and are refused when
            ``n_relevant`` is given.
        n_relevant: ``[Q]`` integers, R: the relevant items of each query's whole
            collection, retrieved or not (default: those in the list). At least the
            relevant items in the list. With the flat form, one per query in
            increasing query id.
        ideal: ``[Q, m]`` the gains of each query's relevant items, the listed ones
            included (any order, 0-padded), for nDCG of graded gains when R is given
            (binary gains need none: R ones). Each positive gain of a list must occur
            in its ideal at least as often as in the list (else ValueError): nDCG <= 1.
        mask: ``[Q, d]`` bool, False past the end of a short list; a masked entry is
            removed (the next valid one takes its rank).
        empty, reduce, categories, ci, ci_method, n_resamples, seed, keep_per_query:
            as :func:`~retrieval_core.evaluate_scores` (a query with R = 0 is empty).

    Cutoffs, R and the ideal past a list's end are numbers in the formulas: nothing
    is padded to them (whole-list nDCG of binary gains adds its R ideal terms in
    constant memory). No loop over queries; everything on the gains' device.
    """
    inputs = ranked_inputs(gains, metrics, n_relevant=n_relevant, ideal=ideal, mask=mask, indexes=indexes,
                           empty=empty, reduce=reduce, categories=categories, ci=ci, ci_method=ci_method,
                           n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query)
    return evaluate_ranked_inputs(inputs)


def evaluate_ranked_inputs(inputs: RankedInputs) -> MetricResults:
    """:func:`evaluate_ranked` of checked inputs."""
    values, query_ids = ranked_values(inputs.gains, inputs.keys, n_relevant=inputs.n_relevant, ideal=inputs.ideal,
                                      mask=inputs.mask, indexes=inputs.indexes)
    return _aggregate(values, inputs.keys, inputs.categories, query_ids, inputs.options)


def ranked_values(gains: Tensor, keys: Sequence[MetricKey], *, n_relevant: Optional[Tensor] = None,
                  ideal: Optional[Tensor] = None, mask: Optional[Tensor] = None, indexes: Optional[Tensor] = None
                  ) -> Tuple[Tensor, Optional[Tensor]]:
    """``(values [Q, M] float64, query ids or None)``: the per-query values of parsed
    per-query ``keys`` on ranked lists (NaN where a key is undefined, e.g. R = 0); the
    arguments as :func:`evaluate_ranked`'s, checked here.

    Example:
        >>> v, _ = ranked_values(torch.tensor([[0, 1]]), parse_metrics(["mrr", "recall@2"]),
        ...                      n_relevant=torch.tensor([2]))
        >>> v.tolist()
        [[0.5, 0.5]]
    """
    g = _as_gains(gains)
    query_ids = None
    if indexes is not None:
        if mask is not None:
            raise ValueError("mask is for padded rows; the flat form (indexes) has no padding")
        g, valid, query_ids = ranked_lists(g, indexes)
    else:
        if g.ndim != 2:
            raise ValueError(f"gains must be [queries, depth] (or 1-D with indexes); got {tuple(g.shape)}")
        valid = torch.ones_like(g, dtype=torch.bool) if mask is None else mask
        if not isinstance(valid, Tensor) or valid.dtype != torch.bool or valid.shape != g.shape:
            raise ValueError(f"mask must be a bool tensor of the shape of gains {tuple(g.shape)}")
    values = _values_in_blocks(lambda rows: (g[rows], valid[rows]), g.shape[0], g.shape[1], g.device, keys,
                               hits=((g > 0) & valid).sum(1), n_relevant=n_relevant, ideal=ideal)
    return values, query_ids


def _aggregate(values: Tensor, keys, categories, query_ids, stats) -> MetricResults:
    """The aggregation of checked options (``empty``, ``reduce``, the interval's; no confidence keys here)."""
    ci = stats["ci"]
    return aggregate_checked(values, [m.key for m in keys], empty=stats["empty"], reduce=stats["reduce"],
                             categories=categories,
                             confidence=None, ties="stable", level=None if ci is None else float(ci),
                             ci_method=stats["ci_method"], n_resamples=stats["n_resamples"], seed=stats["seed"],
                             keep_per_query=stats["keep_per_query"], query_ids=query_ids)


def _given_r(n_relevant: Optional[Tensor], ideal: Optional[Tensor], hits: Tensor, keys) -> Optional[Tensor]:
    """R as int64 after the checks against every query's relevant items in the list."""
    q = hits.shape[0]
    if ideal is not None and (not isinstance(ideal, Tensor) or ideal.ndim != 2 or ideal.shape[0] != q):
        raise ValueError(f"ideal must be [queries, m] = [{q}, m]; got "
                         f"{tuple(ideal.shape) if isinstance(ideal, Tensor) else type(ideal).__name__}")
    if n_relevant is None:
        return None
    if not isinstance(n_relevant, Tensor) or n_relevant.is_floating_point() or n_relevant.shape != (q,):
        raise ValueError(f"n_relevant must be an integer tensor of one count per query [{q}]")
    n_relevant = widen_unsigned("n_relevant", n_relevant).to(device=hits.device, dtype=torch.int64)
    short = n_relevant < hits
    if bool(short.any()):
        raise ValueError(f"n_relevant is below the relevant items in the list of {int(short.sum())} queries "
                         "(R counts every relevant item, retrieved or not)")
    refused = [m.key for m in keys if m.spec.needs_all_candidates]
    if refused:
        raise ValueError(f"{', '.join(refused)} need every candidate of the collection, which a ranked list with "
                         "n_relevant given does not hold")
    return n_relevant


def _values_in_blocks(rows_of, q: int, width: int, device, keys, *, hits: Tensor, n_relevant, ideal) -> Tensor:
    """``[Q, M]`` values, a block of rows at a time (``rows_of(rows)``: their float64 gains in
    rank order and validity): the whole-list temporaries of one block stay in cache
    (1M queries x 100: 5.5 s in blocks, 10.1 s at once)."""
    n_relevant = _given_r(n_relevant, ideal, hits, keys)
    step = sizing.block_elements(device, deep=True)
    blocks = list(row_blocks(q, width, step)) or [slice(0, 0)]  # no query: one empty block
    return torch.cat([_rows_values(*rows_of(rows), keys, hits=hits[rows],
                                   n_relevant=None if n_relevant is None else n_relevant[rows],
                                   ideal=None if ideal is None else ideal[rows]) for rows in blocks])


def _rows_values(g: Tensor, valid: Tensor, keys, *, hits: Tensor, n_relevant: Optional[Tensor], ideal) -> Tensor:
    """``[Q, M]`` values of padded rows: float64 gains ``g`` in rank order, ``valid``, the
    relevant items ``hits`` of each row; R checked. Cutoffs, R and the ideal past the list
    are numbers in the kernels, not slots: nothing is padded to them."""
    if g.shape[1] and bool((valid[:, 1:] & ~valid[:, :-1]).any()):  # a masked slot before a valid one: removed
        order = torch.sort((~valid).to(torch.uint8), dim=1, stable=True).indices
        g, valid = g.gather(1, order), valid.gather(1, order)
    if g.shape[1] == 0:  # no slot at all: one invalid one, so that every kernel has a rank to read
        g, valid = g.new_zeros((g.shape[0], 1)), valid.new_zeros((g.shape[0], 1))
    g = g * valid
    best, ones = _ideal(ideal, g, hits, n_relevant, any(m.spec.needs_ideal for m in keys))
    ranking = Ranking(relevance=g, valid=valid, n_relevant=hits if n_relevant is None else n_relevant,
                      n_candidates=valid.sum(1), ideal=best, ideal_ones=ones, complete=True)
    return ranking_values(ranking, keys)


def _order(scores: Tensor, gains: Tensor, ties: str, dim: int = -1) -> Tensor:
    """Positions in rank order: scores descending, equal scores by lower position
    (``"stable"``), or by higher / lower gain first (``"optimistic"`` / ``"pessimistic"``)."""
    if ties == "expected":
        raise ValueError('ties="expected" averages over orders, which a list ranked once cannot: with n_relevant, '
                         'use "stable", "optimistic" or "pessimistic"')
    first = None
    if ties in ("optimistic", "pessimistic"):
        first = torch.sort(gains, dim=dim, descending=ties == "optimistic", stable=True).indices
        scores = scores.gather(dim, first)
    order = torch.sort(scores, dim=dim, descending=True, stable=True).indices
    return order if first is None else first.gather(dim, order)


def rank_scores(preds: Tensor, target: Tensor, *, indexes: Optional[Tensor] = None, mask: Optional[Tensor] = None,
                ties: str = "stable") -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
    """Scores to ranked lists: ``(gains in rank order, mask, indexes)`` for
    :func:`evaluate_ranked` (the whole list sorted; padding last).

    Example:
        >>> g, m, _ = rank_scores(torch.tensor([[0.2, 0.9, 0.5]]), torch.tensor([[1, 0, 2]]))
        >>> g.tolist(), m.tolist()
        ([[0.0, 2.0, 1.0]], [[True, True, True]])
    """
    target = target.to(torch.float64)
    if indexes is None:
        scores = preds if mask is None else preds.masked_fill(~mask, float("-inf") if preds.is_floating_point()
                                                              else torch.iinfo(preds.dtype).min)
        order = _order(scores, target, ties)
        valid = torch.ones_like(target, dtype=torch.bool) if mask is None else mask.gather(1, order)
        return target.gather(1, order), valid, None
    order = _order(preds, target, ties, dim=0)
    by_query = torch.sort(indexes.to(torch.int64)[order], stable=True).indices  # queries grouped, ranks kept
    order = order[by_query]
    return target[order], None, indexes[order]


def scores_ranked_values(preds: Tensor, target: Tensor, keys: Sequence[MetricKey], *, n_relevant: Optional[Tensor],
                         ideal: Optional[Tensor], mask: Optional[Tensor] = None, ties: str = "stable") -> Tensor:
    """``[Q, M]`` per-query values of dense scores with R (and the ideal gains) given: each
    row ranked by its scores (:func:`rank_scores`), then :func:`ranked_values` (what an
    adapter's update computes with ``n_relevant=`` / ``ideal=``).

    Example:
        >>> scores_ranked_values(torch.tensor([[0.2, 0.9]]), torch.tensor([[1, 0]]), parse_metrics(["recall@2"]),
        ...                      n_relevant=torch.tensor([4]), ideal=None).tolist()
        [[0.25]]
    """
    return _scores_values(preds, target, keys, n_relevant=n_relevant, ideal=ideal, mask=mask, ties=ties)


def _scores_values(preds, target, keys, *, n_relevant, ideal, mask, ties) -> Tensor:
    def rows_of(rows):
        gains, valid, _ = rank_scores(preds[rows], target[rows], mask=None if mask is None else mask[rows], ties=ties)
        return gains, valid

    hits = (target > 0) if mask is None else (target > 0) & mask
    return _values_in_blocks(rows_of, preds.shape[0], preds.shape[1], preds.device, keys, hits=hits.sum(1),
                             n_relevant=n_relevant, ideal=ideal)
