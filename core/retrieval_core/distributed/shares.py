"""One rank's share of an embedding evaluation and the combination of every rank's values."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist
from torch import Tensor

from ..evaluation.embeddings import aggregate_queries, evaluate_embedding_inputs, query_values
from ..inputs.embeddings import EmbeddingInputs
from ..metrics.keys import split_scopes
from ..stats.aggregate import MetricResults
from .agree import agree
from .collectives import gather_cat, gather_per_rank, rank_of, world_size

__all__ = []


def _from_rank0(value: Optional[Tensor], group, device) -> Tensor:
    """Rank 0's 0-d ``value`` on every rank (exact, any dtype)."""
    mine = value.reshape(1) if value is not None else torch.empty(0, dtype=torch.float64, device=device)
    return gather_per_rank(mine, group)[0].reshape(())


def _gather_categories(categories, group):
    if categories is None or world_size(group) == 1:
        return categories
    if isinstance(categories, Tensor):
        return gather_cat(categories, group)
    every: List[Any] = [None] * world_size(group)
    dist.all_gather_object(every, list(categories), group=group)
    return [c for part in every for c in part]


# -- evaluation divided between ranks ---------------------------------------------------

def _share(n: int, rank: int, world: int) -> slice:
    """Rank ``rank``'s contiguous share of ``n`` rows (sizes differ by at most one)."""
    return slice(n * rank // world, n * (rank + 1) // world)


def _share_values(query, query_labels, query_keys, gallery, gallery_labels, query_ids, gallery_ids, options,
                  show: bool, neighbours: Optional[list] = None, truth=None, exclude=None) -> Tensor:
    """``[q, M]`` per-query values of this rank's queries against the whole gallery
    (the single-process engine, checked inputs, no aggregation; NaN = undefined). With
    ``neighbours`` (a list), appends this rank's ``(ids or positions, scores)``."""

    k = options.get("return_neighbours") or 0
    if query.shape[0] == 0:
        if neighbours is not None and k:
            neighbours.append((torch.empty(0, k, dtype=torch.int64, device=query.device),
                               torch.empty(0, k, dtype=torch.float64, device=query.device)))
        return torch.empty(0, len(query_keys), dtype=torch.float64, device=query.device)
    share = EmbeddingInputs(  # checked by the entry point: this rank's queries against the whole gallery
        tuple(query_keys), query, query_labels, gallery, gallery_labels, query_ids, gallery_ids, given_ids=query_ids,
        self_gallery=False, categories=None, confidence=None,
        options=dict(options, progress=show, return_neighbours=k if neighbours is not None and k else 0),
        truth=truth, exclude=exclude)
    values, found = query_values(share)
    if found is not None:
        neighbours.append(found)
    return values


def _set_values(set_keys, query, query_labels, query_ids, gallery, gallery_labels, gallery_ids,
                options) -> Dict[str, Tensor]:
    """The set-level values of the whole evaluation (rank 0 computes them)."""

    self_gallery = gallery is None
    every = EmbeddingInputs(  # checked by the entry point
        tuple(set_keys), query, query_labels, query if self_gallery else gallery,
        query_labels if self_gallery else gallery_labels, query_ids, query_ids if self_gallery else gallery_ids,
        given_ids=query_ids, self_gallery=self_gallery, categories=None, confidence=None,
        options=dict(options, empty="skip", reduce="mean", per_class=None, ci=None, keep_per_query=False,
                     progress=False, return_neighbours=0))
    r = evaluate_embedding_inputs(every)
    return {m.key: r[m.key] for m in set_keys}


def _combine(keys, values: Optional[Tensor], set_values: Optional[Dict[str, Tensor]], n_queries: int, *,
             all_labels: Optional[Tensor], categories, options, group, device, per_query_ids=None,
             neighbours=None, confidence: Optional[Tensor] = None):
    """Gather the per-query values (rank order = global query order), aggregate them
    as one process does, and take rank 0's set-level values: the same on every rank."""

    query_keys, set_keys = split_scopes(keys)
    results = MetricResults(n_queries=torch.tensor(n_queries))
    if query_keys:
        results = aggregate_queries(
            gather_cat(values, group), [m.key for m in query_keys], all_labels, empty=options["empty"],
            reduce=options["reduce"], per_class=options["per_class"], categories=categories, confidence=confidence,
            ties=options["ties"], ci=options["ci"], ci_method=options["ci_method"], n_resamples=options["n_resamples"],
            seed=options["seed"], keep_per_query=options["keep_per_query"], query_ids=per_query_ids)
    for m in set_keys:
        results[m.key] = _from_rank0(None if set_values is None else set_values[m.key], group, device)
    ordered = results.reordered([m.key for m in keys])
    if neighbours:
        ordered.neighbours = (gather_cat(neighbours[0][0], group), gather_cat(neighbours[0][1], group))
    return ordered


def _evaluate_share(keys, query, query_labels, query_ids, *, gallery, gallery_labels, gallery_ids, self_gallery: bool,
                    all_query, all_labels, all_ids, categories, n_queries: int, options, group, device,
                    per_query_ids=None, confidence: Optional[Tensor] = None, truth=None, exclude=None):
    """This rank's queries against the whole gallery (held by every rank), rank 0's
    set-level values, then :func:`_combine`. ``truth``, ``exclude``: the relevance pairs and
    excluded items of this rank's queries (rows numbered from 0), or None."""

    query_keys, set_keys = split_scopes(keys)
    rank = rank_of(group)

    neighbours: list = []

    def local():
        values = None
        neighbours.clear()
        if query_keys:
            values = _share_values(query, query_labels, query_keys, gallery, gallery_labels, query_ids, gallery_ids,
                                   options, show=bool(options["progress"]) and rank == 0, neighbours=neighbours,
                                   truth=truth, exclude=exclude)
        set_values = None
        if set_keys and rank == 0:
            set_values = _set_values(set_keys, all_query, all_labels, all_ids, None if self_gallery else gallery,
                                     None if self_gallery else gallery_labels,
                                     None if self_gallery else gallery_ids, options)
        return (values, set_values), None

    (values, set_values), _ = agree(local, group=group, device=device)
    return _combine(keys, values, set_values, n_queries, all_labels=all_labels, categories=categories,
                    options=options, group=group, device=device, per_query_ids=per_query_ids,
                    neighbours=neighbours, confidence=confidence)
