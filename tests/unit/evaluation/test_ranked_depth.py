"""evaluate_ranked with R, cutoffs and ideals past the list's end: the values equal those of
the rows padded to that depth (what the kernels computed before), and nothing is padded
(an R or a cutoff of 10^12 costs nothing); the ideal must hold the list's gains; a masked
slot is removed; precision_adaptive of an empty list is undefined."""
from __future__ import annotations

import pytest
import torch

import retrieval_core as rc
from retrieval_core.evaluation.accumulator.scores import score_batch_values
from retrieval_core import ranking_values
from retrieval_core.metrics.keys import parse_metrics
from retrieval_core.metrics.spec import AT_K, AT_R, AT_X, REGISTRY
from retrieval_core.evaluation.ranked import ranked_values
from retrieval_core.ranking.ranking import Ranking

DEPTH = 7
CUTS = (1, 3, DEPTH, DEPTH + 1, 40)  # 40: past the list and past most R


def _keys(with_r: bool):
    """Every per-query key evaluate_ranked accepts, in every cutoff form."""
    keys = []
    for name, spec in REGISTRY.items():
        if not spec.per_query or (with_r and spec.needs_all_candidates):
            continue
        if spec.plain:
            keys.append(name)
        if AT_K in spec.cutoffs:
            keys += [f"{name}@{k}" for k in CUTS]
        if AT_R in spec.cutoffs and spec.plain != AT_R:
            keys.append(f"{name}@r")
        if AT_X in spec.cutoffs:
            keys.append(f"{name}@{spec.param_example}")
    return keys


def _padded_reference(gains, valid, keys, n_relevant, ideal, cuts=CUTS):
    """The values of the rows padded to every cutoff, R and the ideal's width, the ideal of
    binary gains as R ones: the Ranking the kernels read before nothing was padded."""
    parsed = parse_metrics(keys)
    g = gains.to(torch.float64) * valid
    hits = (g > 0).sum(1)
    r = hits if n_relevant is None else n_relevant
    if ideal is not None:
        best = ideal.to(torch.float64).sort(dim=1, descending=True).values
    elif n_relevant is None:
        best = g.sort(dim=1, descending=True).values
    else:
        best = (torch.arange(int(r.max())) < r.unsqueeze(1)).to(torch.float64)
    depth = max(g.shape[1], *cuts, int(r.max()), best.shape[1])
    pad = depth - g.shape[1]
    ranking = Ranking(relevance=torch.nn.functional.pad(g, (0, pad)),
                      valid=torch.nn.functional.pad(valid, (0, pad), value=False), n_relevant=r,
                      n_candidates=valid.sum(1), ideal=torch.nn.functional.pad(best, (0, depth - best.shape[1])),
                      complete=True)
    return ranking_values(ranking, parsed)


def _case(seed: int, graded: bool):
    """12 lists of DEPTH: short ones (mask), one empty, one without a hit; R past the list."""
    g = torch.Generator().manual_seed(seed)
    q = 12
    gains = torch.randint(1, 4 if graded else 2, (q, DEPTH), generator=g) * (torch.rand(q, DEPTH, generator=g) < 0.4)
    length = torch.randint(0, DEPTH + 1, (q,), generator=g)
    length[0], length[1] = 0, DEPTH
    gains[2] = 0
    valid = torch.arange(DEPTH) < length.unsqueeze(1)
    gains = gains * valid
    missing = torch.randint(0, 4 if graded else 2, (q, 30), generator=g) * (torch.rand(q, 30, generator=g) < 0.5)
    missing[2] = 0  # one query with R = 0
    ideal = torch.cat([gains, missing], 1)
    ideal = ideal.gather(1, torch.rand(ideal.shape, generator=g).argsort(1))  # any order
    return gains, valid, (ideal > 0).sum(1), ideal


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("graded", [False, True])
@pytest.mark.parametrize("with_r", [False, True])
def test_values_equal_the_padded_reference(seed, graded, with_r):
    gains, valid, n_relevant, ideal = _case(seed, graded)
    keys = _keys(with_r)
    r = n_relevant if with_r else None
    given_ideal = ideal if graded else None  # without R: the ideal may still hold more than the list
    got, _ = ranked_values(gains, parse_metrics(keys), n_relevant=r, ideal=given_ideal, mask=valid)
    want = _padded_reference(gains, valid, keys, r, given_ideal)
    # auroc (R from the list) sums over the whole width: padded by the other keys' cutoffs its
    # last bit changed with them; now it is the value of the list alone, as with no cutoff past it
    alone = _padded_reference(gains, valid, keys, r, None, cuts=())
    for j, key in enumerate(keys):
        ref = alone if key.startswith("auroc") else want
        torch.testing.assert_close(got[:, j], ref[:, j], rtol=0, atol=0, equal_nan=True, msg=key)


def test_lists_of_no_slot():
    got = rc.evaluate_ranked(torch.zeros(2, 0), _keys(True), n_relevant=torch.tensor([1, 0]), reduce="none")
    assert got["map"].tolist()[0] == got["ndcg"].tolist()[0] == got["precision@40"].tolist()[0] == 0.0
    assert all(torch.isnan(got[key][1]) for key in _keys(True))  # R = 0: every key undefined


def test_discount_sums_add_rank_by_rank_across_chunks():
    from retrieval_core.metrics.kernels import discount_sums

    n = torch.tensor([0, 1, 2, 5, 6, 7, 13, 64, 100])
    want = (1.0 / torch.log2(torch.arange(1, 101, dtype=torch.float64) + 1.0)).cumsum(0)
    want = torch.where(n > 0, want[(n - 1).clamp(min=0)], 0.0)
    for chunk in (1, 2, 3, 6, 7, 64, 1000):
        assert torch.equal(discount_sums(n, chunk=chunk), want), chunk


def test_discount_sums_past_the_exact_ranks_agree_with_a_correctly_added_sum():
    import math

    from retrieval_core.metrics.kernels import discount_sums

    n = [1024, 1025, 1031, 5000, 123457]
    # math.fsum: the exact sum of the rounded terms (the last bits of a running sum drift)
    want = torch.tensor([math.fsum(1.0 / math.log2(i + 1) for i in range(1, m + 1)) for m in n], dtype=torch.float64)
    got = discount_sums(torch.tensor(n), exact=1024)  # the Euler-Maclaurin tail past 1024 ranks
    torch.testing.assert_close(got, want, rtol=1e-13, atol=0)


def test_ndcg_of_an_r_of_10_to_the_18_costs_nothing():
    """Whole-list nDCG with R given adds R discounts for its ideal: rank by rank, an R of
    10^18 never ends; the tail's formula makes it as cheap as any other."""
    import math

    out = rc.evaluate_ranked(torch.tensor([[1, 0, 1]]), ["ndcg", "ndcg@10"], n_relevant=torch.tensor([10**18]))
    dcg = 1 + 1 / math.log2(4)
    ideal_at_10 = math.fsum(1 / math.log2(i + 1) for i in range(1, 11))
    assert math.isclose(out["ndcg@10"].item(), dcg / ideal_at_10, rel_tol=1e-15)
    mpmath = pytest.importorskip("mpmath")  # torch's sympy needs it: always there
    with mpmath.workdps(30):  # the ideal: 2^20 terms added exactly, then mpmath's own Euler-Maclaurin
        head = math.fsum(1 / math.log2(i + 1) for i in range(1, 2**20 + 1))
        tail = float(mpmath.sumem(lambda i: 1 / mpmath.log(i + 1, 2), [2**20 + 1, 10**18]))
    assert math.isclose(out["ndcg"].item(), dcg / (head + tail), rel_tol=1e-14)


HUGE = 10**12  # padded to it, the rows would take terabytes


def test_r_and_cutoffs_past_the_list_cost_nothing():
    gains = torch.tensor([[1, 0, 1], [0, 0, 0]])
    r = torch.tensor([HUGE, 4])
    keys = ["map", "recall@5", f"recall@{HUGE}", f"precision@{HUGE}", "r_precision", "precision@r", "ndcg@10",
            f"map@{HUGE}", "mrr", f"precision_adaptive@{HUGE}"]
    out = rc.evaluate_ranked(gains, keys, n_relevant=r, reduce="none", empty="zero")
    assert out["map"].tolist() == [(1 + 2 / 3) / HUGE, 0.0]
    assert out[f"recall@{HUGE}"].tolist() == [2 / HUGE, 0.0]
    assert out[f"precision@{HUGE}"].tolist() == [2 / HUGE, 0.0]
    assert out["precision@r"].tolist() == out["r_precision"].tolist() == [2 / HUGE, 0.0]
    assert out[f"precision_adaptive@{HUGE}"].tolist() == [2 / 3, 0.0]
    # the same through evaluate_scores and an adapter's update (R with scores)
    preds = torch.tensor([[0.9, 0.5, 0.1], [0.3, 0.2, 0.1]])
    scored = rc.evaluate_scores(preds, gains, keys, n_relevant=r, reduce="none", empty="zero")
    for key in keys:
        assert torch.equal(scored[key], out[key]), key
    values, _ = score_batch_values(preds, gains, parse_metrics(keys), n_relevant=r)
    assert values[0, 0].item() == (1 + 2 / 3) / HUGE


def test_whole_list_ndcg_of_a_large_r_in_constant_memory():
    """The ideal DCG of R ones is added without R slots (rank by rank, then a formula)."""
    import math

    r = 3 * 10**6 + 17
    got = rc.evaluate_ranked(torch.tensor([[1, 0, 1]]), ["ndcg", "ndcg@r"], n_relevant=torch.tensor([r]))
    ideal = math.fsum(1.0 / math.log2(i + 1) for i in range(1, r + 1))
    assert got["ndcg"].item() == got["ndcg@r"].item()
    assert math.isclose(got["ndcg"].item(), (1 + 0.5) / ideal, rel_tol=1e-14)


def test_trec_cutoffs_past_the_lists_cost_nothing():
    from retrieval_core.trec import evaluate_trec, qrels_from_dict, run_from_dict

    qrels = qrels_from_dict({"q1": {"a": 2, "b": 0, "c": 1, "z": 1}, "q2": {"x": 1}})
    run = run_from_dict({"q1": {"a": 0.9, "b": 0.8, "c": 0.6}, "q2": {"y": 1.0, "x": 0.5}})
    far = evaluate_trec(qrels, run, [f"recall_{HUGE}", f"ndcg_cut_{HUGE}", f"P_{HUGE}"]).summary()
    near = evaluate_trec(qrels, run, ["recall_1000", "ndcg_cut_1000", "P_1000"]).summary()
    assert far[f"recall_{HUGE}"] == near["recall_1000"] and far[f"ndcg_cut_{HUGE}"] == near["ndcg_cut_1000"]
    assert far[f"P_{HUGE}"] == (2 / HUGE + 1 / HUGE) / 2


@pytest.mark.parametrize("gains, ideal, n_relevant, where", [
    ([[3, 0]], [[1, 0]], [1], "gain 3.0 occurs 1 times in the list, 0 in ideal"),  # nDCG 3.0 before
    ([[2, 2]], [[2, 1]], [2], "gain 2.0 occurs 2 times in the list, 1 in ideal"),  # dominated, yet not held
    ([[0, 1]], [[0, 0]], None, "gain 1.0 occurs 1 times in the list, 0 in ideal"),
    ([[1, 1]], [[2, 1]], None, "gain 1.0 occurs 2 times in the list, 1 in ideal"),
])
def test_an_ideal_that_cannot_hold_the_list_is_refused(gains, ideal, n_relevant, where):
    r = None if n_relevant is None else torch.tensor(n_relevant)
    with pytest.raises(ValueError, match=f"ideal does not hold the gains of the list in 1 queries \\(row 0: {where}"):
        rc.evaluate_ranked(torch.tensor(gains), ["ndcg"], n_relevant=r, ideal=torch.tensor(ideal))


def test_an_ideal_holding_the_list_in_any_order_is_taken():
    got = rc.evaluate_ranked(torch.tensor([[1, 0, 2, 2]]), ["ndcg"], n_relevant=torch.tensor([4]),
                             ideal=torch.tensor([[2, 1, 3, 2, 0]]))
    assert 0 < got["ndcg"].item() < 1


def test_a_masked_slot_in_the_middle_is_removed():
    gains = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 1]])
    mask = torch.tensor([[True, False, True, True], [False, True, False, True]])
    keys = ["map", "mrr", "ndcg@2", "precision@2", "precision_adaptive@5", "recall@1", "dcg"]
    got = rc.evaluate_ranked(gains, keys, n_relevant=torch.tensor([2, 2]), mask=mask, reduce="none")
    want = rc.evaluate_ranked(torch.tensor([[0, 1, 0], [0, 1, 0]]), keys, n_relevant=torch.tensor([2, 2]),
                              mask=torch.tensor([[True, True, True], [True, True, False]]), reduce="none")
    for key in keys:
        assert torch.equal(got[key], want[key]), key
    assert got["mrr"].tolist() == [0.5, 0.5]


def test_precision_adaptive_of_an_empty_list_is_undefined():
    """min(k, 0 candidates) = 0: no value, so empty= decides, as for R = 0."""
    gains, mask, r = torch.tensor([[1, 0], [0, 0]]), torch.tensor([[True, True], [False, False]]), torch.tensor([1, 3])
    skip = rc.evaluate_ranked(gains, ["precision_adaptive@5", "precision@5"], n_relevant=r, mask=mask)
    assert skip["precision_adaptive@5"].item() == 0.5 and skip.n_empty["precision_adaptive@5"] == 1
    assert skip.n_empty["precision@5"] == 0
    zero = rc.evaluate_ranked(gains, ["precision_adaptive@5"], n_relevant=r, mask=mask, empty="zero")
    assert zero["precision_adaptive@5"].item() == 0.25
    with pytest.raises(ValueError, match="precision_adaptive@5"):
        rc.evaluate_ranked(gains, ["precision_adaptive@5"], n_relevant=r, mask=mask, empty="error")


@pytest.mark.parametrize("adapter", ["lightning", "ignite"])
def test_the_adapters_take_an_r_past_the_list_for_nothing(adapter):
    preds, target = torch.tensor([[0.9, 0.5, 0.1], [0.3, 0.2, 0.1]]), torch.tensor([[1, 0, 1], [0, 1, 0]])
    r, keys = torch.tensor([HUGE, 2]), ["map", f"recall@{HUGE}", "ndcg@10"]
    if adapter == "lightning":
        metric = pytest.importorskip("lightning_retrieval").RankingMetrics(keys)
        metric.update(preds, target, n_relevant=r)
        got = metric.compute()
    else:
        metric = pytest.importorskip("ignite_retrieval").RankingMetrics(keys)
        metric.update({"y_pred": preds, "y": target, "n_relevant": r})
        metric.compute()
        got = metric.last_results
    want = rc.evaluate_scores(preds, target, keys, n_relevant=r)
    for key in keys:
        assert got[key].item() == want[key].item(), key
    assert got["map"].item() == ((1 + 2 / 3) / HUGE + 1 / 4) / 2


def test_a_uint64_r_past_int64_is_refused_not_wrapped():
    """2**64 - 1 as uint64 was read as int64 -1: 'n_relevant is below the relevant items in the list'."""
    r = torch.tensor([2**64 - 1, 2], dtype=torch.uint64)
    with pytest.raises(ValueError, match=r"^n_relevant holds uint64 values above 2\*\*63 - 1, which int64 cannot hold$"):
        rc.evaluate_ranked(torch.tensor([[1, 0, 1], [1, 1, 0]]), ["map"], n_relevant=r)
    small = rc.evaluate_ranked(torch.tensor([[1, 0, 1], [1, 1, 0]]), ["map"], n_relevant=torch.tensor([4, 2]).to(
        torch.uint64))
    assert small["map"].item() == pytest.approx(((1 + 2 / 3) / 4 + 1.0) / 2)
