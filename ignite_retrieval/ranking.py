"""``RankingMetrics``: ranking metrics of dense scores ``[B, N]`` as one ignite Metric."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ignite.metrics.metric import reinit__is_reduced

from retrieval_core.evaluation.adapter_steps import check_score_rows, ranking_options, score_batch_values
from retrieval_core import MetricResults
from retrieval_core.evaluation.steps import compact_sums, finalize_compact, finalize_scores
from retrieval_core.validate import raise_value_flags

from ._base import Device, RetrievalMetric, _identity, to_python

__all__ = ["RankingMetrics"]

_NAMES = ("y_pred", "y")  # ignite's names of scores and gains, in the core's messages


class RankingMetrics(RetrievalMetric):
    """Ranking metrics of dense score matrices, accumulated over an ignite run.

    Each batch holds ``B`` queries: scores ``y_pred[B, N]`` (higher = ranked first)
    and gains ``y[B, N]`` (bool, or integer/float >= 0 for graded relevance).
    ``update`` (and so an ``Engine``'s output) takes ``(y_pred, y)`` or a mapping
    with keys ``"y_pred"``, ``"y"`` and optionally ``"ids"`` (``[B]`` integer query
    ids: a query seen twice with the same values, as DistributedSampler pads,
    counts once; an id repeated with different values is a ``ValueError``) and
    ``"categories"`` (``[B]`` integer labels: adds ``"{key}/{label}"`` results) and
    ``"confidence"`` (``[B]`` finite floats, higher = more confident: needed by the
    confidence keys ``"erc:<key>"``, ``"conf:<key>"``, ``"spearman:<key>"``,
    ``"kendall:<key>"``; their curves are in ``last_results.curves``). Any batch may
    also hold ``"mask"`` (``[B, N]`` bool, False for padded candidates) and, for top-k
    lists cut from a larger collection, ``"n_relevant"`` (``[B]`` int, each query's R)
    and ``"ideal"`` (``[B, m]``, its ideal gains): each row is then ranked once and
    evaluated as ``retrieval_core.evaluate_ranked`` (trec_eval's semantics; ``ties``
    not "expected"); they change the per-query values only. From TREC qrels:
    ``retrieval_core.trec.QrelsJudge`` (``judge(...).inputs(preds="y_pred", target="y")``
    is such a mapping; docs/ignite.md).

    Per-query values are computed in ``update`` by ``retrieval_core`` and kept
    (``[n, M]`` float64, tiny); ``compute`` gathers them from every process,
    drops repeated ids and aggregates. ``compact=True`` keeps only per-key sums
    and counts instead (``reduce="mean"`` only, no ids or categories).

    Args:
        metrics: keys such as ``["ndcg@10", "map@r", "mrr"]`` (see
            ``retrieval_core.known_metrics()``).
        ties: ``"stable"``: equal scores are ranked by lower column; ``"expected"``,
            ``"optimistic"``, ``"pessimistic"``: see docs/metrics.md, "Tie modes".
        empty: queries where a metric is undefined (no relevant candidate):
            ``"skip"``, ``"zero"``, ``"one"`` or ``"error"``.
        reduce: ``"mean"``, ``"median"``, ``"min"``, ``"max"`` or ``"none"``
            (per-query values as lists; NaN marks a skipped query).
        compact: keep sums and counts only (constant memory).
        ci, ci_method, n_resamples, seed: intervals of the results, as
            ``retrieval_core.evaluate_scores`` (in ``last_results.ci``; not with
            ``compact``). ``keep_per_query`` (default True, not with ``compact``):
            ``last_results.per_query`` holds the per-query values (ids: the
            ``"ids"`` given, else positions), for ``last_results.worst(key, n)``.
        output_transform, device, skip_unrolling: as every ignite ``Metric``;
            ``device`` is where the state is kept (and gathered: CPU for gloo).

    ``compute`` returns ``{key: float}``; attached to an engine, ignite also
    writes each key into ``engine.state.metrics``. ``last_results`` holds the
    core's ``MetricResults`` of the last ``compute`` (with ``n_queries`` and
    per-key ``n_empty``). ``NotComputableError`` when no query was seen.

    Example:
        >>> import torch
        >>> from ignite.engine import Engine
        >>> from ignite_retrieval import RankingMetrics
        >>> batches = [(torch.tensor([[0.9, 0.2, 0.5]]), torch.tensor([[1, 0, 0]])),
        ...            (torch.tensor([[0.1, 0.8, 0.3]]), torch.tensor([[0, 0, 1]]))]
        >>> evaluator = Engine(lambda engine, batch: batch)
        >>> RankingMetrics(["mrr@3", "hit_rate@1"]).attach(evaluator, "ranking")
        >>> metrics = evaluator.run(batches).metrics
        >>> metrics["mrr@3"], metrics["hit_rate@1"]
        (0.75, 0.5)
    """

    _required = ("y_pred", "y")
    _optional = ("ids", "categories", "confidence")
    _per_batch = ("mask", "n_relevant", "ideal")
    required_output_keys = _required
    _state_attributes = ("_values", "_ids", "_categories", "_confidence", "_sums", "_checks", "_n_rows", "_present")

    def __init__(
        self,
        metrics: Sequence[str],
        *,
        ties: str = "stable",
        empty: str = "skip",
        reduce: str = "mean",
        compact: bool = False,
        ci: Optional[float] = None,
        ci_method: str = "bootstrap",
        n_resamples: int = 1000,
        seed: int = 0,
        keep_per_query: bool = True,
        output_transform: Callable = _identity,
        device: Device = torch.device("cpu"),
        skip_unrolling: bool = False,
    ) -> None:
        keys, self._stats = ranking_options(metrics, ties=ties, empty=empty, reduce=reduce, compact=compact, ci=ci,
                                            ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                            keep_per_query=keep_per_query)
        self._keys = keys
        self.metric_keys: Tuple[str, ...] = tuple(m.key for m in keys)
        self._ties, self._empty, self._reduce, self._compact = ties, empty, reduce, bool(compact)
        self.last_results: Optional[MetricResults] = None
        super().__init__(output_transform=output_transform, device=device, skip_unrolling=skip_unrolling)

    def _agreed_options(self) -> Dict[str, Any]:
        return dict(super()._agreed_options(), metrics=self.metric_keys, ties=self._ties, empty=self._empty,
                    reduce=self._reduce, compact=self._compact, **self._stats)

    @reinit__is_reduced
    def reset(self) -> None:
        self._values: list = []
        self._ids: list = []
        self._categories: list = []
        self._confidence: list = []
        self._n_rows = 0
        self._present: Optional[Dict[str, bool]] = None
        self._checks = torch.zeros(3, dtype=torch.int64, device=self._device)  # summed value_flags
        self._sums = torch.zeros(3, len(self._keys), dtype=torch.float64, device=self._device)

    def _prepare(self, y_pred: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
        """Input preparation before the core (the drop-ins binarise or threshold ``y``)."""
        return y_pred, y

    @reinit__is_reduced
    def update(self, output: Any) -> None:
        fields = self._parse(output)
        y_pred, y = fields["y_pred"], fields["y"]
        with self._named_errors():
            n, ids, categories, confidence = check_score_rows(
                y_pred, y, ids=fields["ids"], categories=fields.get("categories"),
                confidence=fields.get("confidence"), compact=self._compact, mask=fields.get("mask"), names=_NAMES,
                dims="[batch, items]")
        self._check_present(fields)
        if n == 0:
            return
        y_pred, y = self._prepare(y_pred, y)
        with self._named_errors():
            values, flags = score_batch_values(y_pred, y, self._keys, ties=self._ties, mask=fields.get("mask"),
                                               n_relevant=fields.get("n_relevant"), ideal=fields.get("ideal"))
        self._checks += flags.to(self._device)
        self._n_rows += n
        if self._compact:
            self._sums += compact_sums(values).to(self._device)
            return
        self._values.append(values.to(self._device))
        if ids is not None:
            self._ids.append(ids.to(self._device))
        if categories is not None:
            self._categories.append(categories.to(self._device))
        if confidence is not None:
            self._confidence.append(confidence.to(self._device))

    def _results(self) -> MetricResults:
        """Gather every rank's state and aggregate (the same result on every rank)."""
        present, checks = self._agree(self._n_rows, self._checks)
        with self._named_errors():
            raise_value_flags(checks, _NAMES)
        if self._compact:
            self._warn_without_ids("use compact=False and add each query's dataset index to the output mapping "
                                   "as \"ids\".")
            return finalize_compact(self._sums, self.metric_keys, empty=self._empty)
        if not present["ids"]:
            self._warn_without_ids("add each query's dataset index to the output mapping as \"ids\".")
        values = self._cat(self._values, torch.float64, self._device)
        ids = self._cat(self._ids, torch.int64, self._device) if present["ids"] else None
        categories = self._cat(self._categories, torch.int64, self._device) if present.get("categories") else None
        confidence = self._cat(self._confidence, torch.float64, self._device) if present.get("confidence") else None
        return finalize_scores(values, self.metric_keys, ids=ids, categories=categories, confidence=confidence,
                               empty=self._empty, reduce=self._reduce, ties=self._ties, **self._stats)

    def compute(self) -> Dict[str, Any]:
        results = self._results()
        self.last_results = results
        return to_python(results)
