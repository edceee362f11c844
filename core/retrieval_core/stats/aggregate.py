"""Aggregation: the only place that reduces over queries.

Per-query values come as ``values[Q, M]`` float64 with NaN marking a query for
which the metric is undefined (an "empty" query, e.g. no relevant candidate).
(:class:`MetricResults`, the results, is in ``stats.results``.)
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from ..validate.options import EMPTY, REDUCE, check_choice
from ..validate.stats import N_RESAMPLES, check_ci_options, check_confidence, check_keep_per_query
from ..validate.values import check_representable
from .confidence import confidence_intervals, confidence_results
from .curves import split_key
from .intervals import _intervals
from .results import MetricResults

__all__ = ["MetricResults", "aggregate", "aggregate_checked", "encode_labels", "reduce_values", "fill_empty",
           "category_groups"]


def fill_empty(values: Tensor, keys: Sequence[str], empty: str) -> Tensor:
    if empty == "skip":
        return values
    undefined = torch.isnan(values)
    if empty == "error":
        counts = undefined.sum(0).tolist()
        bad = [f"{k}: {c}" for k, c in zip(keys, counts) if c]
        if bad:
            raise ValueError(
                f"queries where a key is undefined (no relevant candidate; no non-relevant one for fall_out/auroc; "
                f"for the beyond-accuracy keys of top-k lists an empty list, fewer than 2 items for diversity, no "
                f"history for serendipity) out of {values.shape[0]}: {', '.join(bad)}; empty='error' forbids them"
            )
        return values
    return values.masked_fill(undefined, 0.0 if empty == "zero" else 1.0)


def _median(col: Tensor) -> Tensor:
    """Median of the non-NaN values, averaging the two middle ones (as numpy)."""
    v = col[~torch.isnan(col)].sort().values
    n = v.numel()
    if n == 0:
        return col.new_tensor(float("nan"))
    return (v[(n - 1) // 2] + v[n // 2]) / 2


def reduce_values(values: Tensor, reduce: str) -> Tensor:
    """Reduce ``[Q, M]`` over queries, ignoring NaN; a column with no value gives NaN."""
    if reduce == "none":
        return values
    present = ~torch.isnan(values)
    count = present.sum(0)
    if reduce == "mean":
        out = torch.where(present, values, 0.0).sum(0) / count
    elif reduce == "median":
        out = torch.stack([_median(values[:, j]) for j in range(values.shape[1])]) if values.shape[1] else values[0]
    elif reduce == "min":
        out = torch.where(present, values, float("inf")).amin(0)
    else:
        out = torch.where(present, values, float("-inf")).amax(0)
    return torch.where(count > 0, out, float("nan"))


def encode_labels(labels: Union[Tensor, Sequence], device=None) -> Tuple[List[str], Tensor]:
    """(sorted distinct label names, int64 code of each entry into them). A 2-D
    tensor ``[N, C]`` is N labels, its rows (distinct rows in lexicographic order;
    bool rows named as 0/1 integers).

    Example:
        >>> encode_labels(["b", "a", "b"])
        (['a', 'b'], tensor([1, 0, 1]))
        >>> encode_labels(torch.tensor([[0, 1], [1, 0], [0, 1]]))
        (['[0, 1]', '[1, 0]'], tensor([0, 1, 0]))
    """
    if isinstance(labels, Tensor):
        rows = labels.ndim == 2
        if rows and labels.dtype == torch.bool:
            labels = labels.to(torch.int64)
        distinct, codes = torch.unique(labels, dim=0 if rows else None, return_inverse=True)
        return [str(x) for x in distinct.tolist()], codes.to(device or labels.device)
    # the names key the results ("{key}/{name}"): labels are grouped by value, and two labels
    # may not share a name (1 and "1", 1 and 1.0 are refused rather than merged or split)
    kinds = {type(c) for c in labels}
    if len(kinds) > 1:
        raise TypeError(f"categories must all be of one type (their names key the results, '{{key}}/{{label}}'); "
                        f"got a mix of {', '.join(sorted(k.__name__ for k in kinds))}")
    try:
        distinct = set(labels)
    except TypeError:
        raise TypeError(f"categories must be hashable labels (str, int...); got {next(iter(kinds)).__name__}") from None
    by_name = {}
    for c in distinct:
        by_name.setdefault(str(c), []).append(c)
    clash = [n for n, same in by_name.items() if len(same) > 1]
    if clash:
        raise ValueError(f"categories hold different labels with the same name {clash[0]!r}; the results "
                         "('{key}/{label}') need one name per label")
    names = sorted(by_name)
    where = {by_name[n][0]: i for i, n in enumerate(names)}
    return names, torch.tensor([where[c] for c in labels], dtype=torch.int64, device=device)


def category_groups(categories: Union[Tensor, Sequence], device) -> List:
    """[(label, row index tensor)] in sorted label order."""
    names, codes = encode_labels(categories, device)
    return [(name, (codes == i).nonzero().squeeze(1)) for i, name in enumerate(names)]


def aggregate(
    values: Tensor,
    keys: Sequence[str],
    *,
    empty: str = "skip",
    reduce: str = "mean",
    categories: Optional[Union[Tensor, Sequence]] = None,
    confidence: Optional[Tensor] = None,
    ties: str = "stable",
    ci: Optional[float] = None,
    ci_method: str = "bootstrap",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    keep_per_query: bool = False,
    query_ids: Optional[Tensor] = None,
) -> MetricResults:
    """Reduce per-query ``values[Q, M]`` (NaN = empty query) to ``{key: Tensor}``.

    With ``categories`` (one label per query) the result also has
    ``"{key}/{label}"`` entries computed on that label's queries alone.
    ``ci``: a level in (0, 1); fills ``results.ci`` for every key and
    ``"{key}/{label}"`` (see :func:`retrieval_core.stats.intervals.intervals`:
    ``ci_method``, ``n_resamples``, ``seed``). ``keep_per_query``: fills
    ``results.per_query`` (``[Q]`` float64 after ``empty``: NaN = skipped) and
    ``results.query_ids`` (the given ``query_ids``; None: positions).
    Confidence keys (``"erc:cmc@1"``..., a column holding the inner key's values)
    are reduced by :func:`retrieval_core.stats.confidence.confidence_results` with
    ``confidence[Q]`` (and ``ties`` for equal confidences), which also fills
    ``curves``; under ``reduce="none"`` they give the inner per-query values. Their
    intervals are bootstrapped by :func:`retrieval_core.stats.confidence.confidence_intervals`
    (the queries resampled with their confidences).

    Example:
        >>> v = torch.tensor([[1.0, float("nan")], [0.0, 0.5]], dtype=torch.float64)
        >>> r = aggregate(v, ["a", "b"])
        >>> r["a"].item(), r["b"].item(), r.n_empty["b"].item()
        (0.5, 0.5, 1)
    """
    check_choice("empty", empty, EMPTY)
    check_choice("reduce", reduce, REDUCE)
    if confidence is not None:
        confidence = check_confidence(confidence, values.shape[0])
    level = check_ci_options(ci, ci_method, n_resamples, seed, reduce)
    check_keep_per_query(keep_per_query)
    return aggregate_checked(values, keys, empty=empty, reduce=reduce, categories=categories, confidence=confidence,
                             ties=ties, level=level, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                             keep_per_query=keep_per_query, query_ids=query_ids)


def aggregate_checked(values: Tensor, keys: Sequence[str], *, empty: str, reduce: str, categories, confidence,
                      ties: str, level: Optional[float], ci_method: str, n_resamples: int, seed: int,
                      keep_per_query: bool, query_ids: Optional[Tensor], representable: bool = False) -> MetricResults:
    """:func:`aggregate` of checked options (``level``: the interval's, None for none) and a
    checked ``confidence`` (finite, one per query): what an entry point that checked its
    inputs calls. ``representable``: the values were checked already (the per-class
    views of values aggregated as a whole first)."""
    if confidence is not None:
        confidence = confidence.to(values.device)
    if not representable:
        check_representable(values, keys)
    n_empty = dict(zip(keys, torch.isnan(values).sum(0).unbind(0)))
    values = fill_empty(values, keys, empty)
    out = MetricResults(
        zip(keys, reduce_values(values, reduce).unbind(-1)),
        n_queries=torch.tensor(values.shape[0]),
        n_empty=n_empty,
    )
    groups = None if categories is None else category_groups(categories, values.device)
    if reduce != "none":
        reduced, out.curves = confidence_results(values, keys, confidence, reduce=reduce, ties=ties, checked=True)
        out.update(reduced)
    for name, rows in groups or []:
        reduced = dict(zip(keys, reduce_values(values[rows], reduce).unbind(-1)))
        if reduce != "none":
            reduced.update(confidence_results(values[rows], keys, None if confidence is None else confidence[rows],
                                              reduce=reduce, ties=ties, curves=False, checked=True)[0])
        out.update({f"{k}/{name}": reduced[k] for k in keys})
    # keys reduced from per-query values; a confidence key ("erc:cmc@1"...) summarises
    # them otherwise: its interval comes from confidence.py (per_query: the inner key's values)
    if level is not None:
        plain = [j for j, k in enumerate(keys) if split_key(k) is None]
        if plain:
            out.ci = _intervals(values[:, plain], [keys[j] for j in plain], level, method=ci_method, reduce=reduce,
                               n_resamples=n_resamples, seed=seed, groups=groups)
        out.ci.update(confidence_intervals(values, keys, confidence, level, reduce=reduce, ties=ties,
                                           n_resamples=n_resamples, seed=seed, groups=groups))
    if keep_per_query:
        out.per_query = dict(zip(keys, values.unbind(1)))
        out.query_ids = query_ids
    return out
