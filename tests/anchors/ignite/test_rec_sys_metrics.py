"""Anchor tests against scikit-learn's ``ndcg_score`` and ignite's ``rec_sys`` metrics
(``HitRate``, ``NDCG``), on dense ``[Q, N]`` scores without ties.

Mapping (docs/metrics.md):

* sklearn ``ndcg_score(k=k)`` = our ``ndcg@k`` (linear gain); with ties sklearn
  averages over tie orders, ours is stable (asserted in ``test_sklearn_ties_differ``).
  A query with no relevant item scores 0 in sklearn: our ``empty="zero"``.
* ignite ``HitRate(top_k)`` = our ``hit_rate@k``; ignite ``NDCG`` with its default
  ``gain_function="exp_rank"`` = our ``ndcg_exp@k``, with ``"linear_rank"`` = ``ndcg@k``.
  ``ignore_zero_hits=True`` (default) drops queries with no relevant item: our
  ``empty="skip"``; ``False`` counts them as 0: our ``empty="zero"``.

Differences, each asserted below:

* ignite ``NDCG`` counts a gain as relevant only when ``>= relevance_threshold``
  (default 1): fractional gains below it are zeroed, ours count every gain > 0.
  ``relevance_threshold`` just above 0 gives ours.
* ignite ``HitRate`` raises for k > N (``torch.topk``); ours covers the whole list.
* ignite raises ``NotComputableError`` when every query is empty; ours gives NaN.
* ignite ``NDCG`` computes in float32 (discounts, accumulator): ATOL_IGNITE = 1e-5.
"""
from __future__ import annotations

import sys

import pytest
import torch

from tests.references import distinct_scores, graded_gains, ours_per_query

import retrieval_core

import sklearn.metrics as sklearn_metrics
import ignite.metrics.rec_sys as rec_sys
from ignite.exceptions import NotComputableError

KS = (1, 3, 10, 50)
ATOL = 1e-6
ATOL_IGNITE = 1e-5


def make_dense(n_queries, n_docs, seed, graded="int"):
    g = torch.Generator().manual_seed(seed)
    preds = distinct_scores((n_queries, n_docs), g)
    if graded == "int":
        target = graded_gains((n_queries, n_docs), g, p_relevant=0.25)
    else:  # float gains in (0, 3), some below 1
        level = torch.rand((n_queries, n_docs), generator=g, dtype=torch.float64) * 3
        target = torch.where(torch.rand((n_queries, n_docs), generator=g) < 0.3, level, torch.zeros_like(level))
    target[::4] = 0  # R = 0 queries
    return preds, target


DATASETS = {
    "q30_n5_int": (30, 5, 301, "int"),
    "q30_n40_int": (30, 40, 302, "int"),
    "q20_n60_float": (20, 60, 303, "float"),
}
_CACHE = {}


def dataset(name):
    if name not in _CACHE:
        _CACHE[name] = make_dense(*DATASETS[name])
    return _CACHE[name]


# --------------------------------------------------------------------------- sklearn


def sklearn_ndcg_per_query(preds, target, k, ignore_ties):
    y_true, y_score = target.numpy(), preds.to(torch.float64).numpy()
    values = [
        sklearn_metrics.ndcg_score(y_true[i : i + 1], y_score[i : i + 1], k=k, ignore_ties=ignore_ties)
        for i in range(y_true.shape[0])
    ]
    return torch.tensor(values, dtype=torch.float64)


@pytest.mark.parametrize("ignore_ties", [False, True])
@pytest.mark.parametrize("k", [*KS, None])
@pytest.mark.parametrize("name", list(DATASETS))
def test_sklearn_ndcg_per_query(name, k, ignore_ties):
    preds, target = dataset(name)
    key = "ndcg" if k is None else f"ndcg@{k}"
    anchor = sklearn_ndcg_per_query(preds, target, k, ignore_ties)
    has = (target > 0).any(1)
    assert has.any() and (~has).any()
    skip = ours_per_query(preds, target, [key], empty="skip")[key]
    torch.testing.assert_close(skip[has], anchor[has], atol=ATOL, rtol=0)
    # R = 0: sklearn gives 0, ours is undefined (NaN = skipped); empty="zero" matches.
    assert torch.isnan(skip[~has]).all() and (anchor[~has] == 0).all()
    zero = ours_per_query(preds, target, [key], empty="zero")[key]
    torch.testing.assert_close(zero, anchor, atol=ATOL, rtol=0)
    # sklearn's mean over all rows = our mean with empty="zero".
    mean = sklearn_metrics.ndcg_score(target.numpy(), preds.to(torch.float64).numpy(), k=k, ignore_ties=ignore_ties)
    ours_mean = retrieval_core.evaluate_scores(preds, target, [key], empty="zero")[key]
    assert ours_mean.item() == pytest.approx(mean, abs=ATOL)


def test_sklearn_ties_differ():
    """sklearn averages the gains of tied scores; ours ranks ties by column (stable)."""
    preds = torch.tensor([[0.5, 0.5, 0.1]])
    target = torch.tensor([[1, 0, 0]])
    sk = sklearn_metrics.ndcg_score(target.numpy(), preds.numpy(), k=1)
    assert sk == pytest.approx(0.5)  # expected gain 1/2 at rank 1, ideal 1
    ours = retrieval_core.evaluate_scores(preds, target, ["ndcg@1"])["ndcg@1"].item()
    assert ours == 1.0  # column 0 (relevant) is ranked first
    # sklearn's value is the mean of ours over the orders of the tied pair (here: the
    # pair swapped, which puts the relevant item second), at every cutoff.
    swapped = target[:, [1, 0, 2]]
    for k in (1, 2, 3):
        key = f"ndcg@{k}"
        both = [retrieval_core.evaluate_scores(preds, t, [key])[key].item() for t in (target, swapped)]
        assert both[0] != both[1]
        sk = sklearn_metrics.ndcg_score(target.numpy(), preds.numpy(), k=k)
        assert sk == pytest.approx(sum(both) / 2, abs=ATOL)
        # ignore_ties=True picks one order (numpy argsort reversed), not the average
        assert sklearn_metrics.ndcg_score(target.numpy(), preds.numpy(), k=k, ignore_ties=True) in (
            pytest.approx(both[0]), pytest.approx(both[1]))


# --------------------------------------------------------------------------- ignite


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
    preds, target = dataset(name)
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
    preds, target = dataset(name)
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
    preds, target = dataset("q20_n60_float")
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
    preds, target = dataset("q30_n5_int")
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
