"""The adapters' ``TopKMetrics`` (top-k recommendation lists with sparse truth) for the
multi-process harness.

Every rank builds the same lists, truth, history and item data (``_data``) and feeds its
own share of the users, a batch at a time, with their ``user_ids``: uneven shares with
DistributedSampler's padding (``padded``: rank 0 also sees again the first user of the
last rank), and a rank without users (``one_rank``: the last rank sees none). On one
process (``harness.run_local``) every user is seen once: the reference, which
``test_rec_topk_distributed.py`` also checks against ``evaluate_topk``. ``*_without_ids``
(negative control): the repeated user counts twice. ``options_differ``: the last rank
gives another ``tail_ratio``; every rank raises the same ``ValueError``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import torch

WORLDS = (2,)
U, I, K = 13, 25, 4
KEYS = ["precision@4", "recall@4", "ndcg@4", "map_capped@4", "mrr@4", "coverage@4", "gini@4", "entropy@4",
        "personalization@4", "novelty@4", "popularity@4", "diversity@4", "tail@4", "serendipity@4"]


def _data():
    g = torch.Generator().manual_seed(11)
    topk = torch.stack([torch.randperm(I, generator=g)[:K] for _ in range(U)])
    topk[3, 2:] = -1
    truth = (torch.rand(U, I, generator=g) < 0.2).long() * torch.randint(1, 3, (U, I), generator=g)
    history = torch.rand(U, I, generator=g) < 0.15
    items = dict(n_items=I, item_popularity=torch.randint(1, 20, (I,), generator=g).double(),
                 item_categories=torch.randint(0, 5, (I,), generator=g))
    return topk, truth, history, items


def _users(rank: int, world: int, layout: str) -> List[List[int]]:
    """This rank's batches of user ids."""
    if world == 1:
        return [list(range(0, 5)), list(range(5, 9)), list(range(9, U))]
    last = rank == world - 1
    if layout == "one_rank":
        return [] if last else [list(range(0, 6)), list(range(6, U))]
    if last:
        return [list(range(8, 11)), list(range(11, U))]
    return [list(range(0, 5)), list(range(5, 8)), [8]]  # [8]: the padding repeat of the last rank's first user


def _batches(rank: int, world: int, layout: str):
    topk, truth, history, _ = _data()
    for users in _users(rank, world, layout):
        rows = torch.tensor(users, dtype=torch.int64)
        yield dict(topk=topk[rows], truth=truth[rows].to_sparse(), history=history[rows].nonzero().T,
                   user_ids=rows * 3 + 100)


def _ignite(layout: str, ids: bool = True, **options) -> Callable[[int, int], Any]:
    def case(rank: int, world: int) -> Dict[str, float]:
        from ignite_retrieval import TopKMetrics

        metric = TopKMetrics(KEYS, **dict(_data()[3], **options))
        for batch in _batches(rank, world, layout):
            if not ids:
                del batch["user_ids"]
            metric.update(batch)
        return metric.compute()
    return case


def _lightning(layout: str, ids: bool = True) -> Callable[[int, int], Any]:
    def case(rank: int, world: int) -> Dict[str, float]:
        from lightning_retrieval import TopKMetrics

        metric = TopKMetrics(KEYS, **_data()[3])
        for batch in _batches(rank, world, layout):
            metric.update(batch["topk"], batch["truth"], history=batch["history"],
                          user_ids=batch["user_ids"] if ids else None)
        return {k: float(v) for k, v in metric.compute().items()}
    return case


def options_differ(rank: int, world: int) -> Dict[str, Any]:
    try:
        _ignite("padded", tail_ratio=0.2 if rank == world - 1 else 0.1)(rank, world)
    except ValueError as exc:
        return {"error": "ValueError", "message": str(exc)}
    return {"error": None}


SCENARIOS = {"ignite_padded": _ignite("padded"), "ignite_one_rank": _ignite("one_rank"),
             "lightning_padded": _lightning("padded"), "lightning_one_rank": _lightning("one_rank"),
             "ignite_without_ids": _ignite("padded", ids=False), "lightning_without_ids": _lightning("padded", False),
             "options_differ": options_differ}
PADDED = {"ignite_without_ids", "lightning_without_ids"}
