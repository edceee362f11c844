"""ci= and per-query values through the torchmetrics adapters: the core's, kept
through torchmetrics' rebuilding of the computed dict."""
from __future__ import annotations

import pytest
import torch

import retrieval_core
from lightning_retrieval import EmbeddingMetrics, RankingMetrics


def test_ranking_metrics_ci_and_per_query(dense_scores):
    preds, target = dense_scores
    m = RankingMetrics(["precision@1"], ci=0.9, ci_method="beta", empty="zero")
    m.update(preds[:5], target[:5])
    m.update(preds[5:], target[5:])
    r = m.compute()
    ref = retrieval_core.evaluate_scores(preds, target, ["precision@1"], ci=0.9, ci_method="beta", empty="zero",
                                         keep_per_query=True)
    assert torch.equal(torch.stack(r.ci["precision@1"]), torch.stack(ref.ci["precision@1"]))
    torch.testing.assert_close(r.per_query["precision@1"], ref.per_query["precision@1"])
    assert r.query_ids is None and r.n_queries.item() == 8
    with pytest.raises(ValueError, match=r"'ndcg@5' is not; use ci_method='bootstrap'"):
        RankingMetrics(["ndcg@5", "precision@1"], ci=0.9, ci_method="beta")
    with pytest.raises(ValueError, match="ci needs the per-query values; compact=True"):
        RankingMetrics(["mrr@5"], compact=True, ci=0.9)


def test_embedding_metrics_ci(embeddings_labels):
    x, labels = embeddings_labels
    m = EmbeddingMetrics(["cmc@1", "map@r"], ci=0.9, n_resamples=300)
    m.update(x[:25], labels[:25])
    m.update(x[25:], labels[25:])
    r = m.compute()
    ref = retrieval_core.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], ci=0.9, n_resamples=300,
                                             keep_per_query=True)
    for k in ("cmc@1", "map@r"):
        assert torch.equal(torch.stack(r.ci[k]), torch.stack(ref.ci[k]))
        torch.testing.assert_close(r.per_query[k], ref.per_query[k], equal_nan=True)
    assert r.worst("map@r", 3)[1].tolist() == ref.worst("map@r", 3)[1].tolist()


def test_keep_per_query_can_be_turned_off(dense_scores):
    preds, target = dense_scores
    m = RankingMetrics(["mrr@5"], keep_per_query=False)
    m.update(preds, target)
    assert m.compute().per_query == {}
    with pytest.raises(TypeError, match="keep_per_query must be a bool; got 'yes'"):
        EmbeddingMetrics(["cmc@1"], keep_per_query="yes")
