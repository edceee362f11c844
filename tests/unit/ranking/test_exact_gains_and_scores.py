"""Exact results where the input's own arithmetic would round: low-precision gains
(float16, bfloat16, int8, uint8 counts past what the dtype holds) and integer scores
beyond float64's integers rank and count as their exact values."""
import pytest
import torch

import retrieval_core as rc
from retrieval_core import rank_dense

# Counts beyond what each dtype holds exactly: float16 integers stop at 2048,
# bfloat16 at 256, int8 at 127, uint8 at 255.
LOW_GAINS = [torch.float16, torch.bfloat16, torch.int8, torch.uint8]
N_BIG = 3001
ALL_ONE_KEYS = [f"recall@{N_BIG}", "recall@r", "map", "map@r", "ndcg", "ndcg@r", "r_precision", "precision@r"]


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- 1. low-precision gains


@pytest.mark.parametrize("dtype", LOW_GAINS)
def test_every_candidate_relevant_gives_exactly_one(dtype):
    # every candidate relevant: recall, AP, nDCG, R-precision are 1 by definition
    preds = torch.rand(2, N_BIG, generator=_gen())
    target = torch.ones(2, N_BIG, dtype=dtype)
    r = rc.evaluate_scores(preds, target, ALL_ONE_KEYS)
    assert {k: v.item() for k, v in r.items()} == {k: 1.0 for k in ALL_ONE_KEYS}


def test_the_reported_bfloat16_and_float16_cases():
    r = rc.evaluate_scores(torch.rand(1, 257, generator=_gen()), torch.ones(1, 257, dtype=torch.bfloat16), ["recall@257"])
    assert r["recall@257"].item() == 1.0
    r = rc.evaluate_scores(torch.rand(1, 2049, generator=_gen()), torch.ones(1, 2049, dtype=torch.float16),
                           ["recall@2049", "map"])
    assert r["recall@2049"].item() == 1.0 and r["map"].item() == 1.0


@pytest.mark.parametrize("dtype", LOW_GAINS)
def test_low_precision_gains_equal_their_float64_values(dtype):
    g = _gen(1)
    preds = torch.rand(3, N_BIG, generator=g)
    # graded gains 0..3 (exact in every dtype), mostly relevant: R in the thousands
    target = torch.randint(0, 4, (3, N_BIG), generator=g).to(dtype)
    keys = ["recall@10", "recall@r", "map", "map@r", "map@100", "ndcg", "ndcg@10", "ndcg@r", "ndcg_exp",
            "dcg@50", "r_precision", "precision@r", "mrr", "f1@r", "fall_out@100", "auroc"]
    low = rc.evaluate_scores(preds, target, keys, reduce="none")
    ref = rc.evaluate_scores(preds, target.to(torch.float64), keys, reduce="none")
    for k in keys:
        assert torch.equal(low[k], ref[k]), k
    ranking = rank_dense(preds, target, 5)
    assert ranking.n_relevant.tolist() == (target > 0).sum(1).tolist()
    assert ranking.n_relevant.dtype == torch.int64


@pytest.mark.parametrize("dtype", LOW_GAINS)
def test_low_precision_gains_in_the_flat_form(dtype):
    g = _gen(2)
    sizes = [N_BIG, 2600, 300]  # unequal sizes: padded blocks with a mask
    indexes = torch.cat([torch.full((s,), q) for q, s in zip([5, 1, 9], sizes)])
    perm = torch.randperm(indexes.numel(), generator=g)  # ungrouped entries
    indexes = indexes[perm]
    preds = torch.rand(indexes.numel(), generator=g)
    target = torch.ones(indexes.numel(), dtype=dtype)
    r = rc.evaluate_scores(preds, target, ["recall@r", "map", "ndcg", "r_precision", "recall@300"],
                           indexes=indexes, reduce="none")
    assert r["recall@r"].tolist() == [1.0, 1.0, 1.0]
    assert r["map"].tolist() == [1.0, 1.0, 1.0]
    assert r["ndcg"].tolist() == [1.0, 1.0, 1.0]
    assert r["r_precision"].tolist() == [1.0, 1.0, 1.0]
    # ids in increasing order: 1 (2600 relevant), 5 (3001), 9 (300)
    assert r["recall@300"].tolist() == [300 / 2600, 300 / N_BIG, 1.0]


def test_tie_gain_is_summed_exactly():
    # 301 candidates tied with the one at the cut, each of gain 1 (301 is no bfloat16)
    ranking = rank_dense(torch.zeros(1, 302), torch.ones(1, 302, dtype=torch.bfloat16), 1, with_ties=True)
    assert ranking.tie_count.tolist() == [301]
    assert ranking.tie_gain.tolist() == [301.0]
    # padding never counts as a tie
    mask = torch.ones(1, 302, dtype=torch.bool)
    mask[0, 100:] = False
    ranking = rank_dense(torch.zeros(1, 302), torch.ones(1, 302, dtype=torch.float16), 1, mask=mask, with_ties=True)
    assert ranking.tie_count.tolist() == [99]
    assert ranking.tie_gain.tolist() == [99.0]


def test_ignite_ranking_metrics_with_bfloat16_gains():
    from ignite_retrieval import RankingMetrics

    m = RankingMetrics(["recall@r", "map", "ndcg", "r_precision"])
    m.update((torch.rand(2, 300, generator=_gen()), torch.ones(2, 300, dtype=torch.bfloat16)))
    m.update((torch.rand(1, 513, generator=_gen(1)), torch.ones(1, 513, dtype=torch.bfloat16)))
    assert m.compute() == {"recall@r": 1.0, "map": 1.0, "ndcg": 1.0, "r_precision": 1.0}


def test_lightning_ranking_metrics_with_bfloat16_gains():
    from lightning_retrieval import RankingMetrics

    m = RankingMetrics(["recall@r", "map", "ndcg", "r_precision"])
    m.update(torch.rand(2, 300, generator=_gen()), torch.ones(2, 300, dtype=torch.bfloat16))
    m.update(torch.rand(1, 513, generator=_gen(1)), torch.ones(1, 513, dtype=torch.bfloat16))
    assert {k: v.item() for k, v in m.compute().items()} == {"recall@r": 1.0, "map": 1.0, "ndcg": 1.0, "r_precision": 1.0}


# ---------------------------------------------------------------- 2. integer scores

T0 = 1_700_000_000_000_000_000  # a nanosecond timestamp: float64 spacing there is 256
INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def test_int64_scores_beyond_float64_integers_do_not_tie():
    r = rc.evaluate_scores(torch.tensor([[T0, T0 + 1]]), torch.tensor([[0, 1]]), ["mrr", "precision@1"])
    assert r["mrr"].item() == 1.0 and r["precision@1"].item() == 1.0
    # the flat form, and with a mask (int64 cannot be widened)
    r = rc.evaluate_scores(torch.tensor([T0 + 1, T0, T0 + 2, T0]), torch.tensor([1, 0, 0, 1]), ["mrr"],
                           indexes=torch.tensor([4, 4, 8, 8]), reduce="none")
    assert r["mrr"].tolist() == [1.0, 0.5]
    r = rc.evaluate_scores(torch.tensor([[T0 + 5, T0, T0 + 1]]), torch.tensor([[1, 0, 1]]), ["mrr", "map"],
                           mask=torch.tensor([[False, True, True]]))
    assert r["mrr"].item() == 1.0 and r["map"].item() == 1.0


def test_equal_integer_scores_keep_the_stable_order():
    # T0 + 1 twice: the lower column first, then T0
    r = rc.evaluate_scores(torch.tensor([[T0, T0 + 1, T0 + 1]]), torch.tensor([[0, 0, 1]]), ["mrr"])
    assert r["mrr"].item() == 0.5
    r = rc.evaluate_scores(torch.tensor([T0 + 1, T0, T0 + 1]), torch.tensor([0, 0, 1]), ["mrr"],
                           indexes=torch.tensor([3, 3, 3]))
    assert r["mrr"].item() == 0.5


def test_uint64_scores_above_int64():
    p = torch.tensor([[2**63, 2**63 + 1, 5]], dtype=torch.uint64)  # one float64 apart: 2**63
    assert rc.evaluate_scores(p, torch.tensor([[0, 1, 0]]), ["mrr"])["mrr"].item() == 1.0
    assert rc.evaluate_scores(p, torch.tensor([[1, 0, 0]]), ["mrr"])["mrr"].item() == 0.5
    mask = torch.tensor([[True, False, True]])
    assert rc.evaluate_scores(p, torch.tensor([[0, 0, 1]]), ["mrr"], mask=mask)["mrr"].item() == 0.5
    p = torch.tensor([[0, 2**64 - 1]], dtype=torch.uint64)  # the extremes keep their order
    assert rc.evaluate_scores(p, torch.tensor([[0, 1]]), ["mrr"], mask=torch.ones(1, 2, dtype=torch.bool))["mrr"].item() == 1.0


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
def test_masked_candidates_rank_after_real_scores_at_the_dtype_minimum(dtype):
    low = torch.iinfo(dtype).min
    preds = torch.tensor([[low, 5, low, low], [low, low, low, low]], dtype=dtype)
    mask = torch.tensor([[False, True, True, False], [True, False, True, True]])
    target = torch.tensor([[1, 0, 1, 0], [0, 1, 1, 0]])
    keys = ["mrr", "map", "precision@2", "precision@3", "precision_adaptive@3", "recall@1", "auroc", "fall_out@1"]
    r = rc.evaluate_scores(preds, target, keys, mask=mask, reduce="none")
    # row 0: real candidates col 1 (5, gain 0) then col 2 (min, gain 1)
    # row 1: real candidates cols 0, 2, 3 all at min: column order, gains 0, 1, 0
    assert r["mrr"].tolist() == [0.5, 0.5]
    assert r["map"].tolist() == [0.5, 0.5]
    assert r["precision@2"].tolist() == [0.5, 0.5]
    assert r["precision@3"].tolist() == [1 / 3, 1 / 3]
    assert r["precision_adaptive@3"].tolist() == [0.5, 1 / 3]
    assert r["recall@1"].tolist() == [0.0, 0.0]
    assert r["auroc"].tolist() == [0.0, 0.5]
    assert r["fall_out@1"].tolist() == [1.0, 0.5]
    ranking = rank_dense(preds, target, 4, mask=mask)
    assert ranking.valid.tolist() == [[True, True, False, False], [True, True, True, False]]
    assert ranking.n_candidates.tolist() == [2, 3]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("masked", [False, True])
def test_integer_scores_equal_their_exact_float_values(dtype, masked):
    g = _gen(3)
    info = torch.iinfo(dtype)
    high = min(info.max, 2**40)  # float64 holds these exactly
    # few distinct values (many ties) including the dtype's minimum (-2**63 is a float64)
    near_min = [info.min + 1] if dtype != torch.int64 else []
    choices = torch.tensor([info.min, *near_min, 0, 1, 2, high - 1, high], dtype=torch.int64).unique()
    preds = choices[torch.randint(0, choices.numel(), (40, 30), generator=g)].to(dtype)
    target = torch.randint(0, 3, (40, 30), generator=g)
    mask = (torch.rand(40, 30, generator=g) > 0.3) if masked else None
    keys = ["mrr", "map", "ndcg", "ndcg@3", "precision@5", "recall@r", "map@r", "auroc", "fall_out@4"]
    exact = rc.evaluate_scores(preds, target, keys, mask=mask, reduce="none")
    as_float = rc.evaluate_scores(preds.to(torch.float64), target, keys, mask=mask, reduce="none")
    for k in keys:
        assert torch.equal(exact[k].nan_to_num(-1.0), as_float[k].nan_to_num(-1.0)), k


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_scores_in_the_flat_form_equal_the_float_values(dtype):
    g = _gen(4)
    info = torch.iinfo(dtype)
    sizes = torch.randint(1, 12, (25,), generator=g)  # unequal: padded blocks
    indexes = torch.repeat_interleave(torch.arange(25), sizes)
    indexes = indexes[torch.randperm(indexes.numel(), generator=g)]
    choices = torch.tensor([info.min, 0, 1, min(info.max, 2**40)], dtype=torch.int64)
    preds = choices[torch.randint(0, 4, (indexes.numel(),), generator=g)].to(dtype)
    target = torch.randint(0, 2, (indexes.numel(),), generator=g)
    keys = ["mrr", "map", "ndcg@3", "precision@2"]
    exact = rc.evaluate_scores(preds, target, keys, indexes=indexes, reduce="none")
    as_float = rc.evaluate_scores(preds.to(torch.float64), target, keys, indexes=indexes, reduce="none")
    for k in keys:
        assert torch.equal(exact[k].nan_to_num(-1.0), as_float[k].nan_to_num(-1.0)), k
    ids, ranking = rc.rank_flat(indexes, preds, target, 3)  # padded Rankings of integer scores
    ids_f, ranking_f = rc.rank_flat(indexes, preds.to(torch.float64), target, 3)
    assert torch.equal(ids, ids_f) and torch.equal(ranking.relevance, ranking_f.relevance)
    assert torch.equal(ranking.valid, ranking_f.valid)
