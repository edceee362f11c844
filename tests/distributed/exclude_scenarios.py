"""The suite of ``exclude=`` across processes (issue 30) for the multi-process harness: the
adapters' ``RankingMetrics`` (exclusions by row of the batch) and ``EmbeddingMetrics``
(exclusions by row of the batch and item id), and ``distributed.evaluate_split``.

Every rank builds the same data (fixed seeds) and feeds its own share of the batches:
uneven, with DistributedSampler's padding (rank 0 sees again the first user of rank 1, with
its exclusions: dropped by its id), or with rank 0 holding nothing (``*_empty_rank``). On one
process (``harness.run_local``) every batch is seen once: the reference, which
``test_exclude_distributed.py`` also checks against ``evaluate_scores(mask=)`` and
``evaluate_embeddings(exclude=)``. A case returns the per-query values by query id and the
means. ``error_*`` cases must raise on every rank of 2.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import torch

from ignite_retrieval import EmbeddingMetrics as IgniteEmbedding, RankingMetrics as IgniteRanking
from lightning_retrieval import EmbeddingMetrics as LightningEmbedding, RankingMetrics as LightningRanking
from retrieval_core.distributed import evaluate_split

WORLDS = (2,)
MODES = ("stable", "expected", "optimistic", "pessimistic")
KEYS = {"stable": ["ndcg@3", "map@r", "recall@4", "mrr", "auroc", "precision@2"],
        "expected": ["ndcg@3", "map@r", "recall@4", "mrr", "auroc"],
        "optimistic": ["ndcg@3", "map@r", "recall@4", "mrr", "precision@2"],
        "pessimistic": ["ndcg@3", "map@r", "recall@4", "mrr", "precision@2"]}
N_USERS, N_ITEMS, ITEM_ID = 13, 9, 100  # items' ids: ITEM_ID + position


def data():
    """Integer scores (exact ties), graded gains, integer embeddings (exact products), seen pairs
    (repeats included; user 1 has seen every item)."""
    g = torch.Generator().manual_seed(30)
    preds = torch.randint(0, 4, (N_USERS, N_ITEMS), generator=g).double()
    target = torch.randint(0, 3, (N_USERS, N_ITEMS), generator=g)
    users = torch.randint(-2, 3, (N_USERS, 3), generator=g).float()
    items = torch.randint(-2, 3, (N_ITEMS, 3), generator=g).float()
    user_labels, item_labels = torch.randint(0, 3, (N_USERS,), generator=g), torch.randint(0, 3, (N_ITEMS,),
                                                                                          generator=g)
    seen = torch.stack([torch.randint(0, N_USERS, (40,), generator=g), torch.randint(0, N_ITEMS, (40,), generator=g)])
    seen = torch.cat([seen, torch.stack([torch.ones(N_ITEMS, dtype=torch.int64), torch.arange(N_ITEMS)])], 1)
    return preds, target, users, items, user_labels, item_labels, seen


def layout_pairs(seen: torch.Tensor, layout: str) -> torch.Tensor:
    """``"pairs_on_rank_1"``: only users 5.. have seen items (rank 0 of 2, users 0..4, passes
    ``exclude=None``: its exclusion states are empty while rank 1's are not)."""
    return seen[:, seen[0] >= 5] if layout == "pairs_on_rank_1" else seen


def user_batches(rank: int, world: int, layout: str) -> List[Tuple[int, int]]:
    """This rank's batches of users, ``(start, stop)``; a repeat of user 4 on rank 0 (padding)."""
    if world == 1:
        return [(0, 6), (6, N_USERS)]
    if layout == "empty_rank":
        return [] if rank == 0 else [(0, 6), (6, N_USERS)]
    if layout == "pairs_on_rank_1":
        return [(0, 5)] if rank == 0 else [(5, 9), (9, N_USERS)]
    return [(0, 4), (4, 5)] if rank == 0 else [(4, 9), (9, N_USERS)]


def item_batches(rank: int, world: int, layout: str) -> List[Tuple[int, int]]:
    if world == 1:
        return [(0, N_ITEMS)]
    if layout == "empty_rank":
        return [] if rank == 0 else [(0, N_ITEMS)]
    return [(0, 4)] if rank == 0 else [(4, N_ITEMS)]


def rows_of(seen: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """The pairs of users ``start..stop - 1``, rows numbered in their batch."""
    inside = (seen[0] >= start) & (seen[0] < stop)
    return torch.stack([seen[0][inside] - start, seen[1][inside]])


def _number(x) -> Any:
    """A float, NaN as the text "nan" (equal to itself: whole results compare with ==)."""
    x = float(x)
    return x if x == x else "nan"


def _plain(results, keys) -> Dict[str, Any]:
    ids = results.query_ids.tolist()
    return {"summary": {k: _number(results[k]) for k in keys},
            "per_query": {q: [_number(results.per_query[k][n]) for k in keys] for n, q in enumerate(ids)}}


def _ranking(make, rank: int, world: int, layout: str) -> Dict[str, Any]:
    preds, target, *_, seen = data()
    seen = layout_pairs(seen, layout)
    out = {}
    for mode in MODES:
        metric = make(KEYS[mode], mode)
        for n, (start, stop) in enumerate(user_batches(rank, world, layout)):
            mine = rows_of(seen, start, stop)
            exclude = mine.clone() if n % 2 else torch.zeros(stop - start, N_ITEMS).index_put_(
                tuple(mine), torch.tensor(1.0)).to_sparse_csr()  # pairs and a sparse tensor
            exclude = exclude if mine.numel() else None
            metric.update(preds[start:stop], target[start:stop], ids=torch.arange(start, stop), exclude=exclude)
        out[mode] = metric.results()
    return out


class _Ignite:
    def __init__(self, keys, mode, cls=IgniteRanking, **options):
        self.keys, self.metric = keys, cls(keys, ties=mode, **options)

    def update(self, preds, target, **more):
        names = ("y_pred", "y") if isinstance(self.metric, IgniteRanking) else ("embeddings", "labels")
        self.metric.update({names[0]: preds, names[1]: target, **more})

    def results(self):
        self.metric.compute()
        return _plain(self.metric.last_results, self.keys)


class _Lightning:
    def __init__(self, keys, mode, cls=LightningRanking, **options):
        self.keys, self.metric = keys, cls(keys, ties=mode, **options)

    def update(self, preds, target, **more):
        self.metric.update(preds, target, **more)

    def results(self):
        return _plain(self.metric.compute(), self.keys)


def _embedding(make, rank: int, world: int, layout: str) -> Dict[str, Any]:
    _, _, users, items, user_labels, item_labels, seen = data()
    seen = layout_pairs(seen, layout)
    out = {}
    for mode in MODES:
        metric = make(KEYS[mode], mode)
        for start, stop in item_batches(rank, world, layout):
            n = stop - start
            metric.update(items[start:stop], item_labels[start:stop], ids=torch.arange(start, stop) + ITEM_ID,
                          is_query=torch.zeros(n, dtype=torch.bool), is_gallery=torch.ones(n, dtype=torch.bool))
        for start, stop in user_batches(rank, world, layout):
            n, mine = stop - start, rows_of(seen, start, stop)
            metric.update(users[start:stop], user_labels[start:stop], ids=torch.arange(start, stop),
                          is_query=torch.ones(n, dtype=torch.bool), is_gallery=torch.zeros(n, dtype=torch.bool),
                          exclude=torch.stack([mine[0], mine[1] + ITEM_ID]) if mine.numel() else None)
        out[mode] = metric.results()
    return out


def _split(rank: int, world: int, only_rank_0: bool = False) -> Dict[str, Any]:
    """Every rank holds every user and item (gathered states) and the same pairs."""
    _, _, users, items, user_labels, item_labels, seen = data()
    exclude = None if only_rank_0 and rank == 1 else seen
    out = {}
    for mode in MODES:
        r = evaluate_split(users, user_labels, KEYS[mode], gallery=items, gallery_labels=item_labels,
                           distance="dot", ties=mode, exclude=exclude, keep_per_query=True,
                           query_ids=torch.arange(N_USERS), gallery_ids=torch.arange(N_ITEMS) + ITEM_ID)
        out[mode] = _plain(r, KEYS[mode])
    return out


def _case(fn, make, layout):
    return lambda rank, world: fn(make, rank, world, layout)


def _embedding_maker(wrapper):
    cls = IgniteEmbedding if wrapper is _Ignite else LightningEmbedding
    return lambda keys, mode: wrapper(keys, mode, cls=cls, distance="dot")


SCENARIOS = {
    "ignite_ranking": _case(_ranking, lambda k, m: _Ignite(k, m), "padded"),
    "lightning_ranking": _case(_ranking, lambda k, m: _Lightning(k, m), "padded"),
    "ignite_ranking_empty_rank": _case(_ranking, lambda k, m: _Ignite(k, m), "empty_rank"),
    "lightning_ranking_empty_rank": _case(_ranking, lambda k, m: _Lightning(k, m), "empty_rank"),
    "ignite_embedding": _case(_embedding, _embedding_maker(_Ignite), "padded"),
    "lightning_embedding": _case(_embedding, _embedding_maker(_Lightning), "padded"),
    "ignite_embedding_empty_rank": _case(_embedding, _embedding_maker(_Ignite), "empty_rank"),
    "lightning_embedding_empty_rank": _case(_embedding, _embedding_maker(_Lightning), "empty_rank"),
    "ignite_ranking_pairs_on_rank_1": _case(_ranking, lambda k, m: _Ignite(k, m), "pairs_on_rank_1"),
    "lightning_ranking_pairs_on_rank_1": _case(_ranking, lambda k, m: _Lightning(k, m), "pairs_on_rank_1"),
    "ignite_embedding_pairs_on_rank_1": _case(_embedding, _embedding_maker(_Ignite), "pairs_on_rank_1"),
    "lightning_embedding_pairs_on_rank_1": _case(_embedding, _embedding_maker(_Lightning), "pairs_on_rank_1"),
    "split": _split,
    "error_split_exclude_on_one_rank": lambda rank, world: _split(rank, world, only_rank_0=True),
}
