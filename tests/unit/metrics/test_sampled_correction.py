"""The corrections of Krichene & Rendle (2020) (retrieval_core.metrics.sampled): the metric of
one relevant item at rank r agrees with the library's kernels, the binomial law of the
sampled rank, a hand-computed MLE and BV table, and the ties' sampled ranks."""
from __future__ import annotations

import math

import pytest
import torch

import retrieval_core as rc
from retrieval_core.metrics.keys import parse_metrics
from retrieval_core.metrics.spec import REGISTRY
from retrieval_core.metrics.sampled import (
    binomial_rows, correction_table, rank_metric, sampled_rank_values,
)

KEYS = ["hit_rate@3", "recall@3", "precision@3", "f1@3", "ndcg@3", "ndcg", "ndcg_exp@2", "mrr@2", "mrr", "map@4", "map",
        "map_capped@3", "auroc", "ndcg@r", "cmc@1"]


def test_every_correctable_name_is_tested():
    assert {m.spec.name for m in parse_metrics(KEYS)} == {n for n, s in REGISTRY.items() if s.at_rank}


@pytest.mark.parametrize("ties", ["stable", "expected"])
def test_the_metric_of_one_relevant_item_at_rank_r_is_the_librarys(ties):
    """Row r - 1: the one relevant item of n at rank r (scores descending, no tie)."""
    n = 7
    preds = torch.arange(n, 0, -1, dtype=torch.float64).repeat(n, 1)
    target = torch.eye(n, dtype=torch.int64)
    library = rc.evaluate_scores(preds, target, KEYS, reduce="none", ties=ties)
    ours = rank_metric(torch.arange(1, n + 1, dtype=torch.float64), parse_metrics(KEYS), n)
    for i, key in enumerate(KEYS):
        torch.testing.assert_close(ours[:, i], library[key].double(), rtol=0, atol=1e-12, msg=key)


def test_binomial_rows_are_the_binomial_law():
    n, m = 9, 4
    rows = binomial_rows(torch.arange(1, n + 1), n, m)
    torch.testing.assert_close(rows.sum(1), torch.ones(n, dtype=torch.float64))
    for r in range(1, n + 1):
        p = (r - 1) / (n - 1)
        expected = [math.comb(m, j) * p ** j * (1 - p) ** (m - j) for j in range(m + 1)]
        torch.testing.assert_close(rows[r - 1], torch.tensor(expected, dtype=torch.float64))
    assert rows[0, 1:].tolist() == [0, 0, 0, 0] and rows[-1, :-1].tolist() == [0, 0, 0, 0]  # p = 0 and 1: exact


def test_the_mle_table_by_hand():
    """n = 11, m = 5: r^ = 1 + (s - 1) * 10 / 5 = 1, 3, 5, 7, 9, 11."""
    keys = parse_metrics(["mrr", "hit_rate@4", "auroc"])
    table = correction_table(keys, 11, 5, "mle")
    r = torch.tensor([1.0, 3, 5, 7, 9, 11], dtype=torch.float64)
    torch.testing.assert_close(table[:, 0], 1 / r)
    assert table[:, 1].tolist() == [1, 1, 0, 0, 0, 0]
    torch.testing.assert_close(table[:, 2], (11 - r) / 10)


@pytest.mark.parametrize("gamma, expected", [(0.0, [5 / 6, -1 / 6]), (1.0, [2 / 3, 0.0]), (0.5, [11 / 15, -1 / 15])])
def test_the_bv_table_by_hand(gamma, expected):
    """n = 3, m = 1, hit_rate@1: p_r = 0, 1/2, 1, so A = [[1, 0], [1/2, 1/2], [0, 1]], b = [1, 0, 0],
    p(r) = 1/3. A^T P A = [[5, 1], [1, 5]] / 12, c = [1/2, 1/2], A^T P b = [1/3, 0]:
    gamma = 0 solves [[5, 1], [1, 5]] x = [4, 0] (x = [5/6, -1/6]); gamma = 1 gives
    x_j = (A^T P b)_j / c_j = [2/3, 0], the mean of M(r) given s under p(r); gamma = 1/2
    solves [[11, 1], [1, 11]] x = [8, 0] (x = [11/15, -1/15])."""
    table = correction_table(parse_metrics(["hit_rate@1"]), 3, 1, "bv", gamma)
    torch.testing.assert_close(table[:, 0], torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-12)


def test_bv_with_gamma_one_is_the_posterior_mean():
    """gamma = 1 minimises the mean squared error: M^(s) = E[M(r) | s] under uniform p(r)."""
    n, m = 40, 6
    keys = parse_metrics(["ndcg@5", "mrr"])
    ranks = torch.arange(1, n + 1, dtype=torch.float64)
    joint = binomial_rows(ranks, n, m)  # P(s | r), uniform prior
    posterior = joint / joint.sum(0, keepdim=True)
    expected = posterior.T @ rank_metric(ranks, keys, n)
    torch.testing.assert_close(correction_table(keys, n, m, "bv", 1.0), expected)


def test_the_bv_blocks_of_ranks_sum_as_one(monkeypatch):
    """The sums over r run a block of ranks at a time: blocks of 7 ranks give the one-block table."""
    from retrieval_core.metrics import sampled
    keys = parse_metrics(["ndcg@10", "hit_rate@5"])
    whole = correction_table(keys, 100, 8, "bv", 0.1)
    monkeypatch.setattr(sampled, "_ROWS", 7)
    torch.testing.assert_close(correction_table(keys, 100, 8, "bv", 0.1), whole, rtol=1e-10, atol=1e-12)


def test_the_sampled_rank_of_ties():
    """A relevant item with 1 negative above and 2 tied: sampled rank 2 (optimistic), 4
    (pessimistic, stable: the negatives first) or each of 2, 3, 4 (expected)."""
    table = torch.tensor([[10.0], [20.0], [30.0], [40.0], [50.0]], dtype=torch.float64)
    above, tied = torch.tensor([1, 0]), torch.tensor([2, 0])
    assert sampled_rank_values(table, above, tied, "optimistic")[:, 0].tolist() == [20.0, 10.0]
    assert sampled_rank_values(table, above, tied, "pessimistic")[:, 0].tolist() == [40.0, 10.0]
    assert sampled_rank_values(table, above, tied, "stable")[:, 0].tolist() == [40.0, 10.0]
    assert sampled_rank_values(table, above, tied, "expected")[:, 0].tolist() == [30.0, 10.0]
    empty = sampled_rank_values(table, above, tied, "expected", relevant=torch.tensor([True, False]))
    assert empty[0, 0] == 30.0 and math.isnan(empty[1, 0])
