"""The corrections of Krichene & Rendle (2020) (retrieval_core.metrics.sampled): the metric of
one relevant item at rank r agrees with the library's kernels, the binomial and hypergeometric
laws of the sampled rank, hand-computed MLE and BV tables (with and without replacement), and
the ties' sampled ranks."""
from __future__ import annotations

import math

import pytest
import torch

import retrieval_core as rc
from retrieval_core.metrics.keys import parse_metrics
from retrieval_core.metrics.spec import REGISTRY
from retrieval_core.metrics.sampled import (
    binomial_rows, correction_table, hypergeometric_rows, law_rows, mle_ranks, rank_metric, sampled_rank_values,
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


def test_the_mle_rank_is_floored():
    """n = 12, m = 5: 1 + (s - 1) * 11 / 5 = 1, 3.2, 5.4, 7.6, 9.8, 12, floored to a rank (the
    rank estimate as restated from the paper's Section 5): r^ = 1, 3, 5, 7, 9, 12, so a sampled
    rank 2 is a hit at 3 (the real 3.2 was not)."""
    keys = parse_metrics(["hit_rate@3", "mrr"])
    table = correction_table(keys, 12, 5, "mle")
    assert table[:, 0].tolist() == [1, 1, 0, 0, 0, 0]
    torch.testing.assert_close(table[:, 1], 1 / torch.tensor([1.0, 3, 5, 7, 9, 12], dtype=torch.float64))
    assert mle_ranks(12, 5).tolist() == [1, 3, 5, 7, 9, 12]
    torch.testing.assert_close(correction_table(keys, 12, 5, "mle", replace=False), table)  # one estimate


def test_the_mle_rank_is_exact_integer_arithmetic():
    """(s - 1)(n - 1) / m floored in int64: n - 1 = 3 * 2**52 - 1, m = 3, s = 2: the quotient is
    2**52 - 1/3, which float64 rounds up to 2**52 (a floor of 2**52, not 2**52 - 1)."""
    n, m = 3 * 2**52, 3
    assert float(n - 1) / m == 2**52  # the float64 path's error
    assert mle_ranks(n, m)[1].item() == 2**52  # 1 + (2**52 - 1)


@pytest.mark.parametrize("n, m", [(4, 2), (9, 4), (9, 8), (30, 7), (200, 20)])
def test_hypergeometric_rows_are_the_hypergeometric_law(n, m):
    """m distinct negatives of the n - 1 others, r - 1 above: C(r-1, j) C(n-r, m-j) / C(n-1, m)."""
    rows = hypergeometric_rows(torch.arange(1, n + 1), n, m)
    for r in range(1, n + 1):
        expected = [math.comb(r - 1, j) * math.comb(n - r, m - j) / math.comb(n - 1, m) for j in range(m + 1)]
        torch.testing.assert_close(rows[r - 1], torch.tensor(expected, dtype=torch.float64), rtol=1e-12, atol=0)
        assert all(rows[r - 1, j] == 0 for j in range(m + 1) if expected[j] == 0)  # off the support: exact 0
    torch.testing.assert_close(law_rows(torch.arange(1, n + 1), n, m, replace=False), rows)


def test_hypergeometric_rows_stay_exact_in_a_large_catalogue():
    """n = 10^6, m = 100: each probability to 1e-12 relative (no lgamma(n), whose relative error
    would be about 1e-16 n log n), at the edges and in the middle of the ranks."""
    n, m = 10**6, 100
    ranks = [1, 2, 3, 5000, n // 2, n - 1, n]
    rows = hypergeometric_rows(torch.tensor(ranks), n, m)
    for i, r in enumerate(ranks):
        expected = [math.comb(r - 1, j) * math.comb(n - r, m - j) / math.comb(n - 1, m) for j in range(m + 1)]
        tiny = [e < 1e-290 for e in expected]  # below float64's normal range once scaled: 0 or subnormal
        got = [g for g, t in zip(rows[i].tolist(), tiny) if not t]
        want = [e for e, t in zip(expected, tiny) if not t]
        torch.testing.assert_close(torch.tensor(got, dtype=torch.float64), torch.tensor(want, dtype=torch.float64),
                                   rtol=1e-12, atol=0)


def test_the_bv_table_without_replacement_by_hand():
    """n = 4, m = 2 distinct negatives of the 3 others: P(s - 1 = j | r) is, for r = 1..4,
    [1, 0, 0], [1/3, 2/3, 0], [0, 2/3, 1/3], [0, 0, 1]. gamma = 1 gives the posterior mean under
    uniform p(r): hit_rate@1 (M = [1, 0, 0, 0]): s = 1: 1 / (1 + 1/3) = 3/4, then 0, 0; mrr
    (M = 1/r): s = 1: (1 + 1/6) / (4/3) = 7/8, s = 2: (1/3 + 2/9) / (4/3) = 5/12,
    s = 3: (1/9 + 1/4) / (4/3) = 13/48. With replacement the law differs (binomial), and so does
    the table."""
    keys = parse_metrics(["hit_rate@1", "mrr"])
    table = correction_table(keys, 4, 2, "bv", 1.0, replace=False)
    torch.testing.assert_close(table[:, 0], torch.tensor([3 / 4, 0, 0], dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(table[:, 1], torch.tensor([7 / 8, 5 / 12, 13 / 48], dtype=torch.float64),
                               rtol=0, atol=1e-12)
    assert (correction_table(keys, 4, 2, "bv", 1.0) - table).abs().max() > 0.05


@pytest.mark.parametrize("gamma", [0.0, 0.01, 1.0])
def test_every_other_item_sampled_without_replacement_is_the_full_rank(gamma):
    """m = n - 1 distinct negatives: s = r surely, so both corrections give the metric itself."""
    n = 9
    keys = parse_metrics(["hit_rate@3", "ndcg@4", "mrr", "auroc"])
    full = rank_metric(torch.arange(1, n + 1, dtype=torch.float64), keys, n)
    torch.testing.assert_close(correction_table(keys, n, n - 1, "bv", gamma, replace=False), full)
    torch.testing.assert_close(correction_table(keys, n, n - 1, "mle", replace=False), full)


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
