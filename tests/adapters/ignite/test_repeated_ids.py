"""ignite adapters, one process: ids that repeat across batches with different rows
are an error (not a silent loss of rows); a repeated row (padding) counts once."""
from __future__ import annotations

import pytest
import torch
from ignite.engine import Engine

import retrieval_core
from ignite_retrieval import EmbeddingMetrics, RankingMetrics

KEYS = ["cmc@1", "map@r", "precision@3"]


def _data(n=40, seed=5):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (n,), generator=g)
    return torch.randn(4, 6, generator=g)[labels] + 0.7 * torch.randn(n, 6, generator=g), labels


def _run(metric, batches):
    engine = Engine(lambda e, b: b)
    metric.attach(engine, "m")
    metrics = engine.run(batches).metrics
    return {k: v for k, v in metrics.items() if k != "m"}  # ignite also stores the whole dict


def test_embedding_ids_counted_from_zero_in_every_batch():
    x, labels = _data()
    batches = [{"embeddings": x[i:i + 10], "labels": labels[i:i + 10], "ids": torch.arange(10)} for i in range(0, 40, 10)]
    with pytest.raises(ValueError, match=r"ids 0, 1, 2, 3, 4 and 5 more repeat with different rows .*"
                                         r"ids must identify dataset items"):
        _run(EmbeddingMetrics(KEYS), batches)
    # with dataset indices as ids all 40 items count
    for i, b in enumerate(batches):
        b["ids"] = torch.arange(10 * i, 10 * i + 10)
    got = _run(EmbeddingMetrics(KEYS), batches)
    expected = retrieval_core.evaluate_embeddings(x, labels, KEYS)
    assert got == pytest.approx({k: v.item() for k, v in expected.items()}, abs=1e-12)


def test_embedding_padding_repeat_counts_once():
    x, labels = _data(23)
    idx = torch.cat([torch.arange(23), torch.tensor([0])])  # padded to 24
    batches = [{"embeddings": x[r], "labels": labels[r], "ids": r} for r in idx.split(6)]
    got = _run(EmbeddingMetrics(KEYS), batches)
    expected = retrieval_core.evaluate_embeddings(x, labels, KEYS)
    assert got == pytest.approx({k: v.item() for k, v in expected.items()}, abs=1e-12)


def test_ranking_ids_counted_from_zero_in_every_batch():
    g = torch.Generator().manual_seed(2)
    preds, target = torch.rand(12, 8, generator=g), (torch.rand(12, 8, generator=g) < 0.3).long()
    target[:, 0] = 1
    batches = [{"y_pred": preds[i:i + 4], "y": target[i:i + 4], "ids": torch.arange(4)} for i in range(0, 12, 4)]
    with pytest.raises(ValueError, match=r"repeat with different rows \(per-query values: \d+ rows\)"):
        _run(RankingMetrics(["ndcg@5", "mrr"]), batches)
    # the same queries repeated (padding): counted once
    batches = [{"y_pred": preds[r], "y": target[r], "ids": r} for r in torch.tensor([0, 1, 2, 3, 4, 5, 0, 1]).split(3)]
    got = _run(RankingMetrics(["ndcg@5", "mrr"]), batches)
    expected = retrieval_core.evaluate_scores(preds[:6], target[:6], ["ndcg@5", "mrr"])
    assert got == pytest.approx({k: v.item() for k, v in expected.items()}, abs=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_embedding_ids_from_zero_with_a_dominant_feature(dtype):
    # issue 18: with one feature dominating every row, the two items of each id
    # were once taken for a padding copy and 20 of 40 items vanished (now an error,
    # naming the ids whose rows differ beyond the dtype's tolerance)
    x, labels = _data(seed=11)
    x[:, 0] = 100.0
    labels[20:] = labels[:20]  # only the embeddings tell the two items of an id apart
    batches = [{"embeddings": x[i:i + 20].to(dtype), "labels": labels[i:i + 20], "ids": torch.arange(20)}
               for i in (0, 20)]
    with pytest.raises(ValueError, match=r"^ids .* repeat with different rows \(embeddings: \d+ rows\)"):
        _run(EmbeddingMetrics(KEYS), batches)
