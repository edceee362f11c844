"""Confidence keys across processes, for the multi-process harness (``harness.py``):
each case returns, on every rank, the distributed result and, computed in the same
process, the single-process result on the concatenation of every rank's rows.

The core (``retrieval_core.distributed.evaluate_embeddings_across_ranks``, gathered and sharded
gallery) keeps the global query order, so its results must equal one process's bit
for bit. The adapters gather their states in rank order, not in the order of
arrival of one process: their confidences are distinct (no tie, so the order of
the queries does not change the keys) and their results are compared to a
rounding tolerance. ``error_*`` cases must raise on every rank.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import torch

import retrieval_core
from retrieval_core import distributed as D

N = 47
KEYS = ["cmc@1", "erc:cmc@1", "erc:map@r", "conf:precision@5", "spearman:map@r", "kendall:ndcg@5"]


def _data(seed: int = 31):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (N,), generator=g)
    x = torch.randn(N, 5, generator=g) + 1.2 * torch.nn.functional.one_hot(labels, 5).float()
    confidence = torch.rand(N, generator=g)  # distinct
    confidence[7] = confidence[30]  # one tie, across ranks: the stable rule (earlier query first) decides
    return x, labels, confidence


def _bounds(world: int) -> List[int]:
    return [0, N] if world == 1 else ([0, 19, N] if world == 2 else [0, 19, 19, N])  # rank 1 of 3: no rows


def _share(t, rank, world):
    b = _bounds(world)
    return t[b[rank]:b[rank + 1]]


def plain(r) -> Dict[str, Any]:
    return {"values": dict(r), "curves": {k: list(v) for k, v in r.curves.items()}, "n_queries": r.n_queries,
            "ci": {k: list(v) for k, v in r.ci.items()}}


def _core(shard: bool = False, categories: bool = False, ci: bool = False) -> Callable[[int, int], Any]:
    def case(rank: int, world: int):
        x, labels, confidence = _data()
        gallery = x + 0.01 if shard else None
        kw = dict(categories=(torch.arange(N) % 3)) if categories else {}
        if ci:
            kw.update(ci=0.9, n_resamples=40, seed=2)
        one = retrieval_core.evaluate_embeddings(x, labels, KEYS, confidence=confidence, gallery=gallery,
                                                 gallery_labels=None if gallery is None else labels, **kw)
        mine = {k: _share(v, rank, world) if k == "categories" else v for k, v in kw.items()}
        got = D.evaluate_embeddings_across_ranks(
            _share(x, rank, world), _share(labels, rank, world), KEYS, confidence=_share(confidence, rank, world),
            gallery=None if gallery is None else _share(gallery, rank, world),
            gallery_labels=None if gallery is None else _share(labels, rank, world), shard_gallery=shard, **mine)
        return {"dist": plain(got), "one": plain(one)}
    return case


def _error_mixed(rank: int, world: int):
    x, labels, confidence = _data()
    c = _share(confidence, rank, world) if rank == 0 else None
    return D.evaluate_embeddings_across_ranks(_share(x, rank, world), _share(labels, rank, world), KEYS, confidence=c)


def _error_length(rank: int, world: int):
    x, labels, confidence = _data()
    c = _share(confidence, rank, world)
    if rank == world - 1:
        c = c[:-1]
    return D.evaluate_embeddings_across_ranks(_share(x, rank, world), _share(labels, rank, world), KEYS, confidence=c)


def _ignite_ranking(rank: int, world: int):
    from ignite.engine import Engine

    from ignite_retrieval import RankingMetrics

    g = torch.Generator().manual_seed(5)
    preds = torch.rand(N, 11, generator=g)
    target = (torch.rand(N, 11, generator=g) < 0.3).long()
    target[::8] = 0
    confidence = torch.rand(N, generator=g)
    ids = torch.arange(N)
    rows = [r for i, r in enumerate(torch.arange(N).split(6)) if i % world == rank]
    if rank == 0 and world > 1:
        rows.append(torch.arange(3))  # padding: repeated queries, the same rows
    metric = RankingMetrics(KEYS)
    batches = [{"y_pred": preds[r], "y": target[r], "ids": ids[r], "confidence": confidence[r]} for r in rows]
    evaluator = Engine(lambda engine, batch: batch)
    metric.attach(evaluator, "m")
    evaluator.run(batches)
    one = retrieval_core.evaluate_scores(preds, target, KEYS, confidence=confidence)
    return {"dist": plain(metric.last_results), "one": plain(one)}


def _ignite_embeddings(rank: int, world: int):
    from ignite_retrieval import EmbeddingMetrics

    x, labels, confidence = _data()
    confidence = confidence.clone()
    confidence[7] = 0.123456  # no tie: the adapters gather in rank order
    metric = EmbeddingMetrics(KEYS)
    rows = [r for i, r in enumerate(torch.arange(N).split(5)) if i % world == rank]
    for r in rows:
        metric.update({"embeddings": x[r], "labels": labels[r], "ids": r, "confidence": confidence[r]})
    metric.compute()
    one = retrieval_core.evaluate_embeddings(x, labels, KEYS, confidence=confidence)
    return {"dist": plain(metric.last_results), "one": plain(one)}


def _lightning_ranking(rank: int, world: int):
    from lightning_retrieval import RankingMetrics

    g = torch.Generator().manual_seed(6)
    preds = torch.rand(N, 9, generator=g)
    target = (torch.rand(N, 9, generator=g) < 0.3).long()
    target[::9] = 0
    confidence = torch.rand(N, generator=g)
    metric = RankingMetrics(KEYS)
    for i, r in enumerate(torch.arange(N).split(7)):
        if i % world == rank:
            metric.update(preds[r], target[r], confidence=confidence[r])
    got = metric.compute()
    one = retrieval_core.evaluate_scores(preds, target, KEYS, confidence=confidence)
    return {"dist": plain(got), "one": plain(one)}


def _lightning_embeddings(rank: int, world: int):
    from lightning_retrieval import EmbeddingMetrics

    x, labels, confidence = _data()
    confidence = confidence.clone()
    confidence[7] = 0.123456
    metric = EmbeddingMetrics(KEYS)
    for i, r in enumerate(torch.arange(N).split(8)):
        if i % world == rank:
            metric.update(x[r], labels[r], ids=r, confidence=confidence[r])
    got = metric.compute()
    one = retrieval_core.evaluate_embeddings(x, labels, KEYS, confidence=confidence)
    return {"dist": plain(got), "one": plain(one)}


CORE = {"core_gathered": _core(), "core_categories": _core(categories=True), "core_sharded": _core(shard=True),
        "core_intervals": _core(categories=True, ci=True)}
ADAPTERS = {"ignite_ranking": _ignite_ranking, "ignite_embeddings": _ignite_embeddings,
            "lightning_ranking": _lightning_ranking, "lightning_embeddings": _lightning_embeddings}
# name: (exception type, part of the message on every rank)
ERRORS = {"error_mixed": ("ValueError", "every rank must pass confidence or none"),
          "error_length": ("ValueError", "confidence must have one value per query")}
SCENARIOS: Dict[str, Callable[[int, int], Any]] = {**CORE, **ADAPTERS, "error_mixed": _error_mixed,
                                                  "error_length": _error_length}
WORLDS = (2, 3)
