"""``RankingMetrics``: ranking metrics of dense scores ``[B, N]`` as one ignite Metric."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from retrieval_core import MetricResults
from retrieval_core.evaluation.accumulator import ScoreAccumulator

from ._base import Device, RetrievalMetric, _identity, to_python
from retrieval_core import N_RESAMPLES

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
    not "expected"); they change the per-query values only. ``"exclude"``: each
    query's seen items, removed from its ranking (neither relevant nor irrelevant,
    they take no rank: as ``"mask"`` False at them), as ``[2, E]`` (row of this batch,
    item column) integer pairs or a sparse ``[B, N]`` tensor (not with ``"n_relevant"``
    / ``"ideal"``); a query repeated by padding must repeat its exclusions. From TREC qrels:
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

        Seen items excluded (``"exclude"``: row 0 of the batch has seen column 0):

        >>> metric = RankingMetrics(["mrr@3"])
        >>> metric.update({"y_pred": torch.tensor([[0.9, 0.2, 0.5]]), "y": torch.tensor([[0, 0, 1]]),
        ...                "exclude": torch.tensor([[0], [0]])})
        >>> metric.compute()
        {'mrr@3': 1.0}
    """

    _required = ("y_pred", "y")
    _optional = ("ids", "categories", "confidence")
    _per_batch = ("mask", "n_relevant", "ideal", "exclude")
    required_output_keys = _required

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
        n_resamples: int = N_RESAMPLES,
        seed: int = 0,
        keep_per_query: bool = True,
        output_transform: Callable = _identity,
        device: Device = torch.device("cpu"),
        skip_unrolling: bool = False,
    ) -> None:
        accumulator = ScoreAccumulator(
            metrics, ties=ties, empty=empty, reduce=reduce, compact=compact, ci=ci, ci_method=ci_method,
            n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query, names=_NAMES, dims="[batch, items]",
            numpy=self._takes_numpy, name=type(self).__name__, device=device, strict_inputs=True,
            ids_hint='add each {unit}\'s dataset index to the output mapping as "ids".')
        self.metric_keys: Tuple[str, ...] = accumulator.keys
        self._empty = empty
        self.last_results: Optional[MetricResults] = None
        super().__init__(accumulator, output_transform=output_transform, device=device, skip_unrolling=skip_unrolling)

    # NumPy arrays in the output become tensors; the drop-ins of ignite's own metrics keep ignite's refusal
    _takes_numpy = True

    def _prepare(self, y_pred: Tensor, y: Tensor) -> Tuple[Tensor, Tensor]:
        """Input preparation before the core (the drop-ins binarise or threshold ``y``)."""
        return y_pred, y

    def _update_options(self) -> Dict[str, Any]:
        return {"prepare": self._prepare}

    def _results(self) -> MetricResults:
        """Gather every rank's state and aggregate (the same result on every rank)."""
        synced = self._sync()
        with self._named_errors():
            self.accumulator.check_values(synced.state)
        return self.accumulator.compute(synced.state, processes=synced.processes, checked=True)

    def compute(self) -> Dict[str, Any]:
        results = self._results()
        self.last_results = results
        return to_python(results)
