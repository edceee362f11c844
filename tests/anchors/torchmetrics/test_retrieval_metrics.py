"""Anchor tests against torchmetrics' retrieval metrics (flat form with ``indexes``).

Data: uneven query sizes (1 to 200 entries), non-contiguous query ids, entries of
all queries interleaved, strictly positive continuous scores without ties (even in
float32), integer graded gains 0..3. Queries with no relevant entry and queries
whose entries are all relevant exist in every dataset.

torchmetrics' binary metrics require 0/1 targets: they get ``gain > 0`` while ours
get the graded gains (our binary metrics count gain > 0). nDCG gets graded gains.

Per-query values come from the classes with an identity ``aggregation`` callable:
one value per query in increasing id order, empty queries left out under
``empty_target_action="skip"``; ours are in the same order (``reduce="none"``).
torchmetrics computes in float32, hence ATOL = 1e-5.

Differences from our definitions, each asserted below:

* RetrievalAUROC gives 0 for a query with no negative; ours is undefined there.
* torchmetrics zeroes the target of an entry whose score is <= 0 (precision,
  recall, MAP, MRR); ours keeps it (docs/metrics.md: an anchor's defect is never copied).
* RetrievalMAP(top_k=k) divides by the hits in the top k (our ``map_hits@k``), not
  by R (our ``map@k``, trec map_cut).
"""
from __future__ import annotations


import pytest
import torch

from tests.references import distinct_scores, graded_gains

import retrieval_core

import torchmetrics.retrieval as tmr

KS = (1, 3, 10, 50)
ATOL = 1e-5
# name: (number of queries, largest query size, seed)
DATASETS = {"small": (20, 8, 201), "medium": (60, 40, 202), "long": (25, 200, 203)}


def make_flat(n_queries: int, max_size: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, max_size + 1, (n_queries,), generator=g)
    sizes[:4] = torch.tensor([1, 2, max_size, max(1, max_size // 2)])
    ids = torch.randperm(10 * n_queries, generator=g)[:n_queries]  # non-contiguous, unsorted
    gains = [graded_gains((int(s),), g, p_relevant=0.3) for s in sizes]
    gains[0][:] = 0  # R = 0
    gains[4][:] = 0  # R = 0
    gains[1][:] = torch.tensor([2, 1])  # every entry relevant (fall-out, AUROC empty)
    gains[5][:] = torch.randint(1, 4, (int(sizes[5]),), generator=g)  # every entry relevant
    gains[2][: max_size // 2] = 0
    gains[2][-1] = 1  # R > 0 in a long query
    indexes = ids.repeat_interleave(sizes)
    target = torch.cat(gains)
    perm = torch.randperm(indexes.numel(), generator=g)  # interleave the queries
    indexes, target = indexes[perm], target[perm]
    preds = distinct_scores((indexes.numel(),), g)  # distinct over all entries
    return preds, target, indexes


_CACHE = {}


def dataset(name):
    if name not in _CACHE:
        _CACHE[name] = make_flat(*DATASETS[name])
    return _CACHE[name]


def identity(values, dim=None):
    return values


def tm_per_query(cls, preds, target, indexes, n_updates=3, **kwargs):
    """Per-query values of a torchmetrics retrieval class (fed in ``n_updates`` batches)."""
    metric = cls(aggregation=identity, **kwargs)
    for chunk in torch.arange(preds.numel()).chunk(n_updates):
        metric.update(preds[chunk], target[chunk], indexes=indexes[chunk])
    return metric.compute().to(torch.float64).reshape(-1)


def ours(preds, target, indexes, key, empty="skip", reduce="none"):
    return retrieval_core.evaluate_scores(preds, target, [key], indexes=indexes, empty=empty, reduce=reduce)[key]


def per_query_stats(target, indexes):
    """(ids ascending, R, number of entries) per query."""
    ids, inverse = torch.unique(indexes, return_inverse=True)
    n_rel = torch.zeros(ids.numel(), dtype=torch.int64).index_add_(0, inverse, (target > 0).long())
    n = torch.zeros(ids.numel(), dtype=torch.int64).index_add_(0, inverse, torch.ones_like(inverse))
    return ids, n_rel, n


# (torchmetrics class, kwargs, our key, graded target for torchmetrics)
CASES = [
    *[("RetrievalHitRate", {"top_k": k}, f"hit_rate@{k}", False) for k in KS],
    *[("RetrievalPrecision", {"top_k": k}, f"precision@{k}", False) for k in KS],
    *[("RetrievalPrecision", {"top_k": k, "adaptive_k": True}, f"precision_adaptive@{k}", False) for k in KS],
    *[("RetrievalRecall", {"top_k": k}, f"recall@{k}", False) for k in KS],
    *[("RetrievalMAP", {"top_k": k}, f"map_hits@{k}", False) for k in KS],
    ("RetrievalMAP", {}, "map", False),
    *[("RetrievalMRR", {"top_k": k}, f"mrr@{k}", False) for k in KS],
    ("RetrievalMRR", {}, "mrr", False),
    *[("RetrievalNormalizedDCG", {"top_k": k}, f"ndcg@{k}", True) for k in KS],
    ("RetrievalNormalizedDCG", {}, "ndcg", True),
    *[("RetrievalFallOut", {"top_k": k}, f"fall_out@{k}", False) for k in KS],
    ("RetrievalRPrecision", {}, "r_precision", False),
]


def case_id(case):
    cls, kwargs, key, _ = case
    return f"{key}-{cls}" + ("-adaptive" if kwargs.get("adaptive_k") else "")


def anchor_target(target, graded):
    return target if graded else (target > 0).long()


@pytest.mark.parametrize("name", list(DATASETS))
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_torchmetrics_per_query_skip(name, case):
    cls, kwargs, key, graded = case
    preds, target, indexes = dataset(name)
    tm = tm_per_query(getattr(tmr, cls), preds, anchor_target(target, graded), indexes, empty_target_action="skip", **kwargs)
    mine = ours(preds, target, indexes, key, empty="skip")
    _, n_rel, n = per_query_stats(target, indexes)
    # Same empty rule: R = 0, except fall-out whose empty query has no non-relevant entry.
    empty = (n_rel == n) if cls == "RetrievalFallOut" else (n_rel == 0)
    assert empty.any() and (~empty).any()
    assert torch.equal(torch.isnan(mine), empty), key
    torch.testing.assert_close(mine[~empty], tm, atol=ATOL, rtol=0, msg=lambda m: f"{key}: {m}")


@pytest.mark.parametrize("name", list(DATASETS))
def test_torchmetrics_auroc(name):
    """Ours = RetrievalAUROC on queries with both classes; where a query has relevant
    entries only, torchmetrics gives 0 and ours is undefined (see also below)."""
    preds, target, indexes = dataset(name)
    tm = tm_per_query(tmr.RetrievalAUROC, preds, (target > 0).long(), indexes, empty_target_action="skip")
    mine = ours(preds, target, indexes, "auroc", empty="skip")
    _, n_rel, n = per_query_stats(target, indexes)
    assert torch.equal(torch.isnan(mine), (n_rel == 0) | (n_rel == n))
    mine_r = mine[n_rel > 0]  # torchmetrics skips R = 0 only
    both = ~torch.isnan(mine_r)
    assert (~both).any()
    torch.testing.assert_close(mine_r[both], tm[both], atol=ATOL, rtol=0)
    assert (tm[~both] == 0).all()


def test_auroc_query_without_negatives_differs():
    """A query whose entries are all relevant: torchmetrics AUROC = 0, ours undefined
    (NaN under skip, so it leaves the mean; 0 or 1 only when asked for)."""
    preds = torch.tensor([0.9, 0.4, 0.8, 0.7, 0.6])
    target = torch.tensor([1, 1, 1, 0, 1])
    indexes = torch.tensor([0, 0, 1, 1, 1])  # query 0: no negative; query 1: AUROC 1/2
    tm = tm_per_query(tmr.RetrievalAUROC, preds, target, indexes, n_updates=1, empty_target_action="skip")
    assert tm.tolist() == pytest.approx([0.0, 0.5])
    mine = ours(preds, target, indexes, "auroc")
    assert torch.isnan(mine[0]) and mine[1].item() == pytest.approx(0.5)
    # The means therefore differ: torchmetrics averages the 0 in, ours skips the query.
    tm_mean = tmr.RetrievalAUROC(empty_target_action="skip")(preds, target, indexes=indexes)
    assert tm_mean.item() == pytest.approx(0.25)
    assert ours(preds, target, indexes, "auroc", reduce="mean").item() == pytest.approx(0.5)
    assert ours(preds, target, indexes, "auroc", empty="zero", reduce="mean").item() == pytest.approx(0.25)
    # A query with no relevant entry is skipped by both.
    tm_neg = tm_per_query(tmr.RetrievalAUROC, preds, torch.tensor([0, 0, 1, 0, 1]), indexes, n_updates=1,
                          empty_target_action="skip")
    assert tm_neg.tolist() == pytest.approx([0.5])


# empty_target_action "neg" / "pos" = our empty "zero" / "one"
EMPTY_CASES = [
    ("RetrievalPrecision", {"top_k": 3}, "precision@3", False),
    ("RetrievalRecall", {"top_k": 10}, "recall@10", False),
    ("RetrievalMRR", {}, "mrr", False),
    ("RetrievalNormalizedDCG", {"top_k": 10}, "ndcg@10", True),
    ("RetrievalFallOut", {"top_k": 3}, "fall_out@3", False),
]


@pytest.mark.parametrize("action,empty", [("neg", "zero"), ("pos", "one")])
@pytest.mark.parametrize("case", EMPTY_CASES, ids=case_id)
def test_torchmetrics_empty_actions(case, action, empty):
    cls, kwargs, key, graded = case
    preds, target, indexes = dataset("medium")
    tm = tm_per_query(getattr(tmr, cls), preds, anchor_target(target, graded), indexes, empty_target_action=action,
                      **kwargs)
    mine = ours(preds, target, indexes, key, empty=empty)
    assert not torch.isnan(mine).any()
    torch.testing.assert_close(mine, tm, atol=ATOL, rtol=0)
    # and the default mean aggregation
    tm_mean = getattr(tmr, cls)(empty_target_action=action, **kwargs)(
        preds, anchor_target(target, graded), indexes=indexes
    )
    torch.testing.assert_close(
        ours(preds, target, indexes, key, empty=empty, reduce="mean"), tm_mean.double(), atol=ATOL, rtol=0
    )


@pytest.mark.parametrize("case", [c for c in CASES if c[2] in ("precision@10", "ndcg@3", "map", "r_precision")],
                         ids=case_id)
def test_torchmetrics_mean_skip(case):
    cls, kwargs, key, graded = case
    preds, target, indexes = dataset("long")
    tm = getattr(tmr, cls)(empty_target_action="skip", **kwargs)(preds, anchor_target(target, graded), indexes=indexes)
    torch.testing.assert_close(ours(preds, target, indexes, key, reduce="mean"), tm.double(), atol=ATOL, rtol=0)


def test_torchmetrics_ndcg_float_gains():
    g = torch.Generator().manual_seed(204)
    indexes = torch.arange(12).repeat_interleave(15)
    preds = distinct_scores((indexes.numel(),), g)
    target = torch.rand(indexes.numel(), generator=g, dtype=torch.float64) * 3
    target = torch.where(torch.rand(indexes.numel(), generator=g) < 0.6, torch.zeros_like(target), target)
    target[:15] = 0  # query 0: R = 0
    for k in (1, 5, None):
        kw = {} if k is None else {"top_k": k}
        key = "ndcg" if k is None else f"ndcg@{k}"
        tm = tm_per_query(tmr.RetrievalNormalizedDCG, preds, target.float(), indexes, empty_target_action="skip", **kw)
        mine = ours(preds, target, indexes, key)
        assert torch.isnan(mine[0]) and not torch.isnan(mine[1:]).any()
        torch.testing.assert_close(mine[1:], tm, atol=ATOL, rtol=0)


def test_map_top_k_divides_by_hits_not_r():
    """RetrievalMAP(top_k=k) is our map_hits@k; our map@k (trec map_cut) divides by R."""
    preds = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
    target = torch.tensor([0, 1, 0, 0, 1])  # R = 2, one hit in the top 3
    indexes = torch.zeros(5, dtype=torch.long)
    tm = tmr.RetrievalMAP(top_k=3)(preds, target, indexes=indexes).item()
    assert tm == pytest.approx(0.5)  # (1/2) / hits@3
    assert ours(preds, target, indexes, "map_hits@3").item() == pytest.approx(tm)
    assert ours(preds, target, indexes, "map@3").item() == pytest.approx(0.25)  # (1/2) / R


def test_torchmetrics_zeroes_targets_of_nonpositive_scores():
    """torchmetrics drops the relevance of an entry scored <= 0 (precision, recall, MAP,
    MRR); ours ranks it like any other score (docs/metrics.md: not copied)."""
    preds = torch.tensor([0.5, -0.2, -0.7])
    target = torch.tensor([0, 1, 0])
    indexes = torch.zeros(3, dtype=torch.long)
    pairs = [
        (tmr.RetrievalPrecision(top_k=2), "precision@2", 0.5),
        (tmr.RetrievalRecall(top_k=2), "recall@2", 1.0),
        (tmr.RetrievalMRR(), "mrr", 0.5),
        (tmr.RetrievalMAP(), "map", 0.5),
    ]
    for metric, key, expected in pairs:
        assert metric(preds, target, indexes=indexes).item() == 0.0, key
        assert ours(preds, target, indexes, key).item() == pytest.approx(expected), key
    # With the scores shifted to be positive (same order), both agree.
    shifted = preds + 1.0
    for metric, key, expected in pairs:
        metric.reset()
        assert metric(shifted, target, indexes=indexes).item() == pytest.approx(expected), key
