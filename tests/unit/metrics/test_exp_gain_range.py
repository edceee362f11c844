"""Exponential gains 2^g - 1 beyond float64's range (issue 18): ndcg_exp is a ratio and
stays exact for any finite gain; dcg_exp is exact where float64 holds it and refused
(a clear ValueError) where it does not, never inf or a query silently counted as empty.

The reference computes in exact rational arithmetic (Python integers for 2^g - 1 with
integer gains, ``fractions.Fraction`` of the float64 discounts 1 / log2(i + 1)), and for
``ties="expected"`` averages over every order of the tied candidates: it shares no
arithmetic with the kernels.
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
import torch

import retrieval_core as rc
from retrieval_core.evaluation.accumulator.scores import compact_sums, finalize_compact


def discount(rank: int) -> Fraction:
    return Fraction(1.0 / math.log2(rank + 1))


def exact_dcg(gains, k=None) -> Fraction:
    """sum over the first k ranks of (2^g - 1) / log2(i + 1), exactly (integer gains)."""
    k = len(gains) if k is None else min(k, len(gains))
    return sum(((2 ** int(g) - 1) * discount(i + 1) for i, g in enumerate(gains[:k])), Fraction(0))


def exact_ndcg(gains_in_order, k=None) -> Fraction:
    return exact_dcg(gains_in_order, k) / exact_dcg(sorted(gains_in_order, reverse=True), k)


def exact_expected(scores, gains, k, normalise: bool) -> Fraction:
    """Mean over every order of equal scores (descending scores, ties in any order)."""
    n = len(scores)
    total, count = Fraction(0), 0
    for perm in itertools.permutations(range(n)):
        order = sorted(perm, key=lambda j: -scores[j])  # stable: ties keep the permutation's order
        ranked = [gains[j] for j in order]
        total += exact_ndcg(ranked, k) if normalise else exact_dcg(ranked, k)
        count += 1
    return total / count


BIG_TARGETS = [
    [[1100, 1, 0], [0, 1, 0]],  # the issue's example
    [[1023, 1023, 5], [2000, 0, 3]],
    [[5000, 4999, 1], [1, 0, 0]],
    [[1024, 0, 1030], [960, 961, 962]],
]


@pytest.mark.parametrize("target", BIG_TARGETS)
@pytest.mark.parametrize("ties", ["stable", "optimistic", "pessimistic", "expected"])
@pytest.mark.parametrize("flat", [False, True])
def test_ndcg_exp_exact_for_big_gains(target, ties, flat):
    preds = torch.tensor([[3.0, 2.0, 1.0], [1.0, 3.0, 2.0]])
    t = torch.tensor(target)
    keys = ["ndcg_exp", "ndcg_exp@1", "ndcg_exp@2"]
    kwargs = dict(indexes=torch.tensor([0, 0, 0, 1, 1, 1])) if flat else {}
    p_in, t_in = (preds.flatten(), t.flatten()) if flat else (preds, t)
    r = rc.evaluate_scores(p_in, t_in, keys, ties=ties, reduce="none", **kwargs)
    for key, k in zip(keys, [None, 1, 2]):
        assert int(r.n_empty[key]) == 0, key
        for q in range(2):
            order = torch.argsort(preds[q], descending=True).tolist()
            want = float(exact_ndcg([target[q][j] for j in order], k))
            assert r[key][q].item() == pytest.approx(want, rel=1e-12), (key, q)


def test_issue_example_mean():
    """The issue's numbers: perfectly ranked, so ndcg_exp is 1 with no empty query."""
    preds = torch.tensor([[3.0, 2.0, 1.0], [1.0, 3.0, 2.0]])
    r = rc.evaluate_scores(preds, torch.tensor(BIG_TARGETS[0]), ["ndcg_exp"])
    assert r["ndcg_exp"].item() == 1.0 and int(r.n_empty["ndcg_exp"]) == 0


@pytest.mark.parametrize("gains,k", [
    ([0, 1024], 2),  # (2^1024 - 1) / log2(3) ~ 1.13e308
    ([0, 0, 0, 1025], 4),  # 2^1025 / log2(5) ~ 1.55e308: 2^1025 alone overflows
    ([1023, 0, 1], 3),
    ([3, 1022, 1021], 3),
    ([1000, 990], 2),
    ([1, 1100], 1),  # the top 1 is small, the row's largest gain is not
])
@pytest.mark.parametrize("ties", ["stable", "expected"])
def test_dcg_exp_exact_where_representable(gains, k, ties):
    preds = torch.tensor([[float(len(gains) - i) for i in range(len(gains))]])
    r = rc.evaluate_scores(preds, torch.tensor([gains], dtype=torch.float64), [f"dcg_exp@{k}", "ndcg_exp"], ties=ties)
    assert r[f"dcg_exp@{k}"].item() == pytest.approx(float(exact_dcg(gains, k)), rel=1e-12)
    assert r["ndcg_exp"].item() == pytest.approx(float(exact_ndcg(gains)), rel=1e-12)


@pytest.mark.parametrize("target,keys", [
    ([[1100, 1, 0], [0, 1, 0]], ["ndcg_exp", "dcg_exp@2"]),  # 2^1100: not a float64
    ([[1025, 0, 0]], ["dcg_exp@1"]),
    ([[1023, 1023, 1023]], ["dcg_exp"]),  # each term fits, the sum (2.13 * 2^1023) does not
    ([[1023, 0, 0], [1023, 0, 0]], ["dcg_exp@1"]),  # each query's fits, their sum does not
])
@pytest.mark.parametrize("ties", ["stable", "expected", "pessimistic"])
def test_unrepresentable_dcg_refused(target, keys, ties):
    preds = torch.tensor([[3.0, 2.0, 1.0]] * len(target))
    with pytest.raises(ValueError, match="beyond what float64 can sum"):
        rc.evaluate_scores(preds, torch.tensor(target, dtype=torch.float64), keys, ties=ties)


@pytest.mark.parametrize("ties", ["stable", "expected", "optimistic"])
@pytest.mark.parametrize("gain", [2.0**960 * 1.5, 1.5e308])
def test_linear_gains_whose_sums_overflow_refused(ties, gain):
    """Gains above 2^960 could overflow sums of gains (cumulative gains, tied groups' totals:
    inf - inf would be NaN, an 'empty' query): refused with the other gain checks."""
    preds = torch.tensor([[1.0, 1.0, 0.0]])
    with pytest.raises(ValueError, match=r"target contains NaN or inf \(or gains above 2\^960\)"):
        rc.evaluate_scores(preds, torch.tensor([[gain, 1e308, 0.0]], dtype=torch.float64), ["dcg", "wap@2"], ties=ties)


@pytest.mark.parametrize("ties", ["stable", "expected"])
def test_linear_gains_at_the_limit(ties):
    """Gains up to 2^960 are taken, sums exact (a tied pair: the mean of both orders)."""
    g = [2.0**960, 2.0**959, 0.0]
    r = rc.evaluate_scores(torch.tensor([[1.0, 1.0, 0.0]]), torch.tensor([g], dtype=torch.float64),
                           ["dcg", "acg@2", "ndcg"], ties=ties)
    d2 = Fraction(1.0 / math.log2(3))
    first, second = Fraction(g[0]), Fraction(g[1])
    stable = first + second * d2
    swapped = second + first * d2
    want = stable if ties == "stable" else (stable + swapped) / 2
    assert r["dcg"].item() == pytest.approx(float(want), rel=1e-12)
    assert r["acg@2"].item() == pytest.approx(float((first + second) / 2), rel=1e-12)
    assert r["ndcg"].item() == pytest.approx(float(want / stable), rel=1e-12)


def test_compact_sums_refused():
    """The adapters' compact state sums per-query values: an overflowed sum is refused at compute."""
    values = torch.tensor([[1.5e308], [1.5e308]], dtype=torch.float64)
    with pytest.raises(ValueError, match="beyond what float64 can sum"):
        finalize_compact(compact_sums(values), ["dcg_exp@1"])


@pytest.mark.parametrize("big", [1100, 2000])
@pytest.mark.parametrize("k", [1, 2])
def test_expected_ties_across_the_cut(big, k):
    """A tied group crossing the cut holds the big gain past it (the partial Ranking's
    tie sums): against the mean over every order, exactly."""
    scores = [5.0, 1.0, 1.0, 1.0, 0.0]
    gains = [2, 0, 3, big, 1]
    r = rc.evaluate_scores(torch.tensor([scores]), torch.tensor([gains]), [f"ndcg_exp@{k}"], ties="expected")
    want = exact_expected(scores, gains, k, normalise=True)
    assert r[f"ndcg_exp@{k}"].item() == pytest.approx(float(want), rel=1e-12)


def test_expected_ties_across_the_cut_dcg_exp():
    scores = [1.0, 1.0, 1.0, 0.0]
    gains = [0, 3, 1010, 1]
    r = rc.evaluate_scores(torch.tensor([scores]), torch.tensor([gains]), ["dcg_exp@1", "dcg_exp@2"], ties="expected")
    for k in (1, 2):
        want = exact_expected(scores, gains, k, normalise=False)
        assert r[f"dcg_exp@{k}"].item() == pytest.approx(float(want), rel=1e-12)


def test_small_gains_unchanged():
    """Below the headroom the gains take expm1 as before (fractional gains near 0 keep
    their relative precision)."""
    preds = torch.tensor([[2.0, 1.0]])
    r = rc.evaluate_scores(preds, torch.tensor([[1e-12, 0.0]], dtype=torch.float64), ["dcg_exp"])
    assert r["dcg_exp"].item() == pytest.approx(math.expm1(1e-12 * math.log(2.0)), rel=1e-12)
