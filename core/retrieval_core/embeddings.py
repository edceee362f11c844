"""Embedding mode: query/gallery embeddings and labels in, ``{key: value}`` out.

The evaluator walks query chunks under a memory budget; for each chunk it computes
the ``[c, G]`` similarities, gains and exclusion mask, ranks them with the same
stable builder as score mode (to the largest k, to the chunk's largest R for
``@r`` keys, or the whole gallery for whole-list keys), runs the kernels and keeps
only ``values[c, M]``. Nothing of size ``[Q, G]`` is ever held.
"""
from __future__ import annotations

from typing import Iterator, Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import optional, search
from .aggregate import MetricResults, aggregate, encode_labels, reduce_values
from .build import rank_binary, rank_dense
from .evaluate import ranking_values
from .registry import MetricKey, depth_needed, parse_metrics, split_scopes
from .validate import EMPTY, REDUCE, check_categories, check_choice, check_same_device, check_tensor, check_ties

__all__ = ["evaluate_embeddings", "embedding_values", "DEFAULT_MEMORY_BUDGET"]

DEFAULT_MEMORY_BUDGET = 256 * 2**20  # bytes of scratch for one query chunk
PER_CLASS = (None, "macro", "all")


def _check_embeddings(name: str, x, distance) -> Tensor:
    check_tensor(name, x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D [items, dim]; got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} is empty; got shape {tuple(x.shape)}")
    if x.is_complex() or (not x.is_floating_point() and distance != "hamming" and not callable(distance)):
        raise TypeError(f"{name} must be a floating-point tensor (integer or bool codes only with distance='hamming'); got {x.dtype}")
    return x


def _check_labels(name: str, labels, n: int, custom: bool) -> Tensor:
    check_tensor(name, labels)
    if labels.ndim == 0 or labels.shape[0] != n:
        raise ValueError(f"{name} must have one entry per embedding; got shape {tuple(labels.shape)} for {n} embeddings")
    if custom:
        return labels
    if labels.ndim > 2:
        raise ValueError(f"{name} must be 1-D class labels or 2-D multi-hot [N, classes]; got shape {tuple(labels.shape)}")
    if labels.ndim == 1 and (labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool):
        raise TypeError(f"{name} must be integer class labels; got {labels.dtype}")
    if labels.ndim == 2 and (labels.is_complex() or labels.is_floating_point()):
        raise TypeError(f"{name} as multi-hot [N, classes] must be bool or integer 0/1; got {labels.dtype}")
    return labels


def _check_ids(name: str, ids, n: int) -> Tensor:
    check_tensor(name, ids)
    if ids.ndim != 1 or ids.shape[0] != n:
        raise ValueError(f"{name} must be 1-D with one id per embedding; got shape {tuple(ids.shape)} for {n} embeddings")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor; got {ids.dtype}")
    return ids


def _check_finite(name: str, x: Tensor) -> None:
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contain NaN or inf")


def _chunk_rows(n_gallery: int, depth_is_deep: bool, memory_budget: int) -> int:
    # scores, masked scores, gains, mask, top-k scratch; whole-list rankings also
    # hold the sort and about eight float64 [c, G] arrays for the kernels
    per_pair = 128 if depth_is_deep else 24
    return max(1, memory_budget // (per_pair * n_gallery))


def embedding_values(
    query: Tensor,
    query_labels: Tensor,
    keys: Sequence[MetricKey],
    *,
    gallery: Tensor,
    gallery_labels: Tensor,
    distance="cosine",
    query_ids: Optional[Tensor] = None,
    gallery_ids: Optional[Tensor] = None,
    relevance=None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    progress: bool = False,
    backend: str = "torch",
) -> Tensor:
    """Per-query values ``[Q, M]`` (NaN = undefined) of per-query ``keys``, chunk by chunk.

    Inputs are assumed checked (see :func:`evaluate_embeddings`).
    """
    depth, at_r, whole = depth_needed(keys)
    n_gallery = gallery.shape[0]
    need_ideal = any(m.spec.needs_ideal for m in keys)
    q_all = search.prepare(query, distance)
    g = q_all if gallery is query else search.prepare(gallery, distance)
    g_sq = (g * g).sum(1) if distance in ("euclidean", "squared_euclidean") else None
    rows = _chunk_rows(n_gallery, at_r or whole, memory_budget)
    # 1-D labels: R and candidate counts from label counts, relevance read at the
    # ranked positions only, exclusion written into the scores: no [c, G] gains.
    binary = relevance is None and query_labels.ndim == 1
    if binary:
        n_relevant, n_candidates = search.label_counts(query_labels, gallery_labels, query_ids, gallery_ids)
        exclusion = None if query_ids is None else search.Exclusion(query_ids, gallery_ids)
    faiss = search.FaissSearch(g, distance) if backend == "faiss" else None
    if faiss is not None:
        rows = max(rows, 4096)  # faiss keeps only k results per query: large chunks are cheap
    values = torch.empty(query.shape[0], len(keys), dtype=torch.float64, device=query.device)
    for chunk in _progress(range(0, query.shape[0], rows), progress, -(-query.shape[0] // rows)):
        part = slice(chunk, chunk + rows)
        depth_or_all = n_gallery if whole else depth
        if faiss is not None:
            values[part] = ranking_values(_faiss_ranking(
                faiss, q_all[part], query_labels[part], gallery_labels, depth, at_r, need_ideal,
                n_relevant[part], n_candidates[part], exclusion, part, query_ids, gallery_ids), keys)
            continue
        scores = search.similarity(q_all[part], g, distance, g_sq)
        if binary:
            if exclusion is not None:
                scores.index_put_(exclusion.pairs(part), torch.tensor(float("-inf"), dtype=scores.dtype))
            labels = query_labels[part].unsqueeze(1)
            ranking = rank_binary(
                scores, depth_or_all, lambda idx: gallery_labels[idx] == labels, n_relevant[part],
                n_candidates[part], at_r=at_r, need_ideal=need_ideal,
            )
        else:
            gain = search.gains(query_labels[part], gallery_labels, relevance)
            mask = search.eligible(None if query_ids is None else query_ids[part], gallery_ids)
            ranking = rank_dense(scores, gain, depth_or_all, mask=mask, at_r=at_r, need_ideal=need_ideal)
        values[part] = ranking_values(ranking, keys)
    return values


def _faiss_ranking(faiss, q, labels, gallery_labels, depth, at_r, need_ideal, n_relevant, n_candidates,
                   exclusion, part, query_ids, gallery_ids):
    """The chunk's Ranking from faiss candidate lists: deep enough for the cutoff,
    the excluded items and one more (to see a tie at the cut among candidates)."""
    need = max(depth, int(n_relevant.max())) if at_r else depth
    extra = 0
    if exclusion is not None:
        rows, _ = exclusion.pairs(part)
        extra = int(torch.bincount(rows).max()) if rows.numel() else 0
    scores, idx = faiss.top(q, min(gallery_labels.shape[0], need + extra + 1))
    if exclusion is not None:
        scores = scores.masked_fill(gallery_ids[idx] == query_ids[part].unsqueeze(1), float("-inf"))
    labels = labels.unsqueeze(1)
    return rank_binary(scores, depth, lambda pos: gallery_labels[idx.gather(1, pos)] == labels, n_relevant,
                       n_candidates, at_r=at_r, need_ideal=need_ideal)


def _progress(it, enabled: bool, total: int):
    if not enabled:
        return it
    return optional.tqdm()(it, total=total, desc="retrieval-metrics", unit="chunk")


def evaluate_embeddings(
    query: Tensor,
    query_labels: Tensor,
    metrics: Sequence[str],
    *,
    gallery: Optional[Tensor] = None,
    gallery_labels: Optional[Tensor] = None,
    distance="cosine",
    query_ids: Optional[Tensor] = None,
    gallery_ids: Optional[Tensor] = None,
    relevance=None,
    ties: str = "stable",
    empty: str = "skip",
    reduce: str = "mean",
    categories=None,
    per_class: Optional[str] = None,
    memory_budget: Optional[int] = None,
    progress: bool = False,
    backend: str = "torch",
) -> MetricResults:
    """Evaluate retrieval of ``gallery`` items by ``query`` embeddings (exact k-NN).

    Args:
        query: ``[Q, D]`` embeddings (integer/bool codes allowed for hamming).
        query_labels: ``[Q]`` int class labels (equal label = relevant), ``[Q, C]``
            multi-hot labels (gain = number of shared labels), or anything a
            ``relevance`` callable understands.
        metrics: per-query keys (``"cmc@1"``, ``"map@r"``, ``"ndcg@10"``...) and
            set-level keys (``"nmi"``, ``"ami"``, ``"pcf@0.5"``, ``"fnmr@0.1"``).
        gallery, gallery_labels: ``[G, D]`` and labels; None: the query set is its own
            gallery and each query's own row is excluded (PML's reference=None).
        distance: ``"cosine"``, ``"dot"``, ``"euclidean"``, ``"squared_euclidean"``,
            ``"hamming"`` (codes in {0,1} or {-1,1}) or ``f(q[c, D], g[G, D]) -> [c, G]``
            distances (smaller = closer).
        query_ids, gallery_ids: ``[Q]``, ``[G]`` ints; a gallery item with the query's
            id is never retrieved nor counted in R (self-match, same sequence).
        relevance: ``f(query_labels[c], gallery_labels) -> gains[c, G]`` (>= 0).
        ties, empty, reduce, categories: as :func:`evaluate_scores`.
        per_class: ``"macro"``: average per label, then over labels (PML
            avg_of_avgs); ``"all"``: also ``"{key}/class={label}"`` entries.
        memory_budget: bytes of scratch for one query chunk (default 256 MiB).
        progress: show a tqdm progress bar over chunks.
        backend: ``"torch"`` (default: exact, deterministic ties on any device) or
            ``"faiss"`` (CPU, float32, class labels, cosine/dot/euclidean, no
            whole-list keys): faiss' flat index finds the candidates; values equal
            the torch backend's except between candidates within float rounding.

    Example:
        >>> import torch
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> labels = torch.tensor([0, 0, 1, 1])
        >>> r = evaluate_embeddings(x, labels, ["cmc@1", "map@r"])
        >>> r["cmc@1"].item(), r["map@r"].item()
        (1.0, 1.0)
    """
    check_ties(ties)
    check_choice("empty", empty, EMPTY)
    check_choice("reduce", reduce, REDUCE)
    if per_class not in PER_CLASS:
        raise ValueError(f"per_class must be None, 'macro' or 'all'; got {per_class!r}")
    if not callable(distance) and distance not in search.DISTANCES:
        raise ValueError(f"distance must be one of {', '.join(map(repr, search.DISTANCES))} or a callable; got {distance!r}")
    keys = parse_metrics(metrics)
    query_keys, set_keys = split_scopes(keys)
    custom = relevance is not None
    query = _check_embeddings("query", query, distance)
    query_labels = _check_labels("query_labels", query_labels, query.shape[0], custom)
    if (gallery is None) != (gallery_labels is None):
        raise ValueError("gallery and gallery_labels go together: give both or neither")
    self_gallery = gallery is None
    if self_gallery:
        gallery, gallery_labels = query, query_labels
        if query_ids is None:
            query_ids = torch.arange(query.shape[0], device=query.device)
        if gallery_ids is not None:
            raise ValueError("gallery_ids needs a gallery; with gallery=None the query_ids serve both sides")
        gallery_ids = query_ids
    else:
        gallery = _check_embeddings("gallery", gallery, distance)
        gallery_labels = _check_labels("gallery_labels", gallery_labels, gallery.shape[0], custom)
        if gallery.shape[1] != query.shape[1]:
            raise ValueError(f"query and gallery must have the same dimension; got {query.shape[1]} and {gallery.shape[1]}")
        if not custom and query_labels.ndim != gallery_labels.ndim:
            raise ValueError(f"query_labels and gallery_labels must both be 1-D or both multi-hot; got shapes {tuple(query_labels.shape)} and {tuple(gallery_labels.shape)}")
        if not custom and query_labels.ndim == 2 and query_labels.shape[1] != gallery_labels.shape[1]:
            raise ValueError(f"multi-hot labels must have the same number of classes; got {query_labels.shape[1]} and {gallery_labels.shape[1]}")
        if (query_ids is None) != (gallery_ids is None):
            raise ValueError("query_ids and gallery_ids go together: give both or neither")
    if query_ids is not None:
        query_ids = _check_ids("query_ids", query_ids, query.shape[0])
        gallery_ids = _check_ids("gallery_ids", gallery_ids, gallery.shape[0])
    check_same_device(query=query, query_labels=query_labels, gallery=gallery, gallery_labels=gallery_labels,
                      query_ids=query_ids, gallery_ids=gallery_ids)
    if backend not in ("torch", "faiss"):
        raise ValueError(f"backend must be 'torch' or 'faiss'; got {backend!r}")
    if backend == "faiss":
        if callable(distance) or distance == "hamming" or custom or query_labels.ndim != 1:
            raise ValueError("backend='faiss' needs cosine, dot or euclidean distances and 1-D class labels")
        if query.device.type != "cpu" or depth_needed(query_keys)[2]:
            raise ValueError("backend='faiss' runs on CPU tensors and takes no whole-list keys (map, mrr, ndcg, auroc...)")
    budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ValueError(f"memory_budget must be a positive number of bytes; got {memory_budget!r}")
    largest_k = depth_needed(query_keys)[0]
    if largest_k > gallery.shape[0]:
        big = [m.key for m in query_keys if isinstance(m.cutoff, int) and m.cutoff > gallery.shape[0]]
        raise ValueError(f"k is larger than the gallery ({gallery.shape[0]} items) in {', '.join(big)}")
    if per_class is not None and (custom or query_labels.ndim != 1):
        raise ValueError("per_class needs 1-D class labels")
    if per_class is not None and reduce == "none":
        raise ValueError("per_class reduces over each label's queries; it cannot go with reduce='none'")
    if categories is not None:
        check_categories(categories, query.shape[0], "query")
    _check_finite("query embeddings", query)
    if not self_gallery:
        _check_finite("gallery embeddings", gallery)
    if distance == "hamming":
        for name, x in (("query", query), ("gallery", gallery)):
            if not (bool(((x == 0) | (x == 1)).all()) or bool(((x == -1) | (x == 1)).all())):
                raise ValueError(f"distance='hamming' needs binary codes in {{0, 1}} or {{-1, 1}}; {name} has other values")
    if not custom and query_labels.ndim == 2:
        for name, labels in (("query_labels", query_labels), ("gallery_labels", gallery_labels)):
            if labels.dtype != torch.bool and not bool(((labels == 0) | (labels == 1)).all()):
                raise ValueError(f"{name} as multi-hot [N, classes] must hold only 0 and 1")

    results = MetricResults(n_queries=torch.tensor(query.shape[0]))
    if query_keys:
        values = embedding_values(
            query, query_labels, query_keys, gallery=gallery, gallery_labels=gallery_labels, distance=distance,
            query_ids=query_ids, gallery_ids=gallery_ids, relevance=relevance, memory_budget=budget, progress=progress,
            backend=backend,
        )
        names = [m.key for m in query_keys]
        results = aggregate(values, names, empty=empty, reduce=reduce, categories=categories)
        if per_class is not None:
            results.update(_per_class(values, names, query_labels, empty, reduce, per_class))
    if set_keys:
        from .set_level import set_level_values

        results.update(set_level_values(
            set_keys, query, query_labels, gallery=None if self_gallery else gallery,
            gallery_labels=None if self_gallery else gallery_labels, distance=distance,
            query_ids=query_ids, gallery_ids=gallery_ids, relevance=relevance, memory_budget=budget,
        ))
    # the requested keys first, in the order asked, then per-category/per-class views
    ordered = MetricResults({m.key: results[m.key] for m in keys}, n_queries=results.n_queries, n_empty=results.n_empty)
    ordered.update((k, v) for k, v in results.items() if k not in ordered)
    return ordered


def _per_class(values: Tensor, names, labels: Tensor, empty: str, reduce: str, per_class: str) -> dict:
    """PML's avg_of_avgs: the main keys become the mean over labels of each label's value."""
    by_label = aggregate(values, names, empty=empty, reduce=reduce, categories=labels)
    label_names, _ = encode_labels(labels)
    out = {}
    for key in names:
        per = torch.stack([by_label[f"{key}/{n}"] for n in label_names])
        out[key] = reduce_values(per.unsqueeze(1), "mean")[0]
        if per_class == "all":
            out.update({f"{key}/class={n}": v for n, v in zip(label_names, per.unbind(0))})
    return out
