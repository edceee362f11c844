"""ci= and per-query values through the ignite adapters: the core's, plumbed through."""
from __future__ import annotations

import pytest
import torch

import retrieval_core
from ignite_retrieval import EmbeddingMetrics, RankingMetrics


def test_ranking_metrics_ci_and_per_query(dense_scores):
    preds, target = dense_scores
    m = RankingMetrics(["ndcg@5", "hit_rate@3"], ci=0.9, n_resamples=500, seed=3)
    for i in range(0, 8, 3):
        m.update((preds[i:i + 3], target[i:i + 3]))
    values = m.compute()
    r = m.last_results
    ref = retrieval_core.evaluate_scores(preds, target, ["ndcg@5", "hit_rate@3"], ci=0.9, n_resamples=500, seed=3,
                                         keep_per_query=True)
    assert values["ndcg@5"] == pytest.approx(ref["ndcg@5"].item())
    for k in ref.ci:
        assert torch.equal(torch.stack(r.ci[k]), torch.stack(ref.ci[k]))
        torch.testing.assert_close(r.per_query[k], ref.per_query[k], equal_nan=True)
    assert r.worst("ndcg@5", 2)[0].tolist() == ref.worst("ndcg@5", 2)[0].tolist()


def test_ranking_metrics_ids_are_the_per_query_ids(dense_scores):
    preds, target = dense_scores
    m = RankingMetrics(["mrr@5"], ci=0.8)
    ids = torch.tensor([7, 3, 9, 1, 5, 2, 8, 4])
    m.update({"y_pred": preds, "y": target, "ids": ids})
    m.compute()
    assert m.last_results.query_ids.tolist() == sorted(ids.tolist())


def test_ranking_metrics_ci_errors():
    with pytest.raises(ValueError, match="ci needs the per-query values; compact=True keeps only sums and counts"):
        RankingMetrics(["mrr@5"], compact=True, ci=0.9)
    with pytest.raises(ValueError, match=r"ci must be a level in \(0, 1\)"):
        RankingMetrics(["mrr@5"], ci=2)


def test_embedding_metrics_ci(embeddings_labels):
    x, labels = embeddings_labels
    m = EmbeddingMetrics(["cmc@1", "map@r"], ci=0.95, ci_method="bootstrap", seed=1)
    m.update((x[:30], labels[:30]))
    m.update((x[30:], labels[30:]))
    m.compute()
    ref = retrieval_core.evaluate_embeddings(x, labels, ["cmc@1", "map@r"], ci=0.95, seed=1, keep_per_query=True)
    for k in ("cmc@1", "map@r"):
        assert torch.equal(torch.stack(m.last_results.ci[k]), torch.stack(ref.ci[k]))
        torch.testing.assert_close(m.last_results.per_query[k], ref.per_query[k], equal_nan=True)
    beta = EmbeddingMetrics(["cmc@1"], ci=0.95, ci_method="beta")
    beta.update((x, labels))
    beta.compute()
    ref = retrieval_core.evaluate_embeddings(x, labels, ["cmc@1"], ci=0.95, ci_method="beta")
    assert torch.equal(torch.stack(beta.last_results.ci["cmc@1"]), torch.stack(ref.ci["cmc@1"]))
    with pytest.raises(ValueError, match=r"ci_method='beta' is not available with per_class='macro'"):
        EmbeddingMetrics(["cmc@1"], ci=0.9, ci_method="beta", per_class="macro")


def test_keep_per_query_can_be_turned_off(dense_scores):
    preds, target = dense_scores
    m = RankingMetrics(["mrr@5"], keep_per_query=False)
    m.update((preds, target))
    m.compute()
    assert m.last_results.per_query == {}
    with pytest.raises(TypeError, match="keep_per_query must be a bool; got 'yes'"):
        EmbeddingMetrics(["cmc@1"], keep_per_query="yes")
