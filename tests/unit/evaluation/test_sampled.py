"""evaluate_sampled: the sampled metrics equal evaluate_scores on each user's list (negatives
then positives), the corrections' mean over many samplings is their exact expectation and,
for BV, the full-ranking metric (Monte Carlo), the sampled metrics reverse two systems that
the full ranking orders the other way (Krichene & Rendle's finding), and bad inputs."""
from __future__ import annotations

import math

import pytest
import torch

import retrieval_core as rc
from retrieval_core.metrics.keys import parse_metrics
from retrieval_core.metrics.sampled import binomial_rows, correction_table, hypergeometric_rows, rank_metric

G = torch.Generator().manual_seed(9)


def _by_hand(positive_scores, negative_scores, truth, keys, ties):
    """evaluate_scores on dense rows: each user's negatives, then its positives (padded, masked)."""
    n_users, m = negative_scores.shape
    counts = torch.bincount(truth[0], minlength=n_users)
    width = m + int(counts.max())
    preds = torch.zeros(n_users, width, dtype=torch.float64)
    target = torch.zeros(n_users, width, dtype=torch.int64)
    mask = torch.zeros(n_users, width, dtype=torch.bool)
    preds[:, :m], mask[:, :m] = negative_scores, True
    for u in range(n_users):
        mine = (truth[0] == u).nonzero().squeeze(1)
        preds[u, m:m + mine.numel()] = positive_scores[mine]
        target[u, m:m + mine.numel()] = 1
        mask[u, m:m + mine.numel()] = True
    return rc.evaluate_scores(preds, target, keys, mask=mask, ties=ties, reduce="none")


@pytest.mark.parametrize("ties", ["stable", "expected", "optimistic", "pessimistic"])
def test_sampled_metrics_are_evaluate_scores_on_each_users_list(ties):
    """Several positives per user, a user without one (empty), ties between positives and
    negatives (scores rounded to a few values)."""
    n_users, m, n_items = 12, 6, 40
    truth = torch.unique(torch.stack([torch.randint(0, n_users - 1, (30,), generator=G),
                                      torch.randint(0, n_items, (30,), generator=G)]), dim=1)
    truth = truth[:, torch.randperm(truth.shape[1], generator=G)]  # the pairs in any order
    positive_scores = torch.randint(0, 4, (truth.shape[1],), generator=G).double()
    negative_scores = torch.randint(0, 4, (n_users, m), generator=G).double()
    keys = ["ndcg@3", "hit_rate@2", "map", "mrr@4", "recall@3", "auroc"]
    r = rc.evaluate_sampled(positive_scores, negative_scores, truth, keys, ties=ties, reduce="none")
    expected = _by_hand(positive_scores, negative_scores, truth, keys, ties)
    for key in keys:
        torch.testing.assert_close(r[key], expected[key], equal_nan=True, msg=key)
    assert math.isnan(r["ndcg@3"][-1])


def test_stable_ranks_a_positive_after_the_negatives_it_ties():
    r = rc.evaluate_sampled(torch.tensor([1.0]), torch.tensor([[1.0, 1.0, 0.0]]), torch.tensor([[0], [0]]),
                            ["mrr"])
    assert r["mrr"].item() == pytest.approx(1 / 3)


def _leave_one_out(ranks, n_items, m, seed, replace=True):
    """Users whose one positive is at full rank ``ranks[u]`` (item i scored -i: the positive is
    item ranks[u] - 1), with m negatives sampled: (positive scores, negative scores, truth)."""
    users = torch.arange(ranks.numel())
    truth = torch.stack([users, ranks - 1])
    negatives = rc.sample_negatives(truth, n_items, m, seed=seed, replace=replace)
    return -truth[1].double(), -negatives.double(), truth


@pytest.mark.parametrize("replace", [True, False])
@pytest.mark.parametrize("correction", [None, "mle", "bv"])
def test_monte_carlo_mean_is_the_exact_expectation_and_bv_the_full_metric(correction, replace):
    """Full ranks uniform over 1..n (each rank 400 times), negatives drawn with or without
    replacement: the mean of the corrected values over the sampled negatives lies within 4
    standard errors of its exact expectation sum_s P(s | r) M^(s) under that law (binomial or
    hypergeometric); with BV (gamma 0.01) that expectation is the full-ranking metric to 1e-3,
    while the plain sampled metric is several times too high. auroc is unbiased without a
    correction and with BV; the MLE's floor moves r^ down by less than 1, so its auroc is
    above the full one by less than 1 / (n - 1)."""
    n, m, copies = 50, 10, 400
    keys = ["hit_rate@5", "ndcg@10", "mrr", "precision@3", "auroc"]
    parsed = parse_metrics(keys)
    ranks = torch.arange(1, n + 1).repeat(copies)
    r = rc.evaluate_sampled(*_leave_one_out(ranks, n, m, seed=1, replace=replace), keys, n_items=n,
                            correction=correction, replace=replace, keep_per_query=True)
    full_ranks = torch.arange(1, n + 1, dtype=torch.float64)
    if correction is None:
        table = rank_metric(torch.arange(1, m + 2, dtype=torch.float64), parsed, m + 1)
    else:
        table = correction_table(parsed, n, m, correction, 0.01, replace=replace)
    law = binomial_rows if replace else hypergeometric_rows
    expectation = (law(full_ranks, n, m) @ table).mean(0)
    full = rank_metric(full_ranks, parsed, n).mean(0)
    for i, key in enumerate(keys):
        values = r.per_query[key]
        error = values.std() / math.sqrt(values.numel())
        assert abs(r[key].item() - expectation[i].item()) <= 4 * error.item() + 1e-12, key
    if correction == "bv":
        torch.testing.assert_close(expectation, full, rtol=0, atol=1e-3)
    if correction is None:
        assert r["hit_rate@5"].item() > 4 * full[0].item()
    if correction == "mle":
        assert 0 <= expectation[4].item() - full[4].item() < 1 / (n - 1)
    else:
        torch.testing.assert_close(expectation[4], full[4])


def test_the_law_of_the_sampled_rank_follows_replace():
    """Every other item drawn without replacement (m = n - 1): the sampled rank is the full rank,
    and both corrections give each user's full-ranking metric exactly; the binomial law (the
    default, replace=True) would not."""
    n = 12
    ranks = torch.arange(1, n + 1)
    args = _leave_one_out(ranks, n, n - 1, seed=2, replace=False)
    keys = ["hit_rate@3", "ndcg@5", "mrr", "auroc"]
    full = rank_metric(ranks.double(), parse_metrics(keys), n)
    for correction in ("mle", "bv"):
        r = rc.evaluate_sampled(*args, keys, n_items=n, correction=correction, replace=False, reduce="none")
        for i, key in enumerate(keys):
            torch.testing.assert_close(r[key], full[:, i], rtol=0, atol=1e-9, msg=f"{correction} {key}")
    binomial = rc.evaluate_sampled(*args, keys, n_items=n, correction="bv", reduce="none")
    assert (binomial["hit_rate@3"] - full[:, 0]).abs().max() > 0.1


def test_sampled_metrics_reverse_two_systems():
    """Krichene & Rendle's finding: n = 1000 items, 100 sampled negatives. System A puts half of
    its users' items first and half last (full hit_rate@10 = 0.5); system B puts every item at
    rank 50 (full hit_rate@10 = 0). Sampled, B wins (about 0.97 against 0.5); corrected, A does again."""
    n, m, users = 1000, 100, 200
    a = torch.where(torch.arange(users) % 2 == 0, 1, n)
    b = torch.full((users,), 50)
    sampled = [rc.evaluate_sampled(*_leave_one_out(s, n, m, seed=0), ["hit_rate@10"])["hit_rate@10"].item()
               for s in (a, b)]
    assert sampled[0] == 0.5 and sampled[1] > 0.9
    for correction in ("mle", "bv"):
        corrected = [rc.evaluate_sampled(*_leave_one_out(s, n, m, seed=0), ["hit_rate@10"], n_items=n,
                                         correction=correction)["hit_rate@10"].item() for s in (a, b)]
        assert corrected[0] > 0.45 and abs(corrected[1]) < 0.05, correction


def test_the_correction_of_ties_follows_ties():
    """One user, full rank unknown: 1 negative above, 2 tied; n = 21, m = 4 (MLE r^ = 1 + 5(s - 1))."""
    args = (torch.tensor([1.0]), torch.tensor([[2.0, 1.0, 1.0, 0.0]]), torch.tensor([[0], [0]]), ["mrr"])
    got = {t: rc.evaluate_sampled(*args, n_items=21, correction="mle", ties=t)["mrr"].item()
           for t in ("optimistic", "pessimistic", "stable", "expected")}
    assert got["optimistic"] == pytest.approx(1 / 6) and got["pessimistic"] == pytest.approx(1 / 16)
    assert got["stable"] == got["pessimistic"]
    assert got["expected"] == pytest.approx((1 / 6 + 1 / 11 + 1 / 16) / 3)


def test_options_pass_to_the_aggregation():
    ranks = torch.tensor([1, 5, 9, 30, 2, 7])
    pos, neg, truth = _leave_one_out(ranks, 40, 8, seed=3)
    r = rc.evaluate_sampled(pos, neg, truth, ["ndcg@5"], n_items=40, correction="bv", gamma=0.1,
                            categories=["x", "y"] * 3, ci=0.9, n_resamples=50, keep_per_query=True)
    assert set(r) == {"ndcg@5", "ndcg@5/x", "ndcg@5/y"} and "ndcg@5" in r.ci
    assert r.per_query["ndcg@5"].shape == (6,)


def test_numpy_inputs_and_a_user_without_a_positive():
    """NumPy arrays evaluate as tensors; a user without a positive is empty (NaN, skipped)."""
    pos, neg, truth = _leave_one_out(torch.tensor([1, 5, 9, 30]), 40, 8, seed=3)
    neg = torch.cat([neg, torch.zeros(1, 8, dtype=torch.float64)])  # a fifth user, no positive
    for correction in (None, "bv"):
        r = rc.evaluate_sampled(pos, neg, truth, ["ndcg@5"], n_items=40, correction=correction, reduce="none")
        n = rc.evaluate_sampled(pos.numpy(), neg.numpy(), truth.numpy(), ["ndcg@5"], n_items=40,
                                correction=correction, reduce="none")
        torch.testing.assert_close(r["ndcg@5"], n["ndcg@5"], equal_nan=True)
        assert math.isnan(r["ndcg@5"][4]) and not r["ndcg@5"][:4].isnan().any()


PAIRS = torch.tensor([[0, 1], [2, 0]])
POS, NEG = torch.tensor([0.5, 0.1]), torch.rand(2, 3, generator=G)


@pytest.mark.parametrize("call, error, match", [
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["mrr"], correction="unbiased", n_items=9), ValueError,
     "correction must be None or one of 'mle', 'bv'"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["mrr"], correction="bv"), ValueError, "needs n_items"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["mrr"], correction="bv", n_items=9, sampling="popularity"),
     ValueError, "with popularity sampling the number of negatives above a user's relevant item depends on the "
                 "popularity of the items ranked above it"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["mrr"], correction="mle", n_items=9, sampling="popularity"),
     ValueError, "correction='mle' models negatives drawn uniformly"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["mrr"], sampling="pop"), ValueError,
     "sampling must be one of 'uniform', 'popularity'"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["mrr"], replace=0), TypeError, "replace must be a bool"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["mrr"], correction="bv", n_items=3, replace=False), ValueError,
     "replace=False: 3 distinct negatives per user cannot be drawn from the n_items - 1 = 2 other items"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["mrr"], correction="bv", n_items=9, gamma=2), ValueError,
     "gamma must be a number in \\[0, 1\\]"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["rbp@0.8"], correction="mle", n_items=9), ValueError,
     "takes the keys"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["ndcg@2", "auroc@5"], correction="bv", n_items=9), ValueError,
     "got auroc@5$"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["erc:mrr"], correction="bv", n_items=9), ValueError,
     "got erc:mrr$"),
    (lambda: rc.evaluate_sampled(torch.tensor([0.5, 0.1, 0.3]), NEG, torch.tensor([[0, 0, 1], [2, 3, 0]]), ["mrr"],
                                 correction="mle", n_items=9), ValueError, "one relevant item per user"),
    (lambda: rc.evaluate_sampled(POS[:1], NEG, PAIRS, ["mrr"]), ValueError, "one score per truth pair \\(2\\)"),
    (lambda: rc.evaluate_sampled(POS, NEG[0], PAIRS, ["mrr"]), ValueError, "negative_scores must be 2-D"),
    (lambda: rc.evaluate_sampled(POS, NEG[:, :0], PAIRS, ["mrr"]), ValueError, "at least one negative"),
    (lambda: rc.evaluate_sampled(torch.tensor([math.nan, 0.1]), NEG, PAIRS, ["mrr"]), ValueError,
     "positive_scores holds NaN"),
    (lambda: rc.evaluate_sampled(POS > 0, NEG, PAIRS, ["mrr"]), TypeError, "positive_scores must hold real"),
    (lambda: rc.evaluate_sampled("0.5", NEG, PAIRS, ["mrr"]), TypeError, "positive_scores must be a tensor"),
    (lambda: rc.evaluate_sampled(POS, NEG, torch.eye(2).to_sparse(), ["mrr"]), ValueError, "coalesce"),
    (lambda: rc.evaluate_sampled(POS, NEG, torch.tensor([[0, 2], [2, 0]]), ["mrr"]), ValueError, "user ids"),
    (lambda: rc.evaluate_sampled(POS, NEG, torch.tensor([[0, 0], [2, 2]]), ["mrr"]), ValueError, "twice"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["mrr"], ties="random"), ValueError, "ties must be one of"),
    (lambda: rc.evaluate_sampled(POS, NEG, PAIRS, ["mrr"], categories=["a"]), ValueError, "categor"),
])
def test_bad_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_popularity_sampling_evaluates_without_a_correction():
    """sampling="popularity" only matters to a correction: the plain sampled metrics are the same."""
    pos, neg, truth = _leave_one_out(torch.tensor([1, 5, 9, 30]), 40, 8, seed=3)
    plain = rc.evaluate_sampled(pos, neg, truth, ["ndcg@5"], reduce="none")
    pop = rc.evaluate_sampled(pos, neg, truth, ["ndcg@5"], sampling="popularity", replace=False, reduce="none")
    torch.testing.assert_close(plain["ndcg@5"], pop["ndcg@5"])


def test_integer_scores_are_compared_exactly():
    """2**53 + 1 and 2**53 are one float64: compared as int64, the positive is above the negative."""
    pos, neg = torch.tensor([2**53 + 1]), torch.tensor([[2**53, 0]])
    for correction in (None, "mle"):
        r = rc.evaluate_sampled(pos, neg, torch.tensor([[0], [0]]), ["mrr"], n_items=3, correction=correction,
                                ties="pessimistic")
        assert r["mrr"].item() == 1.0, correction
