"""Embedding mode: query/gallery embeddings and labels in, ``{key: value}`` out.

The evaluator walks query chunks under a memory budget; for each chunk it computes
the ``[c, G]`` similarities, gains and exclusion mask, ranks them with the same
stable builder as score mode (to the largest k, to the chunk's largest R for
``@r`` keys, or the whole gallery for whole-list keys), runs the kernels and keeps
only ``values[c, M]``. Nothing of size ``[Q, G]`` is ever held.
"""
from __future__ import annotations

import warnings
from typing import Iterator, Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import optional, search, sizing
from .ranking.dense import _count_relevant, _depth, rank_binary, rank_dense
from .stats.aggregate import MetricResults, _category_groups, _fill_empty, aggregate, encode_labels, reduce_values
from .stats.curves import split_key
from .stats.intervals import macro_intervals
from .metrics.apply import ranking_values, set_level_values
from .metrics.registry import MetricKey, depth_needed, parse_metrics, split_scopes
from .validate import (
    PER_CLASS,  # noqa: F401  (re-exported: retrieval_core.embeddings.PER_CLASS)
    check_backend,
    check_categories,
    check_return_neighbours,
    check_stats_options,
    check_confidence,
    check_cutoffs,
    check_embedding_options,
    check_embedding_values,
    check_embeddings,
    check_labels,
    check_memory_budget,
    check_pairs,
    check_per_class,
    check_query_gallery,
    check_rows,
    check_same_device,
)

__all__ = ["evaluate_embeddings", "embedding_values", "DEFAULT_MEMORY_BUDGET"]

# The CPU's default scratch of one query chunk; the default of every device is
# sizing.memory_budget(device) (a share of a GPU's free memory).
DEFAULT_MEMORY_BUDGET = sizing.CPU_MEMORY_BUDGET
_chunk_rows = sizing.chunk_rows  # queries per chunk for a budget (bytes per pair: see sizing)


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
    memory_budget: Optional[int] = None,
    progress: bool = False,
    backend: str = "torch",
    ties: str = "stable",
    neighbours: Optional[list] = None,
) -> Tensor:
    """Per-query values ``[Q, M]`` (NaN = undefined) of per-query ``keys``, chunk by chunk.

    ``neighbours``: a list of length 3 ``[k, None, None]`` (filled here with the
    ``[Q, k]`` gallery positions and scores of each query's first ``k`` ranked items,
    -1 and -inf past the candidates).

    Inputs are assumed checked (see :func:`evaluate_embeddings`). ``memory_budget``:
    bytes of scratch per chunk; None: the device's share (``sizing.memory_budget``).
    Where host reads synchronise (``sizing.sync_free``), the torch backend reads the
    device a constant number of times per call, for every distance and relevance: the
    largest R once (``@r``); after the loop the rows to re-rank exactly (a tie across
    the cut; for euclidean, rows whose float32 order may be wrong, re-ranked by the
    exact distance); the tests of callables' distances and gains, once. (Euclidean
    distances under a tie mode other than "stable" read each chunk's error window.)
    """
    depth, at_r, whole = depth_needed(keys)
    n_query, n_gallery = query.shape[0], gallery.shape[0]
    device = query.device
    need_ideal = any(m.spec.needs_ideal for m in keys)
    q_all = search.prepare(query, distance)
    g = q_all if gallery is query else search.prepare(gallery, distance)
    euclidean = distance in ("euclidean", "squared_euclidean")
    exact = dot_q = dot_g = None
    tie_exact = euclidean and ties != "stable"
    if euclidean:
        # products of centred, rescaled embeddings; the order is repaired by exact distances
        # of the embeddings themselves (search.EuclideanOrder). Tie modes: float64 products,
        # exact values wherever near-equal scores meet (their equal values: exact ties)
        frame = search.Frame.of(query, gallery)
        dtype = torch.float64 if tie_exact else None
        q_all = frame.apply(query, dtype)
        g = q_all if gallery is query else frame.apply(gallery, dtype)
        exact = search.EuclideanOrder(g, gallery, frame)
    elif distance == "dot":  # scaled by powers of two: no product overflows or underflows
        q_all, dot_q = search.dot_scale(q_all)
        g, dot_g = search.dot_scale(g, g.abs().amax())
    g_sq = (g * g).sum(1) if euclidean else None
    sync_free = sizing.sync_free(device) and backend != "faiss"
    # 1-D labels: R and candidate counts from label counts, relevance read at the
    # ranked positions only, exclusion written into the scores: no [c, G] gains.
    # (tie modes other than "stable" read the gains of tied candidates past the cut: [c, G] gains)
    binary = relevance is None and query_labels.ndim == 1 and ties == "stable"
    exclusion = None
    largest_r = None  # the largest R of the call (1-D labels, @r keys): one host read
    n_neighbours = neighbours[0] if neighbours else 0
    if binary:
        n_relevant, n_candidates = search.label_counts(query_labels, gallery_labels, query_ids, gallery_ids)
        if query_ids is not None and not sync_free:  # sync-free: an id comparison per chunk (no host read)
            exclusion = search.Exclusion(query_ids, gallery_ids)
        if at_r:
            largest_r = int(n_relevant.max()) if n_query else 0
    # Only whole-list rankings, and @r ones with a [c, G] gain matrix, hold the deep
    # per-pair scratch; the 1-D-label path keeps the scores and a top-k (or top-R) per row.
    budget = sizing.memory_budget(device, memory_budget)
    if binary and not whole:
        ranked = min(n_gallery, max(depth, n_neighbours, largest_r or 0))
        rows = sizing.chunk_rows(n_gallery, False, budget, ranked=ranked)
    else:
        rows = sizing.chunk_rows(n_gallery, whole or at_r, budget)
    faiss = search.FaissSearch(g, distance) if backend == "faiss" else None
    if faiss is not None:
        rows = max(rows, 4096)  # faiss keeps only k results per query: large chunks are cheap
    depth_or_all = n_gallery if whole else depth
    if n_neighbours:
        if faiss is not None:
            raise ValueError("return_neighbours needs backend='torch'")
        depth_or_all = max(depth_or_all, n_neighbours)
        nb_index = torch.full((n_query, n_neighbours), -1, dtype=torch.int64, device=device)
        nb_score = torch.full((n_query, n_neighbours), float("-inf"), dtype=torch.float64, device=device)
    chunks = [slice(start, start + rows) for start in range(0, n_query, rows)]

    # sync-free: the callables' outputs are tested once, after the loop
    checks = search.Checks() if sync_free else None

    def gains_of(part):
        gain = search.gains(query_labels[part], gallery_labels, relevance, checks=checks)
        return gain, search.eligible(None if query_ids is None else query_ids[part], gallery_ids)

    max_relevant = None
    if sync_free and at_r:  # the largest R of the call, read once
        if binary:
            max_relevant = largest_r
        else:
            maxima = []
            for part in chunks:
                gain, mask = gains_of(part)
                maxima.append(_count_relevant(gain if mask is None else gain.masked_fill(~mask, 0)).max())
            max_relevant = int(torch.stack(maxima).max()) if maxima else 0

    def keep_neighbours(part, ranking, scores):
        """The first k ranked items of the chunk and their scores (larger = closer)."""
        if not n_neighbours:
            return
        idx, valid = ranking.index[:, :n_neighbours], ranking.valid[:, :n_neighbours]
        if euclidean:  # the exact distance, in the embeddings' units (the frame's scaled back)
            c, k = idx.shape
            rows = torch.arange(c, device=device).repeat_interleave(k, output_size=c * k)
            sq = exact.exact(query[part], rows, idx.reshape(-1)).view(c, k)
            e = exact.frame.exponent
            found = -(torch.ldexp(sq.sqrt(), e) if distance == "euclidean" else torch.ldexp(sq, 2 * e))
        else:
            found = scores.gather(1, idx).to(torch.float64)
        if dot_q is not None:  # the scaled product back in the embeddings' units
            found = found / (dot_q[part] * dot_g)
        elif distance == "hamming":  # D - 2 hamming
            found = (found - q_all.shape[1]) / 2
        nb_index[part] = torch.where(valid, idx, -1)
        nb_score[part] = torch.where(valid, found, float("-inf"))

    # one score block for every chunk (named distances, float32): no fresh allocation
    # per chunk (see search.similarity)
    buffer = None
    if not callable(distance) and backend != "faiss" and n_query and q_all.dtype == torch.float32:
        buffer = torch.empty(max(min(rows, n_query), search.MIN_ROWS), n_gallery, device=device)

    def chunk_ranking(part, select):
        """The Ranking of the queries ``part`` (a slice, or positions when re-ranking)."""
        if tie_exact:
            scores, ranking = None, _rank_ties(part, select)
        else:
            scores = search.similarity(q_all[part], g, distance, g_sq, out=buffer, checks=checks)
            ranking = _rank_chunk(part, select, scores)
        keep_neighbours(part, ranking, scores)
        return ranking

    # with neighbours, every near-equal run of the top is put in exact order (gains: the positions)
    def gain_or_position(gain_at):
        return (lambda rows, idx: idx) if n_neighbours else gain_at

    def _rank_ties(part, select):
        """Euclidean under a tie mode: scores whose order and equal values at the cut are
        the exact distances' (search.EuclideanOrder.tie_scores)."""
        gain, mask = gains_of(part)
        n_relevant = _count_relevant(gain if mask is None else gain.masked_fill(~mask, 0))
        d = _depth(depth_or_all, at_r, n_relevant, max_relevant, n_gallery)
        scores = exact.tie_scores(q_all[part], query[part], d, mask)
        return rank_dense(scores, gain, depth_or_all, mask=mask, at_r=at_r, need_ideal=need_ideal, select=select,
                          max_relevant=max_relevant, ties=ties)

    def _rank_chunk(part, select, scores):
        if binary:
            if exclusion is not None:
                scores.index_put_(exclusion.pairs(part), torch.tensor(float("-inf"), dtype=scores.dtype))
            elif query_ids is not None:
                scores.masked_fill_(query_ids[part].unsqueeze(1) == gallery_ids, float("-inf"))
            labels = query_labels[part].unsqueeze(1)
            top = None if exact is None else exact.top(
                q_all[part], gain_or_position(lambda rows, i: gallery_labels[i] == labels[rows]), select=select,
                qx=query[part])
            return rank_binary(
                scores, depth_or_all, lambda idx: gallery_labels[idx] == labels, n_relevant[part],
                n_candidates[part], at_r=at_r, need_ideal=need_ideal, top=top, select=select,
                max_relevant=max_relevant,
            )
        gain, mask = gains_of(part)
        top = None if exact is None else exact.top(
            q_all[part], gain_or_position(lambda rows, idx: gain[rows.unsqueeze(1), idx]), select=select,
            qx=query[part])
        return rank_dense(scores, gain, depth_or_all, mask=mask, at_r=at_r, need_ideal=need_ideal, top=top,
                          select=select, max_relevant=max_relevant, ties=ties)

    values = torch.empty(n_query, len(keys), dtype=torch.float64, device=device)
    flags = []
    for part in _progress(chunks, progress, len(chunks)):
        if faiss is not None:
            values[part] = ranking_values(_faiss_ranking(
                faiss, q_all[part], query_labels[part], gallery_labels, depth, at_r, need_ideal,
                n_relevant[part], n_candidates[part], exclusion, part, query_ids, gallery_ids), keys)
            continue
        ranking = chunk_ranking(part, "deferred" if sync_free else "checked")
        values[part] = ranking_values(ranking, keys)
        if ranking.inexact is not None:
            flags.append((part, ranking.inexact))
    if flags:  # sync-free: rows whose tie crosses the cut, re-ranked by a full stable sort
        inexact = torch.zeros(n_query, dtype=torch.bool, device=device)
        for part, flag in flags:
            inexact[part] = flag
        redo = inexact.nonzero().squeeze(1)
        for start in range(0, redo.numel(), rows):
            part = redo[start:start + rows]
            values[part] = ranking_values(chunk_ranking(part, "exact"), keys)
    if checks is not None:
        checks.raise_any()
    if n_neighbours:
        neighbours[1], neighbours[2] = nb_index, nb_score
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


def _progress(it, enabled: Optional[bool], total: int):
    bar = optional.progress_bar(enabled)  # None: auto (a terminal, not CI)
    if bar is None:
        return it
    return bar(it, total=total, desc="retrieval-metrics", unit="chunk")


# A whole-list key ranks every gallery item; cutoff keys keep only the top k. Past this
# gallery size and ratio to the deepest cutoff, evaluate_embeddings says so once per call.
WHOLE_LIST_NOTICE = (4096, 16)


def _whole_list_notice(keys: Sequence[MetricKey], n_gallery: int) -> None:
    depth, _, whole = depth_needed(keys)
    size, ratio = WHOLE_LIST_NOTICE
    if whole and n_gallery >= size and n_gallery >= ratio * max(depth, 1):
        names = [m.key for m in keys if m.spec.per_query and m.cutoff is None]
        cutoffs = f", where the cutoff keys rank only the top {depth}" if depth else ""
        warnings.warn(
            f"whole-list keys ({', '.join(names)}) rank all {n_gallery} gallery items of every query{cutoffs}: "
            f"this evaluation is many times slower than with cutoffs; a cutoff such as '{names[0]}@100' "
            "(or '@r' where the key takes it) bounds the work",
            stacklevel=3,
        )


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
    progress: Optional[bool] = None,
    backend: str = "torch",
    ci: Optional[float] = None,
    ci_method: str = "bootstrap",
    n_resamples: int = 1000,
    seed: int = 0,
    keep_per_query: bool = False,
    return_neighbours: Optional[int] = None,
    confidence: Optional[Tensor] = None,
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
            avg_of_avgs); ``"all"``: also ``"{key}/class={label}"`` entries. Labels
            are grouped by value, ``[N, C]`` labels by distinct row (``relevance``
            or not; ``{label}`` is the row, e.g. ``[0, 1, 1]``).
        memory_budget: bytes of scratch for one query chunk; None (default): the
            device's share, 256 MiB on CPU and a quarter of the free memory on CUDA
            (within 64 MiB-16 GiB; see ``retrieval_core.sizing``). An int bounds the
            scratch on every device.
        progress: a tqdm progress bar over chunks: True, False, or None (default:
            shown when stderr is a terminal and the ``CI`` variable is unset).
        backend: ``"torch"`` (default: exact, deterministic ties on any device) or
            ``"faiss"`` (CPU, float32, class labels, cosine/dot/euclidean, no
            whole-list keys): faiss' flat index finds the candidates; values equal
            the torch backend's except between candidates within float rounding.
        ci, ci_method, n_resamples, seed, keep_per_query: as :func:`evaluate_scores`
            (per-query keys; ``query_ids`` are the ids of ``results.per_query`` when
            given). ``ci`` is not available with ``per_class``.
        return_neighbours: ``k``: ``results.neighbours = (neighbours [Q, k], scores
            [Q, k])``, each query's first ``k`` gallery items in rank order (the
            ranking of the evaluation): gallery ids when ids were given
            (``gallery_ids``, or ``query_ids`` with ``gallery=None``), else gallery
            positions; scores larger = closer (cosine similarity, dot product, or the
            negated distance). A slot past the query's candidates holds -1 and -inf.
        confidence: ``[Q]`` finite floats, one per query (higher = more
            confident), for the confidence keys (``"erc:cmc@1"``, ``"conf:map@r"``,
            ``"spearman:..."``, ``"kendall:..."``; see :func:`evaluate_scores`).

    Example:
        >>> import torch
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> labels = torch.tensor([0, 0, 1, 1])
        >>> r = evaluate_embeddings(x, labels, ["cmc@1", "map@r"])
        >>> r["cmc@1"].item(), r["map@r"].item()
        (1.0, 1.0)
        >>> r = evaluate_embeddings(x, labels, ["spearman:map@r"], confidence=torch.tensor([0.9, 0.2, 0.5, 0.7]))
        >>> r["spearman:map@r"].item()  # every value is 1: the correlation is undefined
        nan
    """
    keys = parse_metrics(metrics)
    check_embedding_options(distance=distance, relevance=relevance, ties=ties, empty=empty, reduce=reduce,
                            per_class=per_class, memory_budget=memory_budget, backend=backend, keys=keys)
    stats = check_stats_options(keys, ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                                keep_per_query=keep_per_query, reduce=reduce, per_class=per_class)
    n_neighbours = check_return_neighbours(return_neighbours)
    given_ids = query_ids
    query_keys, set_keys = split_scopes(keys)
    custom = relevance is not None
    query = check_embeddings("query", query, distance)
    query_labels = check_labels("query_labels", query_labels, query.shape[0], custom)
    check_pairs(gallery, gallery_labels, query_ids, gallery_ids)
    self_gallery = gallery is None
    if self_gallery:
        gallery, gallery_labels = query, query_labels
        if query_ids is None:
            query_ids = torch.arange(query.shape[0], device=query.device)
        gallery_ids = query_ids
    else:
        gallery = check_embeddings("gallery", gallery, distance)
        gallery_labels = check_labels("gallery_labels", gallery_labels, gallery.shape[0], custom)
        check_query_gallery(query, query_labels, gallery, gallery_labels, custom)
    if query_ids is not None:
        query_ids = check_rows("query_ids", query_ids, query.shape[0], unit="embedding")
        gallery_ids = check_rows("gallery_ids", gallery_ids, gallery.shape[0], unit="embedding")
    check_same_device(query=query, query_labels=query_labels, gallery=gallery, gallery_labels=gallery_labels,
                      query_ids=query_ids, gallery_ids=gallery_ids)
    check_backend(backend, distance=distance, custom=custom, labels=query_labels, device=query.device,
                  whole=depth_needed(query_keys)[2])
    budget = sizing.memory_budget(query.device, check_memory_budget(memory_budget))
    check_cutoffs(query_keys, gallery.shape[0])
    check_per_class(per_class, query_labels, custom)
    if categories is not None:
        check_categories(categories, query.shape[0], "query")
    if confidence is not None:
        confidence = check_confidence(confidence, query.shape[0], "query").to(query.device)
    check_embedding_values(query, query_labels, None if self_gallery else gallery,
                           None if self_gallery else gallery_labels, distance=distance, custom=custom)

    _whole_list_notice(query_keys, gallery.shape[0])
    results = MetricResults(n_queries=torch.tensor(query.shape[0]))
    check_return_neighbours(n_neighbours, gallery.shape[0])
    if n_neighbours and not query_keys:
        raise ValueError("return_neighbours needs a per-query key (e.g. 'cmc@1'): the neighbours come from its ranking")
    if n_neighbours and backend != "torch":
        raise ValueError(f"return_neighbours needs backend='torch'; got backend={backend!r}")
    found = [n_neighbours, None, None]
    if query_keys:
        values = embedding_values(
            query, query_labels, query_keys, gallery=gallery, gallery_labels=gallery_labels, distance=distance,
            query_ids=query_ids, gallery_ids=gallery_ids, relevance=relevance, memory_budget=budget, progress=progress,
            backend=backend, ties=ties, neighbours=found,
        )
        results = aggregate_queries(values, [m.key for m in query_keys], query_labels, empty=empty, reduce=reduce,
                                    per_class=per_class, categories=categories, confidence=confidence, ties=ties,
                                    query_ids=given_ids, **stats)
    if set_keys:
        results.update(set_level_values(
            set_keys, query, query_labels, gallery=None if self_gallery else gallery,
            gallery_labels=None if self_gallery else gallery_labels, distance=distance,
            query_ids=query_ids, gallery_ids=gallery_ids, relevance=relevance, memory_budget=budget,
        ))
    # the requested keys first, in the order asked, then per-category/per-class views
    ordered = results.reordered([m.key for m in keys])
    if n_neighbours:
        positions, scores = found[1], found[2]
        named = gallery_ids if (given_ids is not None or not self_gallery) and gallery_ids is not None else None
        if named is not None:
            positions = torch.where(positions >= 0, named[positions.clamp(min=0)], -1)
        ordered.neighbours = (positions, scores)
    return ordered


def aggregate_queries(values: Tensor, names: Sequence[str], labels: Tensor, *, empty: str, reduce: str,
                      per_class: Optional[str], categories=None, confidence: Optional[Tensor] = None,
                      ties: str = "stable", ci: Optional[float] = None, ci_method: str = "bootstrap",
                      n_resamples: int = 1000, seed: int = 0, keep_per_query: bool = False,
                      query_ids: Optional[Tensor] = None) -> MetricResults:
    """:func:`~retrieval_core.aggregate.aggregate` of the per-query values ``[Q, M]``,
    then the per-class views of ``per_class`` (``labels``: the queries' labels): the
    step that the single-process and the distributed evaluations share."""
    results = aggregate(values, names, empty=empty, reduce=reduce, categories=categories, confidence=confidence,
                        ties=ties, ci=ci, ci_method=ci_method, n_resamples=n_resamples, seed=seed,
                        keep_per_query=keep_per_query, query_ids=query_ids)
    if per_class is not None:
        results.update(_per_class(values, names, labels, empty, reduce, per_class, confidence, ties,
                                  ci=ci, ci_out=results.ci, n_resamples=n_resamples, seed=seed))
    return results


def _per_class(values: Tensor, names, labels: Tensor, empty: str, reduce: str, per_class: str,
               confidence: Optional[Tensor] = None, ties: str = "stable", ci: Optional[float] = None,
               ci_out: Optional[dict] = None, n_resamples: int = 1000, seed: int = 0) -> dict:
    """PML's avg_of_avgs: the main keys become the mean over labels (``[N, C]``: distinct rows) of each label's value
    (confidence keys too: the mean of each label's value; their curves stay those of all queries).
    With ``ci``, ``ci_out`` receives the main keys' (bootstrap) intervals, replacing theirs."""
    by_label = aggregate(values, names, empty=empty, reduce=reduce, categories=labels, confidence=confidence,
                         ties=ties, ci=ci if per_class == "all" else None, n_resamples=n_resamples, seed=seed)
    label_names, _ = encode_labels(labels)
    out = {}
    for key in names:
        per = torch.stack([by_label[f"{key}/{n}"] for n in label_names])
        out[key] = reduce_values(per.unsqueeze(1), "mean")[0]
        if per_class == "all":
            out.update({f"{key}/class={n}": v for n, v in zip(label_names, per.unbind(0))})
            if ci is not None and f"{key}/{label_names[0]}" in by_label.ci:
                ci_out.update({f"{key}/class={n}": by_label.ci[f"{key}/{n}"] for n in label_names})
    if ci is not None:
        plain = [j for j, k in enumerate(names) if split_key(k) is None]  # confidence keys: no interval
        filled = _fill_empty(values[:, plain], [names[j] for j in plain], empty)
        ci_out.update(macro_intervals(filled, [names[j] for j in plain], ci, _category_groups(labels, values.device),
                                      reduce=reduce, n_resamples=n_resamples, seed=seed))
    return out
