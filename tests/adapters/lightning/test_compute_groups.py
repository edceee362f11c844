"""``MetricCollection`` compute groups (torchmetrics' default): metrics share states
when their states are equal after the first update. Ours must never share with a
metric of another class or other options (issue 18: ndcg@10 reported map@10's
value), while two identical metrics still share."""
from __future__ import annotations

import copy

import pytest
import torch
from torchmetrics import MetricCollection

import lightning_retrieval as lr
from tests.adapters.lightning.data import clustered_embeddings


def _dense_batches():
    """A first batch where every per-query value is 1 for every key (the relevant
    item scored highest, no ties), then batches with ties and deeper hits."""
    g = torch.Generator().manual_seed(21)
    preds = torch.rand(6, 12, generator=g)
    first = torch.zeros(6, 12, dtype=torch.long)
    first[torch.arange(6), preds.argmax(1)] = 1
    later = []
    for _ in range(2):
        p = torch.randint(0, 4, (6, 12), generator=g).float()  # ties
        later.append((p, (torch.rand(6, 12, generator=g) < 0.3).long()))
    return [("update", (preds, first), {})] + [("update", b, {}) for b in later]


def _flat_batches():
    """Flat entries: no relevant entry in the first batch, some later."""
    g = torch.Generator().manual_seed(22)
    out = []
    for b in range(3):
        indexes = torch.arange(4 * b, 4 * b + 4).repeat_interleave(5)
        target = torch.zeros(20, dtype=torch.long) if b == 0 else (torch.rand(20, generator=g) < 0.4).long()
        out.append(("update", (torch.rand(20, generator=g), target, indexes), {}))
    return out


def _embedding_batches():
    x, y = clustered_embeddings(23, 30)
    return [("update", (x[i:i + 10], y[i:i + 10]), {"ids": torch.arange(i, i + 10)}) for i in (0, 10, 20)]


PAIRS = {  # name: (metric a, metric b, batches)
    "ranking_keys": (lr.RankingMetrics(["ndcg@10"]), lr.RankingMetrics(["map@10"]), _dense_batches),
    "ranking_ties": (lr.RankingMetrics(["ndcg@10"]), lr.RankingMetrics(["ndcg@10"], ties="pessimistic"),
                     _dense_batches),
    "ranking_empty": (lr.RankingMetrics(["mrr@5"]), lr.RankingMetrics(["mrr@5"], empty="zero"), _dense_batches),
    "ranking_precision_recall": (lr.RankingMetrics(["precision@1"]), lr.RankingMetrics(["recall@1"]), _dense_batches),
    "dropin_ignore_index": (lr.RetrievalHitRate(top_k=2), lr.RetrievalHitRate(top_k=2, ignore_index=1),
                            _flat_batches),
    "dropin_classes": (lr.RetrievalMAP(), lr.RetrievalMRR(), _flat_batches),
    "dropin_top_k": (lr.RetrievalNormalizedDCG(top_k=2), lr.RetrievalNormalizedDCG(top_k=5), _flat_batches),
    "embedding_keys": (lr.EmbeddingMetrics(["cmc@1"]), lr.EmbeddingMetrics(["precision@1"]), _embedding_batches),
    "embedding_distance": (lr.EmbeddingMetrics(["map@r"]), lr.EmbeddingMetrics(["map@r"], distance="euclidean"),
                           _embedding_batches),
}


def _feed(metric, calls):
    for method, args, kwargs in calls:
        getattr(metric, method)(*args, **kwargs)
    return metric


def _values(result):
    return {k: v.item() for k, v in result.items()} if isinstance(result, dict) else result.item()


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_metrics_with_other_options_keep_their_own_states(name):
    a, b, batches = PAIRS[name]
    alone = [_values(_feed(copy.deepcopy(m), batches()).compute()) for m in (a, b)]
    collection = _feed(MetricCollection({"a": copy.deepcopy(a), "b": copy.deepcopy(b)}), batches())
    assert sorted(collection.compute_groups.values()) == [["a"], ["b"]]
    got = [_values(collection[k].compute()) for k in ("a", "b")]
    assert got == alone


def test_the_issue_pair_differs_so_a_merge_would_show():
    # the pair of the issue: equal states after the first batch, different values at the end
    a, b, batches = PAIRS["ranking_keys"]
    first = [_feed(copy.deepcopy(m), batches()[:1]) for m in (a, b)]
    assert torch.equal(first[0].values[0], first[1].values[0])
    ends = [_feed(copy.deepcopy(m), batches()).compute() for m in (a, b)]
    assert ends[0]["ndcg@10"].item() != pytest.approx(ends[1]["map@10"].item(), abs=1e-3)
    a, b, batches = PAIRS["dropin_ignore_index"]
    assert _feed(copy.deepcopy(a), batches()).compute() != _feed(copy.deepcopy(b), batches()).compute()


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_identical_metrics_still_share(name):
    a, _, batches = PAIRS[name]
    alone = _values(_feed(copy.deepcopy(a), batches()).compute())
    collection = _feed(MetricCollection({"x": copy.deepcopy(a), "y": copy.deepcopy(a)}), batches())
    assert list(collection.compute_groups.values()) == [["x", "y"]]
    assert _values(collection["x"].compute()) == alone == _values(collection["y"].compute())
