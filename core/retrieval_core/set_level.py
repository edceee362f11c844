"""Set-level metrics of an embedding evaluation: computed once, not per query.

* ``nmi``, ``ami``: k-means on the query embeddings with as many clusters as query
  labels (as PML's AccuracyCalculator), scored against the labels.
* ``pcf@x``: OML's principal components fraction of the query set (of query and
  gallery together when a separate gallery is given).
* ``fnmr@x``: OML's FNMR at FMR = x over every query-gallery pair left after
  exclusion (positive: gain > 0), computed exactly, chunk by chunk.
"""
from __future__ import annotations

from typing import Dict, Iterator, Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import search
from .registry import MetricKey
from .set_metrics import clustering_scores, fnmr_at_fmr_streaming, pcf


def _pairs(query, query_labels, gallery, gallery_labels, distance, query_ids, gallery_ids, relevance, rows):
    """A factory of (positive distances, negative distances) chunks over all eligible pairs."""
    q_all = search.prepare(query, distance)
    g = search.prepare(gallery, distance)

    def chunks() -> Iterator[Tuple[Tensor, Tensor]]:
        for start in range(0, query.shape[0], rows):
            part = slice(start, start + rows)
            d = search.distances(q_all[part], g, distance)
            positive = search.gains(query_labels[part], gallery_labels, relevance) > 0
            keep = search.eligible(None if query_ids is None else query_ids[part], gallery_ids)
            if keep is None:
                yield d[positive], d[~positive]
            else:
                yield d[positive & keep], d[~positive & keep]

    return chunks


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
    """``{key: value}`` for the set-level ``keys`` (checked inputs, see evaluate_embeddings)."""
    out: Dict[str, Tensor] = {}
    names = {m.spec.name for m in keys}
    if names & {"nmi", "ami"}:
        if relevance is not None or query_labels.ndim != 1:
            raise ValueError("nmi and ami need 1-D class labels to count the clusters")
        embeddings = query if query.is_floating_point() else query.to(torch.float32)
        out["nmi"], out["ami"] = clustering_scores(embeddings, query_labels)
    for m in keys:
        if m.spec.name == "pcf":
            x = query if gallery is None else torch.cat([query, gallery.to(query.dtype)])
            out[m.key] = pcf(x.to(torch.float64) if not x.is_floating_point() else x, m.cutoff)
    fnmr = [m for m in keys if m.spec.name == "fnmr"]
    if fnmr:
        g, gl = (query, query_labels) if gallery is None else (gallery, gallery_labels)
        rows = max(1, memory_budget // (16 * g.shape[0]))
        make_chunks = _pairs(query, query_labels, g, gl, distance, query_ids, gallery_ids, relevance, rows)
        values = fnmr_at_fmr_streaming(make_chunks, [m.cutoff for m in fnmr])
        out.update({m.key: v for m, v in zip(fnmr, values.unbind(0))})
    return {m.key: out[m.spec.name if m.spec.name in ("nmi", "ami") else m.key] for m in keys}
