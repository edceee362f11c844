"""Confidence keys in the ignite adapters: the optional ``"confidence"`` output key."""
from __future__ import annotations

import math
import re

import pytest
import torch
from ignite.engine import Engine

import retrieval_core as rc
from ignite_retrieval import EmbeddingMetrics, RankingMetrics

KEYS = ["cmc@1", "erc:cmc@1", "erc:map@r", "conf:ndcg@5", "spearman:map@r", "kendall:ndcg@5"]


def data(n_queries=31, n_items=15, seed=3):
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(n_queries, n_items, generator=g)
    target = (torch.rand(n_queries, n_items, generator=g) < 0.25).long()
    target[::6] = 0  # skipped queries
    confidence = torch.rand(n_queries, generator=g)
    return preds, target, confidence


def run(metric, batches):
    evaluator = Engine(lambda engine, batch: batch)
    metric.attach(evaluator, "m")
    return evaluator.run(batches).metrics


def split(n, sizes=(7, 1, 12, 11)):
    start = 0
    for s in sizes:
        yield slice(start, start + s)
        start += s
    assert start == n


def assert_same(got, want):
    for k in want:
        a, b = got[k], want[k].item()
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12), k


def test_ranking_confidence_key_equals_core():
    preds, target, confidence = data()
    batches = [{"y_pred": preds[r], "y": target[r], "confidence": confidence[r]} for r in split(31)]
    metric = RankingMetrics(KEYS)
    got = run(metric, batches)
    want = rc.evaluate_scores(preds, target, KEYS, confidence=confidence)
    assert_same(got, want)
    for k in ("erc:cmc@1", "erc:map@r", "conf:ndcg@5"):
        torch.testing.assert_close(metric.last_results.curves[k], want.curves[k], equal_nan=True)


def test_ranking_confidence_through_output_transform_with_ids_and_categories():
    preds, target, confidence = data()
    ids = torch.arange(31)
    categories = ids % 2
    # the last batch repeats queries 0..3 (DistributedSampler padding): counted once
    rows = list(split(31)) + [slice(0, 4)]
    batches = [(preds[r], target[r], ids[r], confidence[r], categories[r]) for r in rows]
    transform = lambda out: {"y_pred": out[0], "y": out[1], "ids": out[2], "confidence": out[3],  # noqa: E731
                             "categories": out[4]}
    got = run(RankingMetrics(KEYS, output_transform=transform), batches)
    want = rc.evaluate_scores(preds, target, KEYS, confidence=confidence, categories=categories)
    assert set(want) <= set(got)
    assert_same(got, want)


def test_ranking_repeated_id_with_other_confidence_is_an_error():
    preds, target, confidence = data()
    metric = RankingMetrics(["erc:cmc@1"])
    metric.update({"y_pred": preds[:3], "y": target[:3], "ids": torch.arange(3), "confidence": confidence[:3]})
    metric.update({"y_pred": preds[:1], "y": target[:1], "ids": torch.arange(1), "confidence": confidence[:1] + 1})
    with pytest.raises(ValueError, match=re.escape("id 0 repeats with different rows (confidence: 1 row)")):
        metric.compute()


def test_ranking_confidence_errors():
    preds, target, confidence = data()
    metric = RankingMetrics(["erc:cmc@1"])
    metric.update((preds, target))
    with pytest.raises(ValueError, match=re.escape("erc:cmc@1: confidence keys need per-query confidences")):
        metric.compute()
    metric = RankingMetrics(["erc:cmc@1"])
    with pytest.raises(ValueError, match=re.escape("RankingMetrics: confidence must have one value per query; got 3 for 31")):
        metric.update({"y_pred": preds, "y": target, "confidence": confidence[:3]})
    metric.update({"y_pred": preds, "y": target, "confidence": torch.full((31,), float("nan"))})  # values: at compute
    with pytest.raises(ValueError, match=re.escape("confidence contains NaN or infinite values (31 of 31)")):
        metric.compute()
    with pytest.raises(ValueError, match=re.escape("compact=True keeps only sums and counts; confidence keys (erc:cmc@1)")):
        RankingMetrics(["mrr", "erc:cmc@1"], compact=True)


def test_embedding_confidence_key_equals_core():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(40) % 4
    x = 1.5 * torch.randn(4, 6, generator=g)[labels] + torch.randn(40, 6, generator=g)
    confidence = torch.rand(40, generator=g)
    is_query = torch.arange(40) % 3 != 0
    keys = ["erc:cmc@1", "conf:map@r", "kendall:map@r", "map@r"]
    batches = [{"embeddings": x[r], "labels": labels[r], "confidence": confidence[r], "is_query": is_query[r],
                "is_gallery": torch.ones(r.stop - r.start, dtype=torch.bool)} for r in split(40, (9, 21, 10))]
    metric = EmbeddingMetrics(keys)
    got = run(metric, batches)
    want = rc.evaluate_embeddings(x[is_query], labels[is_query], keys, gallery=x, gallery_labels=labels,
                                  query_ids=torch.arange(40)[is_query], gallery_ids=torch.arange(40),
                                  confidence=confidence[is_query])
    assert_same(got, want)
    torch.testing.assert_close(metric.last_results.curves["erc:cmc@1"], want.curves["erc:cmc@1"])
