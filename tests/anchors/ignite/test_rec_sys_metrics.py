"""Anchor tests against ignite's ``rec_sys`` metrics (``HitRate``, ``NDCG``), on dense
``[Q, N]`` scores without ties (``tests.references.DENSE_CASES``, shared with the sklearn
cross-checks).

Mapping (docs/metrics.md): ignite ``HitRate(top_k)`` = our ``hit_rate@k``; ignite ``NDCG``
with its default ``gain_function="exp_rank"`` = our ``ndcg_exp@k``, with
``"linear_rank"`` = ``ndcg@k``. ``ignore_zero_hits=True`` (default) drops queries with
no relevant item: our ``empty="skip"``; ``False`` counts them as 0: our ``empty="zero"``.

Differences, each asserted below:

* ignite ``NDCG`` counts a gain as relevant only when ``>= relevance_threshold``
  (default 1): fractional gains below it are zeroed, ours count every gain > 0.
  ``relevance_threshold`` just above 0 gives ours.
* ignite ``HitRate`` raises for k > N (``torch.topk``); ours covers the whole list.
* ignite raises ``NotComputableError`` when every query is empty; ours gives NaN.
* ignite ``NDCG`` computes in float32 (discounts, accumulator): ATOL_IGNITE = 1e-5.
"""
from __future__ import annotations

import pytest
import torch

from tests.references import dense_case, ours_per_query

import retrieval_core

import ignite.metrics.rec_sys as rec_sys
from ignite.exceptions import NotComputableError

KS = (1, 3, 10, 50)
ATOL = 1e-6
ATOL_IGNITE = 1e-5


def ignite_value(metric, preds, target, batch=8):
    metric.reset()
    for rows in torch.arange(preds.shape[0]).split(batch):
        metric.update((preds[rows], target[rows]))
    return torch.tensor(metric.compute(), dtype=torch.float64)


def ignite_per_query(make, preds, target):
    """One fresh metric per row: per-query values, NaN where ignite has no example."""
    out = []
    for i in range(preds.shape[0]):
        try:
            out.append(ignite_value(make(), preds[i : i + 1], target[i : i + 1]))
        except NotComputableError:
            out.append(None)
    width = next(len(v) for v in out if v is not None)
    return torch.stack([torch.full((width,), float("nan"), dtype=torch.float64) if v is None else v for v in out])


@pytest.mark.parametrize("ignore_zero_hits,empty", [(True, "skip"), (False, "zero")])
@pytest.mark.parametrize("name", ["q30_n5_int", "q30_n40_int", "q20_n60_float"])
def test_ignite_hit_rate(name, ignore_zero_hits, empty):
    preds, target = dense_case(name)
    ks = [k for k in KS if k <= preds.shape[1]]  # ignite needs k <= N (see below)
    keys = [f"hit_rate@{k}" for k in ks]
    mean = retrieval_core.evaluate_scores(preds, target, keys, empty=empty)
    anchor = ignite_value(rec_sys.HitRate(top_k=list(ks), ignore_zero_hits=ignore_zero_hits), preds, target)
    torch.testing.assert_close(torch.stack([mean[k] for k in keys]), anchor, atol=ATOL, rtol=0)
    per_query = ignite_per_query(lambda: rec_sys.HitRate(top_k=list(ks), ignore_zero_hits=ignore_zero_hits),
                                 preds, target)
    mine = ours_per_query(preds, target, keys, empty=empty)
    torch.testing.assert_close(torch.stack([mine[k] for k in keys], 1), per_query, atol=ATOL, rtol=0, equal_nan=True)


@pytest.mark.parametrize("ignore_zero_hits,empty", [(True, "skip"), (False, "zero")])
@pytest.mark.parametrize("gain,ours_name", [("exp_rank", "ndcg_exp"), ("linear_rank", "ndcg")])
@pytest.mark.parametrize("name", ["q30_n5_int", "q30_n40_int"])
def test_ignite_ndcg(name, gain, ours_name, ignore_zero_hits, empty):
    preds, target = dense_case(name)
    keys = [f"{ours_name}@{k}" for k in KS]
    make = lambda: rec_sys.NDCG(top_k=list(KS), gain_function=gain, ignore_zero_hits=ignore_zero_hits)  # noqa: E731
    mean = retrieval_core.evaluate_scores(preds, target, keys, empty=empty)
    torch.testing.assert_close(torch.stack([mean[k] for k in keys]), ignite_value(make(), preds, target),
                               atol=ATOL_IGNITE, rtol=0)
    mine = ours_per_query(preds, target, keys, empty=empty)
    torch.testing.assert_close(torch.stack([mine[k] for k in keys], 1), ignite_per_query(make, preds, target),
                               atol=ATOL_IGNITE, rtol=0, equal_nan=True)


@pytest.mark.parametrize("gain,ours_name", [("exp_rank", "ndcg_exp"), ("linear_rank", "ndcg")])
def test_ignite_ndcg_float_gains_need_threshold(gain, ours_name):
    """Fractional gains: ignite's default relevance_threshold=1 zeroes gains < 1, ours
    counts every gain > 0; a threshold just above 0 gives ours."""
    preds, target = dense_case("q20_n60_float")
    assert ((target > 0) & (target < 1)).any()
    keys = [f"{ours_name}@{k}" for k in KS]
    mine = retrieval_core.evaluate_scores(preds, target, keys)
    mine = torch.stack([mine[k] for k in keys])
    matched = ignite_value(rec_sys.NDCG(top_k=list(KS), gain_function=gain, relevance_threshold=1e-12), preds, target)
    torch.testing.assert_close(mine, matched, atol=ATOL_IGNITE, rtol=0)
    default = ignite_value(rec_sys.NDCG(top_k=list(KS), gain_function=gain), preds, target)
    assert (default - mine).abs().max() > 1e-3  # a different definition of relevance
    # which is ours on gains with the sub-threshold ones zeroed (ignoring queries left empty)
    cut = torch.where(target >= 1, target, torch.zeros_like(target))
    thresholded = retrieval_core.evaluate_scores(preds, cut, keys)
    torch.testing.assert_close(torch.stack([thresholded[k] for k in keys]), default, atol=ATOL_IGNITE, rtol=0)


def test_ignite_hit_rate_k_past_the_list_end():
    """ignite HitRate needs k <= N (torch.topk raises); ours uses the whole list."""
    preds, target = dense_case("q30_n5_int")
    with pytest.raises(RuntimeError):
        rec_sys.HitRate(top_k=[10]).update((preds, target))
    torch.testing.assert_close(
        retrieval_core.evaluate_scores(preds, target, ["hit_rate@10"])["hit_rate@10"],
        retrieval_core.evaluate_scores(preds, target, ["hit_rate@5"])["hit_rate@5"],
    )


def test_ignite_all_queries_empty():
    """Only queries without relevant items: ignite (ignore_zero_hits) raises, ours gives
    NaN with n_empty = Q under empty='skip'."""
    preds = torch.tensor([[0.3, 0.2, 0.1], [0.1, 0.5, 0.4]])
    target = torch.zeros(2, 3, dtype=torch.long)
    for metric in (rec_sys.HitRate(top_k=[1]), rec_sys.NDCG(top_k=[1])):
        metric.update((preds, target))
        with pytest.raises(NotComputableError):
            metric.compute()
    res = retrieval_core.evaluate_scores(preds, target, ["hit_rate@1", "ndcg_exp@1"])
    assert torch.isnan(res["hit_rate@1"]) and torch.isnan(res["ndcg_exp@1"])
    assert res.n_empty["hit_rate@1"].item() == 2
