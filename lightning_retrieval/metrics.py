"""``RankingMetrics`` (scores) and ``EmbeddingMetrics`` (embeddings) as torchmetrics metrics.

Both hold states and sync them; every value and every input check comes from ``retrieval_core``.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import torch
from torch import Tensor

from retrieval_core.evaluation.adapter_steps import (
    agreed_embedding_options,
    check_embedding_batch,
    check_score_rows,
    embedding_options,
    ranking_options,
    score_batch_values,
)
from retrieval_core.evaluation.steps import compact_sums, finalize_compact, finalize_embeddings, finalize_scores
from retrieval_core.validate import as_tensors, raise_value_flags

from ._base import CoreStateMetric

__all__ = ["RankingMetrics", "EmbeddingMetrics"]


def _same_rows(values_rows: int, **optional: Optional[Tensor]) -> None:
    for name, t in optional.items():
        if t is not None and t.shape[0] != values_rows:
            raise ValueError(
                f"{name} were given for {t.shape[0]} of {values_rows} rows: pass {name} with every update "
                "(on every rank) or with none"
            )


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
    n_relevant=None, ideal=None)`` takes
    ``preds[B, N]`` scores and ``target[B, N]`` gains (bool, or >= 0) of ``B`` queries;
    ``mask[B, N]`` marks real candidates. ``ids[B]`` (int) are query ids: a query
    seen twice with the same row (DistributedSampler padding) counts once; an id
    repeated with a different row is a ``ValueError``. ``categories[B]`` (int)
    add ``"{key}/{category}"`` results. ``confidence[B]`` (finite floats, higher =
    more confident) feeds the confidence keys (``"erc:<key>"``, ``"conf:<key>"``,
    ``"spearman:<key>"``, ``"kendall:<key>"``; curves in ``compute().curves``).
    The per-query values are computed in
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
        n_resamples: int = 1000,
        seed: int = 0,
        keep_per_query: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        parsed, self.stats = ranking_options(metrics, ties=ties, empty=empty, reduce=reduce, compact=compact, ci=ci,
                                             ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                             keep_per_query=keep_per_query)
        self._parsed = parsed
        self.keys = tuple(m.key for m in parsed)
        self.ties, self.empty, self.reduce, self.compact = ties, empty, reduce, compact
        if compact:
            self.add_state("sums", default=torch.zeros(3, len(self.keys), dtype=torch.float64), dist_reduce_fx="sum")
        else:
            self.add_state("values", default=[], dist_reduce_fx="cat")
            self.add_state("ids", default=[], dist_reduce_fx="cat")
            self.add_state("categories", default=[], dist_reduce_fx="cat")
            self.add_state("confidence", default=[], dist_reduce_fx="cat")
        # summed value_flags of the batches: NaN/inf scores, NaN/inf gains, negative gains
        self.add_state("invalid", default=torch.zeros(3, dtype=torch.int64), dist_reduce_fx="sum")

    def _agreed_options(self) -> Dict[str, Any]:
        return dict(super()._agreed_options(), metrics=self.keys, ties=self.ties, empty=self.empty,
                    reduce=self.reduce, compact=self.compact, **self.stats)

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
    ) -> None:
        """Compute the batch's per-query values (structure checked here, values in ``compute``)."""
        preds, target, ids, categories, mask, confidence, n_relevant, ideal = as_tensors(
            device=self.device, preds=preds, target=target, ids=ids, categories=categories, mask=mask,
            confidence=confidence, n_relevant=n_relevant, ideal=ideal)
        rows = check_score_rows(preds, target, ids=ids, categories=categories, confidence=confidence,
                                compact=self.compact, mask=mask)
        ids, categories, confidence = (None if t is None else t.to(preds.device)
                                       for t in (rows.ids, rows.categories, rows.confidence))
        values, flags = score_batch_values(preds, target, self._parsed, mask=mask, ties=self.ties,
                                           n_relevant=n_relevant, ideal=ideal)
        if self.compact:
            self.sums += compact_sums(values)
        else:
            self.values.append(values)
            if ids is not None:
                self.ids.append(ids)
            if categories is not None:
                self.categories.append(categories)
            if confidence is not None:
                self.confidence.append(confidence)
        self.invalid += flags.to(self.invalid.device)

    def compute(self):
        """``{key: value}`` over every query seen (on every rank, when synced)."""
        raise_value_flags(self.invalid)
        if self.compact:
            self._warn_without_ids("use compact=False and pass each query's dataset index as ids= to update.")
            return self._counted(finalize_compact(self.sums, self.keys, empty=self.empty, gather=False))
        values = self._state("values")
        if values is None:
            values = torch.empty(0, len(self.keys), dtype=torch.float64, device=self.device)
        ids, categories, confidence = self._state("ids"), self._state("categories"), self._state("confidence")
        _same_rows(values.shape[0], ids=ids, categories=categories, confidence=confidence)
        if ids is None:
            self._warn_without_ids("pass each query's dataset index as ids= to update.")
        return self._counted(finalize_scores(values, self.keys, ids=ids, categories=categories, gather=False,
                                             confidence=confidence, empty=self.empty, reduce=self.reduce,
                                             ties=self.ties, processes=self.synced_processes, **self.stats))


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
    categories=None, confidence=None)`` stores a batch: ``embeddings[B, D]``, ``labels[B]`` (int) or
    ``[B, C]`` multi-hot, ``ids[B]`` (int) sample ids (an item seen twice, e.g.
    DistributedSampler padding, counts once (an id repeated with a different row
    is a ``ValueError``); an item is never matched with one of
    the same id), ``is_query[B]``/``is_gallery[B]`` (bool; without them every item
    is both a query and a gallery item, and never retrieves itself),
    ``categories[B]`` (int) per query, ``confidence[B]`` (finite floats, higher = more
    confident; the queries' feed the confidence keys ``"erc:<key>"``...; curves in
    ``compute().curves``). States are "cat" lists of those tensors.
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
        n_resamples: int = 1000,
        seed: int = 0,
        keep_per_query: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        parsed, self.options = embedding_options(
            metrics, distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce,
            per_class=per_class, memory_budget=memory_budget, progress=progress, ci=ci, ci_method=ci_method,
            n_resamples=n_resamples, seed=seed, keep_per_query=keep_per_query)
        self.keys = tuple(m.key for m in parsed)
        for name in ("embeddings", "labels", "ids", "is_query", "is_gallery", "categories", "confidence"):
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def _agreed_options(self) -> Dict[str, Any]:
        return dict(super()._agreed_options(), metrics=self.keys, **agreed_embedding_options(self.options))

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
    ) -> None:
        """Store one batch (detached). Shapes and dtypes are checked here, values in ``compute``."""
        embeddings, labels, ids, is_query, is_gallery, categories, confidence = as_tensors(
            device=self.device, embeddings=embeddings, labels=labels, ids=ids, is_query=is_query,
            is_gallery=is_gallery, categories=categories, confidence=confidence)
        earlier_embeddings, earlier_labels = self._last_batch("embeddings"), self._last_batch("labels")
        embeddings, labels, rows = check_embedding_batch(
            embeddings, labels, dict(ids=ids, is_query=is_query, is_gallery=is_gallery, categories=categories,
                                     confidence=confidence),
            distance=self.options["distance"], relevance=self.options["relevance"],
            dim=None if earlier_embeddings is None else earlier_embeddings.shape[1],
            label_shape=None if earlier_labels is None else tuple(earlier_labels.shape[1:]))
        self.embeddings.append(embeddings.detach())
        self.labels.append(labels.detach())
        for name, value in rows.items():
            getattr(self, name).append(value.detach().to(embeddings.device))

    def _last_batch(self, name: str) -> Optional[Tensor]:
        """The last stored batch of a "cat" state (all of it once merged into one tensor), None before any."""
        value = getattr(self, name)
        if isinstance(value, Tensor):
            return value if value.numel() or value.ndim > 1 else None
        return value[-1] if value else None

    def forward(self, *args: Any, **kwargs: Any) -> dict:
        """Accumulate the batch (as ``update``); returns an empty dict (see the class docs)."""
        self.update(*args, **kwargs)
        return {}

    def compute(self):
        """``{key: value}`` over every item seen (on every rank, when synced)."""
        embeddings = self._state("embeddings")
        if embeddings is None or embeddings.shape[0] == 0:
            return {k: torch.tensor(float("nan"), dtype=torch.float64, device=self.device) for k in self.keys}
        optional = {name: self._state(name) for name in ("ids", "is_query", "is_gallery", "categories", "confidence")}
        labels = self._state("labels")
        _same_rows(embeddings.shape[0], labels=labels, **optional)
        if optional["ids"] is None:
            self._warn_without_ids("pass each item's dataset index as ids= to update.")
        # synced: every rank holds every rank's state, and the ranks divide the evaluation
        synced = self._is_synced
        return self._counted(finalize_embeddings(embeddings, labels, self.keys, gather=False, split=synced,
                                                 processes=self.synced_processes,
                                                 group=getattr(self, "synced_group", None) if synced else None,
                                                 **optional, **self.options))
