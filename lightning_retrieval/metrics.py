"""``RankingMetrics`` (scores) and ``EmbeddingMetrics`` (embeddings) as torchmetrics metrics.

Both hold states and sync them; every value and every input check comes from ``retrieval_core``.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import torch
from torch import Tensor

from retrieval_core.evaluation.accumulator import EmbeddingAccumulator, ScoreAccumulator

from ._base import CoreStateMetric
from retrieval_core import N_RESAMPLES

__all__ = ["RankingMetrics", "EmbeddingMetrics"]


class RankingMetrics(CoreStateMetric):
    """Ranking metrics of dense scores, as a ``torchmetrics.Metric``.

    Args:
        metrics: keys such as ``["ndcg@10", "map@r", "mrr"]`` (``retrieval_core.known_metrics()``).
        ties: ``"stable"``: equal scores ranked by lower column; ``"expected"``,
            ``"optimistic"``, ``"pessimistic"``: see docs/metrics.md, "Tie modes".
        empty: queries for which a metric is undefined (no relevant candidate):
            ``"skip"``, ``"zero"``, ``"one"`` or ``"error"``.
        reduce: ``"mean"``, ``"median"`` (average of the two middle values),
            ``"min"``, ``"max"`` or ``"none"`` (per-query values, in order of arrival,
            or of increasing id when ``ids`` are given).
        compact: keep only per-key sums and counts (``[3, M]`` floats) instead of
            per-query values: constant memory, ``reduce="mean"`` only, no ``ids`` nor
            ``categories``.
        ci, ci_method, n_resamples, seed: intervals (``compute().ci``), as
            ``retrieval_core.evaluate_scores``; not with ``compact``.
        keep_per_query: (default True, not with ``compact``) ``compute()`` also
            carries ``per_query`` (ids: the ``ids`` given, else positions).
        kwargs: torchmetrics' ``Metric`` arguments (``sync_on_compute``,
            ``process_group``, ``dist_sync_fn``, ``compute_on_cpu``...).

    ``update(preds, target, *, ids=None, categories=None, mask=None, confidence=None,
    n_relevant=None, ideal=None, exclude=None)`` takes
    ``preds[B, N]`` scores and ``target[B, N]`` gains (bool, or >= 0) of ``B`` queries;
    ``mask[B, N]`` marks real candidates. ``ids[B]`` (int) are query ids: a query
    seen twice with the same row (DistributedSampler padding) counts once; an id
    repeated with a different row is a ``ValueError``. ``categories[B]`` (int)
    add ``"{key}/{category}"`` results. ``confidence[B]`` (finite floats, higher =
    more confident) feeds the confidence keys (``"erc:<key>"``, ``"conf:<key>"``,
    ``"spearman:<key>"``, ``"kendall:<key>"``; curves in ``compute().curves``).
    ``exclude``: each query's seen items, removed from its ranking (neither relevant nor
    irrelevant, they take no rank: as ``mask`` False at them), as ``[2, E]`` (row of this
    batch, item column) integer pairs or a sparse ``[B, N]`` tensor (not with
    ``n_relevant``/``ideal``); it changes the per-query values only (a query repeated by
    padding must repeat its exclusions). The per-query values are computed in
    ``update``; the states are ``values [n, M]`` float64 (NaN = undefined), ``ids``
    and ``categories`` ("cat"), or ``sums [3, M]`` ("sum") with ``compact=True``,
    plus ``invalid [2]`` ("sum"): counts of NaN/inf scores and bad gains, checked in
    ``compute`` (no device sync per batch).

    ``n_relevant[B]`` (int) and ``ideal[B, m]``: each query's R and ideal gains in its whole
    collection, when ``preds`` scores only some candidates (a top-k list): the row is ranked
    once (``ties`` "stable", "optimistic" or "pessimistic") and evaluated as
    ``retrieval_core.evaluate_ranked`` (trec_eval's semantics). They only change the
    per-query values, so the states and their sync are the same.
    ``retrieval_core.trec.QrelsJudge`` makes them from TREC qrels (docs/trec.md, "In a
    validation loop"): ``m.update(**judge(query_ids, doc_ids, scores).inputs())`` with
    ``empty="zero"`` gives trec_eval's numbers.

    ``compute()`` returns a ``dict[str, Tensor]`` (0-d float64 tensors) ready for
    ``LightningModule.log_dict``; it is a ``retrieval_core.MetricResults`` with
    ``n_queries`` and ``n_empty``. ``forward(preds, target, ...)`` accumulates the
    batch and returns the same dict for that batch alone (torchmetrics' default).

    Example:
        >>> import torch
        >>> m = RankingMetrics(["mrr@3", "precision@1"])
        >>> m.update(torch.tensor([[0.9, 0.2, 0.5]]), torch.tensor([[1, 0, 0]]))
        >>> m.update(torch.tensor([[0.1, 0.8, 0.3]]), torch.tensor([[0, 0, 1]]))
        >>> {k: round(v.item(), 4) for k, v in m.compute().items()}
        {'mrr@3': 0.75, 'precision@1': 0.5}
        >>> m = RankingMetrics(["mrr@3"])  # row 0 of the batch has seen column 0: it takes no rank
        >>> m.update(torch.tensor([[0.9, 0.2, 0.5]]), torch.tensor([[0, 0, 1]]), exclude=torch.tensor([[0], [0]]))
        >>> m.compute()["mrr@3"].item()
        1.0
    """

    higher_is_better: Optional[bool] = None

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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.accumulator = ScoreAccumulator(metrics, ties=ties, empty=empty, reduce=reduce, compact=compact, ci=ci,
                                            ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                            keep_per_query=keep_per_query, name=type(self).__name__)
        self.keys, self.stats = self.accumulator.keys, self.accumulator.stats
        self.ties, self.empty, self.reduce, self.compact = ties, empty, reduce, compact
        # values, ids, categories, confidence ("cat") or sums ("sum", compact); invalid ("sum"): summed
        # value flags of the batches (NaN/inf scores, NaN/inf gains, negative gains)
        self._add_states(self.accumulator)

    def _agreed_options(self) -> Dict[str, Any]:
        return dict(super()._agreed_options(), **self.accumulator.agreed_options())

    def update(
        self,
        preds: Tensor,
        target: Tensor,
        *,
        ids: Optional[Tensor] = None,
        categories: Optional[Tensor] = None,
        mask: Optional[Tensor] = None,
        confidence: Optional[Tensor] = None,
        n_relevant: Optional[Tensor] = None,
        ideal: Optional[Tensor] = None,
        exclude=None,
    ) -> None:
        """Compute the batch's per-query values (structure checked here, values in ``compute``)."""
        self.accumulator.update(self._states(), preds, target, ids=ids, categories=categories, mask=mask,
                                confidence=confidence, n_relevant=n_relevant, ideal=ideal, exclude=exclude,
                                device=self.device)

    def compute(self):
        """``{key: value}`` over every query seen (on every rank, when synced)."""
        return self._counted(self.accumulator.compute(self._states(), **self._synced()))


class EmbeddingMetrics(CoreStateMetric):
    """Retrieval metrics of embeddings (exact k-NN), as a ``torchmetrics.Metric``.

    Args:
        metrics: per-query keys (``"cmc@1"``, ``"map@r"``, ``"ndcg@10"``...) and
            embedding-set keys (``"nmi"``, ``"ami"``, ``"pcf@0.5"``, ``"fnmr@0.1"``).
        distance, relevance, ties, empty, reduce, per_class, memory_budget, progress:
            as ``retrieval_core.evaluate_embeddings``.
        ci, ci_method, n_resamples, seed: intervals (``compute().ci``), as
            ``retrieval_core.evaluate_embeddings``.
        keep_per_query: (default True) ``compute()`` also carries ``per_query``
            (ids: the items' ``ids`` when given, else positions).
        kwargs: torchmetrics' ``Metric`` arguments.

    ``update(embeddings, labels, *, ids=None, is_query=None, is_gallery=None,
    categories=None, confidence=None, exclude=None)`` stores a batch: ``embeddings[B, D]``, ``labels[B]`` (int) or
    ``[B, C]`` multi-hot, ``ids[B]`` (int) sample ids (an item seen twice, e.g.
    DistributedSampler padding, counts once (an id repeated with a different row
    is a ``ValueError``); an item is never matched with one of
    the same id), ``is_query[B]``/``is_gallery[B]`` (bool; without them every item
    is both a query and a gallery item, and never retrieves itself),
    ``categories[B]`` (int) per query, ``confidence[B]`` (finite floats, higher = more
    confident; the queries' feed the confidence keys ``"erc:<key>"``...; curves in
    ``compute().curves``). ``exclude``: gallery items removed from the rankings of this
    batch's queries (a recommender's seen items; neither relevant nor irrelevant, they take
    no rank), as ``[2, E]`` (row of this batch, item id) integer pairs or a sparse
    ``[B, n]`` tensor whose columns are item ids: items are named by their ``ids`` (needed),
    so the pairs follow their items across batches and ranks (kept as (query id, item id)
    states); each must name a query and a gallery item (checked in ``compute``), and a pair
    given twice counts once. States are "cat" lists of those tensors.
    Shapes and dtypes are checked in ``update`` (``retrieval_core.validate``, as
    everywhere), including that every batch has the embedding dimension and label
    form (1-D classes, or multi-hot with the same classes) of the earlier ones.

    ``compute()`` evaluates once over everything seen (every rank when synced) and
    returns a ``dict[str, Tensor]`` for ``log_dict``; with no data it gives NaN for
    each key. When synced, the ranks divide the work: each evaluates a share of
    the queries against the whole gallery and the per-query values are gathered
    (the same result on every rank as one process's).

    ``forward(...)`` only accumulates (as ``update``) and returns an empty dict (so
    a ``MetricCollection``'s forward still gives a dict for ``log_dict``): retrieval
    within one batch (the batch as its own gallery) is not the metric, and a
    cutoff larger than the batch would fail. Call ``compute()`` at epoch end.
    """

    higher_is_better: Optional[bool] = None

    def __init__(
        self,
        metrics: Sequence[str],
        *,
        distance="cosine",
        relevance=None,
        ties: str = "stable",
        empty: str = "skip",
        reduce: str = "mean",
        per_class: Optional[str] = None,
        memory_budget: Optional[int] = None,
        progress: bool = False,
        ci: Optional[float] = None,
        ci_method: str = "bootstrap",
        n_resamples: int = N_RESAMPLES,
        seed: int = 0,
        keep_per_query: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.accumulator = EmbeddingAccumulator(
            metrics, distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce,
            per_class=per_class, memory_budget=memory_budget, progress=progress, ci=ci, ci_method=ci_method,
            n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query, name=type(self).__name__)
        self.keys, self.options = self.accumulator.keys, self.accumulator.options
        self._add_states(self.accumulator)

    def _agreed_options(self) -> Dict[str, Any]:
        return dict(super()._agreed_options(), **self.accumulator.agreed_options())

    def update(
        self,
        embeddings: Tensor,
        labels: Tensor,
        *,
        ids: Optional[Tensor] = None,
        is_query: Optional[Tensor] = None,
        is_gallery: Optional[Tensor] = None,
        categories: Optional[Tensor] = None,
        confidence: Optional[Tensor] = None,
        exclude=None,
    ) -> None:
        """Store one batch (detached). Shapes and dtypes are checked here, values in ``compute``.

        Example:
            >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
            >>> m = EmbeddingMetrics(["cmc@1"], reduce="none")
            >>> m.update(x, torch.tensor([0, 1, 0, 1]), ids=torch.tensor([10, 11, 12, 13]),
            ...          exclude=torch.tensor([[0, 0], [11, 13]]))  # item 10 has seen items 11 and 13
            >>> m.compute()["cmc@1"].tolist()
            [1.0, 0.0, 0.0, 0.0]
        """
        self.accumulator.update(self._states(), embeddings, labels, ids=ids, is_query=is_query,
                                is_gallery=is_gallery, categories=categories, confidence=confidence, exclude=exclude,
                                device=self.device)

    def forward(self, *args: Any, **kwargs: Any) -> dict:
        """Accumulate the batch (as ``update``); returns an empty dict (see the class docs)."""
        self.update(*args, **kwargs)
        return {}

    def compute(self):
        """``{key: value}`` over every item seen (on every rank, when synced)."""
        if self.accumulator.rows(self._states()) == 0:
            return {k: torch.tensor(float("nan"), dtype=torch.float64, device=self.device) for k in self.keys}
        # synced: every rank holds every rank's state, and the ranks divide the evaluation
        synced = self._is_synced
        return self._counted(self.accumulator.compute(self._states(), split=synced, processes=self.synced_processes,
                                                      group=getattr(self, "synced_group", None) if synced else None))
