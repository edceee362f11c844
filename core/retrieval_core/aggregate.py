"""Aggregation: the only place that reduces over queries.

Per-query values come as ``values[Q, M]`` float64 with NaN marking a query for
which the metric is undefined (an "empty" query, e.g. no relevant candidate).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .validate import EMPTY, REDUCE, check_choice, check_confidence

__all__ = ["MetricResults", "aggregate", "encode_labels", "reduce_values"]


class MetricResults(dict):
    """``dict[str, Tensor]`` of results, with the bookkeeping of empty queries.

    Attributes:
        n_queries: number of queries evaluated (0-d int64 tensor).
        n_empty: per key, how many queries had the metric undefined (skipped
            under ``empty="skip"``, filled under ``"zero"``/``"one"``).
        ci: per reduced key, ``(low, high)`` 0-d tensors when an interval was asked.
        per_query: per key, the ``[Q]`` per-query values when they were kept.
        query_ids: ``[Q]`` ids (or None: positions) of the queries in ``per_query``.
        curves: per curve key (``"erc:cmc@1"``...), ``(x, y)`` tensors.
        neighbours: ``(positions or ids [Q, k], scores [Q, k])`` when asked.
    """

    def __init__(self, *args, n_queries: Optional[Tensor] = None, n_empty: Optional[Dict[str, Tensor]] = None):
        super().__init__(*args)
        self.n_queries = n_queries
        self.n_empty = n_empty or {}
        self.ci: Dict[str, Tuple[Tensor, Tensor]] = {}
        self.per_query: Dict[str, Tensor] = {}
        self.query_ids: Optional[Tensor] = None
        self.curves: Dict[str, Tuple[Tensor, Tensor]] = {}
        self.neighbours: Optional[Tuple[Tensor, Tensor]] = None


def _fill_empty(values: Tensor, keys: Sequence[str], empty: str) -> Tensor:
    if empty == "skip":
        return values
    undefined = torch.isnan(values)
    if empty == "error":
        counts = undefined.sum(0).tolist()
        bad = [f"{k}: {c}" for k, c in zip(keys, counts) if c]
        if bad:
            raise ValueError(
                f"queries with no relevant candidate (no non-relevant one for fall_out/auroc) "
                f"out of {values.shape[0]}: {', '.join(bad)}; empty='error' forbids them"
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
    """(sorted distinct label names, int64 code of each entry into them).

    Example:
        >>> encode_labels(["b", "a", "b"])
        (['a', 'b'], tensor([1, 0, 1]))
    """
    if isinstance(labels, Tensor):
        distinct, codes = torch.unique(labels, return_inverse=True)
        return [str(x) for x in distinct.tolist()], codes.to(device or labels.device)
    names = sorted({str(c) for c in labels})
    where = {n: i for i, n in enumerate(names)}
    return names, torch.tensor([where[str(c)] for c in labels], dtype=torch.int64, device=device)


def _category_groups(categories: Union[Tensor, Sequence], device) -> List:
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
) -> MetricResults:
    """Reduce per-query ``values[Q, M]`` (NaN = empty query) to ``{key: Tensor}``.

    With ``categories`` (one label per query) the result also has
    ``"{key}/{label}"`` entries computed on that label's queries alone.
    Confidence keys (``"erc:cmc@1"``..., a column holding the inner key's values)
    are reduced by :func:`retrieval_core.confidence.confidence_results` with
    ``confidence[Q]`` (and ``ties`` for equal confidences), which also fills
    ``curves``; under ``reduce="none"`` they give the inner per-query values.

    Example:
        >>> v = torch.tensor([[1.0, float("nan")], [0.0, 0.5]], dtype=torch.float64)
        >>> r = aggregate(v, ["a", "b"])
        >>> r["a"].item(), r["b"].item(), r.n_empty["b"].item()
        (0.5, 0.5, 1)
    """
    check_choice("empty", empty, EMPTY)
    check_choice("reduce", reduce, REDUCE)
    if confidence is not None:
        confidence = check_confidence(confidence, values.shape[0]).to(values.device)
    n_empty = dict(zip(keys, torch.isnan(values).sum(0).unbind(0)))
    values = _fill_empty(values, keys, empty)
    out = MetricResults(
        zip(keys, reduce_values(values, reduce).unbind(-1)),
        n_queries=torch.tensor(values.shape[0]),
        n_empty=n_empty,
    )
    if reduce != "none":
        from .confidence import confidence_results

        reduced, out.curves = confidence_results(values, keys, confidence, reduce=reduce, ties=ties)
        out.update(reduced)
    if categories is not None:
        for name, rows in _category_groups(categories, values.device):
            reduced = dict(zip(keys, reduce_values(values[rows], reduce).unbind(-1)))
            if reduce != "none":
                reduced.update(confidence_results(values[rows], keys, None if confidence is None else
                                                  confidence[rows], reduce=reduce, ties=ties,
                                                  curves=False)[0])
            out.update({f"{k}/{name}": reduced[k] for k in keys})
    return out
