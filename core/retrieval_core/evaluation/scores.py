"""Score-mode evaluation: scores and gains in, ``{key: value}`` out.

:func:`score_values` is the update-side step that adapters share (checks of
structure, Ranking, kernels); :func:`evaluate_scores` adds the value checks and
the aggregation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .. import sizing
from ..stats.aggregate import MetricResults, aggregate_checked, encode_labels
from ..ranking.dense import count_relevant, rank_dense
from ..ranking.flat import sorted_flat_parts
from ..ranking.groups import iter_flat_blocks, iter_groups
from ..ranking.topk import DEEP_BLOCK_DIVISOR, row_blocks
from ..ranking.ranking import Ranking
from ..metrics.keys import MetricKey, depth_needed, ranking_values
from .ranked import _aggregate, _padded_rows, _scores_values
from ..inputs.pairs import UserItems
from ..inputs.scores import ScoreInputs, score_inputs, score_value_inputs
from ..validate import (
    check_categories, check_confidence_values, check_values, gain_max_flag, score_flag, sign_flag, value_flags,
    value_flags_and_max,
)
from ..validate.stats import N_RESAMPLES

__all__ = ["evaluate_scores", "evaluate_score_inputs", "score_values", "ranking_values", "QueryValues"]


@dataclass
class QueryValues:
    """Per-query metric values ``[Q, M]`` (NaN = metric undefined for the query), with
    the query ids of the flat form (sorted; None for dense rows, which keep their order)."""

    values: Tensor
    keys: Tuple[str, ...]
    query_ids: Optional[Tensor] = None


def _block_ranking(preds, target, mask, keys, depth, at_r, whole, select="checked", max_relevant=None,
                   ties="stable", binary=False, on_scores=None, on_gains=None) -> Ranking:
    need_ideal = any(m.spec.needs_ideal for m in keys)
    return rank_dense(
        preds, target, preds.shape[1] if whole else depth, mask=mask, at_r=at_r, need_ideal=need_ideal,
        select=select, max_relevant=max_relevant, ties=ties, binary=binary, on_scores=on_scores, on_gains=on_gains,
    )


def _block_values(preds, target, mask, keys, depth, at_r, whole, select="checked", max_relevant=None,
                  ties="stable") -> Tensor:
    return ranking_values(_block_ranking(preds, target, mask, keys, depth, at_r, whole, select, max_relevant, ties),
                          keys)


def _rows_mask(mask: Optional[Tensor], exclude: Optional[UserItems], rows) -> Optional[Tensor]:
    """The mask of the rows ``rows`` (a slice or positions): ``mask`` and, with ``exclude``, False at
    each row's excluded columns (built per block of rows: no ``[Q, N]`` mask is added)."""
    m = None if mask is None else mask[rows]
    if exclude is None:
        return m
    keep = ~exclude.dense(rows)
    return keep if m is None else m & keep


def _checked_block_ranking(preds, target, mask, rows, keys, depth, at_r, whole, ties, exclude=None) -> Ranking:
    """The Ranking of one block of dense rows with its value checks (host reads: the CPU
    policy only), in fewer passes over the inputs than :func:`check_values` before the loop.
    A flag makes the whole input's check raise, with the error the up-front check gives.

    Float gains unmasked, with nDCG's ideal gains (whose top-k reads every gain): the
    checks read each slice of rows right after the ranking's pass over it (``on_scores``,
    ``on_gains`` of :func:`rank_dense`, while the cache holds it): the scores' sum and the
    gains' sign bits (:func:`score_flag`, :func:`sign_flag`), then the largest gain from the
    ideal gains (:func:`gain_max_flag`). Otherwise the block is checked first, exactly,
    and integer gains whose largest is 1 are ranked as 0/1 (``binary``: no top-k for the
    ideal gains).
    """
    p, t, m = preds[rows], target[rows], _rows_mask(mask, exclude, rows)
    if m is None and t.is_floating_point() and any(k.spec.needs_ideal for k in keys):
        flags = []
        ranking = _block_ranking(p, t, m, keys, depth, at_r, whole, ties=ties,
                                 on_scores=lambda x: flags.append(score_flag(x)),
                                 on_gains=lambda x: flags.append(sign_flag(x)))
        if (any(flags) and bool(value_flags(p, t).any())) or bool(gain_max_flag(ranking.ideal[:, 0].max())):
            check_values(preds, target)
        return ranking
    flags, high = value_flags_and_max(p, t)
    if bool(flags.any()):
        check_values(preds, target)
    binary = high is not None and not t.is_floating_point() and bool(high <= 1)
    return _block_ranking(p, t, m, keys, depth, at_r, whole, ties=ties, binary=binary)


def _max_relevant(target: Tensor, mask: Optional[Tensor], blocks, exclude: Optional[UserItems] = None) -> int:
    """The largest R over all rows, with one host read (for ``@r`` depths)."""
    maxima = []
    for rows in blocks:
        m = _rows_mask(mask, exclude, rows)
        t = target[rows] if m is None else target[rows].masked_fill(~m, 0)
        maxima.append(count_relevant(t).max())
    return int(torch.stack(maxima).max()) if maxima else 0


def _dense_values_sync_free(preds, target, mask, keys, depth, at_r, whole, block_elements, deep_elements,
                            ties="stable", exclude: Optional[UserItems] = None) -> Tensor:
    """Dense values with a constant number of host reads: the largest R once (``@r``),
    then, after the loop, the rows whose tie crosses the cut, re-ranked exactly."""
    n_rows, n_cols = preds.shape
    blocks = list(row_blocks(n_rows, n_cols, block_elements))
    max_relevant = _max_relevant(target, mask, blocks, exclude) if at_r else None
    values = torch.empty(n_rows, len(keys), dtype=torch.float64, device=preds.device)
    flags = []
    for rows in blocks:
        m = _rows_mask(mask, exclude, rows)
        ranking = _block_ranking(preds[rows], target[rows], m, keys, depth, at_r, whole, "deferred", max_relevant,
                                 ties)
        values[rows] = ranking_values(ranking, keys)
        if ranking.inexact is not None:
            flags.append((rows, ranking.inexact))
    if flags:
        inexact = torch.zeros(n_rows, dtype=torch.bool, device=preds.device)
        for rows, flag in flags:
            inexact[rows] = flag
        redo = inexact.nonzero().squeeze(1)  # the one read of the loop's outcome
        for part in row_blocks(redo.numel(), n_cols, deep_elements):
            r = redo[part]
            values[r] = _block_values(preds[r], target[r], _rows_mask(mask, exclude, r), keys, depth, at_r,
                                      whole, "exact", max_relevant, ties)
    return values


def score_values(
    preds: Tensor,
    target: Tensor,
    metrics: Union[Sequence[str], Iterable[MetricKey]],
    *,
    indexes: Optional[Tensor] = None,
    mask: Optional[Tensor] = None,
    ties: str = "stable",
    block_elements: Optional[int] = None,
    exclude=None,
) -> QueryValues:
    """Per-query values of ``metrics`` for dense ``[Q, N]`` or flat (``indexes``) scores.

    Checks structure (shapes, dtypes, devices, keys), not values. ``block_elements``:
    entries of one block of top-k rankings (divided by ``DEEP_BLOCK_DIVISOR`` for
    whole-list and ``@r`` keys); None: ``sizing.block_elements`` of the device.
    Where host reads synchronise (``sizing.sync_free``), the number of host reads
    per call does not grow with the input. ``exclude``: as :func:`evaluate_scores`
    (dense rows: ``[2, E]`` (row, column) pairs or a sparse ``[Q, N]`` tensor); the
    values are those of ``mask=`` False at the excluded items, under every tie mode.

    Example:
        >>> preds, target = torch.tensor([[0.1, 0.9, 0.5]]), torch.tensor([[0, 0, 1]])
        >>> score_values(preds, target, ["mrr@3"]).values.tolist()
        [[0.5]]
        >>> score_values(preds, target, ["mrr@3"], exclude=torch.tensor([[0], [1]])).values.tolist()  # item 1 seen
        [[1.0]]
    """
    inputs = score_value_inputs(preds, target, metrics, indexes=indexes, mask=mask, ties=ties, exclude=exclude)
    return _score_values(inputs.preds, inputs.target, inputs.keys, indexes=inputs.indexes, mask=inputs.mask,
                         ties=ties, block_elements=block_elements, exclude=inputs.exclude)


def _score_values(preds: Tensor, target: Tensor, keys: Sequence[MetricKey], *, indexes: Optional[Tensor],
                  mask: Optional[Tensor], ties: str, block_elements: Optional[int] = None,
                  check: bool = False, exclude: Optional[UserItems] = None) -> QueryValues:
    """:func:`score_values` of checked inputs (parsed ``keys``, widened ``target`` and ``indexes``).

    ``check``: dense rows under the CPU policy only (:func:`~retrieval_core.inputs.scores.fused_checks`):
    the values are checked block by block, with the ranking (:func:`_checked_block_ranking`).
    ``exclude``: dense rows only, each row's excluded columns (masked block by block)."""
    depth, at_r, whole = depth_needed(keys)
    device = preds.device
    deep_elements = sizing.block_elements(device, deep=True)
    if block_elements is None:
        block_elements = sizing.block_elements(device, deep=at_r or whole)
    elif at_r or whole:
        block_elements = max(1, block_elements // DEEP_BLOCK_DIVISOR)
    names = tuple(m.key for m in keys)
    sync_free = sizing.sync_free(device)
    if indexes is None and sync_free:
        values = _dense_values_sync_free(preds, target, mask, keys, depth, at_r, whole, block_elements, deep_elements,
                                         ties, exclude)
        return QueryValues(values, names)
    if indexes is None:
        blocks = []
        for rows in row_blocks(preds.shape[0], preds.shape[1], block_elements):
            if check:
                ranking = _checked_block_ranking(preds, target, mask, rows, keys, depth, at_r, whole, ties, exclude)
            else:
                ranking = _block_ranking(preds[rows], target[rows], _rows_mask(mask, exclude, rows), keys,
                                         depth, at_r, whole, ties=ties)
            blocks.append(ranking_values(ranking, keys))
        return QueryValues(torch.cat(blocks), names)
    if sync_free:
        parts, ids = [], []
        for part_ids, max_relevant, flat_blocks in sorted_flat_parts(indexes, preds, target, block_elements, at_r):
            values = torch.empty(part_ids.numel(), len(keys), dtype=torch.float64, device=device)
            for rows, p, t, m in flat_blocks:
                values[rows] = _block_values(p, t, m, keys, depth, at_r, whole, "presorted", max_relevant, ties)
            parts.append(values)
            ids.append(part_ids)
        return QueryValues(torch.cat(parts), names, torch.cat(ids))
    parts, ids = [], []
    for groups, (p_, t_) in iter_groups(indexes, preds, target):
        values = torch.empty(groups.n_queries, len(keys), dtype=torch.float64, device=preds.device)
        for rows, p, t, m in iter_flat_blocks(groups, p_, t_, block_elements):
            values[rows] = _block_values(p, t, m, keys, depth, at_r, whole, ties=ties)
        parts.append(values)
        ids.append(groups.ids)
        del p_, t_, p, t  # this part's grouped copies go before the next part's sort (peak memory)
    ids = torch.cat(ids)
    order = torch.argsort(ids)
    return QueryValues(torch.cat(parts)[order], names, ids[order])


def _per_query(values: Tensor, indexes: Tensor, query_ids: Tensor, n: int, name: str) -> Tensor:
    """One value per query from the flat form's per-entry ``values``, which must agree
    within a query (equal ``indexes``); ``query_ids``: the sorted ids of the ``n`` queries."""
    position = torch.searchsorted(query_ids, indexes)
    if values.is_floating_point():
        low, high = float("inf"), float("-inf")
    else:
        values = values.to(torch.int64)
        low, high = torch.iinfo(torch.int64).max, torch.iinfo(torch.int64).min
    lo = values.new_full((n,), low).scatter_reduce(0, position, values, "amin")
    hi = values.new_full((n,), high).scatter_reduce(0, position, values, "amax")
    if bool((lo != hi).any()):
        raise ValueError(f"{name} must be the same for every entry of a query (equal indexes)")
    return lo


def _query_categories(categories, indexes: Optional[Tensor], query_ids: Optional[Tensor], n: int):
    """Categories per query: as given for dense rows; for the flat form, one per entry,
    taken from each query's entries (which must agree)."""
    if indexes is None:
        check_categories(categories, n, "query (row)")
        return categories
    check_categories(categories, indexes.numel(), "prediction (the flat form takes one per entry)")
    labels = None
    if not isinstance(categories, Tensor):
        labels, categories = encode_labels(categories, indexes.device)
    codes = _per_query(categories.to(indexes.device), indexes, query_ids, n, "categories")
    return codes if labels is None else [labels[i] for i in codes.tolist()]


def _query_confidence(confidence: Tensor, indexes: Optional[Tensor], query_ids: Optional[Tensor], n: int) -> Tensor:
    """Confidences per query: as given for dense rows; for the flat form, one per
    entry, taken from each query's entries (which must agree)."""
    # its structure was checked before the work (check_confidence(values=False)); here, its values
    confidence = check_confidence_values(confidence if confidence.is_floating_point() else confidence.double())
    if indexes is None:
        return confidence
    return _per_query(confidence.to(indexes.device), indexes, query_ids, n, "confidence")


def evaluate_scores(
    preds: Tensor,
    target: Tensor,
    metrics: Sequence[str],
    *,
    indexes: Optional[Tensor] = None,
    mask: Optional[Tensor] = None,
    ties: str = "stable",
    empty: str = "skip",
    reduce: str = "mean",
    categories=None,
    ci: Optional[float] = None,
    ci_method: str = "bootstrap",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    keep_per_query: bool = False,
    confidence: Optional[Tensor] = None,
    n_relevant: Optional[Tensor] = None,
    ideal: Optional[Tensor] = None,
    exclude=None,
) -> MetricResults:
    """Evaluate ranking metrics from scores.

    Args:
        preds: ``[Q, N]`` scores (higher = ranked first), or ``[n]`` with ``indexes``.
        target: gains of the same shape: bool, or integer/float >= 0 (graded).
        metrics: keys such as ``["ndcg@10", "map@r", "mrr"]`` (see :func:`known_metrics`).
        indexes: ``[n]`` query id of each entry (the flat form of torchmetrics).
        mask: ``[Q, N]`` bool, False for padding candidates (dense form only).
        ties: ``"stable"``: equal scores ranked by lower column / earlier entry;
            ``"expected"``: each value averaged over every order of equal scores (exact,
            closed form); ``"optimistic"`` / ``"pessimistic"``: equal scores ranked by
            gain, highest / lowest first (docs/metrics.md, "Tie modes").
        empty: queries where a metric is undefined (no relevant candidate):
            ``"skip"``, ``"zero"``, ``"one"`` or ``"error"``.
        reduce: ``"mean"``, ``"median"``, ``"min"``, ``"max"`` or ``"none"``
            (per-query values; NaN marks a skipped query; queries in row order,
            or in increasing query id for the flat form).
        categories: one label per query (dense) or per entry (flat); adds
            ``"{key}/{label}"`` results.
        ci: a level in (0, 1) (e.g. 0.95): ``results.ci[key] = (low, high)`` for
            every key and ``"{key}/{label}"`` (docs/statistics.md).
        ci_method: ``"bootstrap"`` (percentile bootstrap over queries, of the
            ``reduce`` statistic) or ``"beta"`` (Beta(0.5 + hits, 0.5 + misses)
            highest-density interval; keys with 0/1 per-query values, ``reduce="mean"``).
        n_resamples, seed: bootstrap resamples and the seed of their CPU generator
            (the same interval on every device).
        keep_per_query: keep ``results.per_query[key]`` (``[Q]`` float64, NaN =
            skipped) and ``results.query_ids`` (the flat form's query ids; None for
            dense rows: positions), for ``results.worst(key, n)`` and ``compare``.
        confidence: ``[Q]`` finite floats, one per query (dense) or per entry
            (flat; equal within a query), higher = more confident: needed by the
            confidence keys ``"erc:<key>"``, ``"conf:<key>"``, ``"spearman:<key>"``,
            ``"kendall:<key>"`` (docs/metrics.md, "Confidence metrics"), which also
            fill ``results.curves`` (erc, conf).
        n_relevant, ideal: R of each query's whole collection (``[Q]``, in increasing
            query id for the flat form) and its ideal gains, when the candidates scored
            are not all of them: :func:`~retrieval_core.evaluate_ranked` semantics (the
            whole list is ranked; ``ties`` "stable", "optimistic" or "pessimistic").
        exclude: items removed from each query's ranking (a recommender's seen items):
            ``[2, E]`` (query row, column) pairs or a sparse ``[Q, N]`` tensor (COO or CSR;
            its non-zero entries), repeated pairs counted once. An excluded item is neither
            relevant nor irrelevant and takes no rank, as ``mask=`` False does (its gain is
            not counted in R); dense rows only. The mask is built block by block.

    Returns:
        :class:`MetricResults`, a ``dict[str, Tensor]`` on the input's device,
        with ``n_queries`` and per-key ``n_empty`` counts.

    Example:
        >>> import torch
        >>> preds = torch.tensor([[0.9, 0.2, 0.5], [0.1, 0.8, 0.3]])
        >>> target = torch.tensor([[1, 0, 0], [0, 0, 1]])
        >>> r = evaluate_scores(preds, target, ["mrr@3", "precision@1"])
        >>> round(r["mrr@3"].item(), 4), r["precision@1"].item()
        (0.75, 0.5)
        >>> r = evaluate_scores(preds, target, ["hit_rate@1"], ci=0.9, ci_method="beta", keep_per_query=True)
        >>> [round(x.item(), 3) for x in r.ci["hit_rate@1"]], r.per_query["hit_rate@1"].tolist()
        ([0.097, 0.903], [1.0, 0.0])
        >>> r = evaluate_scores(preds, target, ["erc:cmc@1"], confidence=torch.tensor([0.9, 0.4]))
        >>> r["erc:cmc@1"].item(), r.curves["erc:cmc@1"][1].tolist()  # the confident query is right
        (0.25, [0.0, 0.5])
        >>> seen = torch.tensor([[0], [1]])  # query 0 has seen item 1: it is not ranked
        >>> evaluate_scores(torch.tensor([[0.1, 0.9, 0.5]]), torch.tensor([[0, 0, 1]]), ["mrr@3"],
        ...                 exclude=seen)["mrr@3"].item()
        1.0
    """
    inputs = score_inputs(preds, target, metrics, indexes=indexes, mask=mask, ties=ties, empty=empty, reduce=reduce,
                          categories=categories, ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                          keep_per_query=keep_per_query, confidence=confidence, n_relevant=n_relevant, ideal=ideal,
                          exclude=exclude)
    if inputs.ranked:  # R given: the whole list ranked, then evaluate_ranked's values
        return evaluate_scores_ranked(inputs)
    return evaluate_score_inputs(inputs)


def evaluate_score_inputs(inputs: ScoreInputs) -> MetricResults:
    """:func:`evaluate_scores` of checked inputs (R not given)."""
    options, indexes = inputs.options, inputs.indexes
    qv = _score_values(inputs.preds, inputs.target, inputs.keys, indexes=indexes, mask=inputs.mask,
                       ties=options["ties"], check=inputs.fused, exclude=inputs.exclude)
    categories, confidence = inputs.categories, inputs.confidence
    if categories is not None:
        categories = _query_categories(categories, indexes, qv.query_ids, qv.values.shape[0])
    if confidence is not None:
        confidence = _query_confidence(confidence, indexes, qv.query_ids, qv.values.shape[0])
    ci = options["ci"]
    return aggregate_checked(qv.values, qv.keys, empty=options["empty"], reduce=options["reduce"],
                             categories=categories, query_ids=qv.query_ids, confidence=confidence,
                             ties=options["ties"], level=None if ci is None else float(ci),
                             ci_method=options["ci_method"], n_resamples=options["n_resamples"],
                             seed=options["seed"], keep_per_query=options["keep_per_query"])


def evaluate_scores_ranked(inputs: ScoreInputs) -> MetricResults:
    """:func:`~retrieval_core.evaluate_scores` of checked inputs with R (and the ideal gains)
    given (``inputs.ranked``): the whole list ranked by its scores, then evaluated as
    :func:`evaluate_ranked` does. The flat form is first laid out as padded rows (no sort
    when each query's entries stand together), then each row is sorted: no sort of all the
    entries."""
    preds, target, mask, ids = inputs.preds, inputs.target, inputs.mask, None
    if inputs.indexes is not None:
        (preds, target), mask, ids = _padded_rows(inputs.indexes, preds, target)
    values = _scores_values(preds, target, inputs.keys, n_relevant=inputs.n_relevant, ideal=inputs.ideal, mask=mask,
                            ties=inputs.options["ties"])
    return _aggregate(values, inputs.keys, inputs.categories, ids, inputs.options)
