"""Exact k-NN over a gallery sharded across ranks (``shard_gallery=True`` of
:func:`retrieval_core.distributed.evaluate_embeddings_across_ranks`).

The gallery never leaves its rank. Every rank walks the same sequence of query
chunks (rank 0's queries, then rank 1's, ...): the chunk's owner broadcasts it,
every rank scores it against its own shard, R and the candidate counts are summed
over ranks (all-reduce), each rank keeps its shard's first ``d`` candidates in the
stable order, and the owner merges the shards' lists by (score desc, global
gallery position asc). The stable order restricted to a shard is the shard's own
stable order, so the merge is the stable top ``d`` of the whole gallery: ties at
the cut need no extra depth. Euclidean distances are merged by the exact float64
squared distance (then position), the order whose gains the single-process
:class:`~retrieval_core.search.EuclideanOrder` reproduces; each shard sends its
exact top ``d``, found within the float32 error window of its ``d``-th candidate.

Per rank: its shard, one query chunk of scores ``[c, shard]`` and the merge
buffers ``[ranks, c, d]``. Whole-list keys and set-level keys are refused before
(they need every candidate, or every embedding, in one place).

Equality with one process rests on products whose entries do not depend on the
width of the gallery matrix: shards are padded to ``search.MIN_ROWS`` rows
(narrower products take other BLAS kernels), and a gallery smaller than that is
gathered and evaluated unsharded.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist
from torch import Tensor

from .. import optional, search
from ..evaluation.embedding_values import DEFAULT_MEMORY_BUDGET
from ..metrics.keys import depth_needed, ranking_values
from ..ranking.ranking import Ranking
from ..ranking.topk import stable_top
from . import shares
from .agree import agree
from .collectives import all_reduce_sum, gather_cat, rank_of, world_size

__all__ = ["sharded_values"]

# scores, gains, mask and top-k scratch per (query, shard item) pair
_BYTES_PER_PAIR = 24
# a float32 prefix this much longer than d re-ranks the chunk with float64 scores
_HEAVY_EXTRA = 64


def _src(owner: int, group) -> int:
    return owner if group is None else dist.get_global_rank(group, owner)


def _broadcast(t: Optional[Tensor], shape, dtype: torch.dtype, src: int, group, device) -> Tensor:
    """``t`` of rank ``src`` on every rank, moved as raw bytes (any dtype on any backend)."""
    n_bytes = int(torch.Size(shape).numel()) * torch.empty(0, dtype=dtype).element_size()
    if t is not None:
        buf = t.contiguous().reshape(-1).view(torch.uint8).clone()
    else:
        buf = torch.empty(n_bytes, dtype=torch.uint8, device=device)
    if n_bytes:
        dist.broadcast(buf, src, group=group)
    return buf.view(dtype).reshape(shape)


class _Shard:
    """This rank's gallery rows, prepared once for the chunks' products."""

    def __init__(self, gallery: Tensor, labels: Tensor, ids: Optional[Tensor], offset: int, distance,
                 frame: Optional[search.Frame] = None, dot_largest: Optional[Tensor] = None):
        self.n = gallery.shape[0]
        self.labels, self.ids, self.offset, self.distance = labels, ids, offset, distance
        self.frame, self.dot_largest = frame, dot_largest  # (as every rank's: the whole gallery's)
        self.g = search.prepare(gallery, distance)
        if frame is not None:
            self.g = frame.apply(gallery)
        elif dot_largest is not None:
            self.g, _ = search.dot_scale(self.g, dot_largest)
        self.euclidean = distance in ("euclidean", "squared_euclidean")
        self.exact = search.EuclideanOrder(self.g, gallery, frame) if self.euclidean and self.n else None
        # products of at least MIN_ROWS gallery rows give every entry the value it has
        # in the whole gallery's product; the padding columns are cut off
        pad = 0 if callable(distance) else max(0, search.MIN_ROWS - self.n)
        self.g_pad = torch.cat([self.g, self.g.new_zeros(pad, self.g.shape[1])]) if pad else self.g
        self.g_sq = (self.g_pad * self.g_pad).sum(1) if self.euclidean else None
        self.exclusion = None if ids is None else search.Exclusion(ids[:0], ids)

    def prepare(self, q: Tensor) -> Tensor:
        """A query chunk as the products take it (as one process prepares it)."""
        if self.frame is not None:
            return self.frame.apply(q)
        q = search.prepare(q, self.distance)
        return search.dot_scale(q)[0] if self.dot_largest is not None else q

    def scores(self, q: Tensor) -> Tensor:
        return search.similarity(q, self.g_pad, self.distance, self.g_sq)[:, : self.n]


def _chunk_rows(budget: int, largest_shard: int) -> int:
    return max(1, budget // (_BYTES_PER_PAIR * max(1, largest_shard)))


def _local_counts(shard: _Shard, q, labels, ids, binary: bool, relevance):
    """(scores [c, n] with -inf at excluded pairs, gains or None, R part, candidates part)."""
    c = q.shape[0]
    if shard.n == 0:
        zero = torch.zeros(c, dtype=torch.int64, device=q.device)
        return None, None, zero, zero
    scores = shard.scores(q)
    if binary:
        n_relevant, n_candidates = search.label_counts(labels, shard.labels, ids, shard.ids)
        if shard.exclusion is not None:
            shard.exclusion.query_ids = ids
            scores.index_put_(shard.exclusion.pairs(slice(0, c)), torch.tensor(float("-inf"), dtype=scores.dtype))
        return scores, None, n_relevant, n_candidates
    gains = search.gains(labels, shard.labels, relevance)
    mask = search.eligible(ids, shard.ids)
    if mask is not None:
        gains = gains.masked_fill(~mask, 0)
        scores = scores.masked_fill(~mask, float("-inf"))
        n_candidates = mask.sum(1)
    else:
        n_candidates = torch.full((c,), shard.n, dtype=torch.int64, device=q.device)
    return scores, gains, torch.count_nonzero(gains, dim=1), n_candidates


def _exact_top(shard: _Shard, q: Tensor, qx: Tensor, scores: Tensor, d: int):
    """The shard's first ``d`` candidates in the exact euclidean order: ``(-d64, idx)``
    with ``-inf`` keys for excluded pairs (``q``: prepared queries, ``qx``: as given)."""
    exact = shard.exact
    vals, idx, _ = exact.prefix(scores, d, q, exact.terms32, stable_top, rows_alone=False)
    if vals.shape[1] > 2 * d + _HEAVY_EXTRA:  # dense near-ties: a float64 window is narrower
        s64 = exact._scores64(qx).masked_fill_(torch.isneginf(scores), float("-inf"))
        vals, idx, _ = exact.prefix(s64, d, q, exact.terms64, stable_top, rows_alone=False)
    real = torch.isfinite(vals)
    rows = torch.arange(q.shape[0], device=q.device).unsqueeze(1).expand_as(idx)
    key = torch.full(vals.shape, float("-inf"), dtype=torch.float64, device=q.device)
    key[real] = -exact.exact(qx, rows[real], idx[real])
    order = torch.argsort(idx, dim=1, stable=True)
    order = order.gather(1, torch.argsort(key.gather(1, order), dim=1, descending=True, stable=True))[:, :d]
    return key.gather(1, order), idx.gather(1, order)


def _candidates(shard: _Shard, q, qx, labels, scores, gains, d: int, n_total: int, need_ideal: bool) -> Tensor:
    """``[c, d, 4]`` float64: (merge key, global position, gain, ideal gain) of the
    shard's first ``d`` candidates, padded with (-inf, n_total, 0, 0)."""
    c = q.shape[0]
    out = torch.zeros(c, d, 4, dtype=torch.float64, device=q.device)
    out[:, :, 0] = float("-inf")
    out[:, :, 1] = n_total
    k = min(d, shard.n)
    if k == 0:
        return out
    if shard.exact is not None:
        key, idx = _exact_top(shard, q, qx, scores, k)
    else:
        vals, idx = stable_top(scores, k)
        key = vals.to(torch.float64)
    valid = key > float("-inf")
    gain = (shard.labels[idx] == labels.unsqueeze(1)) if gains is None else gains.gather(1, idx)
    out[:, :k, 0] = key
    out[:, :k, 1] = (idx + shard.offset).to(torch.float64)
    out[:, :k, 2] = gain.to(torch.float64) * valid
    if need_ideal and gains is not None:
        top = (gains.to(torch.uint8) if gains.dtype == torch.bool else gains).topk(k, dim=1).values
        out[:, :k, 3] = top.to(torch.float64)
    return out


def _merge(parts: List[Tensor], d: int, n_relevant: Tensor, n_candidates: Tensor, n_total: int, binary: bool,
           need_ideal: bool) -> Ranking:
    """The stable top ``d`` of the shards' candidate lists: (key desc, position asc)."""
    every = torch.cat(parts, dim=1)  # [c, ranks * d, 4]
    key, pos, gain = every[:, :, 0], every[:, :, 1], every[:, :, 2]
    order = torch.argsort(pos, dim=1, stable=True)
    order = order.gather(1, torch.argsort(key.gather(1, order), dim=1, descending=True, stable=True))[:, :d]
    valid = key.gather(1, order) > float("-inf")
    ideal = None
    if need_ideal:
        if binary:
            ideal = (torch.arange(d, device=key.device) < n_relevant.unsqueeze(1)).to(torch.float64)
        else:
            ideal = every[:, :, 3].topk(d, dim=1).values
    return Ranking(relevance=gain.gather(1, order) * valid, valid=valid, n_relevant=n_relevant,
                   n_candidates=n_candidates, ideal=ideal, complete=d >= n_total)


def _shard_of(query: Tensor, gallery: Tensor, labels: Tensor, ids: Optional[Tensor], offset: int, distance,
              group) -> _Shard:
    """This rank's :class:`_Shard`, scaled as every rank's: euclidean, one frame of the whole
    gallery and queries (see search.Frame); dot, by the whole gallery's largest entry."""
    frame = dot_largest = None
    if distance in ("euclidean", "squared_euclidean"):  # one frame for every rank (see search.Frame)
        frame = search.Frame.of(query, gallery, reduce_max=lambda t: _all_reduce_max(t, group),
                                reduce_sum=lambda t: all_reduce_sum(t, group))
    elif distance == "dot":  # the whole gallery's largest entry scales every shard
        dot_largest = _all_reduce_max(gallery.abs().amax().to(torch.float64) if gallery.numel()
                                      else torch.zeros((), dtype=torch.float64, device=gallery.device), group)
    return _Shard(gallery, labels, ids, offset, distance, frame, dot_largest)


def _counts_across_ranks(shard: _Shard, q: Tensor, labels, ids, binary: bool, relevance, group, device):
    """``(prepared q, scores, gains, R, candidates)`` of a query chunk ``q`` on this rank's shard,
    R and the candidate counts summed over ranks; an error on any rank is raised on every rank."""
    c = q.shape[0]
    error: Optional[Exception] = None
    try:
        qp = shard.prepare(q)
        scores, gains, n_rel, n_cand = _local_counts(shard, qp, labels, ids, binary, relevance)
    except Exception as exc:  # noqa: BLE001 - every rank learns of it below
        error, n_rel = exc, torch.zeros(c, dtype=torch.int64, device=device)
        n_cand = n_rel
    counts = all_reduce_sum(torch.cat([n_rel.view(1, c), n_cand.view(1, c),
                                       torch.full((1, c), int(error is not None), device=n_rel.device)]))
    if bool(counts[2].any()):
        agree(lambda: _raise(error), group=group, device=device)
    return qp, scores, gains, counts[0], counts[1]


def sharded_values(query: Tensor, query_labels: Tensor, query_keys, *, gallery: Optional[Tensor],
                   gallery_labels: Optional[Tensor], query_ids: Optional[Tensor], gallery_ids: Optional[Tensor],
                   signatures: List[Dict[str, Any]], options: Dict[str, Any], group, device) -> Tensor:
    """``[q, M]`` per-query values of this rank's queries (checked inputs, ids as
    global positions for a self-gallery) against every rank's gallery shard;
    ``gallery=None``: each rank's queries are its shard."""

    world, rank = world_size(group), rank_of(group)
    self_gallery = gallery is None
    if self_gallery:
        gallery, gallery_labels, gallery_ids = query, query_labels, query_ids
    q_rows = [s["rows"] for s in signatures]
    g_rows = q_rows if self_gallery else [s["gallery_rows"] for s in signatures]
    n_total, dim = sum(g_rows), query.shape[1]
    if n_total == 0:
        raise ValueError(f"gallery is empty; got shape (0, {dim})")
    if n_total < search.MIN_ROWS:  # a tiny gallery: gathered, evaluated unsharded
        g, gl = gather_cat(gallery, group), gather_cat(gallery_labels, group)
        gi = None if gallery_ids is None else gather_cat(gallery_ids, group)
        values, _ = agree(lambda: (shares._share_values(query, query_labels, query_keys, g, gl, query_ids, gi, options,
                                                 show=False), None), group=group, device=device)
        return values
    distance, relevance = options["distance"], options["relevance"]
    binary = relevance is None and query_labels.ndim == 1
    depth, at_r, _ = depth_needed(query_keys)
    need_ideal = any(m.spec.needs_ideal for m in query_keys)
    shard = _shard_of(query, gallery, gallery_labels, gallery_ids, sum(g_rows[:rank]), distance, group)
    rows = _chunk_rows(options["memory_budget"] or DEFAULT_MEMORY_BUDGET, max(g_rows))
    with_ids = query_ids is not None
    values = torch.empty(query.shape[0], len(query_keys), dtype=torch.float64, device=query.device)
    chunks = [(owner, start) for owner in range(world) for start in range(0, q_rows[owner], rows)]
    if options["progress"] and rank == 0:
        chunks = optional.tqdm()(chunks, desc="retrieval-metrics (sharded)", unit="chunk")
    for owner, start in chunks:
        c = min(rows, q_rows[owner] - start)
        mine = owner == rank
        part = slice(start, start + c)
        src, sig = _src(owner, group), signatures[owner]  # shapes and dtypes as the owner holds them
        q = _broadcast(query[part] if mine else None, (c, sig["dim"]), _dtype(sig["dtype"]), src, group, device)
        lab = _broadcast(query_labels[part] if mine else None, (c, *sig["labels"]), _dtype(sig["label_dtype"]), src,
                         group, device)
        ids = _broadcast(query_ids[part] if mine else None, (c,), torch.int64, src, group, device) if with_ids else None
        qp, scores, gains, n_relevant, n_candidates = _counts_across_ranks(shard, q, lab, ids, binary, relevance,
                                                                           group, device)
        d = depth
        if at_r and c:
            d = max(d, int(n_relevant.max()))
        d = max(1, min(d, n_total))
        local = _candidates(shard, qp, q, lab, scores, gains, d, n_total, need_ideal)
        parts = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(parts, local, group=group)
        if mine:
            ranking = _merge(parts, d, n_relevant, n_candidates, n_total, binary, need_ideal)
            values[part] = ranking_values(ranking, query_keys)
    return values


def _all_reduce_max(t: Tensor, group) -> Tensor:
    """The maximum over ranks (a copy; the identity without a process group)."""
    if world_size(group) == 1:
        return t
    out = t.clone()
    dist.all_reduce(out, op=dist.ReduceOp.MAX, group=group)
    return out


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name.rpartition(".")[2])


def _raise(error: Optional[Exception]):
    if error is not None:
        raise error
    return None, None
