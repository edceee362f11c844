"""Set-level metrics of an embedding evaluation: computed once, not per query.

* ``nmi``, ``ami``: k-means on the query embeddings with as many clusters as query
  labels (as PML's AccuracyCalculator), scored against the labels.
* ``pcf@x``: OML's principal components fraction of the query set (of query and
  gallery together when a separate gallery is given).
* ``fnmr@x``: OML's FNMR at FMR = x over every query-gallery pair left after
  exclusion (positive: gain > 0), computed exactly, chunk by chunk.

Each set-level :class:`~retrieval_core.metrics.spec.MetricSpec` carries the function
here that computes it (its ``set_metric``): ``set_metric(keys, data)`` gets all the
requested keys of that function at once (so one FNMR pass serves every ``fnmr@x``)
and the evaluation's :class:`SetData`, and returns one value per key;
:func:`set_level_values` builds the SetData once and runs each function once.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..search.frames import Frame, distances, prepare
from ..search.labels import eligible, gains
from ..set_metrics.clustering import clustering_scores
from ..set_metrics.fnmr import fnmr_at_fmr_streaming
from ..set_metrics.principal_components import pcf

class SetData:
    """The checked inputs of one embedding evaluation (see evaluate_embeddings);
    ``gallery`` is None when the queries are their own gallery."""

    def __init__(self, query: Tensor, query_labels: Tensor, *, gallery: Optional[Tensor],
                 gallery_labels: Optional[Tensor], distance, query_ids: Optional[Tensor],
                 gallery_ids: Optional[Tensor], relevance, memory_budget: int) -> None:
        self.query, self.query_labels = query, query_labels
        self.gallery, self.gallery_labels = gallery, gallery_labels
        self.distance, self.relevance = distance, relevance
        self.query_ids, self.gallery_ids = query_ids, gallery_ids
        self.memory_budget = memory_budget
        self._clustering: Optional[Tuple[Tensor, Tensor]] = None

    def clustering(self) -> Tuple[Tensor, Tensor]:
        """``(nmi, ami)`` of k-means clusters of the queries, computed once."""
        if self._clustering is None:
            if self.relevance is not None or self.query_labels.ndim != 1:
                raise ValueError("nmi and ami need 1-D class labels to count the clusters")
            q = self.query
            self._clustering = clustering_scores(q if q.is_floating_point() else q.to(torch.float32), self.query_labels)
        return self._clustering


SetMetric = Callable[[Sequence["MetricKey"], SetData], List[Tensor]]


def nmi_values(keys: Sequence[MetricKey], data: SetData) -> List[Tensor]:
    return [data.clustering()[0] for _ in keys]


def ami_values(keys: Sequence[MetricKey], data: SetData) -> List[Tensor]:
    return [data.clustering()[1] for _ in keys]


def pcf_values(keys: Sequence[MetricKey], data: SetData) -> List[Tensor]:
    x = data.query if data.gallery is None else torch.cat([data.query, data.gallery.to(data.query.dtype)])
    x = x if x.is_floating_point() else x.to(torch.float64)
    return [pcf(x, m.cutoff) for m in keys]


def _pairs(query, query_labels, gallery, gallery_labels, distance, query_ids, gallery_ids, relevance, rows):
    """A factory of (positive distances, negative distances) chunks over all eligible pairs."""
    if distance in ("euclidean", "squared_euclidean"):
        # moved to the gallery's mean and scaled by powers of two (exact): no cancellation at
        # an offset, no overflow; the rates depend on the order of distances, not their unit
        frame = Frame.of(query, gallery)
        q_all, g = frame.apply(query), frame.apply(gallery)
    else:
        q_all, g = prepare(query, distance), prepare(gallery, distance)

    def chunks() -> Iterator[Tuple[Tensor, Tensor]]:
        for start in range(0, query.shape[0], rows):
            part = slice(start, start + rows)
            d = distances(q_all[part], g, distance)
            positive = gains(query_labels[part], gallery_labels, relevance) > 0
            keep = eligible(None if query_ids is None else query_ids[part], gallery_ids)
            if keep is None:
                yield d[positive], d[~positive]
            else:
                yield d[positive & keep], d[~positive & keep]

    return chunks


def fnmr_values(keys: Sequence[MetricKey], data: SetData) -> List[Tensor]:
    g, gl = (data.query, data.query_labels) if data.gallery is None else (data.gallery, data.gallery_labels)
    rows = max(1, data.memory_budget // (16 * g.shape[0]))
    make_chunks = _pairs(data.query, data.query_labels, g, gl, data.distance, data.query_ids, data.gallery_ids,
                         data.relevance, rows)
    return list(fnmr_at_fmr_streaming(make_chunks, [m.cutoff for m in keys]).unbind(0))


def set_level_values(
    keys: Sequence[MetricKey],
    query: Tensor,
    query_labels: Tensor,
    *,
    gallery: Optional[Tensor],
    gallery_labels: Optional[Tensor],
    distance,
    query_ids: Optional[Tensor],
    gallery_ids: Optional[Tensor],
    relevance,
    memory_budget: int,
) -> Dict[str, Tensor]:
    """``{key: value}`` for the set-level ``keys`` (checked inputs, see evaluate_embeddings),
    each computed by its spec's ``set_metric``."""
    data = SetData(query, query_labels, gallery=gallery, gallery_labels=gallery_labels, distance=distance,
                   query_ids=query_ids, gallery_ids=gallery_ids, relevance=relevance, memory_budget=memory_budget)
    groups: Dict[SetMetric, List[MetricKey]] = {}
    for m in keys:
        groups.setdefault(m.spec.set_metric, []).append(m)
    out: Dict[str, Tensor] = {}
    for compute, group in groups.items():
        out.update(zip((m.key for m in group), compute(group, data)))
    return {m.key: out[m.key] for m in keys}
