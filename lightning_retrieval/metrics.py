"""``RankingMetrics`` (scores) and ``EmbeddingMetrics`` (embeddings) as torchmetrics metrics.

Both hold states and sync them; every value comes from ``retrieval_core``.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from torch import Tensor

from retrieval_core import search
from retrieval_core.evaluate import score_values
from retrieval_core.registry import parse_metrics, split_scopes
from retrieval_core.steps import compact_sums
from retrieval_core.validate import EMPTY, REDUCE, check_categories, check_choice, check_tensor, check_ties

from retrieval_core.steps import finalize_compact, finalize_embeddings, finalize_scores

from ._base import CoreStateMetric

__all__ = ["RankingMetrics", "EmbeddingMetrics"]

_PER_CLASS = (None, "macro", "all")


def _check_rows(name: str, t, n: int, *, kind: str) -> Tensor:
    """A 1-D tensor with one entry per row; ``kind`` "int" or "bool"."""
    check_tensor(name, t)
    if t.ndim != 1 or t.shape[0] != n:
        raise ValueError(f"{name} must be 1-D with one entry per row ({n}); got shape {tuple(t.shape)}")
    if kind == "int" and (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool):
        raise TypeError(f"{name} must be an integer tensor; got {t.dtype}")
    if kind == "bool" and t.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool tensor; got {t.dtype}")
    return t


def _invalid_counts(preds: Tensor, target: Tensor) -> Tensor:
    """``[2]`` int64: non-finite scores, and NaN/inf/negative gains. No device sync:
    the counts are summed as a state and looked at once, in ``compute``."""
    bad_preds = (~torch.isfinite(preds)).sum() if preds.is_floating_point() else preds.new_zeros((), dtype=torch.int64)
    if target.dtype == torch.bool:
        bad_target = torch.zeros((), dtype=torch.int64, device=target.device)
    elif target.is_floating_point():
        bad_target = (~torch.isfinite(target) | (target < 0)).sum()
    else:
        bad_target = (target < 0).sum()
    return torch.stack([bad_preds.to(torch.int64), bad_target.to(torch.int64)])


def _raise_invalid(counts: Tensor) -> None:
    bad_preds, bad_target = counts.tolist()
    if bad_preds:
        raise ValueError(f"preds contain NaN or inf ({bad_preds} entries); scores must be finite")
    if bad_target:
        raise ValueError(f"target contains NaN, inf or negative gains ({bad_target} entries); gains must be finite and >= 0")


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
        ties: ``"stable"``: equal scores ranked by lower column.
        empty: queries for which a metric is undefined (no relevant candidate):
            ``"skip"``, ``"zero"``, ``"one"`` or ``"error"``.
        reduce: ``"mean"``, ``"median"`` (average of the two middle values),
            ``"min"``, ``"max"`` or ``"none"`` (per-query values, in order of arrival,
            or of increasing id when ``ids`` are given).
        compact: keep only per-key sums and counts (``[3, M]`` floats) instead of
            per-query values: constant memory, ``reduce="mean"`` only, no ``ids`` nor
            ``categories``.
        kwargs: torchmetrics' ``Metric`` arguments (``sync_on_compute``,
            ``process_group``, ``dist_sync_fn``, ``compute_on_cpu``...).

    ``update(preds, target, *, ids=None, categories=None, mask=None)`` takes
    ``preds[B, N]`` scores and ``target[B, N]`` gains (bool, or >= 0) of ``B`` queries;
    ``mask[B, N]`` marks real candidates. ``ids[B]`` (int) are query ids: a query
    seen twice (DistributedSampler padding) counts once. ``categories[B]`` (int)
    add ``"{key}/{category}"`` results. The per-query values are computed in
    ``update``; the states are ``values [n, M]`` float64 (NaN = undefined), ``ids``
    and ``categories`` ("cat"), or ``sums [3, M]`` ("sum") with ``compact=True``,
    plus ``invalid [2]`` ("sum"): counts of NaN/inf scores and bad gains, checked in
    ``compute`` (no device sync per batch).

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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_ties(ties)
        check_choice("empty", empty, EMPTY)
        check_choice("reduce", reduce, REDUCE)
        parsed = parse_metrics(metrics)
        _, set_level = split_scopes(parsed)
        if set_level:
            raise ValueError(
                f"{', '.join(m.key for m in set_level)}: embedding-set metrics need embeddings; use EmbeddingMetrics"
            )
        if not isinstance(compact, bool):
            raise TypeError(f"compact must be a bool; got {compact!r}")
        if compact and reduce != "mean":
            raise ValueError(f"compact=True keeps only sums and counts, so reduce must be 'mean'; got {reduce!r}")
        self._parsed = parsed
        self.keys = tuple(m.key for m in parsed)
        self.ties, self.empty, self.reduce, self.compact = ties, empty, reduce, compact
        if compact:
            self.add_state("sums", default=torch.zeros(3, len(self.keys), dtype=torch.float64), dist_reduce_fx="sum")
        else:
            self.add_state("values", default=[], dist_reduce_fx="cat")
            self.add_state("ids", default=[], dist_reduce_fx="cat")
            self.add_state("categories", default=[], dist_reduce_fx="cat")
        self.add_state("invalid", default=torch.zeros(2, dtype=torch.int64), dist_reduce_fx="sum")

    def update(
        self,
        preds: Tensor,
        target: Tensor,
        *,
        ids: Optional[Tensor] = None,
        categories: Optional[Tensor] = None,
        mask: Optional[Tensor] = None,
    ) -> None:
        """Compute the batch's per-query values (structure checked here, values in ``compute``)."""
        values = score_values(preds, target, self._parsed, mask=mask, ties=self.ties).values
        n = preds.shape[0]
        if self.compact:
            if ids is not None or categories is not None:
                raise ValueError("compact=True keeps only sums: ids (de-duplication) and categories need compact=False")
            self.sums += compact_sums(values)
        else:
            if ids is not None:
                ids = _check_rows("ids", ids, n, kind="int").to(device=values.device, dtype=torch.int64)
            if categories is not None:
                if not isinstance(categories, Tensor):
                    raise TypeError(
                        "categories must be an integer tensor here (states are tensors that every rank can sync); "
                        f"got {type(categories).__name__}"
                    )
                check_categories(categories, n, "query (row)")
                categories = categories.to(device=values.device, dtype=torch.int64)
            self.values.append(values)
            if ids is not None:
                self.ids.append(ids)
            if categories is not None:
                self.categories.append(categories)
        self.invalid += _invalid_counts(preds, target).to(self.invalid.device)

    def compute(self):
        """``{key: value}`` over every query seen (on every rank, when synced)."""
        _raise_invalid(self.invalid)
        if self.compact:
            return self._counted(finalize_compact(self.sums, self.keys, empty=self.empty, gather=False))
        values = self._state("values")
        if values is None:
            values = torch.empty(0, len(self.keys), dtype=torch.float64, device=self.device)
        ids, categories = self._state("ids"), self._state("categories")
        _same_rows(values.shape[0], ids=ids, categories=categories)
        return self._counted(finalize_scores(values, self.keys, ids=ids, categories=categories, gather=False,
                                                   empty=self.empty, reduce=self.reduce))


class EmbeddingMetrics(CoreStateMetric):
    """Retrieval metrics of embeddings (exact k-NN), as a ``torchmetrics.Metric``.

    Args:
        metrics: per-query keys (``"cmc@1"``, ``"map@r"``, ``"ndcg@10"``...) and
            embedding-set keys (``"nmi"``, ``"ami"``, ``"pcf@0.5"``, ``"fnmr@0.1"``).
        distance, relevance, ties, empty, reduce, per_class, memory_budget, progress:
            as ``retrieval_core.evaluate_embeddings``.
        kwargs: torchmetrics' ``Metric`` arguments.

    ``update(embeddings, labels, *, ids=None, is_query=None, is_gallery=None,
    categories=None)`` stores a batch: ``embeddings[B, D]``, ``labels[B]`` (int) or
    ``[B, C]`` multi-hot, ``ids[B]`` (int) sample ids (an item seen twice, e.g.
    DistributedSampler padding, counts once; an item is never matched with one of
    the same id), ``is_query[B]``/``is_gallery[B]`` (bool; without them every item
    is both a query and a gallery item, and never retrieves itself),
    ``categories[B]`` (int) per query. States are "cat" lists of those tensors.

    ``compute()`` evaluates once over everything seen (every rank when synced) and
    returns a ``dict[str, Tensor]`` for ``log_dict``; with no data it gives NaN for
    each key.

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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_ties(ties)
        check_choice("empty", empty, EMPTY)
        check_choice("reduce", reduce, REDUCE)
        if per_class not in _PER_CLASS:
            raise ValueError(f"per_class must be None, 'macro' or 'all'; got {per_class!r}")
        if not callable(distance) and distance not in search.DISTANCES:
            raise ValueError(
                f"distance must be one of {', '.join(map(repr, search.DISTANCES))} or a callable; got {distance!r}"
            )
        if relevance is not None and not callable(relevance):
            raise TypeError(f"relevance must be a callable f(query_labels, gallery_labels) -> gains; got {relevance!r}")
        if memory_budget is not None and (isinstance(memory_budget, bool) or not isinstance(memory_budget, int)
                                          or memory_budget <= 0):
            raise ValueError(f"memory_budget must be a positive number of bytes; got {memory_budget!r}")
        self.keys = tuple(m.key for m in parse_metrics(metrics))
        self.options = dict(distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce,
                            per_class=per_class, memory_budget=memory_budget, progress=progress)
        for name in ("embeddings", "labels", "ids", "is_query", "is_gallery", "categories"):
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(
        self,
        embeddings: Tensor,
        labels: Tensor,
        *,
        ids: Optional[Tensor] = None,
        is_query: Optional[Tensor] = None,
        is_gallery: Optional[Tensor] = None,
        categories: Optional[Tensor] = None,
    ) -> None:
        """Store one batch (detached). Shapes and dtypes are checked here, values in ``compute``."""
        check_tensor("embeddings", embeddings)
        if embeddings.ndim != 2:
            raise ValueError(f"embeddings must be 2-D [batch, dim]; got shape {tuple(embeddings.shape)}")
        n = embeddings.shape[0]
        check_tensor("labels", labels)
        if labels.ndim == 0 or labels.shape[0] != n:
            raise ValueError(f"labels must have one entry per embedding; got shape {tuple(labels.shape)} for {n} embeddings")
        self.embeddings.append(embeddings.detach())
        self.labels.append(labels.detach())
        if ids is not None:
            self.ids.append(_check_rows("ids", ids, n, kind="int").detach().to(torch.int64))
        if is_query is not None:
            self.is_query.append(_check_rows("is_query", is_query, n, kind="bool").detach())
        if is_gallery is not None:
            self.is_gallery.append(_check_rows("is_gallery", is_gallery, n, kind="bool").detach())
        if categories is not None:
            check_tensor("categories", categories)
            check_categories(categories, n, "embedding")
            self.categories.append(categories.detach().to(torch.int64))

    def forward(self, *args: Any, **kwargs: Any) -> dict:
        """Accumulate the batch (as ``update``); returns an empty dict (see the class docs)."""
        self.update(*args, **kwargs)
        return {}

    def compute(self):
        """``{key: value}`` over every item seen (on every rank, when synced)."""
        embeddings = self._state("embeddings")
        if embeddings is None or embeddings.shape[0] == 0:
            return {k: torch.tensor(float("nan"), dtype=torch.float64, device=self.device) for k in self.keys}
        optional = {name: self._state(name) for name in ("ids", "is_query", "is_gallery", "categories")}
        labels = self._state("labels")
        _same_rows(embeddings.shape[0], labels=labels, **optional)
        return self._counted(finalize_embeddings(embeddings, labels, self.keys, gather=False, **optional, **self.options))
