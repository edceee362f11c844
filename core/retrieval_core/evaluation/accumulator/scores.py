"""Accumulating dense scores ``[B, N]``: per-query values at update, aggregated at compute.

The state is per-query ``values [n, M]`` float64 (NaN: undefined) with optional query
``ids``, ``categories`` and ``confidence`` ("cat"), or, ``compact``, per-key sums and
counts ``sums [3, M]`` ("sum"); and ``invalid [3]`` ("sum"): the value flags of the
batches (NaN/inf scores, NaN/inf gains, negative gains), raised once at compute.

Example:
    >>> import torch
    >>> acc = ScoreAccumulator(["mrr@3"], empty="zero")
    >>> state = acc.new_state()
    >>> acc.update(state, torch.tensor([[0.9, 0.2, 0.5]]), torch.tensor([[0, 0, 1]]), ids=torch.tensor([7]))
    1
    >>> acc.compute(state)["mrr@3"].item()
    0.5
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ...distributed.duplicates import drop_duplicates
from ...inputs.pairs import UserItems
from ...inputs.scores import accumulated_score_options, check_exclude_form, score_batch_inputs
from ...metrics.keys import MetricKey, parse_metrics
from ...stats.aggregate import MetricResults, aggregate_checked
from ...validate import (
    check_confidence_values, check_representable, check_score_batch, raise_value_flags, value_flags, widen_unsigned,
)
from ..ranked import scores_ranked_values
from ..scores import _score_values
from .state import Accumulator, same_rows
from ...validate.stats import N_RESAMPLES

__all__ = ["ScoreAccumulator", "score_batch_values", "compact_sums",
           "finalize_compact", "finalize_scores"]


class ScoreAccumulator(Accumulator):
    """Ranking metrics of dense scores over batches (``RankingMetrics`` of both adapters).

    Options as :func:`~retrieval_core.evaluate_scores` (``compact``: sums and counts
    only). ``names``/``dims``: what the adapter calls scores, gains and their axes in
    messages. ``numpy``: NumPy arrays in a batch become tensors. The other keywords
    are :class:`~retrieval_core.evaluation.accumulator.state.Accumulator`'s.
    """

    cat_states = (("values", torch.float64), ("ids", torch.int64), ("categories", torch.int64),
                  ("confidence", torch.float64))
    optional = ("ids", "categories", "confidence")
    unit = "query"

    def __init__(self, metrics, *, ties: str = "stable", empty: str = "skip", reduce: str = "mean",
                 compact: bool = False, ci: Optional[float] = None, ci_method: str = "bootstrap",
                 n_resamples: int = N_RESAMPLES, seed: int = 0, keep_per_query: bool = True,
                 names: Tuple[str, str] = ("preds", "target"), dims: Optional[str] = None, numpy: bool = True,
                 **kwargs: Any) -> None:
        self.parsed, self.stats = accumulated_score_options(
            metrics, ties=ties, empty=empty, reduce=reduce, compact=compact, ci=ci, ci_method=ci_method,
            n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query)
        self.keys: Tuple[str, ...] = tuple(m.key for m in self.parsed)
        self.ties, self.empty, self.reduce, self.compact = ties, empty, reduce, compact
        self.names, self.dims, self.numpy = names, dims, numpy
        if compact:
            self.cat_states = ()
        super().__init__(**kwargs)

    def sum_states(self, device=None) -> Dict[str, Tensor]:
        sums = {"sums": torch.zeros(3, len(self.keys), dtype=torch.float64, device=device)} if self.compact else {}
        return dict(sums, invalid=torch.zeros(3, dtype=torch.int64, device=device))

    def rows(self, state) -> int:
        if self.compact:  # every query is counted, defined or not, under each key
            return int(state["sums"][1:, 0].sum())
        return super().rows(state)

    def given(self, state) -> Dict[str, bool]:
        return {k: False for k in self.optional} if self.compact else super().given(state)

    def agreed_options(self) -> Dict[str, Any]:
        return dict(metrics=self.keys, ties=self.ties, empty=self.empty, reduce=self.reduce, compact=self.compact,
                    **self.stats)

    def update(self, state, preds, target, *, ids=None, categories=None, confidence=None, mask=None,
               n_relevant=None, ideal=None, exclude=None, device=None,
               prepare: Optional[Callable[[Tensor, Tensor], Tuple[Tensor, Tensor]]] = None) -> int:
        """Check one batch once and append its per-query values; the number of queries.

        ``exclude``: the batch's excluded items (``[2, E]`` (row of this batch, column) pairs or
        a sparse ``[B, N]`` tensor): they take no rank, as ``mask=`` False (the per-query values
        carry it: no state of its own, and a query repeated by padding repeats its values).
        ``device``: where NumPy inputs go. ``prepare(preds, target)``: the adapter's own
        preparation of checked inputs (a drop-in's binarised gains)."""
        n, preds, target, mask, ids, categories, confidence, n_relevant, ideal, exclude = score_batch_inputs(
            preds, target, ids=ids, categories=categories, confidence=confidence, mask=mask, n_relevant=n_relevant,
            ideal=ideal, exclude=exclude, compact=self.compact, names=self.names, dims=self.dims, numpy=self.numpy,
            device=device)
        self._check_given(state, {"ids": ids is not None, "categories": categories is not None,
                                  "confidence": confidence is not None})
        if n == 0:
            return 0
        if prepare is not None:
            preds, target = prepare(preds, target)
        values, flags = score_batch_values(preds, target, self.parsed, ties=self.ties, mask=mask,
                                           n_relevant=n_relevant, ideal=ideal, checked=True, exclude=exclude)
        state["invalid"] += flags.to(state["invalid"].device)
        store = self.device or preds.device
        if self.compact:
            state["sums"] += compact_sums(values).to(state["sums"].device)
        else:
            self._append(state, store, {"values": values, "ids": ids, "categories": categories,
                                        "confidence": confidence})
        return n

    def check_values(self, state) -> None:
        """Raise for the value flags summed in ``state`` (one host read)."""
        raise_value_flags(state["invalid"], self.names)

    def compute(self, state, *, processes: int = 1, group=None, checked: bool = False) -> MetricResults:
        """The results of a state holding every rank's rows (``processes`` of them);
        ``checked``: :meth:`check_values` ran already."""
        if not checked:
            self.check_values(state)
        if self.compact:
            self.warn_without_ids(processes, group, how="use compact=False and "
                                  + self.ids_hint.format(unit=self.unit))
            return finalize_compact(state["sums"], self.keys, empty=self.empty)
        values = self.cat(state["values"])
        if values is None:
            values = torch.empty(0, len(self.keys), dtype=torch.float64, device=state["invalid"].device)
        ids, categories, confidence = (self.cat(state[k]) for k in self.optional)
        same_rows(values.shape[0], ids=ids, categories=categories, confidence=confidence)
        if ids is None:
            self.warn_without_ids(processes, group)
        return finalize_scores(values, self.keys, ids=ids, categories=categories, confidence=confidence,
                               empty=self.empty, reduce=self.reduce, ties=self.ties, processes=processes, **self.stats)


def score_batch_values(preds: Tensor, target: Tensor, keys: Sequence[MetricKey], *, ties: str = "stable",
                       mask: Optional[Tensor] = None, n_relevant: Optional[Tensor] = None,
                       ideal: Optional[Tensor] = None, checked: bool = False,
                       exclude: Optional[UserItems] = None) -> Tuple[Tensor, Tensor]:
    """``([B, M] per-query values, [3] value flags)`` of a batch whose structure
    :func:`~retrieval_core.inputs.scores.score_batch_inputs` checked (``checked``: not again); the flags are summed over
    batches and raised at compute (``raise_value_flags``).

    ``n_relevant[B]`` (R of each query's whole collection) and ``ideal[B, m]`` (its ideal
    gains) as :func:`~retrieval_core.evaluate_scores` takes them: each row is ranked once by
    its scores (``ties`` "stable", "optimistic" or "pessimistic"), then evaluated as
    :func:`~retrieval_core.evaluate_ranked` does (a top-k list judged against qrels).
    ``exclude``: each row's excluded columns (:func:`~retrieval_core.inputs.scores.score_exclude`;
    without R given), masked block by block.

    Example:
        >>> values, flags = score_batch_values(torch.tensor([[0.9, 0.2]]), torch.tensor([[1, 0]]),
        ...                                    parse_metrics(["mrr@3"]))
        >>> values.tolist(), flags.tolist()
        ([[1.0]], [0, 0, 0])
    """
    if n_relevant is None and ideal is None:
        if not checked:
            check_score_batch(preds, target, mask=mask)
        values = _score_values(preds, widen_unsigned("target", target), keys, indexes=None, mask=mask,
                               ties=ties, exclude=exclude).values
        return values, value_flags(preds, target)
    check_exclude_form(exclude, n_relevant=n_relevant, ideal=ideal)
    if ties == "expected":
        raise ValueError('n_relevant / ideal rank each list once: ties must be "stable", "optimistic" or '
                         '"pessimistic", not "expected"')
    if any(m.confidence is not None for m in keys):
        raise ValueError("confidence keys are not available with n_relevant or ideal")
    for name, t, ndim in (("n_relevant", n_relevant, 1), ("ideal", ideal, 2)):
        if t is not None and (not isinstance(t, Tensor) or t.ndim != ndim or t.shape[0] != preds.shape[0]):
            got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a tensor of shape {'[B]' if ndim == 1 else '[B, m]'} with B = "
                             f"{preds.shape[0]} (the rows of the scores); got {got}")
    if n_relevant is not None and (n_relevant.is_floating_point() or n_relevant.dtype == torch.bool):
        raise TypeError(f"n_relevant must be integer counts (R per query); got {n_relevant.dtype}")
    values = scores_ranked_values(preds, target, keys, n_relevant=n_relevant, ideal=ideal, mask=mask, ties=ties)
    return values, value_flags(preds, target)


def compact_sums(values: Tensor) -> Tensor:
    """``[3, M]`` float64: sum of defined values, number defined, number undefined."""
    defined = ~torch.isnan(values)
    return torch.stack([torch.where(defined, values, 0.0).sum(0), defined.sum(0), (~defined).sum(0)]).to(torch.float64)


def finalize_compact(sums: Tensor, keys: Sequence[str], *, empty: str = "skip") -> MetricResults:
    """Means from ``compact_sums`` states summed over batches (and ranks)."""
    total, defined, undefined = sums.to(torch.float64).unbind(0)
    check_representable(total.unsqueeze(0), keys, n_queries=1)  # a sum that overflowed is inf
    n_queries = (defined + undefined)[0].to(torch.int64)
    if empty == "error" and bool((undefined > 0).any()):
        bad = [f"{k}: {int(c)}" for k, c in zip(keys, undefined.tolist()) if c]
        raise ValueError(f"queries where the metric is undefined: {', '.join(bad)}; empty='error' forbids them")
    fill = {"zero": 0.0, "one": 1.0}.get(empty)
    if fill is not None:
        total, defined = total + fill * undefined, defined + undefined
    means = torch.where(defined > 0, total / defined.clamp(min=1), float("nan"))
    return MetricResults(zip(keys, means.unbind(0)), n_queries=n_queries,
                         n_empty=dict(zip(keys, undefined.to(torch.int64).unbind(0))))


def finalize_scores(values: Tensor, keys: Sequence[str], *, ids: Optional[Tensor] = None,
                    categories: Optional[Tensor] = None, confidence: Optional[Tensor] = None, empty: str = "skip",
                    reduce: str = "mean", ties: str = "stable", processes: int = 1, **stats) -> MetricResults:
    """Drop repeated query ids of the per-query values (of ``processes`` processes) and
    aggregate. ``stats``: ``ci``, ``ci_method``, ``n_resamples``, ``seed``,
    ``keep_per_query`` of :func:`~retrieval_core.aggregate` (the per-query values' ids
    are ``ids`` when given, else positions).

    A repeated id with the same row (per-query values, NaN equal to NaN, and
    category: a query repeated by DistributedSampler's padding) counts once, at most
    ``processes - 1`` times over; an id repeated with a different row is a
    ``ValueError`` (see :func:`~retrieval_core.distributed.drop_duplicates`).
    ``confidence[n]`` (one per row, for the confidence keys) travels with the values.

    Example:
        >>> values = torch.tensor([[1.0], [0.5], [1.0]], dtype=torch.float64)
        >>> finalize_scores(values, ["mrr"], ids=torch.tensor([3, 8, 3]), processes=2)["mrr"].item()
        0.75
    """
    if ids is not None:
        named = [(n, t) for n, t in (("categories", categories), ("confidence", confidence)) if t is not None]
        ids, values, *rest = drop_duplicates(ids, values, *(t for _, t in named),
                                             names=["per-query values"] + [n for n, _ in named],
                                             max_repeats=max(int(processes), 1) - 1)
        rest = iter(rest)
        categories = None if categories is None else next(rest)
        confidence = None if confidence is None else next(rest)
    # the options were checked when the accumulator was built, the confidences' values here
    if confidence is not None:  # each batch's structure was checked at update; the values once, here
        confidence = check_confidence_values(confidence.to(torch.float64))
    ci = stats.get("ci")
    return aggregate_checked(values, keys, empty=empty, reduce=reduce, categories=categories, confidence=confidence,
                             ties=ties, level=None if ci is None else float(ci),
                             ci_method=stats.get("ci_method", "bootstrap"),
                             n_resamples=stats.get("n_resamples", N_RESAMPLES), seed=stats.get("seed", 0),
                             keep_per_query=stats.get("keep_per_query", False), query_ids=ids)
