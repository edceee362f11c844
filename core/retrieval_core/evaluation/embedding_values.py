"""Per-query values of embeddings: query chunks under a memory budget, ranked against the whole gallery."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from .. import optional, search, sizing
from ..metrics.keys import MetricKey, depth_needed, ranking_values
from ..ranking.dense import block_depth as _depth, count_relevant as _count_relevant, rank_binary, rank_dense

__all__ = ["DEFAULT_MEMORY_BUDGET", "embedding_values"]

# The CPU's default scratch of one query chunk; the default of every device is
# sizing.memory_budget(device) (a share of a GPU's free memory).
DEFAULT_MEMORY_BUDGET = sizing.CPU_MEMORY_BUDGET
_chunk_rows = sizing.chunk_rows  # queries per chunk for a budget (bytes per pair: see sizing)


def _euclidean_shortcuts(keys, depth: int, deep: bool, n_neighbours: int):
    """``(fused, cuts)`` of the exact Euclidean order: ``fused``, shallow rankings take
    -|g|^2 inside the float32 product (a wider error window, one pass less); ``cuts``,
    the depths of keys that read only the set of the first k (hits@k), across which
    alone the order is repaired (None: some key reads the order, or neighbours are asked)."""
    fused = not deep and max(depth, n_neighbours) <= search.FUSED_MAX_DEPTH
    per_query = [m for m in keys if m.spec.per_query]
    order_free = per_query and not n_neighbours and all(
        m.spec.order_free and isinstance(m.depth, int) for m in per_query)
    return fused, (sorted({m.depth for m in per_query}) if order_free else None)


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
    fused, cuts = _euclidean_shortcuts(keys, depth, whole or at_r, neighbours[0] if neighbours else 0)
    if euclidean:
        # products of centred, rescaled embeddings; the order is repaired by exact distances
        # of the embeddings themselves (search.EuclideanOrder). Tie modes: float64 products,
        # exact values wherever near-equal scores meet (their equal values: exact ties)
        frame = search.Frame.of(query, gallery)
        dtype = torch.float64 if tie_exact else None
        q_all = frame.apply(query, dtype)
        g = q_all if gallery is query else frame.apply(gallery, dtype)
        exact = search.EuclideanOrder(g, gallery, frame, fused=fused)
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
            scores = search.similarity(q_all[part], g, distance, g_sq, out=buffer, checks=checks, fused=fused)
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
                qx=query[part], cuts=cuts)
            return rank_binary(scores, depth_or_all, lambda idx: gallery_labels[idx] == labels, n_relevant[part],
                               n_candidates[part], at_r=at_r, need_ideal=need_ideal, top=top, select=select,
                               max_relevant=max_relevant)
        gain, mask = gains_of(part)
        top = None if exact is None else exact.top(
            q_all[part], gain_or_position(lambda rows, idx: gain[rows.unsqueeze(1), idx]), select=select,
            qx=query[part], cuts=cuts)
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
