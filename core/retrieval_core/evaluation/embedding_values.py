"""Per-query values of embeddings: query chunks under a memory budget, ranked against the whole gallery."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor

from .. import optional, search, sizing
from ..inputs.pairs import UserItems
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
    truth: Optional[UserItems] = None,
    exclude: Optional[UserItems] = None,
) -> Tensor:
    """Per-query values ``[Q, M]`` (NaN = undefined) of per-query ``keys``, chunk by chunk.

    ``neighbours``: a list of length 3 ``[k, None, None]`` (filled here with the
    ``[Q, k]`` gallery positions and scores of each query's first ``k`` ranked items,
    -1 and -inf past the candidates). ``truth``: the relevance of (query, gallery item)
    pairs (the labels then unread); ``exclude``: each query's excluded gallery items.

    Inputs are assumed checked (see :func:`evaluate_embeddings`). ``memory_budget``:
    bytes of scratch per chunk; None: the device's share (``sizing.memory_budget``).
    Where host reads synchronise (``sizing.sync_free``), the torch backend reads the
    device a constant number of times per call, for every distance and relevance: the
    largest R once (``@r``); after the loop the rows to re-rank exactly (a tie across
    the cut; for euclidean, rows whose float32 order may be wrong, re-ranked by the
    exact distance); the tests of callables' distances and gains, once. (Euclidean
    distances under a tie mode other than "stable" read each chunk's error window.)
    """
    walk = _ChunkWalk(query, query_labels, keys, gallery, gallery_labels, distance, query_ids, gallery_ids,
                      relevance, memory_budget, backend, ties, neighbours[0] if neighbours else 0, truth, exclude)
    values = torch.empty(walk.n_query, len(keys), dtype=torch.float64, device=walk.device)
    flags = []
    for part in _progress(walk.chunks, progress, len(walk.chunks)):
        if walk.faiss is not None:
            values[part] = ranking_values(walk.faiss_ranking(part), keys)
            continue
        ranking = walk.rank(part, "deferred" if walk.sync_free else "checked")
        values[part] = ranking_values(ranking, keys)
        if ranking.inexact is not None:
            flags.append((part, ranking.inexact))
    if flags:  # sync-free: rows whose tie crosses the cut, re-ranked by a full stable sort
        _rerank_inexact(walk, flags, values, keys)
    if walk.checks is not None:
        walk.checks.raise_any()
    if walk.n_neighbours:
        neighbours[1], neighbours[2] = walk.nb_index, walk.nb_score
    return values


def _rerank_inexact(walk: _ChunkWalk, flags, values: Tensor, keys) -> None:
    """The values of the rows flagged inexact (``flags``: ``(part, flag)`` per chunk), re-ranked
    with ``select="exact"``, chunk by chunk."""
    inexact = torch.zeros(walk.n_query, dtype=torch.bool, device=walk.device)
    for part, flag in flags:
        inexact[part] = flag
    redo = inexact.nonzero().squeeze(1)
    for start in range(0, redo.numel(), walk.rows):
        part = redo[start:start + walk.rows]
        values[part] = ranking_values(walk.rank(part, "exact"), keys)


class _ChunkWalk:
    """The state of one :func:`embedding_values` call, set up once: the options the keys
    need (depth, ``@r``, whole list, ideal gains), the embeddings prepared for the products
    (the search frame), the label counts and the exclusion, the chunks and their score
    buffer, and the neighbours' buffers. :meth:`rank` ranks one chunk of queries."""

    def __init__(self, query, query_labels, keys, gallery, gallery_labels, distance, query_ids, gallery_ids,
                 relevance, memory_budget, backend, ties, n_neighbours, truth=None, exclude=None):
        self.query, self.query_labels, self.gallery_labels = query, query_labels, gallery_labels
        self.truth, self.excluded = truth, exclude
        self.query_ids, self.gallery_ids, self.relevance = query_ids, gallery_ids, relevance
        self.distance, self.ties, self.n_neighbours = distance, ties, n_neighbours
        self.depth, self.at_r, self.whole = depth_needed(keys)
        self.n_query, self.n_gallery = query.shape[0], gallery.shape[0]
        self.device = query.device
        self.need_ideal = any(m.spec.needs_ideal for m in keys)
        self.euclidean = distance in ("euclidean", "squared_euclidean")
        self.tie_exact = self.euclidean and ties != "stable"
        self.fused, self.cuts = _euclidean_shortcuts(keys, self.depth, self.whole or self.at_r, n_neighbours)
        self._prepare_embeddings(query, gallery)
        self.sync_free = sizing.sync_free(self.device) and backend != "faiss"
        # 1-D labels: R and candidate counts from label counts, relevance read at the
        # ranked positions only, exclusion written into the scores: no [c, G] gains.
        # (tie modes other than "stable" read the gains of tied candidates past the cut: [c, G] gains)
        # (exclude= goes through the [c, G] mask with labels; relevance pairs of gain 1, by the scores:
        # excluded items' scores -inf, relevance looked up at the ranked positions, R and candidates counted)
        self.binary = relevance is None and query_labels.ndim == 1 and ties == "stable" and truth is None \
            and exclude is None
        self.truth_binary = truth is not None and truth.binary and ties == "stable" and not self.euclidean
        self._count_labels()
        self._plan_chunks(memory_budget, backend)
        # sync-free: the callables' outputs are tested once, after the loop
        self.checks = search.Checks() if self.sync_free else None
        self.max_relevant = self._largest_relevant()
        # one score block for every chunk (named distances, float32): no fresh allocation
        # per chunk (see search.similarity)
        self.buffer = None
        if not callable(distance) and backend != "faiss" and self.n_query and self.q_all.dtype == torch.float32:
            self.buffer = torch.empty(max(min(self.rows, self.n_query), search.MIN_ROWS), self.n_gallery,
                                      device=self.device)

    def _prepare_embeddings(self, query: Tensor, gallery: Tensor) -> None:
        """``q_all``, ``g`` (the embeddings as the products take them; dot: the queries unscaled,
        :meth:`queries` scales each chunk), ``exact`` (euclidean: the exact order), ``dot_q``,
        ``dot_g`` (dot: the scales) and ``g_sq``."""
        distance = self.distance
        self.q_all = search.prepare(query, distance)
        self.g = self.q_all if gallery is query else search.prepare(gallery, distance)
        self.exact = self.dot_q = self.dot_g = None
        if self.euclidean:
            # products of centred, rescaled embeddings; the order is repaired by exact distances
            # of the embeddings themselves (search.EuclideanOrder). Tie modes: float64 products,
            # exact values wherever near-equal scores meet (their equal values: exact ties)
            frame = search.Frame.of(query, gallery)
            dtype = torch.float64 if self.tie_exact else None
            self.q_all = frame.apply(query, dtype)
            self.g = self.q_all if gallery is query else frame.apply(gallery, dtype)
            self.exact = search.EuclideanOrder(self.g, gallery, frame, fused=self.fused)
        elif distance == "dot":  # scaled by powers of two: no product overflows or underflows
            # the queries' factors only ([Q, 1]): each chunk is scaled when ranked (no [Q, D] copy)
            self.dot_q = search.dot_factors(self.q_all)
            self.g, self.dot_g = search.dot_scale(self.g, self.g.abs().amax())
        self.g_sq = (self.g * self.g).sum(1) if self.euclidean else None

    def _count_labels(self) -> None:
        """1-D labels: ``n_relevant``, ``n_candidates`` from label counts, the ``exclusion``
        (host reads only) and ``largest_r``, the largest R of the call (``@r`` keys: one host read)."""
        self.exclusion = self.largest_r = self.n_relevant = self.n_candidates = None
        if self.truth_binary:
            self._count_truth()
            return
        if not self.binary:
            return
        self.n_relevant, self.n_candidates = search.label_counts(self.query_labels, self.gallery_labels,
                                                                 self.query_ids, self.gallery_ids)
        if self.query_ids is not None and not self.sync_free:  # sync-free: an id comparison per chunk (no host read)
            self.exclusion = search.Exclusion(self.query_ids, self.gallery_ids)
        if self.at_r:
            self.largest_r = int(self.n_relevant.max()) if self.n_query else 0

    def _count_truth(self) -> None:
        """Relevance pairs of gain 1: R, the query's relevant items but the excluded ones, and the
        candidates, the gallery but the excluded items (each query's pairs are distinct)."""
        self.n_relevant = self.truth.counts()
        self.n_candidates = torch.full_like(self.n_relevant, self.n_gallery)
        if self.excluded is not None:
            self.n_relevant = self.n_relevant - self.truth.overlap(self.excluded)
            self.n_candidates = self.n_candidates - self.excluded.counts()
        if self.at_r:
            self.largest_r = int(self.n_relevant.max()) if self.n_query else 0

    def _plan_chunks(self, memory_budget, backend) -> None:
        """``rows`` per chunk under the budget, the ``chunks``, the ``faiss`` index, the depth
        ranked (``depth_or_all``) and the neighbours' buffers ``nb_index``, ``nb_score``."""
        n_gallery, n_neighbours = self.n_gallery, self.n_neighbours
        # Only whole-list rankings, and @r ones with a [c, G] gain matrix, hold the deep
        # per-pair scratch; the 1-D-label path keeps the scores and a top-k (or top-R) per row.
        budget = sizing.memory_budget(self.device, memory_budget)
        if (self.binary or self.truth_binary) and not self.whole:
            ranked = min(n_gallery, max(self.depth, n_neighbours, self.largest_r or 0))
            rows = sizing.chunk_rows(n_gallery, False, budget, ranked=ranked)
        else:
            rows = sizing.chunk_rows(n_gallery, self.whole or self.at_r, budget)
        self.faiss = search.FaissSearch(self.g, self.distance) if backend == "faiss" else None
        if self.faiss is not None:
            rows = max(rows, 4096)  # faiss keeps only k results per query: large chunks are cheap
        self.depth_or_all = n_gallery if self.whole else self.depth
        self.nb_index = self.nb_score = None
        if n_neighbours:
            if self.faiss is not None:
                raise ValueError("return_neighbours needs backend='torch'")
            self.depth_or_all = max(self.depth_or_all, n_neighbours)
            self.nb_index = torch.full((self.n_query, n_neighbours), -1, dtype=torch.int64, device=self.device)
            self.nb_score = torch.full((self.n_query, n_neighbours), float("-inf"), dtype=torch.float64,
                                       device=self.device)
        self.rows = rows
        self.chunks = [slice(start, start + rows) for start in range(0, self.n_query, rows)]

    def _largest_relevant(self) -> Optional[int]:
        """Sync-free ``@r``: the largest R of the call, read once (else None: each block reads its own)."""
        if not (self.sync_free and self.at_r):
            return None
        if self.binary or self.truth_binary:
            return self.largest_r
        maxima = []
        for part in self.chunks:
            gain, mask = self._gains_of(part)
            maxima.append(_count_relevant(gain if mask is None else gain.masked_fill(~mask, 0)).max())
        return int(torch.stack(maxima).max()) if maxima else 0

    def _gains_of(self, part):
        """``(gains [c, G], eligible mask or None)`` of the queries ``part``: relevance pairs or labels;
        not eligible, the query's own id and its excluded items."""
        if self.truth is not None:
            gain = self.truth.dense(part)
        else:
            gain = search.gains(self.query_labels[part], self.gallery_labels, self.relevance, checks=self.checks)
        mask = search.eligible(None if self.query_ids is None else self.query_ids[part], self.gallery_ids)
        if self.excluded is not None:
            kept = ~self.excluded.dense(part)
            mask = kept if mask is None else mask & kept
        return gain, mask

    def queries(self, part) -> Tensor:
        """The queries ``part`` as the products take them (dot: scaled row by row, as
        ``search.dot_scale`` scales the whole: the same values)."""
        if self.dot_q is None:
            return self.q_all[part]
        return search.dot_apply(self.q_all[part], self.dot_q[part])

    def rank(self, part, select):
        """The Ranking of the queries ``part`` (a slice, or positions when re-ranking)."""
        if self.tie_exact:
            scores, ranking = None, self._rank_ties(part, select)
        else:
            scores = search.similarity(self.queries(part), self.g, self.distance, self.g_sq, out=self.buffer,
                                       checks=self.checks, fused=self.fused)
            if self.binary:
                ranking = self._rank_binary(part, select, scores)
            elif self.truth_binary:
                ranking = self._rank_truth(part, select, scores)
            else:
                ranking = self._rank_dense(part, select, scores)
        if self.n_neighbours:
            self._keep_neighbours(part, ranking, scores)
        return ranking

    def _rank_ties(self, part, select):
        """Euclidean under a tie mode: scores whose order and equal values at the cut are
        the exact distances' (search.EuclideanOrder.tie_scores)."""
        gain, mask = self._gains_of(part)
        n_relevant = _count_relevant(gain if mask is None else gain.masked_fill(~mask, 0))
        d = _depth(self.depth_or_all, self.at_r, n_relevant, self.max_relevant, self.n_gallery)
        scores = self.exact.tie_scores(self.q_all[part], self.query[part], d, mask)
        return rank_dense(scores, gain, self.depth_or_all, mask=mask, at_r=self.at_r, need_ideal=self.need_ideal,
                          select=select, max_relevant=self.max_relevant, ties=self.ties)

    def _gain_or_position(self, gain_at):
        """with neighbours, every near-equal run of the top is put in exact order (gains: the positions)"""
        return (lambda rows, idx: idx) if self.n_neighbours else gain_at

    def _rank_binary(self, part, select, scores):
        """1-D labels: the excluded pairs written into the scores, relevance read at the ranked positions."""
        query_ids, gallery_labels = self.query_ids, self.gallery_labels
        if self.exclusion is not None:
            scores.index_put_(self.exclusion.pairs(part), torch.tensor(float("-inf"), dtype=scores.dtype))
        elif query_ids is not None:
            scores.masked_fill_(query_ids[part].unsqueeze(1) == self.gallery_ids, float("-inf"))
        labels = self.query_labels[part].unsqueeze(1)
        top = None if self.exact is None else self.exact.top(
            self.q_all[part], self._gain_or_position(lambda rows, i: gallery_labels[i] == labels[rows]),
            select=select, qx=self.query[part], cuts=self.cuts)
        return rank_binary(scores, self.depth_or_all, lambda idx: gallery_labels[idx] == labels,
                           self.n_relevant[part], self.n_candidates[part], at_r=self.at_r, need_ideal=self.need_ideal,
                           top=top, select=select, max_relevant=self.max_relevant)

    def _rank_truth(self, part, select, scores):
        """Relevance pairs of gain 1: the excluded items' scores -inf, relevance looked up at the
        ranked positions (no [c, G] gains nor mask)."""
        if self.excluded is not None:
            self.excluded.fill_(part, scores, float("-inf"))
        return rank_binary(scores, self.depth_or_all, lambda idx: self.truth.contains(part, idx),
                           self.n_relevant[part], self.n_candidates[part], at_r=self.at_r, need_ideal=self.need_ideal,
                           select=select, max_relevant=self.max_relevant)

    def _rank_dense(self, part, select, scores):
        """Gains ``[c, G]`` (multi-label, relevance callables, tie modes): a dense ranking."""
        gain, mask = self._gains_of(part)
        top = None if self.exact is None else self.exact.top(
            self.q_all[part], self._gain_or_position(lambda rows, idx: gain[rows.unsqueeze(1), idx]), select=select,
            qx=self.query[part], cuts=self.cuts)
        return rank_dense(scores, gain, self.depth_or_all, mask=mask, at_r=self.at_r, need_ideal=self.need_ideal,
                          top=top, select=select, max_relevant=self.max_relevant, ties=self.ties)

    def _keep_neighbours(self, part, ranking, scores):
        """The first k ranked items of the chunk and their scores (larger = closer)."""
        n_neighbours = self.n_neighbours
        idx, valid = ranking.index[:, :n_neighbours], ranking.valid[:, :n_neighbours]
        if self.euclidean:  # the exact distance, in the embeddings' units (the frame's scaled back)
            c, k = idx.shape
            rows = torch.arange(c, device=self.device).repeat_interleave(k, output_size=c * k)
            sq = self.exact.exact(self.query[part], rows, idx.reshape(-1)).view(c, k)
            e = self.exact.frame.exponent
            found = -(torch.ldexp(sq.sqrt(), e) if self.distance == "euclidean" else torch.ldexp(sq, 2 * e))
        else:
            found = scores.gather(1, idx).to(torch.float64)
        if self.dot_q is not None:  # the scaled product back in the embeddings' units
            found = found / (self.dot_q[part] * self.dot_g)
        elif self.distance == "hamming":  # D - 2 hamming
            found = (found - self.q_all.shape[1]) / 2
        self.nb_index[part] = torch.where(valid, idx, -1)
        self.nb_score[part] = torch.where(valid, found, float("-inf"))

    def faiss_ranking(self, part):
        """The chunk's Ranking from faiss candidate lists (1-D labels)."""
        return _faiss_ranking(self.faiss, self.queries(part), self.query_labels[part], self.gallery_labels, self.depth,
                              self.at_r, self.need_ideal, self.n_relevant[part], self.n_candidates[part],
                              self.exclusion, part, self.query_ids, self.gallery_ids)


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
