"""The update- and compute-side steps that the ignite and torchmetrics adapters share.

Adapters keep state tensors and call these; all math lives here and below.

* Score mode keeps per-query ``values[n, M]`` (from :func:`score_values` at update),
  optional query ``ids`` and ``categories``; or, compact, per-key sums and counts.
* Embedding mode keeps embeddings, labels and optional ids, query/gallery flags
  and categories, and evaluates once at compute; with several ranks holding the
  gathered state, each evaluates a share of the queries (see :func:`finalize_embeddings`).
"""
from __future__ import annotations

from functools import partial
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..stats.aggregate import MetricResults, aggregate
from ..distributed.collectives import all_reduce_sum, gather_cat, world_size
from ..distributed.duplicates import drop_duplicates
from ..distributed.evaluation import evaluate_split
from .embeddings import evaluate_embeddings
from ..validate import check_representable

__all__ = ["compact_sums", "finalize_compact", "finalize_scores", "finalize_embeddings"]


def _gather_present(gather: bool, group, *tensors: Optional[Tensor]) -> Tuple[Optional[Tensor], ...]:
    if not gather:  # the adapter's framework gathered already
        return tensors
    return tuple(None if t is None else gather_cat(t, group) for t in tensors)


def compact_sums(values: Tensor) -> Tensor:
    """``[3, M]`` float64: sum of defined values, number defined, number undefined."""
    defined = ~torch.isnan(values)
    return torch.stack([torch.where(defined, values, 0.0).sum(0), defined.sum(0), (~defined).sum(0)]).to(torch.float64)


def finalize_compact(
    sums: Tensor, keys: Sequence[str], *, empty: str = "skip", group=None, gather: bool = True
) -> MetricResults:
    """Means from summed ``compact_sums`` states (summed over ranks here unless ``gather=False``)."""
    total, defined, undefined = (all_reduce_sum(sums, group) if gather else sums).to(torch.float64).unbind(0)
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


def finalize_scores(
    values: Tensor,
    keys: Sequence[str],
    *,
    ids: Optional[Tensor] = None,
    categories: Optional[Tensor] = None,
    empty: str = "skip",
    reduce: str = "mean",
    group=None,
    gather: bool = True,
    confidence: Optional[Tensor] = None,
    ties: str = "stable",
    processes: Optional[int] = None,
    **stats,
) -> MetricResults:
    """Gather per-query values from every rank (unless ``gather=False``: already
    gathered), drop repeated query ids and aggregate. ``processes``: how many
    processes' rows are held (default: the group's size when gathered here, else 1);
    more repeated ids than DistributedSampler pads over them (``processes - 1``) is an
    error. ``stats``: ``ci``,
    ``ci_method``, ``n_resamples``, ``seed``, ``keep_per_query`` of
    :func:`~retrieval_core.stats.aggregate.aggregate` (the per-query values' ids are
    ``ids`` when given, else positions).

    A repeated id with the same row (per-query values, NaN equal to NaN, and
    category: a query repeated by DistributedSampler's padding) counts once; an id
    repeated with a different row is a ``ValueError`` (see
    :func:`~retrieval_core.distributed.drop_duplicates`). ``confidence[n]`` (one per
    row, for the confidence keys) travels with the values.

    Example:
        >>> values = torch.tensor([[1.0], [0.5], [1.0]], dtype=torch.float64)
        >>> finalize_scores(values, ["mrr"], ids=torch.tensor([3, 8, 3]))["mrr"].item()
        0.75
    """
    values, ids, categories, confidence = _gather_present(gather, group, values, ids, categories, confidence)
    if ids is not None:
        named = [(n, t) for n, t in (("categories", categories), ("confidence", confidence)) if t is not None]
        ids, values, *rest = drop_duplicates(ids, values, *(t for _, t in named),
                                             names=["per-query values"] + [n for n, _ in named],
                                             max_repeats=_padding(processes, gather, group))
        rest = iter(rest)
        categories = None if categories is None else next(rest)
        confidence = None if confidence is None else next(rest)
    return aggregate(values, keys, empty=empty, reduce=reduce, categories=categories, confidence=confidence,
                     ties=ties, query_ids=ids, **stats)


def _padding(processes: Optional[int], gathered: bool, group) -> int:
    """The most samples DistributedSampler repeats over the ``processes`` whose rows are
    held (default: the group's size when they were gathered here, else one): one less."""
    if processes is None:
        processes = world_size(group) if gathered else 1
    return max(int(processes), 1) - 1


def finalize_embeddings(
    embeddings: Tensor,
    labels: Tensor,
    metrics: Sequence[str],
    *,
    ids: Optional[Tensor] = None,
    is_query: Optional[Tensor] = None,
    is_gallery: Optional[Tensor] = None,
    categories: Optional[Tensor] = None,
    confidence: Optional[Tensor] = None,
    group=None,
    gather: bool = True,
    split: Optional[bool] = None,
    processes: Optional[int] = None,
    **options,
) -> MetricResults:
    """Gather embedding state from every rank, drop repeated ``ids`` and evaluate.
    ``processes``: how many processes' items are held (default: the group's size when
    gathered or split, else 1); more repeated ids than DistributedSampler pads over
    them (``processes - 1``) is an error.

    With ``split`` (default: ``gather``, as every rank then holds the same state)
    and several ranks in ``group``, the ranks divide the evaluation: each
    evaluates a contiguous share of the queries against the whole gallery and
    the per-query values are gathered (:func:`~retrieval_core.distributed.evaluate_split`);
    the result is the same on every rank as one process's. ``split=False`` keeps
    the evaluation local (a rank's own, unsynchronised state).

    An id repeated with the same row (embedding, label, flags, category: a sample
    repeated by DistributedSampler's padding) counts once; an id repeated with a
    different row is a ``ValueError`` (ids must identify dataset items; see
    :func:`~retrieval_core.distributed.drop_duplicates`).

    Without flags every item is both a query and a gallery item (PML's layout);
    with ``is_query``/``is_gallery`` (OML's layout) the flagged subsets are used. An
    item is never matched with itself (nor with another item of the same id).
    ``confidence`` (one per item; the queries' are used) feeds the confidence keys.
    """
    embeddings, labels, ids, is_query, is_gallery, categories, confidence = _gather_present(
        gather, group, embeddings, labels, ids, is_query, is_gallery, categories, confidence)
    if ids is not None:
        named = [(n, t) for n, t in (("labels", labels), ("is_query", is_query), ("is_gallery", is_gallery),
                                     ("categories", categories), ("confidence", confidence)) if t is not None]
        ids, embeddings, *present = drop_duplicates(ids, embeddings, *(t for _, t in named),
                                                    names=["embeddings"] + [n for n, _ in named],
                                                    max_repeats=_padding(processes, gather or bool(split), group))
        labels, rest = present[0], iter(present[1:])
        is_query = None if is_query is None else next(rest)
        is_gallery = None if is_gallery is None else next(rest)
        categories = None if categories is None else next(rest)
        confidence = None if confidence is None else next(rest)
    item_ids = ids if ids is not None else torch.arange(embeddings.shape[0], device=embeddings.device)
    divided = (gather if split is None else split) and world_size(group) > 1
    evaluate = partial(evaluate_split, group=group) if divided else evaluate_embeddings
    if is_query is None and is_gallery is None:
        return evaluate(embeddings, labels, metrics, query_ids=item_ids, categories=categories,
                        confidence=confidence, **options)
    q = torch.ones_like(item_ids, dtype=torch.bool) if is_query is None else is_query.bool()
    g = torch.ones_like(item_ids, dtype=torch.bool) if is_gallery is None else is_gallery.bool()
    return evaluate(
        embeddings[q], labels[q], metrics, gallery=embeddings[g], gallery_labels=labels[g],
        query_ids=item_ids[q], gallery_ids=item_ids[g],
        categories=None if categories is None else categories[q],
        confidence=None if confidence is None else confidence[q], **options,
    )
