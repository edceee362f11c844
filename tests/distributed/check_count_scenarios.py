"""Input checks counted on 2 gloo processes (the shared harness): each distributed entry
point and each adapter's synced ``compute`` runs every declared check
(:mod:`retrieval_core.validate.counting`) at most once per call on every rank.
A case returns, per rank, ``{check: calls}`` of one call (``test_checks_once_distributed.py``
asserts them)."""
from __future__ import annotations

from typing import Any, Callable, Dict

import torch

from retrieval_core import distributed as D
from retrieval_core.validate.counting import count_checks
from tests.distributed.eval_scenarios import _data, _rows

WORLDS = (2,)
KEYS = ["cmc@1", "map@r"]


def _counted(call: Callable[[], Any]) -> Dict[str, int]:
    with count_checks() as counts:
        call()
    return dict(counts)


def _across(**options):
    def case(rank: int, world: int) -> Dict[str, int]:
        x, labels, _, _ = _data()
        return _counted(lambda: D.evaluate_embeddings_across_ranks(_rows(x, rank, world), _rows(labels, rank, world),
                                                                   options.pop("metrics", KEYS), **options))
    return case


def _across_gallery(rank: int, world: int) -> Dict[str, int]:
    x, labels, _, ids = _data()
    q, g = slice(0, 20), slice(20, None)
    return _counted(lambda: D.evaluate_embeddings_across_ranks(
        _rows(x[q], rank, world), _rows(labels[q], rank, world), KEYS, gallery=_rows(x[g], rank, world),
        gallery_labels=_rows(labels[g], rank, world), query_ids=_rows(ids[q], rank, world),
        gallery_ids=_rows(ids[g], rank, world), ci=0.9, n_resamples=50))


def _split(rank: int, world: int) -> Dict[str, int]:
    x, labels, _, _ = _data()
    return _counted(lambda: D.evaluate_split(x, labels, KEYS + ["nmi"], per_class="macro"))


def _scores(rank: int):
    g = torch.Generator().manual_seed(7 + rank)
    return torch.rand(6, 8, generator=g), torch.rand(6, 8, generator=g) > 0.6


def _adapter_compute(framework: str, cls_name: str, *args, **options):
    """The counts of the synced ``compute`` (the updates run before counting)."""
    def case(rank: int, world: int) -> Dict[str, int]:
        import ignite_retrieval
        import lightning_retrieval

        module = ignite_retrieval if framework == "ignite" else lightning_retrieval
        metric = getattr(module, cls_name)(*args, **options)
        if cls_name == "EmbeddingMetrics":
            x, labels, _, _ = _data()
            ids = torch.arange(len(x)) + 100
            batch = (_rows(x, rank, world), _rows(labels, rank, world))
            rows = {"ids": _rows(ids, rank, world)}
        elif cls_name == "RankingMetrics":
            batch, rows = _scores(rank), {}
        else:  # a flat drop-in: (preds, target, indexes)
            preds, target = _scores(rank)
            batch, rows = (preds.reshape(-1), target.reshape(-1), torch.arange(48) // 8 + 10 * rank), {}
        if framework == "ignite":
            metric.update(batch if not rows else {"embeddings": batch[0], "labels": batch[1], **rows})
        else:
            metric.update(*batch, **rows)
        return _counted(metric.compute)
    return case


SCENARIOS: Dict[str, Callable[[int, int], Any]] = {
    "across_gathered": _across(metrics=KEYS + ["nmi"]),
    "across_sharded": _across(shard_gallery=True),
    "across_gallery": _across_gallery,
    "split": _split,
    "ignite_embeddings": _adapter_compute("ignite", "EmbeddingMetrics", KEYS),
    "lightning_embeddings": _adapter_compute("lightning", "EmbeddingMetrics", KEYS),
    "ignite_ranking": _adapter_compute("ignite", "RankingMetrics", ["mrr@3", "ndcg"]),
    "lightning_ranking": _adapter_compute("lightning", "RankingMetrics", ["mrr@3", "ndcg"]),
    "lightning_flat": _adapter_compute("lightning", "RetrievalMAP"),
}
