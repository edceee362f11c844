"""Confidence keys in the torchmetrics adapters: the optional ``confidence=`` argument of ``update``."""
from __future__ import annotations

import math
import re

import pytest
import torch

import retrieval_core as rc
from lightning_retrieval import EmbeddingMetrics, RankingMetrics

KEYS = ["cmc@1", "erc:cmc@1", "erc:ndcg@5", "conf:map@r", "spearman:map@r", "kendall:cmc@3"]


def data(n_queries=30, n_items=14, seed=5):
    g = torch.Generator().manual_seed(seed)
    preds = torch.rand(n_queries, n_items, generator=g)
    target = (torch.rand(n_queries, n_items, generator=g) < 0.3).long()
    target[::7] = 0
    return preds, target, torch.rand(n_queries, generator=g)


def assert_same(got, want):
    assert list(got) == list(want)
    for k in want:
        a, b = got[k].item(), want[k].item()
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12), k


def test_ranking_update_confidence_equals_core():
    preds, target, confidence = data()
    metric = RankingMetrics(KEYS)
    for r in (slice(0, 11), slice(11, 12), slice(12, 30)):
        metric.update(preds[r], target[r], confidence=confidence[r])
    got = metric.compute()
    want = rc.evaluate_scores(preds, target, KEYS, confidence=confidence)
    assert_same(got, want)
    assert set(got.curves) == {"erc:cmc@1", "erc:ndcg@5", "conf:map@r"}
    for k in got.curves:
        torch.testing.assert_close(got.curves[k], want.curves[k], equal_nan=True)


def test_ranking_confidence_list_ids_categories():
    preds, target, confidence = data()
    metric = RankingMetrics(KEYS)
    ids, categories = torch.arange(30), torch.arange(30) % 3
    for r in (slice(0, 20), slice(20, 30), slice(25, 30)):  # the last batch repeats 25..29: counted once
        metric.update(preds[r], target[r], ids=ids[r], categories=categories[r], confidence=confidence[r].tolist())
    want = rc.evaluate_scores(preds, target, KEYS, confidence=confidence, categories=categories)
    assert_same(metric.compute(), want)


def test_ranking_confidence_errors():
    preds, target, confidence = data()
    metric = RankingMetrics(["erc:cmc@1"])
    metric.update(preds, target)
    with pytest.raises(ValueError, match=re.escape("erc:cmc@1: confidence keys need per-query confidences")):
        metric.compute()
    with pytest.raises(TypeError, match=re.escape("confidence must be a real (float or integer) tensor; got torch.bool")):
        RankingMetrics(["erc:cmc@1"]).update(preds, target, confidence=confidence > 0.5)
    metric = RankingMetrics(["erc:cmc@1"])
    metric.update(preds[:2], target[:2], confidence=torch.tensor([0.5, float("inf")]))
    with pytest.raises(ValueError, match=re.escape("confidence contains NaN or infinite values (1 of 2)")):
        metric.compute()
    metric = RankingMetrics(["erc:cmc@1"])
    metric.update(preds[:2], target[:2], confidence=confidence[:2])
    metric.update(preds[2:4], target[2:4])
    with pytest.raises(ValueError, match=re.escape("confidence were given for 2 of 4 rows")):
        metric.compute()
    with pytest.raises(ValueError, match=re.escape("compact=True keeps only sums and counts; confidence keys (erc:cmc@1)")):
        RankingMetrics(["erc:cmc@1"], compact=True)


def test_embedding_update_confidence_equals_core():
    g = torch.Generator().manual_seed(1)
    labels = torch.arange(36) % 3
    x = 1.5 * torch.randn(3, 5, generator=g)[labels] + torch.randn(36, 5, generator=g)
    confidence = torch.rand(36, generator=g)
    keys = ["erc:cmc@1", "conf:map@r", "spearman:map@r", "map@r"]
    metric = EmbeddingMetrics(keys)
    for r in (slice(0, 10), slice(10, 36)):
        metric.update(x[r], labels[r], confidence=confidence[r])
    got = metric.compute()
    want = rc.evaluate_embeddings(x, labels, keys, confidence=confidence)
    assert_same(got, want)
    torch.testing.assert_close(got.curves["erc:cmc@1"], want.curves["erc:cmc@1"])
