"""Anchor tests against scikit-learn's ``ndcg_score``, on dense ``[Q, N]`` scores without
ties (``tests.references.DENSE_CASES``, shared with the ignite cross-checks).

Mapping (docs/metrics.md): sklearn ``ndcg_score(k=k)`` = our ``ndcg@k`` (linear gain);
with ties sklearn averages over tie orders, ours is stable (asserted in
``test_sklearn_ties_differ``). A query with no relevant item scores 0 in sklearn: our
``empty="zero"``.
"""
from __future__ import annotations

import pytest
import torch

from tests.references import DENSE_CASES, dense_case, ours_per_query

import retrieval_core

import sklearn.metrics as sklearn_metrics

KS = (1, 3, 10, 50)
ATOL = 1e-6


def sklearn_ndcg_per_query(preds, target, k, ignore_ties):
    y_true, y_score = target.numpy(), preds.to(torch.float64).numpy()
    values = [
        sklearn_metrics.ndcg_score(y_true[i : i + 1], y_score[i : i + 1], k=k, ignore_ties=ignore_ties)
        for i in range(y_true.shape[0])
    ]
    return torch.tensor(values, dtype=torch.float64)


@pytest.mark.parametrize("ignore_ties", [False, True])
@pytest.mark.parametrize("k", [*KS, None])
@pytest.mark.parametrize("name", list(DENSE_CASES))
def test_sklearn_ndcg_per_query(name, k, ignore_ties):
    preds, target = dense_case(name)
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
