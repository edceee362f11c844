"""torchmetrics adapters, one process: ids that repeat across batches with different
rows are an error (not a silent loss of rows); a repeated row (padding) counts once."""
from __future__ import annotations

import pytest
import torch

import retrieval_core
from lightning_retrieval import EmbeddingMetrics, RankingMetrics
from tests.adapters.lightning.data import clustered_embeddings, dense_batches

KEYS = ["cmc@1", "map@r", "precision@3"]


def test_embedding_ids_counted_from_zero_in_every_batch():
    x, y = clustered_embeddings(9, 40)
    m = EmbeddingMetrics(KEYS)
    for i in range(0, 40, 10):
        m.update(x[i:i + 10], y[i:i + 10], ids=torch.arange(10))
    with pytest.raises(ValueError, match=r"ids 0, 1, 2, 3, 4 and 5 more repeat with different rows .*"
                                         r"ids must identify dataset items"):
        m.compute()
    m = EmbeddingMetrics(KEYS)
    for i in range(0, 40, 10):
        m.update(x[i:i + 10], y[i:i + 10], ids=torch.arange(i, i + 10))
    expected = retrieval_core.evaluate_embeddings(x, y, KEYS)
    got = m.compute()
    assert {k: v.item() for k, v in got.items()} == pytest.approx({k: v.item() for k, v in expected.items()}, abs=1e-12)


def test_embedding_padding_repeat_counts_once():
    x, y = clustered_embeddings(10, 23)
    m = EmbeddingMetrics(KEYS)
    for r in torch.cat([torch.arange(23), torch.tensor([0])]).split(6):
        m.update(x[r], y[r], ids=r)
    expected = retrieval_core.evaluate_embeddings(x, y, KEYS)
    assert {k: v.item() for k, v in m.compute().items()} == pytest.approx(
        {k: v.item() for k, v in expected.items()}, abs=1e-12)


def test_ranking_ids_counted_from_zero_in_every_batch():
    batches = dense_batches(12, [4, 4, 4])
    m = RankingMetrics(["ndcg@5", "mrr"])
    for p, t, _, _ in batches:
        m.update(p, t, ids=torch.arange(4))
    with pytest.raises(ValueError, match=r"repeat with different rows \(per-query values: \d+ rows\)"):
        m.compute()
    # the first batch again (padding): counted once
    m = RankingMetrics(["ndcg@5", "mrr"])
    for p, t, i, _ in batches + batches[:1]:
        m.update(p, t, ids=i)
    preds, target = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    expected = retrieval_core.evaluate_scores(preds, target, ["ndcg@5", "mrr"])
    assert {k: v.item() for k, v in m.compute().items()} == pytest.approx(
        {k: v.item() for k, v in expected.items()}, abs=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_embedding_ids_from_zero_with_a_dominant_feature(dtype):
    # issue 18: with one feature dominating every row, the two items of each id
    # were once taken for a padding copy and 20 of 40 items vanished (now an error,
    # naming the ids whose rows differ beyond the dtype's tolerance)
    x, y = clustered_embeddings(11, 40)
    x[:, 0] = 100.0
    y[20:] = y[:20]  # only the embeddings tell the two items of an id apart
    m = EmbeddingMetrics(KEYS)
    for i in (0, 20):
        m.update(x[i:i + 20].to(dtype), y[i:i + 20], ids=torch.arange(20))
    with pytest.raises(ValueError, match=r"^ids .* repeat with different rows \(embeddings: \d+ rows\)"):
        m.compute()


def _queries(n=9, size=6, seed=12):
    g = torch.Generator().manual_seed(seed)
    preds, target = torch.rand(n, size, generator=g), (torch.rand(n, size, generator=g) < 0.4).long()
    ids = torch.arange(n * size).reshape(n, size)  # the dataset index of each entry
    return preds, target, torch.arange(n)[:, None].expand(n, size), ids


def test_dropin_entry_ids_drop_a_repeated_query():
    from lightning_retrieval import RetrievalMAP

    preds, target, indexes, ids = _queries()
    once, padded, without = RetrievalMAP(top_k=4), RetrievalMAP(top_k=4), RetrievalMAP(top_k=4)
    once.update(preds, target, indexes, ids=ids)
    for m, kw in ((padded, {"ids": ids[:2]}), (without, {})):
        m.update(preds, target, indexes, **({"ids": ids} if kw else {}))
        m.update(preds[:2], target[:2], indexes[:2], **kw)  # the sampler's padding repeats two queries
    assert padded.compute().item() == once.compute().item() != without.compute().item()


def test_dropin_entry_ids_errors():
    from lightning_retrieval import RetrievalMRR

    preds, target, indexes, ids = _queries()
    with pytest.raises(ValueError, match=r"^`ids` must be a tensor of the shape of `indexes` \(9, 6\); got \(9,\)"):
        RetrievalMRR().update(preds, target, indexes, ids=ids[:, 0])
    m = RetrievalMRR()
    m.update(preds[:4], target[:4], indexes[:4], ids=ids[:4])
    m.update(preds[4:], target[4:], indexes[4:])
    with pytest.raises(ValueError, match=r"^ids were given for 24 of 54 entries"):
        m.compute()
    m = RetrievalMRR()
    m.update(preds[:4], target[:4], indexes[:4], ids=ids[:4])
    m.update(preds[4:8], target[4:8], indexes[4:8], ids=ids[:4])  # counted from 0 again
    with pytest.raises(ValueError, match=r"repeat with different rows \(indexes: 24 rows, preds: 24 rows"):
        m.compute()
