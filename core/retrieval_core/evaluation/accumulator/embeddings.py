"""Accumulating embeddings and labels: rows kept at update, evaluated once at compute.

The state is "cat" lists of ``embeddings``, ``labels`` and the optional ``ids``,
``is_query``, ``is_gallery``, ``categories`` and ``confidence`` of each batch, and the
excluded (query id, item id) pairs of the batches that gave ``exclude``
(``exclude_queries``, ``exclude_items``). With several ranks holding the gathered state,
each evaluates a share of the queries (:func:`finalize_embeddings`).

Example:
    >>> import torch
    >>> acc = EmbeddingAccumulator(["cmc@1"])
    >>> state = acc.new_state()
    >>> acc.update(state, torch.tensor([[1.0, 0.0], [0.9, 0.1]]), torch.tensor([0, 0]))
    2
    >>> acc.update(state, torch.tensor([[0.0, 1.0], [0.1, 0.9]]), torch.tensor([1, 1]))
    2
    >>> acc.compute(state)["cmc@1"].item()
    1.0
"""
from __future__ import annotations

from functools import partial
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ...distributed.collectives import world_size
from ...distributed.duplicates import drop_duplicates
from ...distributed.evaluation import evaluate_split
from ...metrics.keys import parse_metrics
from ...stats.aggregate import MetricResults
from ...inputs.pairs import batch_exclusions, excluded_positions
from ...validate import (
    as_tensors, check_batch_like_earlier, check_confidence, check_embedding_options, check_embeddings, check_labels,
    check_rows, check_stats_options,
)
from ..embeddings import evaluate_embeddings
from .state import Accumulator, same_rows
from ...validate.stats import N_RESAMPLES

__all__ = ["EmbeddingAccumulator", "EMBEDDING_ROWS", "check_embedding_batch", "finalize_embeddings"]

# the optional per-item rows of an embedding batch, with the kind of their values
EMBEDDING_ROWS: Tuple[Tuple[str, str], ...] = (("ids", "int"), ("is_query", "flag"), ("is_gallery", "flag"),
                                               ("categories", "int"))


class EmbeddingAccumulator(Accumulator):
    """Retrieval metrics of embeddings over batches (``EmbeddingMetrics`` of both adapters).

    Options as :func:`~retrieval_core.evaluate_embeddings` (``self.options`` holds its
    keywords); ``numpy``: NumPy arrays in a batch become tensors; the other keywords
    are :class:`~retrieval_core.evaluation.accumulator.state.Accumulator`'s.
    """

    cat_states = (("embeddings", torch.float32), ("labels", torch.int64), ("ids", torch.int64),
                  ("is_query", torch.bool), ("is_gallery", torch.bool), ("categories", torch.int64),
                  ("confidence", torch.float64), ("exclude_queries", torch.int64), ("exclude_items", torch.int64))
    optional = ("ids", "is_query", "is_gallery", "categories", "confidence")
    unit = "item"

    def __init__(self, metrics, *, distance="cosine", relevance=None, ties: str = "stable", empty: str = "skip",
                 reduce: str = "mean", per_class: Optional[str] = None, memory_budget: Optional[int] = None,
                 progress: bool = False, ci: Optional[float] = None, ci_method: str = "bootstrap",
                 n_resamples: int = N_RESAMPLES, seed: int = 0, keep_per_query: bool = True, numpy: bool = True,
                 **kwargs: Any) -> None:
        self.parsed = parse_metrics(metrics)
        check_embedding_options(distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce,
                                per_class=per_class, memory_budget=memory_budget, keys=self.parsed)
        stats = check_stats_options(self.parsed, ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                    keep_per_query=keep_per_query, reduce=reduce, per_class=per_class)
        self.options: Dict[str, Any] = dict(distance=distance, relevance=relevance, ties=ties, empty=empty,
                                            reduce=reduce, per_class=per_class, memory_budget=memory_budget,
                                            progress=progress, **stats)
        self.keys: Tuple[str, ...] = tuple(m.key for m in self.parsed)
        self.numpy = numpy
        super().__init__(**kwargs)

    def agreed_options(self) -> Dict[str, Any]:
        """All options but ``progress`` (which only decides who prints)."""
        return dict(metrics=self.keys, **{k: v for k, v in self.options.items() if k != "progress"})

    def update(self, state, embeddings, labels, *, ids=None, is_query=None, is_gallery=None, categories=None,
               confidence=None, exclude=None, device=None) -> int:
        """Check one batch once (shapes and dtypes, and its dimension and label form
        against the earlier batches) and append it; the number of items. ``exclude``: gallery
        items removed from the rankings of this batch's queries (:func:`batch_exclusions`:
        ``[2, E]`` (row of this batch, item id) pairs or a sparse ``[B, n]`` tensor whose
        columns are item ids; needs ``ids``); any batch may give it or not."""
        rows = dict(ids=ids, is_query=is_query, is_gallery=is_gallery, categories=categories, confidence=confidence)
        if self.numpy:
            embeddings, labels, exclude, *given = as_tensors(device=device, embeddings=embeddings, labels=labels,
                                                             exclude=exclude, **rows)
            rows = dict(zip(rows, given))
        earlier_embeddings, earlier_labels = self._last_batch(state, "embeddings"), self._last_batch(state, "labels")
        embeddings, labels, checked = check_embedding_batch(
            embeddings, labels, rows, distance=self.options["distance"], relevance=self.options["relevance"],
            dim=None if earlier_embeddings is None else earlier_embeddings.shape[1],
            label_shape=None if earlier_labels is None else tuple(earlier_labels.shape[1:]))
        excluded = batch_exclusions(exclude, checked.get("ids"), n=embeddings.shape[0])
        self._check_given(state, {k: rows[k] is not None for k in self.optional})
        n = embeddings.shape[0]
        if n == 0:
            return 0
        self._append(state, self.device or embeddings.device, {"embeddings": embeddings, "labels": labels, **checked,
                                                               **excluded})
        return n

    @staticmethod
    def _last_batch(state, name: str) -> Optional[Tensor]:
        """The last stored batch of a "cat" entry (all of it once merged into one tensor), None before any."""
        value = state[name]
        if isinstance(value, Tensor):
            return value if value.numel() or value.ndim > 1 else None
        return value[-1] if value else None

    def compute(self, state, *, processes: int = 1, group=None, split: bool = False) -> MetricResults:
        """The results of a state holding every rank's rows (``processes`` of them); with
        ``split`` (every rank of ``group`` holds the same state) the ranks divide the work."""
        embeddings, labels = self.cat(state["embeddings"]), self.cat(state["labels"])
        optional = {name: self.cat(state[name]) for name in self.optional}
        same_rows(embeddings.shape[0], labels=labels, **optional)
        if optional["ids"] is None:
            self.warn_without_ids(processes, group)
        excluded = [self.cat(state[name]) for name in ("exclude_queries", "exclude_items")]
        return finalize_embeddings(embeddings, labels, self.keys, split=split, processes=processes, group=group,
                                   exclude_ids=None if excluded[0] is None else tuple(excluded), **optional,
                                   **self.options)


def check_embedding_batch(embeddings: Tensor, labels: Tensor, rows: Dict[str, Optional[Tensor]], *, distance,
                          relevance, dim: Optional[int], label_shape: Optional[tuple]
                          ) -> Tuple[Tensor, Tensor, Dict[str, Tensor]]:
    """``(embeddings, labels, {name: row})`` of one checked embedding batch: ``rows`` holds
    the optional :data:`EMBEDDING_ROWS` and ``confidence`` (None: not given); ``dim`` and
    ``label_shape`` are those of the earlier batches (None before any)."""
    embeddings = check_embeddings("embeddings", embeddings, distance, batch=True)
    n = embeddings.shape[0]
    labels = check_labels("labels", labels, n, custom=relevance is not None)
    check_batch_like_earlier(embeddings, labels, dim, label_shape)
    checked = {name: check_rows(name, rows[name], n, kind=kind, lists=True)
               for name, kind in EMBEDDING_ROWS if rows.get(name) is not None}
    if rows.get("confidence") is not None:  # values (finite) are read once, at compute
        checked["confidence"] = check_confidence(rows["confidence"], n, values=False, lists=True)
    return embeddings, labels, checked


def finalize_embeddings(embeddings: Tensor, labels: Tensor, metrics: Sequence[str], *, ids: Optional[Tensor] = None,
                        is_query: Optional[Tensor] = None, is_gallery: Optional[Tensor] = None,
                        categories: Optional[Tensor] = None, confidence: Optional[Tensor] = None, group=None,
                        split: bool = False, processes: int = 1,
                        exclude_ids: Optional[Tuple[Tensor, Tensor]] = None, **options) -> MetricResults:
    """Drop repeated ``ids`` of the items (of ``processes`` processes: at most
    ``processes - 1`` repeats each) and evaluate.

    With ``split`` and several ranks in ``group`` (every rank holds the same state),
    the ranks divide the evaluation: each evaluates a contiguous share of the queries
    against the whole gallery and the per-query values are gathered
    (:func:`~retrieval_core.distributed.evaluate_split`); the result is the same on
    every rank as one process's.

    An id repeated with the same row (embedding, label, flags, category: a sample
    repeated by DistributedSampler's padding) counts once; an id repeated with a
    different row is a ``ValueError`` (ids must identify dataset items; see
    :func:`~retrieval_core.distributed.drop_duplicates`).

    Without flags every item is both a query and a gallery item (PML's layout);
    with ``is_query``/``is_gallery`` (OML's layout) the flagged subsets are used. An
    item is never matched with itself (nor with another item of the same id).
    ``confidence`` (one per item; the queries' are used) feeds the confidence keys.
    ``exclude_ids``: ``(query ids, item ids)`` of the excluded pairs (:func:`batch_exclusions`;
    ``ids`` given): each item is removed from its query's ranking (``exclude=`` of
    :func:`~retrieval_core.evaluate_embeddings`); a pair given twice counts once.
    """
    if ids is not None:
        named = [(n, t) for n, t in (("labels", labels), ("is_query", is_query), ("is_gallery", is_gallery),
                                     ("categories", categories), ("confidence", confidence)) if t is not None]
        ids, embeddings, *present = drop_duplicates(ids, embeddings, *(t for _, t in named),
                                                    names=["embeddings"] + [n for n, _ in named],
                                                    max_repeats=max(int(processes), 1) - 1)
        labels, rest = present[0], iter(present[1:])
        is_query = None if is_query is None else next(rest)
        is_gallery = None if is_gallery is None else next(rest)
        categories = None if categories is None else next(rest)
        confidence = None if confidence is None else next(rest)
    item_ids = ids if ids is not None else torch.arange(embeddings.shape[0], device=embeddings.device)
    evaluate = partial(evaluate_split, group=group) if split and world_size(group) > 1 else evaluate_embeddings
    if exclude_ids is not None and ids is None:
        raise ValueError("exclude names gallery items by their ids: pass ids with every batch")
    if is_query is None and is_gallery is None:
        exclude = None if exclude_ids is None else excluded_positions(exclude_ids, item_ids, item_ids)
        return evaluate(embeddings, labels, metrics, query_ids=item_ids, categories=categories,
                        confidence=confidence, exclude=exclude, **options)
    q = torch.ones_like(item_ids, dtype=torch.bool) if is_query is None else is_query.bool()
    g = torch.ones_like(item_ids, dtype=torch.bool) if is_gallery is None else is_gallery.bool()
    exclude = None if exclude_ids is None else excluded_positions(exclude_ids, item_ids[q], item_ids[g])
    return evaluate(
        embeddings[q], labels[q], metrics, gallery=embeddings[g], gallery_labels=labels[g],
        query_ids=item_ids[q], gallery_ids=item_ids[g],
        categories=None if categories is None else categories[q],
        confidence=None if confidence is None else confidence[q], exclude=exclude, **options,
    )
